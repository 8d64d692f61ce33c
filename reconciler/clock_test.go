package reconciler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

func TestSteadyClockIgnoresWallSteps(t *testing.T) {
	wall, mono := t0, 5*time.Second
	clock := SteadyClock(func() time.Time { return wall }, func() time.Duration { return mono })
	assert.Equal(t, t0, clock(), "it starts at the wall clock")
	wall, mono = wall.Add(time.Hour), mono+2*time.Second
	assert.Equal(t, t0.Add(2*time.Second), clock(), "a step forward of the wall clock is not seen")
	wall, mono = wall.Add(-3*time.Hour), mono+time.Second
	assert.Equal(t, t0.Add(3*time.Second), clock(), "nor one back")
}

func TestBoundStatus(t *testing.T) {
	now := t0
	p := testPolicy() // Probe 5 s, BackoffMax 5 min
	ahead := now.Add(time.Hour)
	tests := []struct {
		name   string
		p      func(*Policy)
		st     desired.Status
		want   desired.Status
		fields []string
	}{
		{name: "instants_in_the_past_are_kept",
			st:   desired.Status{SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Hour), ProbeDeadline: now.Add(time.Second)}, RestartHistory: desired.RestartHistory{NextAttempt: now.Add(time.Minute)}, DeliveryState: desired.DeliveryState{DeliveredAt: []time.Time{now}}},
			want: desired.Status{SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Hour), ProbeDeadline: now.Add(time.Second)}, RestartHistory: desired.RestartHistory{NextAttempt: now.Add(time.Minute)}, DeliveryState: desired.DeliveryState{DeliveredAt: []time.Time{now}}}},
		{name: "stamps_ahead_of_now_are_now",
			st: desired.Status{SessionState: desired.SessionState{SpawnedAt: ahead}, RestartHistory: desired.RestartHistory{LastExitAt: ahead},
				QueuedAt: ahead, ActiveSeenAt: ahead, WorkspaceState: desired.WorkspaceState{PrepareStarted: ahead},
				DeliveryState: desired.DeliveryState{SentAt: ahead, DeliveredAt: []time.Time{now.Add(-time.Minute), ahead}}},
			want: desired.Status{SessionState: desired.SessionState{SpawnedAt: now}, RestartHistory: desired.RestartHistory{LastExitAt: now},
				QueuedAt: now, ActiveSeenAt: now, WorkspaceState: desired.WorkspaceState{PrepareStarted: now},
				DeliveryState: desired.DeliveryState{SentAt: now, DeliveredAt: []time.Time{now.Add(-time.Minute), now}}},
			fields: []string{"SpawnedAt", "SentAt", "LastExitAt", "QueuedAt", "ActiveSeenAt", "PrepareStarted", "DeliveredAt"}},
		{name: "a_next_attempt_waits_at_most_the_longest_backoff",
			st: desired.Status{RestartHistory: desired.RestartHistory{NextAttempt: ahead}}, want: desired.Status{RestartHistory: desired.RestartHistory{NextAttempt: now.Add(5 * time.Minute)}}, fields: []string{"NextAttempt"}},
		{name: "a_probe_deadline_is_at_most_one_probe_away",
			st: desired.Status{SessionState: desired.SessionState{ProbeDeadline: ahead}}, want: desired.Status{SessionState: desired.SessionState{ProbeDeadline: now.Add(5 * time.Second)}}, fields: []string{"ProbeDeadline"}},
		{name: "a_usage_limit_holds_at_most_the_longest_hold_and_its_margin",
			p:  func(p *Policy) { p.LimitMaxHold, p.LimitMargin = 10*time.Minute, time.Minute },
			st: desired.Status{LimitState: desired.LimitState{LimitUntil: ahead}}, want: desired.Status{LimitState: desired.LimitState{LimitUntil: now.Add(11 * time.Minute)}}, fields: []string{"LimitUntil"}},
		{name: "a_rate_limited_item_attempts_again_at_its_holds_end_not_the_backoffs",
			p:    func(p *Policy) { p.LimitMaxHold, p.LimitMargin = 2*time.Hour, time.Minute },
			st:   desired.Status{Phase: desired.PhaseRateLimited, RestartHistory: desired.RestartHistory{NextAttempt: ahead}, LimitState: desired.LimitState{LimitUntil: ahead}},
			want: desired.Status{Phase: desired.PhaseRateLimited, RestartHistory: desired.RestartHistory{NextAttempt: ahead}, LimitState: desired.LimitState{LimitUntil: ahead}}},
		{name: "a_rate_limited_items_next_attempt_is_bounded_by_the_longest_hold",
			p:      func(p *Policy) { p.LimitMaxHold, p.LimitMargin = 10*time.Minute, time.Minute },
			st:     desired.Status{Phase: desired.PhaseRateLimited, RestartHistory: desired.RestartHistory{NextAttempt: ahead}},
			want:   desired.Status{Phase: desired.PhaseRateLimited, RestartHistory: desired.RestartHistory{NextAttempt: now.Add(11 * time.Minute)}},
			fields: []string{"NextAttempt"}},
		{name: "an_unbounded_usage_limit_is_kept",
			st: desired.Status{LimitState: desired.LimitState{LimitUntil: ahead}}, want: desired.Status{LimitState: desired.LimitState{LimitUntil: ahead}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pol := p
			if tc.p != nil {
				tc.p(&pol)
			}
			got, fields := boundStatus(tc.st, pol, now)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.fields, fields)
		})
	}
}

// TestWallClockStepDoesNotTimeOutASpawn: a spawn waits for its
// confirmation, and the wall clock steps an hour forward while two seconds
// pass. On the daemon's clock (SteadyClock) the spawn is two seconds old:
// it is still awaited, not given up, and its confirmation then marks it
// running. (On the wall clock it would be an hour old, past its 2 min
// ConfirmTimeout: give_up and NeedsAttention.)
func TestWallClockStepDoesNotTimeOutASpawn(t *testing.T) {
	r := newPassRig(t)
	mono := time.Duration(0)
	clock := SteadyClock(func() time.Time { return r.now }, func() time.Duration { return mono })
	r.rc.Now, r.rc.Executor.Now = clock, clock
	r.opened(t)
	res := r.pass(t, false)
	require.Equal(t, []string{"prepare_workspace", "fresh_spawn"}, names(res.Plan))
	id := r.record(t).Status.HarnessSessionID

	r.now, mono = r.now.Add(time.Hour), mono+6*time.Second
	res = r.pass(t, false)
	require.Equal(t, []string{"wait"}, names(res.Plan), "the spawn is awaited, not given up")
	assert.Equal(t, actions.ReasonAwaitingConfirm, res.Plan[0].(actions.Wait).Reason)
	assert.Equal(t, desired.PhaseSpawning, r.record(t).Status.Phase)

	r.boot(t, id)
	mono += time.Second
	res = r.pass(t, false)
	require.Equal(t, []string{"mark_running"}, names(res.Plan))
	assert.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)
	assert.Empty(t, r.events(t, journal.SessionNeedsAttention))
}

// TestStoredDeadlineAheadOfTheClockIsBounded: a daemon restarted after the
// wall clock stepped an hour back finds an item backing off until an hour
// from its now. The pass brings the next attempt back to the longest
// backoff, writes it and journals clock.bounded, and the item is respawned
// once that has passed, not an hour later.
func TestStoredDeadlineAheadOfTheClockIsBounded(t *testing.T) {
	r := newPassRig(t)
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	r.opened(t)
	r.turn(t, old, openedPrompt)
	st := r.exited(t, old).Status
	st.Phase, st.Failures, st.NextAttempt = desired.PhaseBackingOff, 3, r.now.Add(time.Hour)
	st.SpawnedAt, st.LastExitAt = r.now.Add(50*time.Minute), r.now.Add(59*time.Minute)
	require.NoError(t, r.store.PutStatus(context.Background(), r.key, st, "d-1"))

	res := r.pass(t, false)
	require.Equal(t, []string{"wait"}, names(res.Plan))
	backoffMax := testPolicy().BackoffMax
	assert.Equal(t, r.now.Add(backoffMax), res.Plan[0].(actions.Wait).Until, "the wait is bounded by the longest backoff")
	got := r.record(t).Status
	assert.Equal(t, r.now.Add(backoffMax), got.NextAttempt.UTC(), "the bound is written")
	assert.Equal(t, r.now, got.LastExitAt.UTC())
	bounded := r.events(t, journal.ClockBounded)
	require.Len(t, bounded, 1)
	assert.Equal(t, "SpawnedAt,LastExitAt,NextAttempt", bounded[0].Attrs["fields"])

	r.now = r.now.Add(backoffMax)
	res = r.pass(t, false)
	assert.Equal(t, []string{"resume_spawn"}, names(res.Plan), "respawned after the longest backoff")
	assert.Len(t, r.events(t, journal.ClockBounded), 1, "bounded once")
}
