package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// deadAt is the item's pane dead with status since at (pane_dead_time, in
// whole seconds: the death was within the second after at).
func deadAt(status int, at time.Time) observed.Snapshot {
	s := dead(status)
	p := s.Panes[sess]
	p.DeadTime = at
	s.Panes[sess] = p
	return s
}

// TestDecideRestartFromTheDeath: the run is measured from spawn to death,
// not to the pass that saw the death.
func TestDecideRestartFromTheDeath(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	tests := []struct {
		name string
		h    History
		want Decision
	}{
		// codev: a resumed agent died 3 s after its spawn while the daemon
		// was down for 20 s.
		{"death_3s_after_spawn_seen_20s_later_is_fast", History{Own: true, SameWords: true, SpawnedAt: ago(23 * time.Second), DiedAt: ago(20 * time.Second), Failures: 2, FastFailures: 2},
			Decision{Outcome: OutcomeRetire, Retired: RetiredFastFailures, Delay: 4 * time.Second, Failures: 3, Reason: actions.ReasonCrash}},
		{"outage_longer_than_healthy_reset_keeps_a_crash_loops_counts", History{Own: true, SameWords: true, SpawnedAt: ago(11*time.Minute + 3*time.Second), DiedAt: ago(11 * time.Minute), Failures: 4, FastFailures: 1},
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, FastFailures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"healthy_run_seen_late_resets", History{Own: true, SameWords: true, SpawnedAt: ago(time.Hour), DiedAt: ago(30 * time.Minute), Failures: 3, FastFailures: 2},
			Decision{Outcome: OutcomeRestart, Failures: 1, Reason: actions.ReasonCrash}},
		{"unknown_death_time_is_now", History{Own: true, SameWords: true, SpawnedAt: ago(20 * time.Second), Failures: 1, FastFailures: 1},
			Decision{Outcome: OutcomeRestart, Delay: 2 * time.Second, Failures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		// tmux shows whole seconds: the death counts at the end of its
		// second, here 15.5 s after the spawn.
		{"death_counts_at_the_end_of_its_second", History{Own: true, SameWords: true, SpawnedAt: ago(16*time.Second + 500*time.Millisecond), DiedAt: ago(2 * time.Second), Failures: 1, FastFailures: 1},
			Decision{Outcome: OutcomeRestart, Delay: 2 * time.Second, Failures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"death_time_after_now_is_now", History{Own: true, SameWords: true, SpawnedAt: ago(10 * time.Second), DiedAt: now.Add(10 * time.Second), Failures: 1, FastFailures: 1},
			Decision{Outcome: OutcomeRestart, Delay: 2 * time.Second, Failures: 2, FastFailures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"death_time_before_the_spawn_is_the_spawn", History{Own: true, SameWords: true, SpawnedAt: ago(10 * time.Second), DiedAt: ago(time.Minute)},
			Decision{Outcome: OutcomeRestart, Failures: 1, FastFailures: 1, ChurnFailures: 1, Reason: actions.ReasonCrash}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, decideRestart(tt.h, testPolicy(), now))
		})
	}
}

// TestPlanCountsFromTheDeath: backoff and the fast-failure window run from
// the death tmux recorded, so a pass that sees a death late (no daemon ran,
// cron runs reconcile --once) decides as a pass at the death would have,
// and resumes at once when the backoff has passed since.
func TestPlanCountsFromTheDeath(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	none := desired.Delivery{}
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		want []actions.Action
	}{
		{"crash_seen_after_its_backoff_resumes_at_once", rec(with(running(), func(s *desired.Status) { s.SpawnedAt, s.Failures = t0.Add(-30*time.Second), 1 })),
			obs(deadAt(1, t0.Add(-7*time.Second)), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 2, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				e.Delay = 2 * time.Second
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		{"crash_seen_within_its_backoff_waits_the_rest", rec(with(running(), func(s *desired.Status) { s.SpawnedAt, s.Failures = t0.Add(-30*time.Second), 1 })),
			obs(deadAt(1, t0.Add(-2*time.Second)), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 2, 0, actions.ReasonCrash)
				e.NextAttempt = t0.Add(time.Second)
				e.Delay = 2 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonBackoff}}},
		{"resumed_agent_dead_3s_after_spawn_seen_20s_later_degrades", rec(with(running(), func(s *desired.Status) {
			s.SpawnMode, s.SpawnedAt, s.Failures, s.FastFailures = desired.SpawnResume, t0.Add(-23*time.Second), 2, 2
		})), obs(deadAt(1, t0.Add(-20*time.Second)), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 3, 0, actions.ReasonCrash)
				e.NextAttempt, e.Retire, e.ChurnFailures = t0, RetiredFastFailures, 0
				e.Delay = 4 * time.Second
				return e
			}(), fresh(none, actions.ReasonPaneDead, actions.ResumeCrashLoop)}},
		{"crash_loop_keeps_its_counts_across_a_long_outage", rec(with(running(), func(s *desired.Status) {
			s.SpawnedAt, s.Failures, s.FastFailures = t0.Add(-11*time.Minute-3*time.Second), 4, 1
		})), obs(deadAt(1, t0.Add(-11*time.Minute)), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 5, 2, actions.ReasonCrash)
				e.NextAttempt = t0
				e.Delay = 16 * time.Second
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		// No pane, no death time: the pass that finds the session gone
		// stands for the death.
		{"missing_session_backs_off_from_now", rec(with(running(), func(s *desired.Status) { s.Failures = 1 })), obs(gone(), transcript),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 2, Delay: 2 * time.Second, NextAttempt: t0.Add(2 * time.Second), Reason: actions.ReasonSessionMissing},
				actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, testPolicy(), t0))
		})
	}
}
