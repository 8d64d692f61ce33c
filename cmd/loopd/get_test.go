package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
)

func TestGetFlagsStalePendingWhileStopped(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pending := func(ages ...time.Duration) []desired.Delivery {
		var out []desired.Delivery
		for _, a := range ages {
			out = append(out, desired.Delivery{ID: "d-" + a.String(), ReceivedAt: now.Add(-a)})
		}
		return out
	}
	item := func(n int, phase desired.Phase, closed bool, p []desired.Delivery) desired.Record {
		return desired.Record{
			Key:     desired.Key{Owner: "o", Repo: "r", Number: n},
			Spec:    desired.Spec{Closed: closed},
			Status:  desired.Status{Phase: phase},
			Pending: p,
		}
	}
	tests := []struct {
		name string
		rec  desired.Record
		want string // the reason column; "" for none
	}{
		{name: "stopped_with_old_pending", rec: item(1, desired.PhaseStopped, false, pending(2*time.Hour+5*time.Minute+7*time.Second, time.Minute, 0)),
			want: "stale_pending=3 since=2h5m"},
		{name: "closed_with_old_pending", rec: item(2, desired.PhaseStopped, true, pending(11*time.Minute)), want: "stale_pending=1 since=11m"},
		{name: "stopped_with_recent_pending", rec: item(3, desired.PhaseStopped, false, pending(9*time.Minute)), want: ""},
		{name: "stopped_without_pending", rec: item(4, desired.PhaseStopped, false, nil), want: ""},
		{name: "running_with_old_pending", rec: item(5, desired.PhaseRunning, false, pending(time.Hour)), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, printRecords(&out, &table{}, itemViews([]desired.Record{tt.rec}, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 2)
			var reason string
			if col := strings.Index(lines[0], "REASON"); len(lines[1]) > col {
				reason = strings.TrimSpace(lines[1][col:])
			}
			assert.Equal(t, tt.want, reason)
		})
	}
}

func testPolicy() reconciler.Policy {
	return reconciler.PolicyFrom(schema.DefaultPolicy(), nil, "")
}

// loopd get shows the failure count the next restart decision would use:
// a run that has lasted healthyResetSeconds has reset it, and a pending
// release clears it, whatever the record still says.
func TestGetShowsTheFailureCountTheNextDecisionUses(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	item := func(st desired.Status, spec desired.Spec) desired.Record {
		return desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: spec, Status: st}
	}
	tests := []struct {
		name string
		rec  desired.Record
		want string
	}{
		{"running_for_a_minute_after_three_failures", item(desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Minute)}, RestartHistory: desired.RestartHistory{Failures: 3}}, desired.Spec{}), "3"},
		{"running_healthy_for_an_hour", item(desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Hour)}, RestartHistory: desired.RestartHistory{Failures: 3}}, desired.Spec{}), "0"},
		{"backing_off", item(desired.Status{Phase: desired.PhaseBackingOff, SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Hour)}, RestartHistory: desired.RestartHistory{Failures: 3}}, desired.Spec{}), "3"},
		{"release_pending", item(desired.Status{Phase: desired.PhaseNeedsAttention, RestartHistory: desired.RestartHistory{Failures: 11}}, desired.Spec{Generation: 4, ReleaseGeneration: 4}), "0"},
		{"release_carried_out", item(desired.Status{Phase: desired.PhaseNeedsAttention, RestartHistory: desired.RestartHistory{Failures: 11}, ReleasedGeneration: 4}, desired.Spec{Generation: 4, ReleaseGeneration: 4}), "11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, printRecords(&out, &table{}, itemViews([]desired.Record{tt.rec}, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			require.Len(t, lines, 2)
			col := strings.Index(lines[0], "FAILURES")
			assert.Equal(t, tt.want, strings.Fields(lines[1][col:])[0])
		})
	}
}

// A run seen dead after an outage is measured to its death, not to now: it
// did not last healthyResetSeconds, so its failures still count.
func TestGetMeasuresADeadRunToItsDeath(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	k := desired.Key{Owner: "o", Repo: "r", Number: 1}
	rec := desired.Record{Key: k, Status: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Hour)}, RestartHistory: desired.RestartHistory{Failures: 2}}}
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, itemViews([]desired.Record{rec}, now, schema.DefaultStalePending, testPolicy(),
		map[desired.Key]time.Time{k: now.Add(-time.Hour + 2*time.Second)}), false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	col := strings.Index(lines[0], "FAILURES")
	assert.Equal(t, "2", strings.Fields(lines[1][col:])[0])
}

// loopd get names the conversation the item is in: after a /clear, the
// recorded one until a pass follows the report (its transcript must appear
// first: reconciler's follow).
func TestGetShowsTheConversationTheItemIsIn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const old, cleared = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	rec := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1},
		Status: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{SpawnedAt: now.Add(-time.Minute), HarnessSessionID: old}},
		Report: &desired.SessionReport{SessionID: cleared, Source: "clear", At: now.Add(-time.Second)}}
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, itemViews([]desired.Record{rec}, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
	assert.Contains(t, out.String(), old)
	assert.NotContains(t, out.String(), cleared)
}

// TestGetShowsBlocksAndUsageLimits: a blocked item says why, and every
// item of the account a usage limit holds shows its reset, an item of
// another account nothing.
func TestGetShowsBlocksAndUsageLimits(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := testPolicy()
	p.Harnesses = map[string]reconciler.Capabilities{"a": {Account: "one"}, "a2": {Account: "one"}, "b": {Account: "two"}}
	reset := now.Add(20 * time.Minute)
	item := func(n int, harness string, st desired.Status) desired.Record {
		return desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: n}, Spec: desired.Spec{Harness: harness}, Status: st}
	}
	records := []desired.Record{
		item(1, "a", desired.Status{Phase: desired.PhaseRateLimited, Reason: "rate_limited", LimitState: desired.LimitState{LimitReset: reset, LimitUntil: reset.Add(time.Minute)}}),
		item(2, "a2", desired.Status{Phase: desired.PhaseIdle}),
		item(3, "b", desired.Status{Phase: desired.PhaseRunning, Reason: "delivered", AttentionState: desired.AttentionState{Blocked: "login_required"}}),
	}
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, itemViews(records, now, schema.DefaultStalePending, p, nil), false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	held := "rate_limited reset=" + reset.Local().Format(time.RFC3339) + " until=" + reset.Add(time.Minute).Local().Format(time.RFC3339)
	assert.Contains(t, lines[1], "RateLimited")
	assert.Contains(t, lines[1], held)
	assert.NotContains(t, lines[1], "rate_limited rate_limited", "the reason is said once")
	assert.Contains(t, lines[2], held, "the same account is held")
	assert.Contains(t, lines[3], "delivered blocked reason=login_required")
	assert.NotContains(t, lines[3], "rate_limited", "another account is not held")
}

// loopd get gives each Queued item its place in the queue, the oldest
// pending event first, as the planner admits them.
func TestGetShowsTheQueuePosition(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	item := func(n int, phase desired.Phase, received time.Duration) desired.Record {
		return desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: n},
			Status:  desired.Status{Phase: phase, Reason: "capacity"},
			Pending: []desired.Delivery{{ID: "d", ReceivedAt: now.Add(-received)}}}
	}
	var out bytes.Buffer
	recs := []desired.Record{item(1, desired.PhaseRunning, time.Hour), item(2, desired.PhaseQueued, time.Minute), item(3, desired.PhaseQueued, 2*time.Minute)}
	require.NoError(t, printRecords(&out, &table{}, itemViews(recs, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	assert.NotContains(t, lines[1], "position=")
	assert.True(t, strings.HasSuffix(lines[2], "capacity position=2"), lines[2])
	assert.True(t, strings.HasSuffix(lines[3], "capacity position=1"), lines[3])
}

// The AGE column is how long the item has been in its phase, as kubectl
// writes an age; "-" when the record does not say.
func TestGetShowsTheAgeOfThePhase(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	k := func(n int) desired.Key { return desired.Key{Owner: "o", Repo: "r", Number: n} }
	recs := []desired.Record{
		{Key: k(1), Spec: desired.Spec{Harness: "claude-code"}, Status: desired.Status{Phase: desired.PhaseRunning, PhaseSince: now.Add(-5*time.Minute - 10*time.Second)}},
		{Key: k(2), Spec: desired.Spec{Harness: "claude-code"}, Status: desired.Status{Phase: desired.PhaseIdle}},
	}
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, itemViews(recs, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3)
	col := strings.Index(lines[0], "AGE")
	require.Positive(t, col)
	assert.Equal(t, "5m", strings.Fields(lines[1][col:])[0])
	assert.Equal(t, "-", strings.Fields(lines[2][col:])[0])
}

func TestShortAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second: "0s", 45 * time.Second: "45s", 119 * time.Second: "119s", 2 * time.Minute: "2m", 59 * time.Minute: "59m",
		time.Hour: "1h", 47 * time.Hour: "47h", 48 * time.Hour: "2d", 400 * 24 * time.Hour: "400d", 3 * 365 * 24 * time.Hour: "3y",
	} {
		assert.Equal(t, want, shortAge(d), d.String())
	}
}

// An agent that waits at a screen for a person says so in the phase
// column: Running/Blocked, the reason column saying at what.
func TestGetShowsABlockedAgentInItsPhase(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rec := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: desired.Spec{Harness: "claude-code"},
		Status: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "login_required"}}}
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, itemViews([]desired.Record{rec}, now, schema.DefaultStalePending, testPolicy(), nil), false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, strings.Fields(lines[1]), "Running/Blocked")
	assert.Contains(t, lines[1], "blocked reason=login_required")
}

// An agent that waits on an answer from GitHub shows AwaitingApproval
// with the question's id, in the table, in -o json and in describe.
func TestGetShowsAwaitingApprovalWithTheQuestionID(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "permission_prompt"}}
	st.Question = &desired.Question{ID: "q3", Title: "Do you want to proceed?", Choices: []string{"Yes", "No"}, AskedAt: now}
	rec := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: desired.Spec{Harness: "claude-code"}, Status: st}
	views := itemViews([]desired.Record{rec}, now, schema.DefaultStalePending, testPolicy(), nil)
	var out bytes.Buffer
	require.NoError(t, printRecords(&out, &table{}, views, false, true))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, strings.Fields(lines[1]), "Running/AwaitingApproval")
	assert.Contains(t, lines[1], "awaiting_approval question_id=q3")
	assert.Equal(t, "q3", views[0].Status.Question)
	out.Reset()
	require.NoError(t, describe(&out, &schema.Config{}, rec, views[0], reconciler.ProjectSettings{}, nil))
	assert.Contains(t, out.String(), `q3 "Do you want to proceed?" asked`)
}
