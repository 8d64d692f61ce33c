package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/webhook"
)

// seen returns the value of the series (as metric takes it) from the
// daemon's /metrics, and false when it is not there yet; unlike metric it
// may run in a waitFor condition.
func (e *env) seen(t testing.TB, series string) (float64, bool) {
	t.Helper()
	resp, err := (&http.Client{Timeout: waitShort}).Get("http://" + e.listen + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return n, true
		}
	}
	return 0, false
}

// TestMetricsOfRealDeliveries drives a real daemon with real signed
// deliveries (one accepted, its redelivery, one with a bad signature), a
// kill -9 of the agent and its resume, and reads /metrics and `loopd
// events`: the counters by outcome and reason, the delivery's latency, the
// resume, the NeedsAttention gauge at 0, and the bad signature's row.
func TestMetricsOfRealDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	assert.Zero(t, e.metric(t, `loopd_work_items{phase="NeedsAttention"}`), "exported at 0, so that an alert on it resolves")

	body := e.payload(t, "issues.opened.1.json", nil)
	id := uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.post(t, "issues", id, body, webhook.Sign([]byte(e.secret), body)))
	require.Equal(t, http.StatusOK, e.post(t, "issues", id, body, webhook.Sign([]byte(e.secret), body)), "a redelivery")
	require.Equal(t, http.StatusUnauthorized, e.post(t, "issues", "", body, webhook.Sign([]byte("not the secret"), body)))

	e.waitFor(t, func() bool {
		out, _, code := e.run(t, "events")
		return code == 0 && strings.Contains(out, "delivery.rejected") && strings.Contains(out, "reason=bad_signature")
	}, waitShort, "the bad signature's rejection never reached loopd events")
	assert.Equal(t, 1.0, e.metric(t, `loopd_webhook_deliveries_total{outcome="accepted",reason=""}`))
	assert.Equal(t, 1.0, e.metric(t, `loopd_webhook_deliveries_total{outcome="duplicate",reason=""}`))
	assert.Equal(t, 1.0, e.metric(t, `loopd_webhook_deliveries_total{outcome="rejected",reason="bad_signature"}`))

	waitDelivered(t, e, id, waitLong)
	e.waitFor(t, func() bool {
		n, ok := e.seen(t, `loopd_delivery_latency_seconds_count{harness="claude-code"}`)
		return ok && n == 1
	}, waitShort, "the delivery's latency was never observed")
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	e.waitFor(t, func() bool { n, ok := e.seen(t, "loopd_pending_deliveries"); return ok && n == 0 }, waitShort,
		"the delivered event still counted pending")
	assert.Zero(t, e.metric(t, "loopd_oldest_pending_delivery_age_seconds"))

	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool {
		n, ok := e.seen(t, `loopd_resumes_total{harness="claude-code",outcome="resumed"}`)
		return ok && n == 1
	}, waitLong, "the resume after kill -9 was never counted")
	assert.Zero(t, e.metric(t, `loopd_work_items{phase="NeedsAttention"}`))
	assert.Zero(t, e.metric(t, "loopd_reconcile_errors_total"))
}
