package reconciler

import (
	"time"

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
		limitReset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_usage_limit_reset_timestamp_seconds",
			Help: "When the usage limit holding a harness's items resets, in Unix seconds; 0 when none holds them."}, []string{"harness"}),
	}
	reg.MustRegister(m.passes, m.actions, m.failed, m.duration, m.limitReset)
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
