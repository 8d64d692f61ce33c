package webhook

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/journal"
)

// The reasons of listener.refused.
const (
	// ReasonConnsPerAddress: a connection cut at its accept, its address
	// holding ServerLimits.MaxConnsPerAddress already.
	ReasonConnsPerAddress = "conns_per_address"
	// ReasonShed: a connection still reading its headers, cut under
	// pressure for a new one (ServerLimits.ShedAfter).
	ReasonShed = "shed"
)

// refusalErr is the fixed err of each reason of listener.refused: no text
// of the request, so that a flood of one refusal folds into one row
// (journal.Limiter).
var refusalErr = map[string]string{
	ReasonConnsPerAddress: "too many connections from one address",
	ReasonShed:            "headers not sent while the server was full",
	ReasonHostNotAllowed:  "Host header names another site",
}

// Refusals returns the function that records one refusal of the listener
// (a connection its bounds cut, a request to its own pages that names
// another Host): the listener.refused row with its reason, the client's
// remote address and a fixed err, through rec (serve gives it the
// Limiter's queued recorder of unauthenticated rejections, so that
// nothing waits on the store), and the count in m (nil: none).
func Refusals(rec *journal.Recorder, m *Metrics) func(reason, remoteAddr string) {
	return func(reason, remoteAddr string) {
		rec.Record(context.Background(), slog.LevelWarn, journal.ListenerRefused, "",
			"reason", reason, "remote_addr", remoteAddr, "err", refusalErr[reason])
		m.refusal(reason) // after the row: a count seen is a refusal journaled
	}
}

// connGuard is the listener of ServerLimits.Listener: it bounds the
// connections served at once, and those of one address, and under
// pressure cuts the connections that hold a slot without a request.
//
// The kernel's accept queue is first in, first out: a listener that stops
// accepting while stalled connections hold every slot makes a real
// delivery wait behind every connection queued before it, until each slot
// is freed by a header timeout (with 1,000 stalled connections and 256
// slots cut after 10 s, 20 s and more: GitHub has given up by then). So
// the guard keeps accepting:
//   - a connection whose address (an IPv4 address, an IPv6 /64) holds
//     MaxConnsPerAddress open already is closed at once: a flood from one
//     address holds that many slots, whatever it opens;
//   - at MaxConns, the connection that has waited longest for its
//     request's headers (a new one, or a kept-alive one between requests),
//     if that is ShedAfter or more, is closed to make room; when none has,
//     the new one waits for a slot (a close, a kept-alive connection going
//     idle, or one reaching ShedAfter).
//
// A connection being served (its headers read) is never cut by the guard;
// the server's own timeouts bound it.
type connGuard struct {
	net.Listener
	limits  ServerLimits
	refused func(reason, remoteAddr string)
	now     func() time.Time

	mu      sync.Mutex
	open    map[*guardedConn]struct{}
	byAddr  map[netip.Addr]int
	changed chan struct{} // a slot may have freed, or a connection become pending
	closed  chan struct{} // the listener was closed
	once    sync.Once
}

// guardedConn is a connection the guard accepted.
type guardedConn struct {
	net.Conn
	g    *connGuard
	addr netip.Addr // its address's key; invalid for none (no per-address bound)
	once sync.Once
	// Under g.mu: whether it waits for a request's headers, and since
	// when (its accept, or the end of its last request).
	pending bool
	since   time.Time
}

// Accept returns the next connection the bounds admit (see connGuard).
func (g *connGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc := &guardedConn{Conn: c, g: g, addr: addressKey(c.RemoteAddr())}
		if g.admit(gc) {
			return gc, nil
		}
	}
}

// admit registers gc, cutting what the bounds say; it reports false for a
// connection that was closed instead (its address's bound, or the
// listener closed while it waited for a slot).
func (g *connGuard) admit(gc *guardedConn) bool {
	g.mu.Lock()
	if gc.addr.IsValid() && g.limits.MaxConnsPerAddress > 0 && g.byAddr[gc.addr] >= g.limits.MaxConnsPerAddress {
		g.mu.Unlock()
		gc.Conn.Close()
		g.refuse(ReasonConnsPerAddress, gc)
		return false
	}
	for g.limits.MaxConns > 0 && len(g.open) >= g.limits.MaxConns {
		now := g.now()
		victim, wait := g.oldestPending(now)
		if victim != nil {
			// Unregistered here, so that the slot is free at once; its
			// Close (by the server, once its read fails) finds it gone.
			g.remove(victim)
			g.mu.Unlock()
			victim.Conn.Close()
			g.refuse(ReasonShed, victim)
			g.mu.Lock()
			continue
		}
		g.mu.Unlock()
		if !g.await(wait) {
			gc.Conn.Close()
			return false
		}
		g.mu.Lock()
	}
	gc.pending, gc.since = true, g.now()
	g.open[gc] = struct{}{}
	if gc.addr.IsValid() {
		g.byAddr[gc.addr]++
	}
	g.mu.Unlock()
	return true
}

// await waits until a slot may have freed, or for wait when it is more
// than 0 (the oldest pending connection then reaches ShedAfter); it
// reports false when the listener was closed meanwhile.
func (g *connGuard) await(wait time.Duration) bool {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-g.changed:
	case <-timeout:
	case <-g.closed:
		return false
	}
	return true
}

// oldestPending returns the connection that has waited longest for its
// headers when that is ShedAfter or more; otherwise nil and how long until
// the oldest gets there (0 when none waits). The caller holds g.mu.
func (g *connGuard) oldestPending(now time.Time) (*guardedConn, time.Duration) {
	var oldest *guardedConn
	for c := range g.open {
		if c.pending && (oldest == nil || c.since.Before(oldest.since)) {
			oldest = c
		}
	}
	if oldest == nil {
		return nil, 0
	}
	if age := now.Sub(oldest.since); age < g.limits.ShedAfter {
		return nil, g.limits.ShedAfter - age
	}
	return oldest, 0
}

// remove unregisters c; the caller holds g.mu. A connection removed
// twice is removed once.
func (g *connGuard) remove(c *guardedConn) {
	if _, ok := g.open[c]; !ok {
		return
	}
	delete(g.open, c)
	if c.addr.IsValid() {
		if g.byAddr[c.addr]--; g.byAddr[c.addr] <= 0 {
			delete(g.byAddr, c.addr)
		}
	}
	g.signal()
}

// signal wakes an Accept that waits for a slot.
func (g *connGuard) signal() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// refuse reports a connection cut for reason.
func (g *connGuard) refuse(reason string, c *guardedConn) {
	if g.refused != nil {
		g.refused(reason, c.RemoteAddr().String())
	}
}

// Close closes the listener; an Accept waiting for a slot returns.
func (g *connGuard) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// Close closes the connection and frees its slot.
func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.remove(c)
		c.g.mu.Unlock()
	})
	return err
}

// connState is the server's ConnState hook (NewServer): it tells the
// guard which of its connections wait for a request's headers (new, or
// kept alive between requests) and frees the slot of one that closed or
// was hijacked.
func connState(c net.Conn, state http.ConnState) {
	gc, ok := c.(*guardedConn)
	if !ok {
		return
	}
	g := gc.g
	g.mu.Lock()
	defer g.mu.Unlock()
	switch state {
	case http.StateActive:
		gc.pending = false
	case http.StateIdle:
		gc.pending, gc.since = true, g.now()
		g.signal()
	case http.StateClosed, http.StateHijacked:
		g.remove(gc)
	}
}

// addressKey returns the key that a connection from addr counts under
// for ServerLimits.MaxConnsPerAddress: its IPv4 address, or the /64 of
// its IPv6 address (one subscriber's allocation, RFC 6177); invalid for
// an address that is not TCP.
func addressKey(addr net.Addr) netip.Addr {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := tcp.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}
