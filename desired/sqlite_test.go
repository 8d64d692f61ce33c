package desired

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/journal"
)

var (
	keyAPI = Key{Owner: "acme", Repo: "api", Number: 42}
	t0     = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

// openStore opens a store on a fresh file in a directory OpenSQLite must
// create, and closes it at the end of the test.
func openStore(t testing.TB) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "loopd.db")
	s, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

// comment is an Ingest that queues one issue_comment delivery on k.
func comment(k Key, id string, at time.Time) Ingest {
	return Ingest{
		DeliveryID: id,
		Key:        k,
		Kind:       KindIssue,
		Harness:    "claude-code",
		Cwd:        "/src/" + k.Repo,
		Delivery: &Delivery{
			ID: id, Event: "issue_comment", Action: "created", Sender: "octocat",
			Prompt: "event=issue_comment delivery=" + id + "\nplease look", ReceivedAt: at,
		},
	}
}

// stateChange is an Ingest that only sets the open/closed state of k.
func stateChange(k Key, id string, closed bool, at time.Time) Ingest {
	return Ingest{DeliveryID: id, Key: k, Kind: KindIssue, Harness: "claude-code", Cwd: "/src/" + k.Repo, Closed: &closed, StateAt: at}
}

func TestOpenSQLite(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()

	info, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	pragmas := []struct {
		name string
		want string
	}{
		{name: "journal_mode", want: "wal"},
		{name: "synchronous", want: "2"}, // FULL
		{name: "foreign_keys", want: "1"},
		{name: "busy_timeout", want: "5000"},
		{name: "user_version", want: strconv.Itoa(schemaVersion)},
	}
	for _, p := range pragmas {
		var got string
		require.NoError(t, s.db.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got))
		assert.Equal(t, p.want, got, p.name)
	}

	_, err = OpenSQLite(ctx, filepath.Join(t.TempDir(), "a?b.db"))
	assert.Error(t, err)
}

func TestOpenSQLiteRefusesNewerSchema(t *testing.T) {
	s, path := openStore(t)
	_, err := s.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = OpenSQLite(context.Background(), path)
	assert.ErrorContains(t, err, fmt.Sprintf("schema version %d", schemaVersion+1))
}

func TestIngestNewItem(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()

	res, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	assert.Equal(t, IngestResult{Created: true, Queued: true}, res)

	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	want := Record{
		Key:     keyAPI,
		Spec:    Spec{Kind: KindIssue, Harness: "claude-code", Cwd: "/src/api", Generation: 1},
		Status:  Status{Phase: PhaseIdle},
		Pending: []Delivery{*comment(keyAPI, "d1", t0).Delivery},
	}
	assert.Equal(t, want, got)

	// A second delivery keeps the item's own spec and queues behind the first.
	next := comment(keyAPI, "d2", time.Time{})
	next.Kind, next.Harness, next.Cwd = KindPullRequest, "codex", "/elsewhere"
	next.Delivery.ID = "" // filled from DeliveryID
	res, err = s.Ingest(ctx, next)
	require.NoError(t, err)
	assert.Equal(t, IngestResult{Queued: true}, res)

	got, err = s.Get(ctx, keyAPI)
	require.NoError(t, err)
	want.Spec.Generation = 2
	second := *next.Delivery
	second.ID = "d2"
	want.Pending = append(want.Pending, second) // a zero ReceivedAt stays zero
	assert.Equal(t, want, got)
}

func TestIngestRedelivery(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	before, err := s.Records(ctx)
	require.NoError(t, err)

	tests := []struct {
		name string
		in   Ingest
	}{
		{name: "same_delivery", in: comment(keyAPI, "d1", t0)},
		{name: "same_id_other_content", in: comment(keyAPI, "d1", t0.Add(time.Hour))},
		{name: "same_id_with_close", in: stateChange(keyAPI, "d1", true, t0.Add(time.Hour))},
		{name: "same_id_other_item", in: comment(Key{"acme", "web", 1}, "d1", t0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Ingest(ctx, tt.in)
			require.NoError(t, err)
			assert.Equal(t, IngestResult{Duplicate: true}, res)
			after, err := s.Records(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after)
		})
	}
}

func TestIngestOpenClosed(t *testing.T) {
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	type step struct {
		closed bool
		at     time.Time
		want   IngestResult
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
				{closed: true, at: t1, want: IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: t2, want: IngestResult{StateChanged: true}},
			},
			wantClosed: false, wantAt: t2, wantGen: 2,
		},
		{
			name: "stale_close_ignored",
			steps: []step{
				{closed: false, at: t2, want: IngestResult{Created: true}},
				{closed: true, at: t1, want: IngestResult{StaleState: true}},
			},
			wantClosed: false, wantAt: t2, wantGen: 1,
		},
		{
			name: "same_time_applies",
			steps: []step{
				{closed: true, at: t1, want: IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: t1, want: IngestResult{StateChanged: true}},
			},
			wantClosed: false, wantAt: t1, wantGen: 2,
		},
		{
			name: "repeated_state_moves_time_only",
			steps: []step{
				{closed: true, at: t1, want: IngestResult{Created: true, StateChanged: true}},
				{closed: true, at: t2, want: IngestResult{}},
			},
			wantClosed: true, wantAt: t2, wantGen: 1,
		},
		{
			name: "zero_time_is_stale_once_a_time_is_recorded",
			steps: []step{
				{closed: true, at: t1, want: IngestResult{Created: true, StateChanged: true}},
				{closed: false, at: time.Time{}, want: IngestResult{StaleState: true}},
			},
			wantClosed: true, wantAt: t1, wantGen: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := context.Background()
			for i, st := range tt.steps {
				res, err := s.Ingest(ctx, stateChange(keyAPI, fmt.Sprintf("s%d", i), st.closed, st.at))
				require.NoError(t, err)
				assert.Equal(t, st.want, res, "step %d", i)
			}
			got, err := s.Get(ctx, keyAPI)
			require.NoError(t, err)
			assert.Equal(t, tt.wantClosed, got.Spec.Closed)
			assert.Equal(t, tt.wantAt, got.Spec.StateChangedAt)
			assert.Equal(t, tt.wantGen, got.Spec.Generation)
			assert.Empty(t, got.Pending)

			// A state-only delivery still claims its id.
			res, err := s.Ingest(ctx, comment(keyAPI, "s0", t0))
			require.NoError(t, err)
			assert.True(t, res.Duplicate)
		})
	}
}

// TestIngestStateSnapshot covers the state a comment or review payload
// carries: it heals a lost close or reopen, and never flips the state on a
// timestamp that is not newer than the recorded one.
func TestIngestStateSnapshot(t *testing.T) {
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	explicit := func(id string, closed bool, at time.Time) Ingest { return stateChange(keyAPI, id, closed, at) }
	snapshot := func(id string, closed bool, at time.Time) Ingest {
		in := comment(keyAPI, id, at)
		in.Closed, in.StateAt, in.Snapshot = &closed, at, true
		return in
	}
	type step struct {
		in   Ingest
		want IngestResult
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
				{in: explicit("open", false, t0), want: IngestResult{Created: true}},
				{in: explicit("close", true, t1), want: IngestResult{StateChanged: true}},
				// The reopen at t2 was lost; the comment at t3 shows it open.
				{in: snapshot("c", false, t3), want: IngestResult{Queued: true, StateChanged: true}},
			},
			wantClosed: false, wantAt: t3, wantPending: 1,
		},
		{
			name: "comment_after_lost_close_closes_and_waits",
			steps: []step{
				{in: snapshot("c1", false, t0), want: IngestResult{Created: true, Queued: true}},
				// The close at t1 was lost; the comment at t2 shows it closed.
				{in: snapshot("c2", true, t2), want: IngestResult{Queued: true, StateChanged: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 2,
		},
		{
			name: "older_snapshot_ignored",
			steps: []step{
				{in: explicit("close", true, t2), want: IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", false, t1), want: IngestResult{Queued: true, StaleState: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 1,
		},
		{
			// "Close with comment": the comment, made in the same second,
			// carries the state from before the close.
			name: "same_second_snapshot_does_not_undo_a_close",
			steps: []step{
				{in: explicit("close", true, t1), want: IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", false, t1), want: IngestResult{Queued: true, StaleState: true}},
			},
			wantClosed: true, wantAt: t1, wantPending: 1,
		},
		{
			name: "close_in_the_second_of_a_snapshot_applies",
			steps: []step{
				{in: snapshot("c", false, t1), want: IngestResult{Created: true, Queued: true}},
				{in: explicit("close", true, t1), want: IngestResult{StateChanged: true}},
			},
			wantClosed: true, wantAt: t1, wantPending: 1,
		},
		{
			name: "same_state_older_snapshot_changes_nothing",
			steps: []step{
				{in: explicit("close", true, t2), want: IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", true, t1), want: IngestResult{Queued: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 1,
		},
		{
			name: "same_state_newer_snapshot_moves_the_time",
			steps: []step{
				{in: explicit("close", true, t1), want: IngestResult{Created: true, StateChanged: true}},
				{in: snapshot("c", true, t2), want: IngestResult{Queued: true}},
				// So a reopen stamped before the comment is stale.
				{in: explicit("reopen", false, t1.Add(time.Second)), want: IngestResult{StaleState: true}},
			},
			wantClosed: true, wantAt: t2, wantPending: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := context.Background()
			for i, st := range tt.steps {
				res, err := s.Ingest(ctx, st.in)
				require.NoError(t, err)
				assert.Equal(t, st.want, res, "step %d", i)
			}
			got, err := s.Get(ctx, keyAPI)
			require.NoError(t, err)
			assert.Equal(t, tt.wantClosed, got.Spec.Closed)
			assert.Equal(t, tt.wantAt, got.Spec.StateChangedAt)
			assert.Len(t, got.Pending, tt.wantPending)
		})
	}
}

func TestIngestSnapshotNeverCreates(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	open := false
	in := stateChange(keyAPI, "d1", open, t0)
	in.Snapshot = true

	res, err := s.Ingest(ctx, in)

	require.NoError(t, err)
	assert.Equal(t, IngestResult{Unknown: true}, res)
	_, err = s.Get(ctx, keyAPI)
	assert.ErrorIs(t, err, ErrNotFound)
	res, err = s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	assert.False(t, res.Duplicate, "the id was not claimed")
}

func TestIngestCloseWithDelivery(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)

	in := comment(keyAPI, "d2", t0)
	closed := true
	in.Closed, in.StateAt = &closed, t0
	res, err := s.Ingest(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, IngestResult{Queued: true, StateChanged: true}, res)

	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.True(t, got.Spec.Closed)
	assert.Equal(t, int64(2), got.Spec.Generation, "one change, one bump")
	assert.Len(t, got.Pending, 2)
}

func TestIngestRefusesBadInput(t *testing.T) {
	tests := []struct {
		name   string
		in     Ingest
		badKey bool
	}{
		{name: "zero_number", in: comment(Key{"acme", "api", 0}, "d1", t0), badKey: true},
		{name: "empty_owner", in: comment(Key{"", "api", 1}, "d1", t0), badKey: true},
		{name: "slash_in_owner", in: comment(Key{"ac/me", "api", 1}, "d1", t0), badKey: true},
		{name: "empty_delivery_id", in: comment(keyAPI, "", t0)},
		{name: "delivery_id_mismatch", in: func() Ingest { in := comment(keyAPI, "d1", t0); in.Delivery.ID = "d2"; return in }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := context.Background()
			_, err := s.Ingest(ctx, tt.in)
			require.Error(t, err)
			if tt.badKey {
				assert.ErrorIs(t, err, ErrBadKey)
			}
			recs, err := s.Records(ctx)
			require.NoError(t, err)
			assert.Empty(t, recs)
		})
	}
}

func TestRecordsOrder(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	keys := []Key{{"acme", "api", 10}, {"beta", "x", 1}, {"acme", "api", 9}, {"acme", "web", 1}, {"Acme", "api", 1}}
	for i, k := range keys {
		_, err := s.Ingest(ctx, comment(k, fmt.Sprintf("d%d", i), t0))
		require.NoError(t, err)
	}
	recs, err := s.Records(ctx)
	require.NoError(t, err)
	var got []Key
	for _, r := range recs {
		got = append(got, r.Key)
		assert.Len(t, r.Pending, 1, r.Key.String())
	}
	assert.Equal(t, []Key{{"Acme", "api", 1}, {"acme", "api", 9}, {"acme", "api", 10}, {"acme", "web", 1}, {"beta", "x", 1}}, got)
}

func TestPutStatusMarksDelivered(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	other := Key{"acme", "web", 7}
	for _, in := range []Ingest{comment(keyAPI, "d1", t0), comment(keyAPI, "d2", t0), comment(keyAPI, "d3", t0), comment(other, "o1", t0)} {
		_, err := s.Ingest(ctx, in)
		require.NoError(t, err)
	}
	exit := 1
	st := Status{
		Phase: PhaseRunning, HarnessSessionID: "7f3c", Session: SessionName(keyAPI), PaneID: "%3",
		SpawnMode: SpawnResume, SpawnedAt: t0, LastExitStatus: &exit, TranscriptSizeAtSpawn: -1,
		ObservedGeneration: 3,
	}

	// "o1" belongs to another item and "nope" to none: both are skipped.
	require.NoError(t, s.PutStatus(ctx, keyAPI, st, "d1", "d2", "o1", "nope"))
	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Equal(t, st, got.Status)
	assert.Equal(t, []Delivery{*comment(keyAPI, "d3", t0).Delivery}, got.Pending)
	assert.Equal(t, int64(3), got.Spec.Generation, "a status write is not a spec change")
	o, err := s.Get(ctx, other)
	require.NoError(t, err)
	assert.Len(t, o.Pending, 1)

	// Marking again is a no-op.
	require.NoError(t, s.PutStatus(ctx, keyAPI, st, "d1"))
	got, err = s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Len(t, got.Pending, 1)
}

func TestPutStatusIsAtomic(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	for _, id := range []string{"d1", "d2"} {
		_, err := s.Ingest(ctx, comment(keyAPI, id, t0))
		require.NoError(t, err)
	}
	// Make the second mark fail after the status and the first mark were
	// written in the transaction.
	_, err := s.db.Exec(`CREATE TRIGGER fail_d2 BEFORE UPDATE ON deliveries WHEN NEW.id = 'd2'
		BEGIN SELECT RAISE(ABORT, 'injected'); END`)
	require.NoError(t, err)

	err = s.PutStatus(ctx, keyAPI, Status{Phase: PhaseRunning}, "d1", "d2")
	require.ErrorContains(t, err, "injected")

	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Equal(t, Status{Phase: PhaseIdle}, got.Status)
	assert.Len(t, got.Pending, 2)
}

func TestUnknownKey(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	unknown := Key{"acme", "api", 43}

	tests := []struct {
		name string
		call func() error
	}{
		{name: "get", call: func() error { _, err := s.Get(ctx, unknown); return err }},
		{name: "put_status", call: func() error { return s.PutStatus(ctx, unknown, Status{Phase: PhaseRunning}, "d1") }},
		{name: "set_held", call: func() error { return s.SetHeld(ctx, unknown, true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			assert.ErrorIs(t, err, ErrNotFound)
			assert.ErrorContains(t, err, unknown.String())
		})
	}
	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Len(t, got.Pending, 1, "d1 of another item was not marked")
}

func TestSetHeld(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)

	for i, held := range []bool{true, true, false} {
		require.NoError(t, s.SetHeld(ctx, keyAPI, held))
		got, err := s.Get(ctx, keyAPI)
		require.NoError(t, err)
		assert.Equal(t, held, got.Spec.Held)
		assert.Equal(t, int64(2+i), got.Spec.Generation)
	}
}

func TestDurableAcrossReopen(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	_, err = s.Ingest(ctx, comment(keyAPI, "d2", t0.Add(time.Second)))
	require.NoError(t, err)
	_, err = s.Ingest(ctx, stateChange(Key{"acme", "web", 1}, "s1", true, t0))
	require.NoError(t, err)
	require.NoError(t, s.PutStatus(ctx, keyAPI, Status{Phase: PhaseRunning, SpawnedAt: t0}, "d1"))
	require.NoError(t, s.SetHeld(ctx, keyAPI, true))
	require.NoError(t, s.AppendEvent(ctx, journal.Event{Time: t0, Name: journal.SessionSpawned, WorkItem: keyAPI.String(),
		Attrs: map[string]string{"session": SessionName(keyAPI)}}))
	wantRecs, err := s.Records(ctx)
	require.NoError(t, err)
	require.Len(t, wantRecs, 2)
	wantEvents, err := s.Events(ctx, EventFilter{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s2, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer s2.Close()
	recs, err := s2.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantRecs, recs)
	events, err := s2.Events(ctx, EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, wantEvents, events)
	res, err := s2.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "claims survive a restart")
}

func TestIngestConcurrent(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	const workers, each = 6, 10
	keys := []Key{{"acme", "api", 1}, {"acme", "api", 2}, {"acme", "web", 3}}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := s.Ingest(ctx, comment(keys[(w+i)%len(keys)], fmt.Sprintf("w%d-%d", w, i), t0))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recs, err := s.Records(ctx)
	require.NoError(t, err)
	require.Len(t, recs, len(keys))
	ids := map[string]bool{}
	for _, r := range recs {
		// Generation 1 at creation, then one per further delivery.
		assert.Equal(t, int64(len(r.Pending)), r.Spec.Generation, r.Key.String())
		for _, d := range r.Pending {
			ids[d.ID] = true
		}
	}
	assert.Len(t, ids, workers*each)
}

func TestIngestSameIDRace(t *testing.T) {
	tests := []struct {
		name    string
		handles int // stores open on the one file, as separate processes would have
	}{
		{name: "one_store", handles: 1},
		{name: "two_stores", handles: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := openStore(t)
			ctx := context.Background()
			stores := []*SQLite{s}
			for len(stores) < tt.handles {
				other, err := OpenSQLite(ctx, path)
				require.NoError(t, err)
				t.Cleanup(func() { other.Close() })
				stores = append(stores, other)
			}
			const racers = 8
			var (
				wg       sync.WaitGroup
				accepted atomic.Int32
				errs     = make(chan error, racers)
			)
			for i := range racers {
				wg.Go(func() {
					res, err := stores[i%len(stores)].Ingest(ctx, comment(keyAPI, "same", t0))
					if err == nil && !res.Duplicate {
						accepted.Add(1)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			assert.Equal(t, int32(1), accepted.Load())
			got, err := s.Get(ctx, keyAPI)
			require.NoError(t, err)
			assert.Len(t, got.Pending, 1)
			assert.Equal(t, int64(1), got.Spec.Generation)
		})
	}
}

func TestLock(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()
	other, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer other.Close()

	unlock, err := s.Lock(ctx)
	require.NoError(t, err)

	lockers := []struct {
		name  string
		store *SQLite
	}{
		{name: "same_store", store: s},
		{name: "other_store", store: other},
	}
	for _, l := range lockers {
		t.Run(l.name, func(t *testing.T) {
			short, cancel := context.WithTimeout(ctx, 3*lockPoll)
			defer cancel()
			_, err := l.store.Lock(short)
			assert.ErrorIs(t, err, ErrLocked)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}

	// A waiter gets the lock once it is released, and not before.
	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		unlock2, err := other.Lock(ctx)
		if err == nil {
			if !released.Load() {
				err = errors.New("lock taken while held")
			}
			unlock2()
		}
		got <- err
	}()
	released.Store(true)
	unlock()
	unlock() // a second call is harmless
	require.NoError(t, <-got)

	// Free again: even an ended context takes a free lock.
	done, cancel := context.WithCancel(ctx)
	cancel()
	unlock3, err := s.Lock(done)
	require.NoError(t, err)
	unlock3()
}

// TestLockAcrossProcesses holds the lock in a child process (this test
// binary, re-run as lockHolder) and checks that this process waits for it.
func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv("LOOPD_TEST_LOCK_HOLDER") != "" {
		lockHolder(os.Getenv("LOOPD_TEST_LOCK_HOLDER"))
		return
	}
	s, path := openStore(t)
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "LOOPD_TEST_LOCK_HOLDER="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	short, cancel := context.WithTimeout(ctx, 3*lockPoll)
	defer cancel()
	_, err = s.Lock(short)
	assert.ErrorIs(t, err, ErrLocked)

	stdin.Close() // the child exits, and the kernel drops its lock
	unlock, err := s.Lock(ctx)
	require.NoError(t, err)
	unlock()
}

// lockHolder takes the lock of the store at path, says "locked" on stdout
// and holds the lock until stdin closes.
func lockHolder(path string) {
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		fmt.Fprintln(os.Stdout, err)
		os.Exit(1)
	}
	if _, err := s.Lock(context.Background()); err != nil {
		fmt.Fprintln(os.Stdout, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "locked")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

func TestEvents(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	a, b := keyAPI.String(), "acme/web#1"
	all := []journal.Event{
		{Time: t0, Name: journal.ConfigReloaded, Level: slog.LevelInfo},
		{Time: t0.Add(1 * time.Second), Name: journal.SessionSpawned, Level: slog.LevelInfo, WorkItem: a,
			Attrs: map[string]string{"session": "loop-acme-api-42", "resumed": "false"}},
		{Time: t0.Add(2 * time.Second), Name: journal.SessionSpawned, Level: slog.LevelInfo, WorkItem: b, Attrs: map[string]string{}},
		{Time: t0.Add(3 * time.Second), Name: journal.SessionResumeFailed, Level: slog.LevelWarn, WorkItem: a,
			Attrs: map[string]string{"reason": "pane_died"}},
		{Time: t0.Add(4 * time.Second), Name: journal.DispatchDelivered, Level: slog.LevelInfo, WorkItem: a},
	}
	// Appended out of time order: the journal orders by time.
	for _, i := range []int{0, 1, 3, 2, 4} {
		require.NoError(t, s.AppendEvent(ctx, all[i]))
	}

	tests := []struct {
		name   string
		filter EventFilter
		want   []journal.Event
	}{
		{name: "everything", filter: EventFilter{}, want: all},
		{name: "work_item", filter: EventFilter{WorkItem: a}, want: []journal.Event{all[1], all[3], all[4]}},
		{name: "since_is_inclusive", filter: EventFilter{Since: t0.Add(2 * time.Second)}, want: all[2:]},
		{name: "limit_keeps_newest", filter: EventFilter{Limit: 2}, want: all[3:]},
		{name: "limit_above_count", filter: EventFilter{Limit: 50}, want: all},
		{name: "combined", filter: EventFilter{WorkItem: a, Since: t0.Add(time.Second), Limit: 2}, want: []journal.Event{all[3], all[4]}},
		{name: "no_match", filter: EventFilter{WorkItem: "acme/none#1"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Events(ctx, tt.filter)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestHandEditedStatus(t *testing.T) {
	tests := []struct {
		name   string
		status string
		reason string // part of the reason after "status unreadable: "
		keep   func(t *testing.T, st Status)
	}{
		{name: "not_json", status: `{"Phase": "Running",`, reason: "unexpected end of JSON input"},
		{name: "null", status: `null`, reason: `unknown phase ""`},
		{name: "unknown_phase", status: `{"Phase": "Runing"}`, reason: `unknown phase "Runing"`},
		{
			name:   "wrong_field_type",
			status: `{"Phase": "Running", "HarnessSessionID": "7f3c", "FastFailures": "three"}`,
			reason: "FastFailures",
			keep: func(t *testing.T, st Status) {
				assert.Equal(t, "7f3c", st.HarnessSessionID, "fields that decode are kept")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			ctx := context.Background()
			healthy := Key{"acme", "web", 1}
			for _, in := range []Ingest{comment(keyAPI, "d1", t0), comment(healthy, "d2", t0)} {
				_, err := s.Ingest(ctx, in)
				require.NoError(t, err)
			}
			_, err := s.db.Exec(`UPDATE work_items SET status = ? WHERE key = ?`, tt.status, keyAPI.String())
			require.NoError(t, err)

			recs, err := s.Records(ctx)
			require.NoError(t, err, "one bad row must not hide the others")
			require.Len(t, recs, 2)
			assert.Equal(t, PhaseIdle, recs[1].Status.Phase)
			got, err := s.Get(ctx, keyAPI)
			require.NoError(t, err)
			assert.Equal(t, recs[0], got)

			assert.Equal(t, PhaseNeedsAttention, got.Status.Phase)
			assert.True(t, strings.HasPrefix(got.Status.Reason, "status unreadable: "), got.Status.Reason)
			assert.Contains(t, got.Status.Reason, tt.reason)
			assert.Equal(t, got.Spec.Generation, got.Status.AttentionGeneration)
			assert.Len(t, got.Pending, 1, "deliveries are kept")
			if tt.keep != nil {
				tt.keep(t, got.Status)
			}

			// An operator release writes a fresh status.
			require.NoError(t, s.PutStatus(ctx, keyAPI, Status{Phase: PhaseIdle}))
			got, err = s.Get(ctx, keyAPI)
			require.NoError(t, err)
			assert.Equal(t, Status{Phase: PhaseIdle}, got.Status)
		})
	}
}

func TestHandEditedSpecRefused(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	before, err := s.Records(ctx)
	require.NoError(t, err)

	edits := []struct {
		name string
		sql  string
	}{
		{name: "text_generation", sql: `UPDATE work_items SET generation = 'abc'`},
		{name: "closed_not_bool", sql: `UPDATE work_items SET closed = 2`},
		{name: "null_kind", sql: `UPDATE work_items SET kind = NULL`},
		{name: "key_not_parts", sql: `UPDATE work_items SET number = 43`},
		{name: "zero_number", sql: `UPDATE work_items SET number = 0, key = 'acme/api#0'`},
		{name: "text_time", sql: `UPDATE work_items SET state_changed_at = 'yesterday'`},
		{name: "orphan_delivery", sql: `INSERT INTO deliveries (id, work_item, event, action, sender, prompt, state)
			VALUES ('x', 'acme/none#1', '', '', '', '', 'pending')`},
		{name: "unknown_delivery_state", sql: `UPDATE deliveries SET state = 'sent'`},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			_, err := s.db.Exec(e.sql)
			assert.Error(t, err)
		})
	}
	after, err := s.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func BenchmarkIngest(b *testing.B) {
	s, _ := openStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		k := Key{"acme", "api", 1 + i%16}
		if _, err := s.Ingest(ctx, comment(k, fmt.Sprintf("d%d", i), t0)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func TestReportSessionIsLoadedWithTheRecord(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	k := Key{Owner: "o", Repo: "r", Number: 1}
	err := s.ReportSession(ctx, k, SessionReport{SessionID: "x", Source: "startup"})
	require.ErrorIs(t, err, ErrNotFound)

	_, err = s.Ingest(ctx, Ingest{DeliveryID: "d-1", Key: k, Kind: KindIssue, Harness: "h", Cwd: "/w"})
	require.NoError(t, err)
	rec, err := s.Get(ctx, k)
	require.NoError(t, err)
	assert.Nil(t, rec.Report)

	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, s.ReportSession(ctx, k, SessionReport{SessionID: "a", Source: "startup", At: at}))
	require.NoError(t, s.ReportSession(ctx, k, SessionReport{SessionID: "b", Source: "clear", At: at.Add(time.Second)}))
	recs, err := s.Records(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, &SessionReport{SessionID: "b", Source: "clear", At: at.Add(time.Second)}, recs[0].Report, "the latest report replaces the earlier")
}
