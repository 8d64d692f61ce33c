package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// testServerOwner is the loopd the tests plan for, testOwner its mark.
var (
	testServerOwner = tmux.NewOwner("/srv/loopd/state")
	testOwner       = testServerOwner.ID
)

func testPolicy() Policy {
	return Policy{
		Resume: true, Probe: 5 * time.Second, ConfirmTimeout: 2 * time.Minute, Restart: schema.RestartOnFailure,
		FastFail: 15 * time.Second, MaxFastFailures: 3, MaxChurnFailures: 5, ChurnWindow: 5 * time.Minute, BackoffInitial: 2 * time.Second, BackoffMax: 5 * time.Minute,
		HealthyReset: 10 * time.Minute, RestartBudget: 10, Poll: time.Second, StartPoll: 200 * time.Millisecond, MaxBootPrompt: schema.DefaultMaxBootPrompt,
		DeliveryConfirm: schema.DefaultDeliveryConfirm, MaxSendAttempts: schema.DefaultMaxSendAttempts,
		Harnesses: map[string]Capabilities{
			"claude-code": {SupportsResume: true, ValidSessionID: isUUID, ProcessNames: []string{"claude"}},
			"cursor":      {SupportsResume: false, ValidSessionID: isUUID, ProcessNames: []string{"cursor-agent"}},
		},
		Owner: testOwner,
	}
}

func TestDecideRestart(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	with := func(f func(*Policy)) Policy { p := testPolicy(); f(&p); return p }
	tests := []struct {
		name string
		h    History
		p    Policy
		want Decision
	}{
		{"first_crash_after_healthy_run_is_immediate", History{Own: true, SameWords: true, SpawnedAt: ago(time.Hour)}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Failures: 1, Reason: actions.ReasonCrash}},
		{"second_consecutive_failure_waits_2s", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 1}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 2 * time.Second, Failures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"third_waits_4s", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 2}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 4 * time.Second, Failures: 3, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"backoff_caps_at_5m", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 9}, with(func(p *Policy) { p.RestartBudget = 100 }),
			Decision{Outcome: OutcomeRestart, Delay: 5 * time.Minute, Failures: 10, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"healthy_run_resets_counts", History{Own: true, SameWords: true, SpawnedAt: ago(11 * time.Minute), Failures: 7, FastFailures: 2, ChurnFailures: 4}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Failures: 1, Reason: actions.ReasonCrash}},
		{"fast_failure_counts", History{Own: true, SameWords: true, SpawnedAt: ago(3 * time.Second), Failures: 1, FastFailures: 1}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 2 * time.Second, Failures: 2, FastFailures: 2, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"third_fast_failure_degrades", History{Own: true, SameWords: true, SpawnedAt: ago(3 * time.Second), Failures: 2, FastFailures: 2}, testPolicy(),
			Decision{Outcome: OutcomeRetire, Retired: RetiredFastFailures, Delay: 4 * time.Second, Failures: 3, FastFailures: 0, Reason: actions.ReasonCrash}},
		{"third_exit_at_once_gives_up_retiring_nothing", History{Own: true, SameWords: true, NeverRan: true, SpawnedAt: ago(time.Second), Failures: 2, FastFailures: 2, ChurnFailures: 2}, testPolicy(),
			Decision{Outcome: OutcomeGiveUp, Failures: 3, FastFailures: 3, ChurnFailures: 3, Reason: actions.ReasonHarnessExitedAtOnce}},
		{"exits_at_once_are_never_churn", History{Own: true, SameWords: true, NeverRan: true, SpawnedAt: ago(time.Second), Failures: 4, ChurnFailures: 4}, with(func(p *Policy) { p.MaxFastFailures = 9 }),
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, FastFailures: 1, ChurnFailures: 5, Reason: actions.ReasonCrash}},
		{"slow_failure_breaks_fast_streak", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 2, FastFailures: 2}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 4 * time.Second, Failures: 3, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"over_budget_gives_up", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 10}, testPolicy(),
			Decision{Outcome: OutcomeGiveUp, Failures: 11, ChurnFailures: 1, Reason: actions.ReasonBudgetExhausted}},
		{"clean_exit_on_failure_policy_is_not_a_crash", History{Own: true, SameWords: true, SpawnedAt: ago(time.Minute), Failures: 2, FastFailures: 1, Clean: true}, testPolicy(),
			Decision{Outcome: OutcomeWait, Failures: 2, FastFailures: 1, Reason: actions.ReasonCleanExit}},
		{"clean_exit_always_restarts", History{Own: true, SameWords: true, SpawnedAt: ago(time.Hour), Clean: true}, with(func(p *Policy) { p.Restart = schema.RestartAlways }),
			Decision{Outcome: OutcomeRestart, Failures: 1, Reason: actions.ReasonExitedAlways}},
		{"never_policy_does_not_restart", History{Own: true, SameWords: true, SpawnedAt: ago(time.Hour)}, with(func(p *Policy) { p.Restart = schema.RestartNever }),
			Decision{Outcome: OutcomeWait, Failures: 1, Reason: actions.ReasonPolicyNever}},
		// The churn rule (gascity's churn case): runs that each die a while
		// after their resume, too slow to be fast failures.
		{"slow_failure_counts_toward_churn", History{Own: true, SameWords: true, SpawnedAt: ago(20 * time.Second), Failures: 3, ChurnFailures: 3}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 8 * time.Second, Failures: 4, ChurnFailures: 4, Reason: actions.ReasonCrash}},
		{"fifth_churn_failure_retires_the_id", History{Own: true, SameWords: true, SpawnedAt: ago(20 * time.Second), Failures: 4, ChurnFailures: 4}, testPolicy(),
			Decision{Outcome: OutcomeRetire, Retired: RetiredChurn, Delay: 16 * time.Second, Failures: 5, Reason: actions.ReasonCrash}},
		{"run_longer_than_the_churn_window_breaks_the_streak", History{Own: true, SameWords: true, SpawnedAt: ago(6 * time.Minute), Failures: 4, ChurnFailures: 4}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, Reason: actions.ReasonCrash}},
		{"clean_exit_leaves_the_churn_count", History{Own: true, SameWords: true, SpawnedAt: ago(20 * time.Second), Failures: 4, ChurnFailures: 4, Clean: true}, testPolicy(),
			Decision{Outcome: OutcomeWait, Failures: 4, ChurnFailures: 4, Reason: actions.ReasonCleanExit}},
		{"churn_rule_off", History{Own: true, SameWords: true, SpawnedAt: ago(20 * time.Second), Failures: 4, ChurnFailures: 4}, with(func(p *Policy) { p.MaxChurnFailures = 0 }),
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, ChurnFailures: 5, Reason: actions.ReasonCrash}},
		// Issue 21, case 7: only the harness's own exits, dying the same
		// way, implicate the conversation. A kill from outside (SIGKILL, an
		// OOM kill, a session killed) is counted against the budget and
		// backed off, and leaves the conversation's counts as they were.
		{"kill_from_outside_counts_neither_fast_nor_churn", History{SpawnedAt: ago(3 * time.Second), Failures: 4, FastFailures: 2, ChurnFailures: 4}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, FastFailures: 2, ChurnFailures: 4, Reason: actions.ReasonCrash}},
		{"long_run_killed_from_outside_still_clears_the_streaks", History{SpawnedAt: ago(6 * time.Minute), Failures: 4, FastFailures: 2, ChurnFailures: 4}, testPolicy(),
			Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, Reason: actions.ReasonCrash}},
		{"own_exit_with_other_last_words_starts_a_new_streak", History{Own: true, SpawnedAt: ago(3 * time.Second), Failures: 4, FastFailures: 2, ChurnFailures: 4},
			testPolicy(), Decision{Outcome: OutcomeRestart, Delay: 16 * time.Second, Failures: 5, FastFailures: 1, ChurnFailures: 1, Reason: actions.ReasonCrash}},
		{"conversation_that_kills_its_cli_every_time_is_retired", History{Own: true, SameWords: true, SpawnedAt: ago(3 * time.Second), Failures: 2, FastFailures: 2, ChurnFailures: 2},
			testPolicy(), Decision{Outcome: OutcomeRetire, Retired: RetiredFastFailures, Delay: 4 * time.Second, Failures: 3, Reason: actions.ReasonCrash}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, decideRestart(tt.h, tt.p, now))
		})
	}
}

func TestBackoffDelaySequence(t *testing.T) {
	p := testPolicy()
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, backoffDelay(n, p))
	}
	s := time.Second
	assert.Equal(t, []time.Duration{0, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 300 * s}, got)
}
