package main

import (
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/store"
)

// registerMetrics registers with reg the collectors serve exports on
// /metrics: the Go runtime's and the process's, the reconciler's (which
// the executor feeds too), the webhook receiver's, and the count of
// rejection rows the journal queue dropped (rejections.Dropped), and
// loopd_store_listening (listener's state, nil for a store without one),
// loopd_store_reachable (storeDown's: the heartbeats', nil for always),
// loopd_build_info, 1 with the binary's version, commit and Go version as
// labels (the Prometheus convention for build facts).
// contrib/prometheus and contrib/grafana use their names.
func registerMetrics(reg prometheus.Registerer, rejections *journal.Async, listener store.Listener,
	storeDown func() (time.Time, error)) (*reconciler.Metrics, *webhook.Metrics) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopd_store_reachable",
		Help: "1 while the store answers this host's heartbeats, 0 from the first that failed until one succeeds."},
		func() float64 {
			if storeDown != nil {
				if since, _ := storeDown(); !since.IsZero() {
					return 0
				}
			}
			return 1
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "loopd_store_listening",
		Help: "1 while the store's listener for other hosts' changes (PostgreSQL LISTEN) is connected, 0 while it is down; 1 with SQLite, which has none."},
		func() float64 {
			if listener != nil && listener.ListenDown() != nil {
				return 0
			}
			return 1
		}))
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "loopd_journal_rejections_dropped_total",
		Help: "Journal rows of rejected webhook requests dropped: their queue was full, or the store refused them."},
		func() float64 { return float64(rejections.Dropped()) }))
	v := currentVersion(debug.ReadBuildInfo())
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loopd_build_info",
		Help: "Always 1; the labels say which build of loopd this is."}, []string{"version", "commit", "go"})
	build.WithLabelValues(v.Version, v.Commit, v.Go).Set(1)
	reg.MustRegister(build)
	return reconciler.NewMetrics(reg), webhook.NewMetrics(reg)
}
