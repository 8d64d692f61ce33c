package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// ingestNewItem: the first delivery creates the item (its kind, harness
// and cwd, open, generation 1, Idle); a second keeps the item's own spec
// and queues behind the first.
func (s suite) ingestNewItem(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()

	res, err := st.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Created: true, Queued: true}, res)

	want := desired.Record{
		Key:     keyAPI,
		Spec:    desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/src/api", Generation: 1},
		Status:  desired.Status{Phase: desired.PhaseIdle},
		Pending: []desired.Delivery{comment(keyAPI, "d1", t0).Delivery.Compact()},
	}
	assert.Equal(t, want, get(t, st, keyAPI))

	next := comment(keyAPI, "d2", time.Time{})
	next.Kind, next.Harness, next.Cwd = desired.KindPullRequest, "codex", "/elsewhere"
	next.Delivery.ID = "" // filled from DeliveryID
	res, err = st.Ingest(ctx, next)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Queued: true}, res)

	want.Spec.Generation = 2
	second := *next.Delivery
	second.ID = "d2"
	want.Pending = append(want.Pending, second.Compact()) // a zero ReceivedAt stays zero
	assert.Equal(t, want, get(t, st, keyAPI))
}

// headRef: a pull request's head branch is recorded when a payload names
// it, replaced by a later one that names another, kept by one that names
// none, and is not a spec change (the generation counts deliveries).
func (s suite) headRef(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	first := comment(keyAPI, "d1", t0)
	first.Kind, first.HeadRef = desired.KindPullRequest, "feature/a"
	ingest(t, st, first)
	assert.Equal(t, "feature/a", get(t, st, keyAPI).Spec.HeadRef)
	ingest(t, st, comment(keyAPI, "d2", t0))
	assert.Equal(t, "feature/a", get(t, st, keyAPI).Spec.HeadRef)
	next := comment(keyAPI, "d3", t0)
	next.HeadRef = "feature/b"
	_, err := st.Ingest(ctx, next)
	require.NoError(t, err)
	r := get(t, st, keyAPI)
	assert.Equal(t, "feature/b", r.Spec.HeadRef)
	assert.Equal(t, int64(3), r.Spec.Generation)
}

// redelivery: a delivery id already claimed is a duplicate whatever it
// carries, and changes nothing.
func (s suite) redelivery(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0))
	before := records(t, st)

	tests := []struct {
		name string
		in   store.Ingest
	}{
		{name: "same_delivery", in: comment(keyAPI, "d1", t0)},
		{name: "same_id_other_content", in: comment(keyAPI, "d1", t0.Add(time.Hour))},
		{name: "same_id_with_close", in: stateChange(keyAPI, "d1", true, t0.Add(time.Hour))},
		{name: "same_id_other_item", in: comment(desired.Key{Owner: "acme", Repo: "web", Number: 1}, "d1", t0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := st.Ingest(ctx, tt.in)
			require.NoError(t, err)
			assert.Equal(t, store.IngestResult{Duplicate: true}, res)
			assert.Equal(t, before, records(t, st))
		})
	}
}

// openClosed: explicit open/closed changes apply in payload-time order; an
// older one is stale, a repeated state only moves the time, and a
// state-only delivery still claims its id.
func (s suite) openClosed(t *testing.T) {
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	type step struct {
		closed bool
		at     time.Time
		want   store.IngestResult
	}
	tests := []struct {
		name       string
		steps      []step
		wantClosed bool
		wantAt     time.Time
		wantGen    int64
	}{
		{
			name: "close_then_reopen",
			steps: []step{
				{closed: true, at: t1, want: store.IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: t2, want: store.IngestResult{StateChanged: true}},
			},
			wantClosed: false, wantAt: t2, wantGen: 2,
		},
		{
			name: "stale_close_ignored",
			steps: []step{
				{closed: false, at: t2, want: store.IngestResult{Created: true}},
				{closed: true, at: t1, want: store.IngestResult{StaleState: true}},
			},
			wantClosed: false, wantAt: t2, wantGen: 1,
		},
		{
			name: "same_time_applies",
			steps: []step{
				{closed: true, at: t1, want: store.IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: t1, want: store.IngestResult{StateChanged: true}},
			},
			wantClosed: false, wantAt: t1, wantGen: 2,
		},
		{
			name: "repeated_state_moves_time_only",
			steps: []step{
				{closed: true, at: t1, want: store.IngestResult{Created: true, StateChanged: true}},
				{closed: true, at: t2, want: store.IngestResult{}},
			},
			wantClosed: true, wantAt: t2, wantGen: 1,
		},
		{
			name: "zero_time_is_stale_once_a_time_is_recorded",
			steps: []step{
				{closed: true, at: t1, want: store.IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: time.Time{}, want: store.IngestResult{StaleState: true}},
			},
			wantClosed: true, wantAt: t1, wantGen: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := s.open(t)
			ctx := context.Background()
			for i, step := range tt.steps {
				res, err := st.Ingest(ctx, stateChange(keyAPI, fmt.Sprintf("s%d", i), step.closed, step.at))
				require.NoError(t, err)
				assert.Equal(t, step.want, res, "step %d", i)
			}
			got := get(t, st, keyAPI)
			assert.Equal(t, tt.wantClosed, got.Spec.Closed)
			assert.Equal(t, tt.wantAt, got.Spec.StateChangedAt)
			assert.Equal(t, tt.wantGen, got.Spec.Generation)
			assert.Empty(t, got.Pending)

			// A state-only delivery still claims its id.
			res, err := st.Ingest(ctx, comment(keyAPI, "s0", t0))
			require.NoError(t, err)
			assert.True(t, res.Duplicate)
		})
	}
}

// stateSnapshot covers the state a comment or review payload carries
// (store.Ingest.Snapshot): it heals a lost close or reopen, and never
// flips the state on a timestamp that is not newer than the recorded one.
func (s suite) stateSnapshot(t *testing.T) {
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	explicit := func(id string, closed bool, at time.Time) store.Ingest { return stateChange(keyAPI, id, closed, at) }
	snapshot := func(id string, closed bool, at time.Time) store.Ingest {
		in := comment(keyAPI, id, at)
		in.Closed, in.StateAt, in.Snapshot = &closed, at, true
		return in
	}
	type step struct {
		in   store.Ingest
		want store.IngestResult
	}
	tests := []struct {
		name        string
		steps       []step
		wantClosed  bool
		wantAt      time.Time
		wantPending int
	}{
		{
			name: "comment_after_lost_reopen_reopens",
			steps: []step{
				{in: explicit("open", false, t0), want: store.IngestResult{Created: true}},
				{in: explicit("close", true, t1), want: store.IngestResult{StateChanged: true}},
				// The reopen at t2 was lost; the comment at t3 shows it open.
				{in: snapshot("c", false, t3), want: store.IngestResult{Queued: true, StateChanged: true}},
			},
			wantClosed: false, wantAt: t3, wantPending: 1,
		},
		{
			name: "comment_after_lost_close_closes_and_waits",
			steps: []step{
				{in: snapshot("c1", false, t0), want: store.IngestResult{Created: true, Queued: true}},
				// The close at t1 was lost; the comment at t2 shows it closed.
				{in: snapshot("c2", true, t2), want: store.IngestResult{Queued: true, StateChanged: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 2,
		},
		{
			// A comment older than the close is an old event: its state is
			// stale and its text is not queued (a replay after a close).
			name: "older_snapshot_ignored",
			steps: []step{
				{in: explicit("close", true, t2), want: store.IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", false, t1), want: store.IngestResult{Outdated: true, StaleState: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 0,
		},
		{
			// "Close with comment": the comment, made in the same second,
			// carries the state from before the close.
			name: "same_second_snapshot_does_not_undo_a_close",
			steps: []step{
				{in: explicit("close", true, t1), want: store.IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", false, t1), want: store.IngestResult{Queued: true, StaleState: true}},
			},
			wantClosed: true, wantAt: t1, wantPending: 1,
		},
		{
			name: "close_in_the_second_of_a_snapshot_applies",
			steps: []step{
				{in: snapshot("c", false, t1), want: store.IngestResult{Created: true, Queued: true}},
				{in: explicit("close", true, t1), want: store.IngestResult{StateChanged: true}},
			},
			wantClosed: true, wantAt: t1, wantPending: 1,
		},
		{
			name: "same_state_older_snapshot_changes_nothing",
			steps: []step{
				{in: explicit("close", true, t2), want: store.IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", true, t1), want: store.IngestResult{Outdated: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 0,
		},
		{
			name: "same_state_newer_snapshot_moves_the_time",
			steps: []step{
				{in: explicit("close", true, t1), want: store.IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", true, t2), want: store.IngestResult{Queued: true}},
				// So a reopen stamped before the comment is stale.
				{in: explicit("reopen", false, t1.Add(time.Second)), want: store.IngestResult{StaleState: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := s.open(t)
			ctx := context.Background()
			for i, step := range tt.steps {
				res, err := st.Ingest(ctx, step.in)
				require.NoError(t, err)
				assert.Equal(t, step.want, res, "step %d", i)
			}
			got := get(t, st, keyAPI)
			assert.Equal(t, tt.wantClosed, got.Spec.Closed)
			assert.Equal(t, tt.wantAt, got.Spec.StateChangedAt)
			assert.Len(t, got.Pending, tt.wantPending)
		})
	}
}

// snapshotNeverCreates: a snapshot with nothing to queue for an unknown
// item writes nothing and leaves its id unclaimed.
func (s suite) snapshotNeverCreates(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	in := stateChange(keyAPI, "d1", false, t0)
	in.Snapshot = true

	res, err := st.Ingest(ctx, in)

	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Unknown: true}, res)
	_, err = st.Get(ctx, keyAPI)
	assert.ErrorIs(t, err, store.ErrNotFound)
	res, err = st.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	assert.False(t, res.Duplicate, "the id was not claimed")
}

// closeWithDelivery: a delivery that also closes the item is one spec
// change, one generation bump.
func (s suite) closeWithDelivery(t *testing.T) {
	st, _ := s.open(t)
	ingest(t, st, comment(keyAPI, "d1", t0))

	in := comment(keyAPI, "d2", t0)
	closed := true
	in.Closed, in.StateAt = &closed, t0
	res, err := st.Ingest(context.Background(), in)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Queued: true, StateChanged: true}, res)

	got := get(t, st, keyAPI)
	assert.True(t, got.Spec.Closed)
	assert.Equal(t, int64(2), got.Spec.Generation, "one change, one bump")
	assert.Len(t, got.Pending, 2)
}

// badInput: a key that does not round-trip (ErrBadKey), an empty delivery
// id or a delivery carrying another id is refused, and nothing is written.
func (s suite) badInput(t *testing.T) {
	tests := []struct {
		name   string
		in     store.Ingest
		badKey bool
	}{
		{name: "zero_number", in: comment(desired.Key{Owner: "acme", Repo: "api"}, "d1", t0), badKey: true},
		{name: "empty_owner", in: comment(desired.Key{Repo: "api", Number: 1}, "d1", t0), badKey: true},
		{name: "slash_in_owner", in: comment(desired.Key{Owner: "ac/me", Repo: "api", Number: 1}, "d1", t0), badKey: true},
		{name: "empty_delivery_id", in: comment(keyAPI, "", t0)},
		{name: "delivery_id_mismatch", in: func() store.Ingest {
			in := comment(keyAPI, "d1", t0)
			in.Delivery.ID = "d2"
			return in
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := s.open(t)
			_, err := st.Ingest(context.Background(), tt.in)
			require.Error(t, err)
			if tt.badKey {
				assert.ErrorIs(t, err, desired.ErrBadKey)
			}
			assert.Empty(t, records(t, st))
		})
	}
}

// titleAndURL: the title and page the newest payload names are the
// item's; a payload that names none keeps them.
func (s suite) titleAndURL(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	in := comment(keyAPI, "d1", t0)
	in.Title, in.URL = "Spelling error", "https://github.com/acme/api/issues/42"
	_, err := st.Ingest(ctx, in)
	require.NoError(t, err)
	r := get(t, st, keyAPI)
	assert.Equal(t, "Spelling error", r.Spec.Title)
	assert.Equal(t, "https://github.com/acme/api/issues/42", r.Spec.URL)

	_, err = st.Ingest(ctx, comment(keyAPI, "d2", t0.Add(time.Second)))
	require.NoError(t, err)
	assert.Equal(t, "Spelling error", get(t, st, keyAPI).Spec.Title, "a payload without one keeps it")

	in = comment(keyAPI, "d3", t0.Add(2*time.Second))
	in.Title = "Spelling errors, plural"
	_, err = st.Ingest(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, "Spelling errors, plural", get(t, st, keyAPI).Spec.Title, "an edit renames it")
}
