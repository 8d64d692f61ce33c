package reconciler

import (
	"time"

	"github.com/loopd/loopd/desired"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reconciler's Prometheus metrics.
type Metrics struct {
	passes   prometheus.Counter
	actions  *prometheus.CounterVec
	failed   prometheus.Counter
	duration prometheus.Histogram
	// limitReset is the reset of the usage limit holding each harness, in
	// Unix seconds; 0 when none does.
	limitReset *prometheus.GaugeVec
	// phases counts the work items in each phase; live and starts are
	// the slots held and the starts in flight (Load), maxLive and maxStarts
	// the capacity (0: no limit).
	phases    *prometheus.GaugeVec
	live      prometheus.Gauge
	maxLive   prometheus.Gauge
	starts    prometheus.Gauge
	maxStarts prometheus.Gauge
}

// NewMetrics registers the reconciler's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "loopd_reconcile_passes_total", Help: "Reconcile passes run."}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_actions_planned_total",
			Help: "Actions planned, by action name."}, []string{"action"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "loopd_actions_failed_total", Help: "Actions that returned an error."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "loopd_reconcile_pass_seconds",
			Help: "Duration of one reconcile pass in seconds.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		phases: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_work_items",
			Help: "Work items, by phase (Queued, Parked and the others), after the last pass."}, []string{"phase"}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_live_sessions",
			Help: "Work items holding a live agent's slot (Spawning, Running, BackingOff after a crash), after the last pass."}),
		maxLive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_max_live_sessions",
			Help: "capacity.maxLiveSessions: the slots of live agents; 0 means no limit."}),
		starts: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_starts_in_flight",
			Help: "Starts in flight: spawns whose harness has not yet reported it started, after the last pass."}),
		maxStarts: prometheus.NewGauge(prometheus.GaugeOpts{Name: "loopd_max_starts_in_flight",
			Help: "capacity.maxStartsInFlight: the starts that may be in flight at once."}),
		limitReset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_usage_limit_reset_timestamp_seconds",
			Help: "When the usage limit holding a harness's items resets, in Unix seconds; 0 when none holds them."}, []string{"harness"}),
	}
	reg.MustRegister(m.passes, m.actions, m.failed, m.duration, m.limitReset, m.phases, m.live, m.maxLive, m.starts, m.maxStarts)
	return m
}

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
func (m *Metrics) limits(holds map[string]limitHold, p Policy) {
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
	counts := map[desired.Phase]int{}
	for _, r := range records {
		phase := r.Status.Phase
		if phase == "" {
			phase = desired.PhaseIdle
		}
		counts[phase]++
	}
	for _, phase := range desired.Phases() {
		m.phases.WithLabelValues(string(phase)).Set(float64(counts[phase]))
	}
	l := LoadOf(records)
	m.live.Set(float64(l.Live))
	m.starts.Set(float64(l.Starts))
	m.maxLive.Set(float64(p.MaxLive))
	m.maxStarts.Set(float64(p.MaxStarts))
}
