package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

// TestListenerPagesAnswerOnlyTheirOwnHost: the status page, /metrics,
// /healthz and /readyz of a real daemon refuse a Host that names another
// site (a page whose DNS name rebinds to 127.0.0.1 sends its own), with
// 421 and one listener.refused row; they answer an address, localhost and
// a name of allowedHosts, and a reload adds one. /metrics answers GET and
// HEAD only. The webhook's path takes a signed delivery whatever its Host,
// as a proxy's public name.
func TestListenerPagesAnswerOnlyTheirOwnHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	status := func(method, path, host string) int {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+e.listen+path, nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := (&http.Client{Timeout: waitShort}).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	for _, path := range []string{"/", "/metrics", "/healthz", "/readyz", "/static/live.js"} {
		assert.Equal(t, http.StatusMisdirectedRequest, status(http.MethodGet, path, "rebound.evil.example:"+port(e)), path)
		assert.Equal(t, http.StatusOK, status(http.MethodGet, path, e.listen), path)
		assert.Equal(t, http.StatusOK, status(http.MethodGet, path, "localhost:"+port(e)), path)
	}
	assert.Equal(t, http.StatusOK, status(http.MethodHead, "/metrics", e.listen))
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		assert.Equal(t, http.StatusMethodNotAllowed, status(method, "/metrics", e.listen), method)
	}

	body := e.payload(t, "issues.opened.1.json", nil)
	req, err := http.NewRequest(http.MethodPost, e.webhookURL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Host = "hooks.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", uuid.NewString())
	req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte(e.secret), body))
	resp, err := (&http.Client{Timeout: githubTimeout}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "the webhook's path answers any Host")

	rows := e.waitEvent(t, journal.ListenerRefused, desired.Key{}, 1, waitShort)
	assert.Equal(t, webhook.ReasonHostNotAllowed, rows[0].Attrs["reason"])
	assert.True(t, strings.HasPrefix(rows[0].Attrs["remote_addr"], "127.0.0.1:"), "%v", rows[0].Attrs)
	assert.NotContains(t, rows[0].Attrs, "host", "no request text reaches the journal")

	e.ghWebhook()["allowedHosts"] = []string{"status.example.com"}
	e.writeConfig(t)
	e.reload(t)
	assert.Equal(t, http.StatusOK, status(http.MethodGet, "/", "status.example.com"), "a proxy's public name, once allowed")
}

// port returns the port of the env's listener.
func port(e *env) string {
	_, p, _ := strings.Cut(e.listen, ":")
	return p
}
