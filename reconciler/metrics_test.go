package reconciler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// metered gives the rig's reconciler and executor one set of Metrics, as
// serve does.
func (r *passRig) metered() *Metrics {
	m := NewMetrics(prometheus.NewRegistry())
	m.now = func() time.Time { return r.now }
	r.rc.Metrics, r.rc.Executor.Meter = m, m
	return m
}

// TestEveryPhaseExportedFromTheStart: before any pass, each phase's gauge
// is there at 0, so that `loopd_work_items{phase="NeedsAttention"} > 0`
// has a series to resolve on.
func TestEveryPhaseExportedFromTheStart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)

	assert.Equal(t, len(desired.Phases()), testutil.CollectAndCount(reg, "loopd_work_items"))
	assert.Zero(t, testutil.ToFloat64(m.phases.WithLabelValues(string(desired.PhaseNeedsAttention))))
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "loopd_reconcile_errors_total"))
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "loopd_oldest_pending_delivery_age_seconds"))
}

// TestPendingDeliveriesAndTheOldestAge: the deliveries of open items that
// are not held count, and the oldest one's age is its age at the scrape.
func TestPendingDeliveriesAndTheOldestAge(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	t1 := t0.Add(-10 * time.Minute)
	at := func(ts ...time.Time) []desired.Delivery {
		var out []desired.Delivery
		for _, x := range ts {
			out = append(out, desired.Delivery{ID: x.String(), ReceivedAt: x})
		}
		return out
	}
	records := []desired.Record{
		{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Pending: at(t1.Add(time.Minute), t1)},
		{Key: desired.Key{Owner: "o", Repo: "r", Number: 2}, Pending: at(t1.Add(time.Hour))},
		{Key: desired.Key{Owner: "o", Repo: "r", Number: 3}, Spec: desired.Spec{Held: true}, Pending: at(t1.Add(-time.Hour))},
		{Key: desired.Key{Owner: "o", Repo: "r", Number: 4}, Spec: desired.Spec{Closed: true}, Pending: at(t1.Add(-2 * time.Hour))},
	}
	m.now = func() time.Time { return t0 }

	m.fleet(records, Policy{})

	assert.Equal(t, 3.0, testutil.ToFloat64(m.pending))
	assert.Equal(t, 600.0, m.oldestAge(), "the oldest of the open, unheld items")
	m.now = func() time.Time { return t0.Add(time.Minute) }
	assert.Equal(t, 660.0, m.oldestAge(), "aged at the scrape, not at the pass")

	m.fleet(records[2:], Policy{})
	assert.Zero(t, testutil.ToFloat64(m.pending))
	assert.Zero(t, m.oldestAge())
}

// TestLiveSessionsAreThisHosts: on a fleet, the live sessions exported
// are those of the items this host's lease runs, the figure its capacity
// bounds, not every host's.
func TestLiveSessionsAreThisHosts(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	running := func(n int, host string) desired.Record {
		return desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: n}, Lease: desired.Lease{Owner: host},
			Status: desired.Status{Phase: desired.PhaseRunning}}
	}
	records := []desired.Record{running(1, "a"), running(2, "b"), running(3, "b")}
	m.fleet(records, Policy{Host: "a"})
	assert.Equal(t, 1.0, testutil.ToFloat64(m.live))
	m.fleet(records, Policy{})
	assert.Equal(t, 3.0, testutil.ToFloat64(m.live), "one loopd with no fleet: every item")
}

// TestBlockedSessionsByReason: an agent waiting at a screen for a person
// counts under its reason; a stopped one does not (its screen is gone),
// and a reason no item shows any more leaves the export.
func TestBlockedSessionsByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	item := func(n int, phase desired.Phase, blocked string) desired.Record {
		return desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: n},
			Status: desired.Status{Phase: phase, AttentionState: desired.AttentionState{Blocked: blocked}}}
	}
	m.fleet([]desired.Record{item(1, desired.PhaseRunning, "login_required"), item(2, desired.PhaseNeedsAttention, "login_required"),
		item(3, desired.PhaseRunning, "workspace_trust"), item(4, desired.PhaseStopped, "login_required"), item(5, desired.PhaseRunning, "")}, Policy{})
	assert.Equal(t, 2.0, testutil.ToFloat64(m.blocked.WithLabelValues("login_required")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.blocked.WithLabelValues("workspace_trust")))
	m.fleet([]desired.Record{item(3, desired.PhaseRunning, "workspace_trust")}, Policy{})
	assert.Equal(t, 1, testutil.CollectAndCount(reg, "loopd_blocked_sessions"), "login_required is gone")
}

// TestResumesAndDeliveryLatencyCountedOnce carries an item through its
// first event, a crash and a verified resume, and a failed resume that
// falls back to fresh, and reads the counters the executor fed.
func TestResumesAndDeliveryLatencyCountedOnce(t *testing.T) {
	r := newPassRig(t)
	m := r.metered()
	_, err := r.store.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: r.key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: r.cwd,
		Delivery: &desired.Delivery{ID: "d-1", Event: "issues", Action: "opened", Sender: "octocat", Prompt: openedPrompt,
			ReceivedAt: r.now.Add(-4 * time.Second)}})
	require.NoError(t, err)
	sess := desired.SessionName(r.key)

	r.pass(t, false)
	id := r.record(t).Status.HarnessSessionID
	r.boot(t, id)
	r.now = r.now.Add(6 * time.Second)
	r.pass(t, false)
	r.pass(t, false)
	require.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)

	require.Equal(t, 1, testutil.CollectAndCount(m.latency), "one delivery verified, observed once")
	assert.Equal(t, 1.0, histogramCount(t, m.latency.WithLabelValues("claude-code")))
	assert.Equal(t, 10.0, histogramSum(t, m.latency.WithLabelValues("claude-code")), "receipt to verification")

	r.now = r.now.Add(time.Hour)
	r.tmux.Exit(sess, 1)
	r.pass(t, false) // resume_spawn
	r.now = r.now.Add(6 * time.Second)
	r.boot(t, id)
	r.pass(t, false) // mark_running, verified
	require.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.resumes.WithLabelValues("claude-code", "resumed")))

	r.now = r.now.Add(time.Hour)
	r.tmux.Exit(sess, 1)
	r.tmux.FailNext("NewSession", errors.New("tmux: server exited unexpectedly"))
	r.pass(t, false) // the resume is refused
	r.pass(t, false) // a failure: tmux's refusal is no word of the harness
	r.now = r.now.Add(2 * time.Second)
	r.pass(t, false) // resumed again after the backoff
	require.Equal(t, []string{"--resume", id}, r.tmux.Argv(sess)[1:3])
	r.now = r.now.Add(time.Second)
	r.tmux.SetScreen(sess, "No conversation found with session ID: "+id)
	r.tmux.Exit(sess, 1)
	r.pass(t, false) // the harness's refusal: fresh fallback
	assert.Equal(t, 1.0, testutil.ToFloat64(m.resumes.WithLabelValues("claude-code", "not_resumable")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.resumes.WithLabelValues("claude-code", "resumed")), "counted once")
}

// TestFailedPassesCounted: a pass that fails (the store closed under it)
// counts in loopd_reconcile_errors_total.
func TestFailedPassesCounted(t *testing.T) {
	r := newPassRig(t)
	m := r.metered()
	require.NoError(t, r.store.Close())
	r.rc.Interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.rc.Run(ctx) }()

	require.Eventually(t, func() bool { return testutil.ToFloat64(m.passErrors) >= 2 }, 10*time.Second, 10*time.Millisecond,
		"each failed pass, retried with backoff, counts")
	cancel()
	require.NoError(t, <-done)
	assert.Zero(t, testutil.ToFloat64(m.passes), "no pass completed")
}

func histogramCount(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	return float64(histogram(t, o).GetSampleCount())
}

func histogramSum(t *testing.T, o prometheus.Observer) float64 {
	t.Helper()
	return histogram(t, o).GetSampleSum()
}

// histogram reads the one histogram o is.
func histogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&out))
	return out.GetHistogram()
}

// TestBudgetGaugesPerItemAndRoute: each open item of a route with a
// budget has its usage and budget by kind of budget, and the route the
// sum of its items' usage and how many are held; an item without a
// budget, and a closed one, have none.
func TestBudgetGaugesPerItemAndRoute(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.now = func() time.Time { return t0 }
	p := budgetPolicy()
	p.Routing.Repos["octo-org/web"] = schema.Route{Harness: "claude-code", Workdir: cwd}
	held := rec(used(desired.Status{Phase: desired.PhaseBudgetExhausted}, 1200))
	other := rec(used(running(), 300))
	other.Key.Number = 43
	closed := rec(used(running(), 300))
	closed.Key.Number, closed.Spec.Closed = 44, true
	free := rec(used(running(), 300))
	free.Key.Repo = "web"
	m.fleet([]desired.Record{held, other, closed, free}, p)

	assert.Equal(t, 1200.0, testutil.ToFloat64(m.budgetUsed.WithLabelValues("octo-org/api#42", "window")))
	assert.Equal(t, 1000.0, testutil.ToFloat64(m.budgetLimit.WithLabelValues("octo-org/api#42", "window")))
	assert.Equal(t, 5000.0, testutil.ToFloat64(m.budgetLimit.WithLabelValues("octo-org/api#43", "total")))
	assert.Equal(t, 1500.0, testutil.ToFloat64(m.routeUsed.WithLabelValues("octo-org/api")))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.exhausted.WithLabelValues("octo-org/api")))
	assert.Equal(t, 4, testutil.CollectAndCount(m.budgetUsed), "two items, two budgets each; none for the closed one or the free route")
}
