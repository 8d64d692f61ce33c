package webhook

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loopd/loopd/internal/journal"
)

// Metrics are the webhook receiver's Prometheus metrics.
type Metrics struct {
	// deliveries counts the requests answered, by outcome (the event that
	// records each, less "delivery.") and reason (the handler's reason
	// constants; "" when none applies). Both label sets are bounded: no
	// value comes from the request.
	deliveries *prometheus.CounterVec
	// refused counts the listener's refusals by reason (listener.refused).
	refused *prometheus.CounterVec
}

// NewMetrics registers the receiver's metrics with reg. The accepted and
// duplicate outcomes are exported from the start, at 0.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_webhook_deliveries_total",
			Help: "Webhook requests answered, by outcome (accepted, duplicate, ignored, rejected) and reason."},
			[]string{"outcome", "reason"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "loopd_listener_refused_total",
		Help: "Connections the listener cut before any request (conns_per_address, shed) and requests to its own pages refused for their Host (host_not_allowed), by reason."},
		[]string{"reason"})
	reg.MustRegister(m.deliveries, m.refused)
	for reason := range refusalErr {
		m.refused.WithLabelValues(reason)
	}
	for _, name := range []journal.Name{journal.DeliveryAccepted, journal.DeliveryDuplicate} {
		m.deliveries.WithLabelValues(outcomeOf(name), "")
	}
	return m
}

// outcomeOf is the outcome label of the event name that records a
// delivery: delivery.accepted is "accepted".
func outcomeOf(name journal.Name) string {
	return strings.TrimPrefix(string(name), "delivery.")
}

// count counts one request answered with the event name and reason. A nil
// m counts nothing.
func (m *Metrics) count(name journal.Name, reason string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(outcomeOf(name), reason).Inc()
}

// refusal counts one refusal of the listener for reason. A nil m counts
// nothing.
func (m *Metrics) refusal(reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(reason).Inc()
}
