package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// outboxWrittenWithTheStatus: WriteStatus queues its calls in the same
// write as the status and the deliveries it marks; each comes back
// pending, with the write's key, its fields, a creation time and its due
// time, in the order queued; a delivery's Source round-trips through
// ingest; a refused call keeps the whole write out; another handle (a restarted daemon) sees the same outbox.
func (s suite) outboxWrittenWithTheStatus(t *testing.T) {
	st, another := s.open(t)
	ctx := context.Background()
	in := comment(keyAPI, "d1", t0)
	in.Delivery.Source = desired.Source{Kind: desired.SourceIssueComment, ID: 1234567890123}
	ingest(t, st, in)
	assert.Equal(t, in.Delivery.Source, get(t, st, keyAPI).Pending[0].Source)

	later := t0.Add(time.Minute)
	w := store.StatusWrite{
		Status:    desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}},
		Delivered: []string{"d1"},
		Calls: []desired.Call{
			{Kind: desired.CallAnnounce, Body: "hello\n<!-- m -->", Marker: "<!-- m -->"},
			{Kind: desired.CallReact, Target: in.Delivery.Source, NextAttempt: later},
		},
	}
	require.NoError(t, st.WriteStatus(ctx, keyAPI, w))
	got := get(t, st, keyAPI)
	assert.Equal(t, w.Status, got.Status)
	assert.Empty(t, got.Pending)

	calls, err := another().Calls(ctx, store.CallFilter{})
	require.NoError(t, err)
	require.Len(t, calls, 2)
	for i, c := range calls {
		assert.Equal(t, keyAPI, c.Key)
		assert.Equal(t, desired.CallPending, c.State)
		assert.False(t, c.CreatedAt.IsZero(), "created at")
		assert.Equal(t, time.UTC, c.CreatedAt.Location())
		if i > 0 {
			assert.Greater(t, c.ID, calls[i-1].ID, "queued order")
		}
	}
	assert.Equal(t, desired.CallAnnounce, calls[0].Kind)
	assert.Equal(t, "hello\n<!-- m -->", calls[0].Body)
	assert.Equal(t, "<!-- m -->", calls[0].Marker)
	assert.True(t, calls[0].NextAttempt.IsZero())
	assert.Equal(t, desired.CallReact, calls[1].Kind)
	assert.Equal(t, in.Delivery.Source, calls[1].Target)
	assert.Equal(t, later, calls[1].NextAttempt)

	// All or nothing: a call the store refuses (an unknown kind) keeps the
	// status and the deliveries of its write from being written.
	ingest(t, st, comment(keyAPI, "d2", t0))
	bad := store.StatusWrite{Status: desired.Status{Phase: desired.PhaseExited}, Delivered: []string{"d2"},
		Calls: []desired.Call{{Kind: desired.CallNotify, Body: "n"}, {Kind: "bogus"}}}
	require.Error(t, st.WriteStatus(ctx, keyAPI, bad))
	got = get(t, st, keyAPI)
	assert.Equal(t, w.Status, got.Status)
	assert.Len(t, got.Pending, 1)

	// A write to an unknown item queues nothing.
	err = st.WriteStatus(ctx, desired.Key{Owner: "acme", Repo: "none", Number: 1}, w)
	require.ErrorIs(t, err, store.ErrNotFound)
	calls, err = st.Calls(ctx, store.CallFilter{})
	require.NoError(t, err)
	assert.Len(t, calls, 2)
}

// dueCallsAndUpdates: DueCalls returns the pending calls due at now, oldest
// first and at most limit; UpdateCall records a try's outcome, which takes
// a call out of DueCalls until its next attempt, or for good once posted
// or failed; Calls filters by item and state; an unknown id is not found.
func (s suite) dueCallsAndUpdates(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	other := desired.Key{Owner: "acme", Repo: "web", Number: 7}
	ingest(t, st, comment(keyAPI, "d1", t0), comment(other, "o1", t0))
	require.NoError(t, st.WriteStatus(ctx, keyAPI, store.StatusWrite{Calls: []desired.Call{
		{Kind: desired.CallNotify, Body: "a", Marker: "ma"},
		{Kind: desired.CallNotify, Body: "b", Marker: "mb", NextAttempt: t0.Add(time.Hour)},
	}}))
	require.NoError(t, st.WriteStatus(ctx, other, store.StatusWrite{Calls: []desired.Call{
		{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceItem}},
	}}))

	due, err := st.DueCalls(ctx, t0, 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	assert.Equal(t, "a", due[0].Body)
	assert.Equal(t, other, due[1].Key)
	due, err = st.DueCalls(ctx, t0, 1)
	require.NoError(t, err)
	require.Len(t, due, 1)

	a := due[0]
	a.Attempts, a.NextAttempt, a.HTTPStatus, a.Error = 1, t0.Add(2*time.Second), 502, "bad gateway"
	require.NoError(t, st.UpdateCall(ctx, a))
	due, err = st.DueCalls(ctx, t0.Add(time.Second), 0)
	require.NoError(t, err)
	require.Len(t, due, 1, "a retry waits for its next attempt")
	due, err = st.DueCalls(ctx, t0.Add(2*time.Second), 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	assert.Equal(t, a, due[0], "the try's outcome round-trips")

	a.State, a.Attempts, a.NextAttempt, a.DoneAt, a.HTTPStatus, a.Error, a.URL = desired.CallPosted, 2, time.Time{}, t0, 201, "", "https://github.com/acme/api/issues/42#issuecomment-1"
	require.NoError(t, st.UpdateCall(ctx, a))
	due, err = st.DueCalls(ctx, t0.Add(2*time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, due, 2, "posted calls are done; the late one is due")
	assert.Equal(t, "b", due[0].Body)

	posted, err := st.Calls(ctx, store.CallFilter{WorkItem: keyAPI.String(), State: desired.CallPosted})
	require.NoError(t, err)
	assert.Equal(t, []desired.Call{a}, posted)
	mine, err := st.Calls(ctx, store.CallFilter{WorkItem: other.String()})
	require.NoError(t, err)
	assert.Len(t, mine, 1)

	a.ID = 1 << 40
	require.ErrorIs(t, st.UpdateCall(ctx, a), store.ErrNotFound)
}

// pauses: a pause is recorded per installation and kind, replaced by the
// next of the same, seen by another handle, and removed by one with no
// Until and no Streak.
func (s suite) pauses(t *testing.T) {
	st, another := s.open(t)
	ctx := context.Background()
	secondary := desired.Pause{Installation: "installation 7", Kind: desired.PauseSecondary, Until: t0.Add(time.Minute),
		Since: t0, Streak: 1, HTTPStatus: 403, Message: "You have exceeded a secondary rate limit"}
	primary := desired.Pause{Installation: "installation 7", Kind: desired.PausePrimary, Until: t0.Add(time.Hour), Since: t0,
		Streak: 1, HTTPStatus: 403, Message: "API rate limit exceeded"}
	token := desired.Pause{Installation: "token", Kind: desired.PauseSecondary, Until: t0.Add(time.Second), Since: t0, Streak: 1}
	require.NoError(t, st.PutPause(ctx, secondary))
	require.NoError(t, st.PutPause(ctx, primary))
	require.NoError(t, st.PutPause(ctx, token))
	secondary.Until, secondary.Streak = t0.Add(3*time.Minute), 2
	require.NoError(t, st.PutPause(ctx, secondary))
	got, err := another().Pauses(ctx)
	require.NoError(t, err)
	assert.Equal(t, []desired.Pause{primary, secondary, token}, got)

	require.NoError(t, st.PutPause(ctx, desired.Pause{Installation: "installation 7", Kind: desired.PauseSecondary}))
	got, err = st.Pauses(ctx)
	require.NoError(t, err)
	assert.Equal(t, []desired.Pause{primary, token}, got)
}

// installation: the installation the newest delivery that named one came
// through is the item's, one that names none keeps it, and its calls are
// read with it (the outbox sends each with its installation's token).
func (s suite) installation(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	in := comment(keyAPI, "d1", t0)
	in.Installation = 11
	ingest(t, st, in)
	assert.Equal(t, int64(11), get(t, st, keyAPI).Spec.Installation)
	ingest(t, st, comment(keyAPI, "d2", t0.Add(time.Second)))
	assert.Equal(t, int64(11), get(t, st, keyAPI).Spec.Installation, "a delivery without one keeps it")
	in = comment(keyAPI, "d3", t0.Add(2*time.Second))
	in.Installation = 12
	ingest(t, st, in)
	assert.Equal(t, int64(12), get(t, st, keyAPI).Spec.Installation, "the App reinstalled")

	keyWeb := desired.Key{Owner: "acme", Repo: "web", Number: 1}
	ingest(t, st, comment(keyWeb, "d4", t0))
	calls := []desired.Call{{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceItem}}}
	require.NoError(t, st.WriteStatus(ctx, keyAPI, store.StatusWrite{Calls: calls}))
	require.NoError(t, st.WriteStatus(ctx, keyWeb, store.StatusWrite{Calls: calls}))
	due, err := st.DueCalls(ctx, t0.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	assert.Equal(t, int64(12), due[0].Installation)
	assert.Equal(t, int64(0), due[1].Installation, "none named")
}
