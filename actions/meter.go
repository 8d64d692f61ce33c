package actions

import "time"

// Meter receives what the executor found out for metrics, each fact once,
// at the place where it is recorded (reconciler.Metrics implements it).
// Executor.Meter nil counts nothing.
type Meter interface {
	// Resumed counts a resume of harness that brought its conversation
	// back (session.respawned resumed=true: confirmed by its transcript
	// or report).
	Resumed(harness string)
	// ResumeFellBack counts a fresh spawn of harness that replaces a
	// resume, for reason (one of the Resume… reasons; session.resume_failed).
	ResumeFellBack(harness string, reason Reason)
	// Delivered observes the latency of a delivery to an agent of harness:
	// from its receipt by the webhook (desired.Delivery.ReceivedAt) to
	// its verification in the conversation's transcript.
	Delivered(harness string, latency time.Duration)
	// LimitEpisode counts a usage-limit episode of an agent of harness,
	// of window (harness.LimitWindow, "" when the harness did not say):
	// each limit an item takes that is not the one it waits on
	// (session.rate_limited episode=…).
	LimitEpisode(harness, window string)
}
