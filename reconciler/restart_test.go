package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/tmux"
)

// testServerOwner is the loopd the tests plan for, testOwner its mark.
var (
	testServerOwner = tmux.NewOwner("/srv/loopd/state")
	testOwner       = testServerOwner.ID
)

func testPolicy() Policy {
	return Policy{
		Resume: true, Probe: 5 * time.Second, ConfirmTimeout: 2 * time.Minute, Restart: schema.RestartOnFailure,
		FastFail: 15 * time.Second, MaxFastFailures: 3, BackoffInitial: 2 * time.Second, BackoffMax: 5 * time.Minute,
		HealthyReset: 10 * time.Minute, RestartBudget: 10, Poll: time.Second, MaxBootPrompt: DefaultMaxBootPrompt,
		DeliveryConfirm: DefaultDeliveryConfirm, MaxSendAttempts: DefaultMaxSendAttempts,
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
		{"first_crash_after_healthy_run_is_immediate", History{SpawnedAt: ago(time.Hour)}, testPolicy(),
			Decision{Restart: true, Failures: 1, Reason: actions.ReasonCrash}},
		{"second_consecutive_failure_waits_2s", History{SpawnedAt: ago(time.Minute), Failures: 1}, testPolicy(),
			Decision{Restart: true, Delay: 2 * time.Second, Failures: 2, Reason: actions.ReasonCrash}},
		{"third_waits_4s", History{SpawnedAt: ago(time.Minute), Failures: 2}, testPolicy(),
			Decision{Restart: true, Delay: 4 * time.Second, Failures: 3, Reason: actions.ReasonCrash}},
		{"backoff_caps_at_5m", History{SpawnedAt: ago(time.Minute), Failures: 9}, with(func(p *Policy) { p.RestartBudget = 100 }),
			Decision{Restart: true, Delay: 5 * time.Minute, Failures: 10, Reason: actions.ReasonCrash}},
		{"healthy_run_resets_counts", History{SpawnedAt: ago(11 * time.Minute), Failures: 7, FastFailures: 2}, testPolicy(),
			Decision{Restart: true, Failures: 1, Reason: actions.ReasonCrash}},
		{"fast_failure_counts", History{SpawnedAt: ago(3 * time.Second), Failures: 1, FastFailures: 1}, testPolicy(),
			Decision{Restart: true, Delay: 2 * time.Second, Failures: 2, FastFailures: 2, Reason: actions.ReasonCrash}},
		{"third_fast_failure_degrades", History{SpawnedAt: ago(3 * time.Second), Failures: 2, FastFailures: 2}, testPolicy(),
			Decision{Restart: true, Delay: 4 * time.Second, Degrade: true, Failures: 3, FastFailures: 0, Reason: actions.ReasonCrash}},
		{"slow_failure_breaks_fast_streak", History{SpawnedAt: ago(time.Minute), Failures: 2, FastFailures: 2}, testPolicy(),
			Decision{Restart: true, Delay: 4 * time.Second, Failures: 3, Reason: actions.ReasonCrash}},
		{"over_budget_gives_up", History{SpawnedAt: ago(time.Minute), Failures: 10}, testPolicy(),
			Decision{GiveUp: true, Failures: 11, Reason: actions.ReasonBudgetExhausted}},
		{"clean_exit_on_failure_policy_is_not_a_crash", History{SpawnedAt: ago(time.Minute), Failures: 2, FastFailures: 1, Clean: true}, testPolicy(),
			Decision{Failures: 2, FastFailures: 1, Reason: actions.ReasonCleanExit}},
		{"clean_exit_always_restarts", History{SpawnedAt: ago(time.Hour), Clean: true}, with(func(p *Policy) { p.Restart = schema.RestartAlways }),
			Decision{Restart: true, Failures: 1, Reason: actions.ReasonExitedAlways}},
		{"never_policy_does_not_restart", History{SpawnedAt: ago(time.Hour)}, with(func(p *Policy) { p.Restart = schema.RestartNever }),
			Decision{Failures: 1, Reason: actions.ReasonPolicyNever}},
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
