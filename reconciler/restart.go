package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/doubling"
	"github.com/loopd/loopd/schema"
)

// History is what the restart decision knows of one item's last run.
type History struct {
	SpawnedAt time.Time
	// DiedAt is when the run ended, as tmux recorded it (pane_dead_time,
	// whole seconds); zero when no death time is known (the session is
	// missing, or the pane lives on without the harness): the decision's
	// now then stands for it (diedAt).
	DiedAt        time.Time
	FastFailures  int // consecutive fast failures before this exit
	ChurnFailures int // consecutive failed runs shorter than the churn window before this exit
	Failures      int // consecutive failed runs before this exit
	Clean         bool
	// Own is true when the harness ended the run itself with an exit
	// status of its own choosing: not a signal (nor a shell's 128+N for
	// one), not a session found missing or a pane left with a shell, not
	// a refused spawn or a lost server. Only such a death can implicate
	// the conversation (the fast-failure and churn rules).
	Own bool
	// SameWords is true when the harness's last words are those of the
	// death the fast-failure and churn counts last took
	// (desired.Status.LastWords), or the counts took none.
	SameWords bool
	// NeverRan is true when the run was a fresh spawn whose harness
	// exited at once, before its conversation started (no transcript, no
	// prompt landed: actions.ReasonHarnessExitedAtOnce): there is no
	// conversation to retire, so the fast-failure rule gives up instead,
	// and the churn rule does not apply.
	NeverRan bool
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

// Outcome is what the restart decision does with one exit.
type Outcome int

// The outcomes of the restart decision.
const (
	// OutcomeWait: no self-heal; the item waits for a new event (a clean
	// exit under OnFailure or Never, any exit under Never).
	OutcomeWait Outcome = iota
	// OutcomeRestart: respawn after Decision.Delay, resuming the
	// conversation.
	OutcomeRestart
	// OutcomeRetire: respawn after Decision.Delay in a new conversation;
	// the id is retired (Decision.Retired says by which rule) and never
	// resumed again.
	OutcomeRetire
	// OutcomeGiveUp: past the restart budget; the item needs attention.
	OutcomeGiveUp
)

// Why an id is retired (Decision.Retired, the reason of session.crash_loop).
const (
	// RetiredFastFailures: MaxFastFailures runs in a row died within
	// FastFail of their spawn.
	RetiredFastFailures actions.Reason = "fast_failures"
	// RetiredChurn: MaxChurnFailures failed runs in a row each lasted less
	// than ChurnWindow (a conversation that dies a while after each resume).
	RetiredChurn actions.Reason = "churn"
)

// Decision is the outcome of one exit, in the style of nomad's restart
// tracker but with the clock passed in: wait for an event, restart (after
// Delay), restart with a retired id, or give up.
type Decision struct {
	Outcome Outcome
	// Delay is the wait before the respawn, for OutcomeRestart and
	// OutcomeRetire, counted from the death.
	Delay time.Duration
	// Retired names the rule that retired the id, with OutcomeRetire.
	Retired actions.Reason
	// The counts to record after this exit.
	Failures      int
	FastFailures  int
	ChurnFailures int
	Reason        actions.Reason
}

// Restarts reports whether the decision respawns the item by itself.
func (d Decision) Restarts() bool { return d.Outcome == OutcomeRestart || d.Outcome == OutcomeRetire }

// decideRestart applies the restart policy to one exit observed at now.
// Branch order: healthy-run reset, clean exit, policy Never, budget,
// fast-failure and churn retirement (of the harness's own exits only:
// History.Own, SameWords; for a run that never started its conversation,
// History.NeverRan, the fast-failure rule gives up with
// harness_exited_at_once and nothing is retired), backoff. The run is measured from
// spawn to death (History.diedAt), however late a pass saw the death; Delay
// counts from the death too. It reads no clock and no randomness.
func decideRestart(h History, p Policy, now time.Time) Decision {
	ran := h.diedAt(now).Sub(h.SpawnedAt)
	failures, fast, churn := resetCounts(h, p, now)
	if h.Clean && p.Restart != schema.RestartAlways {
		// A clean exit is not a crash: it leaves the counts alone and waits
		// for the next event.
		return Decision{Outcome: OutcomeWait, Failures: failures, FastFailures: fast, ChurnFailures: churn, Reason: actions.ReasonCleanExit}
	}
	// The fast-failure and churn counts judge the conversation: only the
	// harness's own exits, dying the same way each time, implicate it. A
	// kill from outside (a signal, an OOM kill, a lost session) is a crash
	// of the same conversation, counted against the budget and backed off
	// but never held against the conversation; an own exit with other last
	// words starts a new streak. A run that lasted the window clears them.
	if h.Own && !h.SameWords {
		fast, churn = 0, 0
	}
	switch {
	case ran >= p.FastFail:
		fast = 0
	case h.Own:
		fast++
	}
	switch {
	case ran >= p.ChurnWindow:
		churn = 0
	case h.Own:
		churn++
	}
	failures++
	d := Decision{Failures: failures, FastFailures: fast, ChurnFailures: churn, Reason: actions.ReasonCrash}
	if h.Clean {
		d.Reason = actions.ReasonExitedAlways
	}
	if p.Restart == schema.RestartNever {
		d.Reason = actions.ReasonPolicyNever
		return d
	}
	if overBudget(failures, p) {
		d.Outcome = OutcomeGiveUp
		d.Reason = actions.ReasonBudgetExhausted
		return d
	}
	d.Outcome = OutcomeRestart
	switch {
	case h.NeverRan && fast >= p.MaxFastFailures:
		// The command fails before any conversation: a new id would fail
		// the same way, and only a person can fix the command.
		d.Outcome, d.Reason = OutcomeGiveUp, actions.ReasonHarnessExitedAtOnce
		return d
	case h.NeverRan:
	case fast >= p.MaxFastFailures:
		d.Outcome, d.Retired = OutcomeRetire, RetiredFastFailures
	case p.MaxChurnFailures > 0 && churn >= p.MaxChurnFailures:
		d.Outcome, d.Retired = OutcomeRetire, RetiredChurn
	}
	if d.Outcome == OutcomeRetire {
		// The counts were the retired conversation's.
		d.FastFailures, d.ChurnFailures = 0, 0
	}
	d.Delay = backoffDelay(failures, p)
	return d
}

// overBudget reports whether failures consecutive failures are past the
// restart budget: the item then needs attention.
func overBudget(failures int, p Policy) bool { return failures > p.RestartBudget }

// decideRetry is the restart decision for a failure that is not a run: a
// workspace that could not be made. It counts one more failure against the
// same budget and backoff as a crash (a failed run before it, or after,
// counts toward the same limit), with no run to measure: no fast failure,
// no churn, no retirement. Outcome is OutcomeRestart after Delay, or
// OutcomeGiveUp past the budget.
func decideRetry(failures int, p Policy) Decision {
	failures++
	d := Decision{Outcome: OutcomeRestart, Failures: failures, Reason: actions.ReasonWorkspaceFailed, Delay: backoffDelay(failures, p)}
	if overBudget(failures, p) {
		d.Outcome, d.Reason, d.Delay = OutcomeGiveUp, actions.ReasonBudgetExhausted, 0
	}
	return d
}

// resetCounts returns h's counts as the next decision takes them: a run
// that lasted HealthyReset (to its death, diedAt) clears all three first.
func resetCounts(h History, p Policy, now time.Time) (failures, fast, churn int) {
	if h.diedAt(now).Sub(h.SpawnedAt) >= p.HealthyReset {
		return 0, 0, 0
	}
	return h.Failures, h.FastFailures, h.ChurnFailures
}

// NextFailures returns the count of consecutive failed runs that the next
// restart decision about r would start from at now: 0 while a release is
// pending (carrying it out clears the counts) or once the current run has
// lasted HealthyReset (resetCounts), the recorded Status.Failures
// otherwise. diedAt is when tmux saw the current run's pane die
// (tmux.Pane.DeadTime), zero while it lives or when not known: a run is
// measured to its death, so an outage does not pass for a healthy run.
// loopd get shows it.
func NextFailures(r desired.Record, p Policy, now, diedAt time.Time) int {
	if r.ReleasePending() && !r.Spec.Closed {
		return 0
	}
	st := r.Status
	if st.Phase == desired.PhaseRunning || st.Phase == desired.PhaseSpawning {
		failures, _, _ := resetCounts(History{SpawnedAt: st.SpawnedAt, DiedAt: diedAt, Failures: st.Failures}, p, now)
		return failures
	}
	return st.Failures
}

// backoffDelay is the wait before the respawn that follows the n-th
// consecutive failure: none after the first (the first respawn after a
// healthy run is immediate), then BackoffInitial doubling up to BackoffMax.
// The sequence is internal/doubling's, so it is deterministic.
func backoffDelay(n int, p Policy) time.Duration {
	return doubling.Nth(p.BackoffInitial, p.BackoffMax, n-1)
}
