package reconciler

import (
	"sync"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reconciler's Prometheus metrics. They also count what
// the executor verified (actions.Meter): set Executor.Meter to them.
type Metrics struct {
	passes   prometheus.Counter
	actions  *prometheus.CounterVec
	failed   prometheus.Counter
	duration prometheus.Histogram
	// passErrors counts the passes that failed (reconcile.failed).
	passErrors prometheus.Counter
	// resumes counts resumes by harness and outcome: "resumed", or the
	// reason of the fresh spawn that replaced one (actions.Resume…).
	resumes *prometheus.CounterVec
	// latency is the time from a delivery's receipt to its verification
	// in the transcript, by harness.
	latency *prometheus.HistogramVec
	// pending counts the deliveries waiting on items that are neither
	// closed nor held; oldest is the receipt of the oldest of them (zero
	// when none), from which a scrape computes its age.
	pending prometheus.Gauge
	now     func() time.Time
	mu      sync.Mutex
	oldest  time.Time
	// limitReset is the reset of the usage limit holding each harness, in
	// Unix seconds; 0 when none does.
	limitReset *prometheus.GaugeVec
	// limitEpisodes counts usage-limit episodes by harness and window.
	limitEpisodes *prometheus.CounterVec
	// budgetUsed and budgetLimit are each budgeted open item's weighted
	// tokens used and its budget, by budget (window, total); routeUsed
	// the weighted tokens the items of each route with a budget counted
	// in all, and exhausted how many of them are BudgetExhausted.
	budgetUsed, budgetLimit *prometheus.GaugeVec
	routeUsed, exhausted    *prometheus.GaugeVec
	// phases counts the work items in each phase; live and starts are
	// the slots held and the starts in flight (Load), maxLive and maxStarts
	// the capacity (0: no limit).
	phases  *prometheus.GaugeVec
	blocked *prometheus.GaugeVec
	// unsandboxed counts, in each phase, the work items whose agent runs
	// or will run with no sandbox (Unsandboxed).
	unsandboxed *prometheus.GaugeVec
	live        prometheus.Gauge
	maxLive     prometheus.Gauge
	starts      prometheus.Gauge
	maxStarts   prometheus.Gauge
}

// NewMetrics registers the reconciler's metrics with reg. The gauge of
// every phase is exported from the start, at 0 until a pass counts it, so
// that an alert on one (NeedsAttention > 0) can fire and resolve; so are
// the counter of failed passes.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		now: time.Now,
		passErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "loopd_reconcile_errors_total",
			Help: "Reconcile passes that failed (reconcile.failed)."}),
		resumes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_resumes_total",
			Help: "Resumes, by harness and outcome: resumed, or the reason of the fresh spawn that replaced one."},
			[]string{"harness", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "loopd_delivery_latency_seconds",
			Help:    "Time from a delivery's receipt by the webhook to its verification in the agent's transcript, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.25, 2, 16)}, []string{"harness"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_pending_deliveries",
			Help: "Deliveries waiting to reach the agent of an item that is neither closed nor held, after the last pass."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "loopd_reconcile_passes_total", Help: "Reconcile passes run."}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_actions_planned_total",
			Help: "Actions planned, by action name."}, []string{"action"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "loopd_actions_failed_total", Help: "Actions that returned an error."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loopd_reconcile_pass_seconds",
			Help: "Duration of one reconcile pass in seconds.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		phases: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_work_items",
			Help: "Work items, by phase (Queued, Parked and the others), after the last pass."}, []string{"phase"}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_blocked_sessions",
			Help: "Work items whose agent waits at a screen for a person (login_required, workspace_trust, …), by that reason, after the last pass."},
			[]string{"reason"}),
		unsandboxed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_unsandboxed_work_items",
			Help: "Work items whose agent runs, or will run, with no sandbox (sandbox.mode none), by phase, after the last pass."}, []string{"phase"}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_live_sessions",
			Help: "Work items of this host holding a live agent's slot (Spawning, Running, BackingOff after a crash), after the last pass."}),
		maxLive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_max_live_sessions",
			Help: "capacity.maxLiveSessions: the slots of live agents; 0 means no limit."}),
		starts: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_starts_in_flight",
			Help: "Starts in flight: spawns whose harness has not yet reported it started, after the last pass."}),
		maxStarts: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_max_starts_in_flight",
			Help: "capacity.maxStartsInFlight: the starts that may be in flight at once."}),
		limitReset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_usage_limit_reset_timestamp_seconds",
			Help: "When the usage limit holding a harness's items resets, in Unix seconds; 0 when none holds them."}, []string{"harness"}),
		limitEpisodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_usage_limit_episodes_total",
			Help: "Usage-limit episodes of the agents, by harness and window (session, weekly, daily, per_minute; unknown when the harness did not say)."},
			[]string{"harness", "window"}),
		budgetUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_budget_used_tokens",
			Help: "Weighted tokens an open work item with a token budget used, within its route's rolling window or in all (budget), after the last pass."}, []string{"work_item", "budget"}),
		budgetLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_budget_limit_tokens",
			Help: "That work item's budget in weighted tokens, raises included (budget: window or total)."}, []string{"work_item", "budget"}),
		routeUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_budget_route_used_tokens",
			Help: "Weighted tokens the open work items of a route with a token budget counted in all, after the last pass."}, []string{"route"}),
		exhausted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_budget_exhausted_work_items",
			Help: "Open work items of a route with a token budget held BudgetExhausted, after the last pass."}, []string{"route"}),
	}
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopd_oldest_pending_delivery_age_seconds",
		Help: "Age at the scrape of the oldest delivery counted in loopd_pending_deliveries, in seconds; 0 when there is none."},
		m.oldestAge)
	reg.MustRegister(m.passes, m.actions, m.failed, m.duration, m.limitReset, m.phases, m.blocked, m.unsandboxed, m.live, m.maxLive, m.starts, m.maxStarts,
		m.passErrors, m.resumes, m.latency, m.pending, oldest, m.limitEpisodes, m.budgetUsed, m.budgetLimit, m.routeUsed, m.exhausted)
	for _, phase := range desired.Phases() {
		m.phases.WithLabelValues(string(phase))
		m.unsandboxed.WithLabelValues(string(phase))
	}
	return m
}

// oldestAge is the age of the oldest pending delivery counted, in
// seconds, 0 when there is none.
func (m *Metrics) oldestAge() float64 {
	m.mu.Lock()
	oldest := m.oldest
	m.mu.Unlock()
	if oldest.IsZero() {
		return 0
	}
	return max(m.now().Sub(oldest).Seconds(), 0)
}

// passFailed counts a pass that failed.
func (m *Metrics) passFailed() { m.passErrors.Inc() }

// Resumed implements actions.Meter.
func (m *Metrics) Resumed(harness string) {
	m.resumes.WithLabelValues(harness, resumedOutcome).Inc()
}

// resumedOutcome is the outcome of a resume that brought its conversation
// back; the others are the reasons of the fallbacks.
const resumedOutcome = "resumed"

// ResumeFellBack implements actions.Meter.
func (m *Metrics) ResumeFellBack(harness string, reason actions.Reason) {
	m.resumes.WithLabelValues(harness, string(reason)).Inc()
}

// Delivered implements actions.Meter.
func (m *Metrics) Delivered(harness string, latency time.Duration) {
	m.latency.WithLabelValues(harness).Observe(latency.Seconds())
}

// LimitEpisode implements actions.Meter.
func (m *Metrics) LimitEpisode(harness, window string) {
	if window == "" {
		window = unknownWindow
	}
	m.limitEpisodes.WithLabelValues(harness, window).Inc()
}

// unknownWindow is the window label of a limit whose harness did not say.
const unknownWindow = "unknown"

func (m *Metrics) observe(res PassResult, d time.Duration) {
	m.passes.Inc()
	for _, a := range res.Plan {
		m.actions.WithLabelValues(a.Name()).Inc()
	}
	m.failed.Add(float64(res.Result.Failed))
	m.duration.Observe(d.Seconds())
}

// limits sets the usage-limit reset of every harness of p from the holds
// in force (limitHolds).
func (m *Metrics) limits(holds map[string]LimitHold, p Policy) {
	for name, caps := range p.Harnesses {
		reset := 0.0
		if h, ok := holds[caps.Account]; ok && caps.Account != "" {
			reset = float64(h.Reset.Unix())
		}
		m.limitReset.WithLabelValues(name).Set(reset)
	}
}

// fleet sets the fleet's gauges from records as the pass left them, and
// the capacity from p.
func (m *Metrics) fleet(records []desired.Record, p Policy) {
	counts, unsandboxed := map[desired.Phase]int{}, map[desired.Phase]int{}
	blocked := map[string]int{}
	pending := 0
	var oldest time.Time
	for _, r := range records {
		if !r.Spec.Closed && !r.Spec.Held {
			// What loopd still has to deliver; a held or closed item's
			// events wait by the operator's or GitHub's choice.
			for _, d := range r.Pending {
				pending++
				if oldest.IsZero() || d.ReceivedAt.Before(oldest) {
					oldest = d.ReceivedAt
				}
			}
		}
		phase := r.Status.Phase
		if phase == "" {
			phase = desired.PhaseIdle
		}
		counts[phase]++
		if by := r.Status.BlockedBy(); by != "" {
			blocked[by]++
		}
		if Unsandboxed(r, p) {
			unsandboxed[phase]++
		}
	}
	for _, phase := range desired.Phases() {
		m.phases.WithLabelValues(string(phase)).Set(float64(counts[phase]))
		m.unsandboxed.WithLabelValues(string(phase)).Set(float64(unsandboxed[phase]))
	}
	m.blocked.Reset() // a reason nothing shows any more goes
	for reason, n := range blocked {
		m.blocked.WithLabelValues(reason).Set(float64(n))
	}
	m.pending.Set(float64(pending))
	m.mu.Lock()
	m.oldest = oldest
	m.mu.Unlock()
	m.budgets(records, p)
	l := LoadOn(records, p.Host) // this host's, against its capacity
	m.live.Set(float64(l.Live))
	m.starts.Set(float64(l.Starts))
	m.maxLive.Set(float64(p.MaxLive))
	m.maxStarts.Set(float64(p.MaxStarts))
}

// budgets sets the budget gauges from records: each open item whose route
// has a token budget (BudgetSpent), and each such route's sum. An item or
// a route that has none any more goes.
func (m *Metrics) budgets(records []desired.Record, p Policy) {
	m.budgetUsed.Reset()
	m.budgetLimit.Reset()
	m.routeUsed.Reset()
	m.exhausted.Reset()
	now := m.now()
	for _, r := range records {
		if r.Spec.Closed {
			continue
		}
		spent, ok := BudgetSpent(r, p, now)
		if !ok {
			continue
		}
		k := r.Key.String()
		if spent.WindowLimit > 0 {
			m.budgetUsed.WithLabelValues(k, desired.BudgetWindow).Set(float64(spent.WindowUsed))
			m.budgetLimit.WithLabelValues(k, desired.BudgetWindow).Set(float64(spent.WindowLimit))
		}
		if spent.TotalLimit > 0 {
			m.budgetUsed.WithLabelValues(k, desired.BudgetTotal).Set(float64(spent.TotalUsed))
			m.budgetLimit.WithLabelValues(k, desired.BudgetTotal).Set(float64(spent.TotalLimit))
		}
		route, _ := p.Routing.RouteKey(r.Key.Owner, r.Key.Repo)
		m.routeUsed.WithLabelValues(route).Add(float64(r.Status.UsageWeighted))
		held := m.exhausted.WithLabelValues(route)
		if r.Status.Phase == desired.PhaseBudgetExhausted {
			held.Inc()
		}
	}
}
