package actions_test

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

// TestQueueJournalsOncePerEpisode: an item entering the queue is Queued,
// with the time it entered, and journaled once; one that stays (its
// reason changed) is rewritten without a second session.queued.
func TestQueueJournalsOncePerEpisode(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	sess := desired.SessionName(r.key)
	q := actions.Queue{Key: r.key, Session: sess, Position: 2, Live: 3, MaxLive: 3, Starts: 1, MaxStarts: 2, Reason: actions.ReasonCapacity, Enter: true}
	require.Equal(t, actions.Result{Applied: 1}, r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{q}))
	got := r.get(t)
	assert.Equal(t, desired.PhaseQueued, got.Status.Phase)
	assert.Equal(t, r.now, got.Status.QueuedAt)
	assert.Equal(t, "capacity", got.Status.Reason)
	assert.Len(t, got.Pending, 1, "nothing is dropped")
	queued := r.named(t, journal.SessionQueued)
	require.Len(t, queued, 1)
	assert.Equal(t, map[string]string{"session": sess, "position": "2", "live": "3", "max_live": "3", "starts": "1", "max_starts": "2",
		"pending": "1", "reason": "capacity"}, queued[0].Attrs)

	entered := r.now
	r.now = r.now.Add(time.Minute)
	q.Reason = actions.ReasonStartsInFlight
	require.Equal(t, actions.Result{Applied: 1}, r.exec.Execute(ctx, []desired.Record{got}, []actions.Action{q}))
	got = r.get(t)
	assert.Equal(t, "starts_in_flight", got.Status.Reason)
	assert.Equal(t, entered, got.Status.QueuedAt, "its place is kept")
	assert.Len(t, r.named(t, journal.SessionQueued), 1, "once per episode")

	q.Enter = false
	assert.False(t, q.Mutates(), "staying queued writes nothing")
}

// TestParkStopsAnIdleAgentCleanly: a park at an empty input box kills the
// session and records Parked, no exit and no failure; a screen that shows
// the agent at work or a draft is left alone, its idle time restarted.
func TestParkStopsAnIdleAgentCleanly(t *testing.T) {
	for _, tt := range []struct {
		screen string
		parked bool
	}{
		{"ready-empty.txt", true},
		{"busy.txt", false},
		{"draft-pasted.txt", false},
		{"blocked-trust.txt", false},
	} {
		t.Run(tt.screen, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			sess, pane := r.livePane(t)
			rec := r.ingest(t, "d-1", "[loopd] x\ny")
			rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}, RestartHistory: desired.RestartHistory{Failures: 1}}
			require.NoError(t, r.store.PutStatus(ctx, r.key, rec.Status, "d-1"))
			rec = r.get(t)
			r.tmux.SetScreen(sess, screen(t, tt.screen))

			res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.Park{Key: r.key, Session: sess, PaneID: pane, IdleFor: 20 * time.Minute}})
			got := r.get(t)
			if !tt.parked {
				assert.Equal(t, actions.Result{}, res, "an agent at work is no failure")
				assert.Equal(t, []string{sess}, r.tmux.Sessions(), "left running")
				assert.Equal(t, desired.PhaseRunning, got.Status.Phase)
				assert.Equal(t, r.now, got.Status.ActiveSeenAt, "its idle time counts from now")
				assert.Empty(t, r.events(t))
				return
			}
			assert.Equal(t, actions.Result{Applied: 1}, res)
			assert.Empty(t, r.tmux.Sessions())
			assert.Equal(t, desired.PhaseParked, got.Status.Phase)
			assert.Equal(t, "idle", got.Status.Reason)
			assert.Empty(t, got.Status.PaneID)
			assert.Equal(t, "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", got.Status.HarnessSessionID, "its conversation is kept")
			assert.Equal(t, 1, got.Status.Failures, "nothing counted")
			assert.Nil(t, got.Status.LastExitStatus, "not an exit")
			parked := r.named(t, journal.SessionParked)
			require.Len(t, parked, 1)
			assert.Equal(t, "20m0s", parked[0].Attrs["idle_for"])
			assert.Equal(t, []string{"session.parked"}, r.events(t))
		})
	}
}
