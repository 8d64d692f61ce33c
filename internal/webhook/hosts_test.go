package webhook

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOwnHostsAllows(t *testing.T) {
	own := OwnHosts{Listen: "loopd.internal:8787", Hostname: "buildhost",
		Allowed: func() []string { return []string{"status.example.com", "Metrics.Example.COM."} }}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"", true}, // HTTP/1.0 without a Host: no browser sends that
		{"127.0.0.1:8787", true},
		{"127.0.0.1", true},
		{"10.0.0.5:8788", true}, // a proxy's private address, passed through
		{"[::1]:8787", true},
		{"[::1]", true},
		{"[fe80::1%25eth0]:8787", true},
		{"localhost:8787", true},
		{"LOCALHOST.", true},
		{"loopd.internal:9999", true}, // the listen host, whatever the port
		{"buildhost:8787", true},
		{"status.example.com", true},
		{"metrics.example.com:443", true},
		// DNS rebinding: the attacker's own names, whatever they resolve to.
		{"evil.example:8787", false},
		{"127.0.0.1.nip.io:8787", false},
		{"localhost.evil.example", false},
		{"buildhost.evil.example", false},
		{"status.example.com.evil.example", false},
		{"2130706433:8787", false}, // a browser writes 127.0.0.1 for it
	} {
		assert.Equal(t, tc.want, own.Allows(tc.host), "%q", tc.host)
	}
	assert.False(t, OwnHosts{Listen: ":8787"}.Allows("evil.example"), "an empty listen host adds no name")
}

func TestOwnHostsGuard(t *testing.T) {
	var refused []string
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := OwnHosts{Listen: "127.0.0.1:8787"}.Guard(ok, func(r *http.Request) bool { return r.URL.Path == "/webhook" },
		func(r *http.Request) { refused = append(refused, r.RemoteAddr) })
	serve := func(method, path, host string) int {
		req := httptest.NewRequest(method, path, nil)
		req.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}

	assert.Equal(t, http.StatusMisdirectedRequest, serve(http.MethodGet, "/metrics", "evil.example:8787"))
	assert.Equal(t, http.StatusNoContent, serve(http.MethodGet, "/metrics", "127.0.0.1:8787"))
	assert.Equal(t, http.StatusNoContent, serve(http.MethodPost, "/webhook", "hooks.example.com"), "the webhook's path is open")
	assert.Len(t, refused, 1)
}
