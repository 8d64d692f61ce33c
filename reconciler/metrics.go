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
	}
	reg.MustRegister(m.passes, m.actions, m.failed, m.duration)
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
