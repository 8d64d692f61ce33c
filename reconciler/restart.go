package reconciler

import (
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/schema"
)

// History is what the restart decision knows of one item's last run.
type History struct {
	SpawnedAt time.Time
	// DiedAt is when the run ended, as tmux recorded it (pane_dead_time,
	// whole seconds); zero when no death time is known (the session is
	// missing, or the pane lives on without the harness): the decision's
	// now then stands for it (diedAt).
	DiedAt       time.Time
	FastFailures int // consecutive fast failures before this exit
	Failures     int // consecutive failed runs before this exit
	Clean        bool
}

// diedAt is when the run ended, as late as the facts allow, so that a
// backoff counted from it is never shorter than the policy asks. tmux shows
// the death time in whole seconds (pane_dead_time), so the death happened
// within the second after DiedAt, and by now at the latest: the end of that
// second, or now if earlier, and never before the spawn. With no death time
// known, now, the first moment the death is known to have happened by.
func (h History) diedAt(now time.Time) time.Time {
	if h.DiedAt.IsZero() {
		return now
	}
	died := h.DiedAt.Add(time.Second)
	if died.After(now) {
		died = now
	}
	if died.Before(h.SpawnedAt) {
		died = h.SpawnedAt
	}
	return died
}

// Decision is the outcome of one exit, in the style of nomad's restart
// tracker but with the clock passed in: restart (after Delay), degrade the
// session id to a fresh one, or give up.
type Decision struct {
	Restart bool
	// Delay is the backoff before the restart, counted from the death.
	Delay        time.Duration
	Degrade      bool // FastFailures reached MaxFastFailures: retire the id
	GiveUp       bool // Failures went past the restart budget
	Failures     int  // the counts to record after this exit
	FastFailures int
	Reason       actions.Reason
}

// decideRestart applies the restart policy to one exit observed at now.
// Branch order: healthy-run reset, clean exit, policy Never, budget,
// fast-failure degrade, backoff. The run is measured from spawn to death
// (History.diedAt), however late a pass saw the death; Delay counts from the
// death too. It reads no clock and no randomness.
func decideRestart(h History, p Policy, now time.Time) Decision {
	ran := h.diedAt(now).Sub(h.SpawnedAt)
	failures, fast := h.Failures, h.FastFailures
	if ran >= p.HealthyReset {
		failures, fast = 0, 0
	}
	if h.Clean && p.Restart != schema.RestartAlways {
		// A clean exit is not a crash: it leaves the counts alone and waits
		// for the next event.
		return Decision{Failures: failures, FastFailures: fast, Reason: actions.ReasonCleanExit}
	}
	if ran < p.FastFail {
		fast++
	} else {
		fast = 0
	}
	failures++
	d := Decision{Failures: failures, FastFailures: fast, Reason: actions.ReasonCrash}
	if h.Clean {
		d.Reason = actions.ReasonExitedAlways
	}
	if p.Restart == schema.RestartNever {
		d.Reason = actions.ReasonPolicyNever
		return d
	}
	if failures > p.RestartBudget {
		d.GiveUp = true
		d.Reason = actions.ReasonBudgetExhausted
		return d
	}
	if fast >= p.MaxFastFailures {
		d.Degrade = true
		d.FastFailures = 0
	}
	d.Restart = true
	d.Delay = backoffDelay(failures, p)
	return d
}

// backoffDelay is the wait before the respawn that follows the n-th
// consecutive failure: none after the first (the first respawn after a
// healthy run is immediate), then BackoffInitial doubling up to BackoffMax.
// The sequence comes from cenkalti/backoff with randomization off, so it is
// deterministic.
func backoffDelay(n int, p Policy) time.Duration {
	if n <= 1 {
		return 0
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     p.BackoffInitial,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         p.BackoffMax,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	var d time.Duration
	for i := 1; i < n; i++ {
		d = b.NextBackOff()
	}
	return d
}
