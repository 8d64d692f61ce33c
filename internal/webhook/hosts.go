package webhook

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// ReasonHostNotAllowed is the reason of a request refused by
// OwnHosts.Guard: its Host names another site.
const ReasonHostNotAllowed = "host_not_allowed"

// OwnHosts is the rule of which Host a request to the listener's own pages
// (the status page, /metrics, /healthz, /readyz) may name. A page of
// another site that a DNS name rebinds to the listener's address reaches
// it with that name as its Host, and its script could read what the pages
// show (DNS rebinding); refused, it reads a 421. Allowed:
//   - no Host at all (an HTTP/1.0 health check; a browser always sends one);
//   - an IP address, any: a page whose origin is an address was served
//     from that address, so the browser that sends it reached the listener
//     (or a proxy or NAT in front of it) as itself, and no DNS answer can
//     move it;
//   - localhost, which browsers resolve to loopback themselves;
//   - the listen address's host, when it is a name;
//   - this machine's hostname;
//   - the names Allowed returns (webhooks.ghWebhook.allowedHosts: a
//     proxy's public name, a name Prometheus scrapes by).
//
// Names match case-insensitively, one trailing dot ignored, whatever the
// port. The webhook's own path is not guarded (Guard's open): GitHub signs
// what it sends, and a proxy passes its own public name.
type OwnHosts struct {
	// Listen is the configured listen address (host:port).
	Listen string
	// Hostname is this machine's hostname ("" for none).
	Hostname string
	// Allowed returns the names the config adds, read on each request;
	// nil for none.
	Allowed func() []string
}

// Allows reports whether host, a request's Host (a name or an address,
// with or without a port), is one the listener answers its pages to.
func (o OwnHosts) Allows(host string) bool {
	if host == "" {
		return true
	}
	name := hostName(host)
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	own := []string{"localhost", o.Hostname}
	if h, _, err := net.SplitHostPort(o.Listen); err == nil {
		own = append(own, h)
	}
	if o.Allowed != nil {
		own = append(own, o.Allowed()...)
	}
	return slices.ContainsFunc(own, func(n string) bool { return n != "" && hostName(n) == name })
}

// hostName returns the name or address of host without its port, its IPv6
// brackets and zone, and one trailing dot, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// Guard returns next behind the rule: a request whose Host o does not
// allow is answered 421 Misdirected Request with a fixed text, and refused
// is called with it (to journal it); one for which open reports true (the
// webhook's path) passes whatever its Host.
func (o OwnHosts) Guard(next http.Handler, open func(*http.Request) bool, refused func(*http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open(r) || o.Allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		if refused != nil {
			refused(r)
		}
		http.Error(w, "misdirected request: this listener answers its pages only under its own name or address "+
			"(add a proxy's name to webhooks.ghWebhook.allowedHosts)", http.StatusMisdirectedRequest)
	})
}
