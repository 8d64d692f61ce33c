package transcript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// fakeStore keeps transcript copies as store.Fleet does: an append must
// start at the stored size (ErrTranscriptOffset) and carry the item's
// lease generation (ErrFenced); an unknown item is ErrNotFound.
type fakeStore struct {
	mu      sync.Mutex
	gen     map[desired.Key]int64
	data    map[copyKey][]byte
	appends []int // the size of each append applied
	sizes   int   // TranscriptSize calls
	fail    error // every call fails with it when set
}

func newFakeStore(gens map[desired.Key]int64) *fakeStore {
	return &fakeStore{gen: gens, data: map[copyKey][]byte{}}
}

func (s *fakeStore) TranscriptSize(_ context.Context, k desired.Key, id string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sizes++
	if s.fail != nil {
		return 0, s.fail
	}
	return int64(len(s.data[copyKey{k, id}])), nil
}

func (s *fakeStore) AppendTranscript(_ context.Context, k desired.Key, id string, off int64, data []byte, gen int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	cur, ok := s.gen[k]
	switch {
	case !ok:
		return fmt.Errorf("append transcript %s: %w", k, store.ErrNotFound)
	case off != int64(len(s.data[copyKey{k, id}])):
		return fmt.Errorf("append transcript %s at %d: %w", k, off, store.ErrTranscriptOffset)
	case gen != cur:
		return fmt.Errorf("append transcript %s: %w", k, store.ErrFenced)
	}
	s.data[copyKey{k, id}] = append(s.data[copyKey{k, id}], data...)
	s.appends = append(s.appends, len(data))
	return nil
}

func (s *fakeStore) Transcript(_ context.Context, k desired.Key, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	b, ok := s.data[copyKey{k, id}]
	if !ok {
		return nil, fmt.Errorf("transcript %s %s: %w", k, id, store.ErrNoTranscript)
	}
	return bytes.Clone(b), nil
}

func (s *fakeStore) stored(k desired.Key, id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.data[copyKey{k, id}])
}

// events collects the journal's rows.
type events struct {
	mu   sync.Mutex
	rows []journal.Event
}

func (e *events) AppendEvent(_ context.Context, ev journal.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rows = append(e.rows, ev)
	return nil
}

func (e *events) named(n journal.Name) []journal.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []journal.Event
	for _, r := range e.rows {
		if r.Name == n {
			out = append(out, r)
		}
	}
	return out
}

var keyA = desired.Key{Owner: "acme", Repo: "api", Number: 7}

// fixture is a Mover on host "a" with a claude-code harness whose
// config dir is under a temp dir, and a record of keyA in work.
type fixture struct {
	store  *fakeStore
	events *events
	mover  *Mover
	ad     harness.Adapter
	work   string
	rec    desired.Record
	path   string // the record's transcript
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(work, 0o700))
	ad, err := harness.New(harness.AdapterClaudeCode, schema.Harness{Command: "claude", Env: map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dir, "config")}})
	require.NoError(t, err)
	f := &fixture{store: newFakeStore(map[desired.Key]int64{keyA: 1}), events: &events{}, ad: ad, work: work}
	rec := journal.NewRecorder(slog.New(slog.DiscardHandler), f.events, time.Now)
	f.mover = NewMover(f.store, map[string]harness.Adapter{"claude-code": ad}, "a", rec)
	id := uuid.NewString()
	f.rec = desired.Record{Key: keyA, Spec: desired.Spec{Harness: "claude-code"},
		Status: desired.Status{SessionState: desired.SessionState{HarnessSessionID: id}, WorkspaceState: desired.WorkspaceState{Workdir: work}}, Lease: desired.Lease{Owner: "a", Generation: 1}}
	tr, err := ad.Transcript(work, id)
	require.NoError(t, err)
	f.path = tr.Path
	return f
}

func (f *fixture) id() string { return f.rec.Status.HarnessSessionID }

// write appends text to the record's transcript, making it if need be.
func (f *fixture) write(t *testing.T, text string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(f.path), 0o700))
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	require.NoError(t, err)
	_, err = file.WriteString(text)
	require.NoError(t, errors.Join(err, file.Close()))
}

func userLine(text string) string {
	return `{"type":"user","message":{"role":"user","content":"` + text + `"},"uuid":"` + uuid.NewString() + `","timestamp":"2026-01-01T00:00:00.000Z"}` + "\n"
}

func TestShipAppendsWholeNewLinesByOffset(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	require.NoError(t, f.mover.Ship(ctx, f.rec), "no transcript yet: nothing to copy")
	assert.Empty(t, f.store.appends)

	first, second := userLine("one"), userLine("two")
	f.write(t, first)
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	assert.Equal(t, first, string(f.store.stored(keyA, f.id())))

	// A line being written waits for its newline.
	f.write(t, second[:20])
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	assert.Equal(t, first, string(f.store.stored(keyA, f.id())))
	f.write(t, second[20:])
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	assert.Equal(t, first+second, string(f.store.stored(keyA, f.id())))
	assert.Equal(t, []int{len(first), len(second)}, f.store.appends, "only the new bytes, once")
	assert.Equal(t, 1, f.store.sizes, "the stored size is read once, then followed")
	assert.Empty(t, f.events.named(journal.TranscriptShipFailed))
}

func TestShipCopiesInChunksOfAtMostChunkSize(t *testing.T) {
	f := newFixture(t)
	var b strings.Builder
	for b.Len() < 2*ChunkSize+ChunkSize/2 {
		b.WriteString(userLine(strings.Repeat("x", 1000)))
	}
	f.write(t, b.String())
	require.NoError(t, f.mover.Ship(t.Context(), f.rec))
	assert.Equal(t, b.String(), string(f.store.stored(keyA, f.id())))
	require.Len(t, f.store.appends, 3)
	for _, n := range f.store.appends {
		assert.LessOrEqual(t, n, ChunkSize)
	}
}

func TestShipRefusesAShrunkOrRewrittenFile(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	first, second := userLine("one"), userLine("two")
	f.write(t, first+second)
	require.NoError(t, f.mover.Ship(ctx, f.rec))

	require.NoError(t, os.WriteFile(f.path, []byte(first), 0o600))
	require.ErrorIs(t, f.mover.Ship(ctx, f.rec), ErrShrunk)
	require.ErrorIs(t, f.mover.Ship(ctx, f.rec), ErrShrunk)
	assert.Equal(t, first+second, string(f.store.stored(keyA, f.id())), "the stored copy is kept whole")
	failed := f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 1, "one episode, journaled once")
	assert.Equal(t, "shrunk", failed[0].Attrs["reason"])
	assert.Equal(t, fmt.Sprint(len(first)), failed[0].Attrs["bytes"])
	assert.Equal(t, fmt.Sprint(len(first+second)), failed[0].Attrs["stored"])

	// Longer again, but not an extension of what was copied.
	require.NoError(t, os.WriteFile(f.path, []byte(first+userLine("other")+second), 0o600))
	require.ErrorIs(t, f.mover.Ship(ctx, f.rec), ErrRewritten)
	assert.Equal(t, first+second, string(f.store.stored(keyA, f.id())))
	failed = f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 2)
	assert.Equal(t, "rewritten", failed[1].Attrs["reason"])
}

func TestShipIsFenced(t *testing.T) {
	f := newFixture(t)
	f.store.gen[keyA] = 2 // the lease moved
	f.write(t, userLine("one"))
	err := f.mover.Ship(t.Context(), f.rec)
	require.ErrorIs(t, err, store.ErrFenced)
	assert.Empty(t, f.store.stored(keyA, f.id()))
	failed := f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, "fenced", failed[0].Attrs["reason"])
	assert.Equal(t, f.id(), failed[0].Attrs["harness_session_id"])
}

func TestShipReadsTheStoredSizeAgainAfterAnOffsetMismatch(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	first, second := userLine("one"), userLine("two")
	f.write(t, first)
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	// Another writer (an earlier run of this host) already copied more.
	f.write(t, second)
	require.NoError(t, f.store.AppendTranscript(ctx, keyA, f.id(), int64(len(first)), []byte(second), 1))
	third := userLine("three")
	f.write(t, third)
	require.ErrorIs(t, f.mover.Ship(ctx, f.rec), store.ErrTranscriptOffset)
	require.NoError(t, f.mover.Ship(ctx, f.rec))
	assert.Equal(t, first+second+third, string(f.store.stored(keyA, f.id())))
}

// A conversation the harness reported (/clear) is shipped once the
// planner followed it (Status.HarnessSessionID): the report alone is the
// agent's word, and the recorded conversation is shipped until then.
func TestShipFollowsTheFollowedConversation(t *testing.T) {
	f := newFixture(t)
	other := uuid.NewString()
	f.rec.Status.Phase, f.rec.Status.SpawnedAt = desired.PhaseRunning, time.Now().Add(-time.Minute)
	f.rec.Report = &desired.SessionReport{SessionID: other, At: time.Now()}
	tr, err := f.ad.Transcript(f.work, other)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path), 0o700))
	line := userLine("after clear")
	require.NoError(t, os.WriteFile(tr.Path, []byte(line), 0o600))
	require.NoError(t, f.mover.Ship(t.Context(), f.rec))
	assert.Empty(t, f.store.stored(keyA, other), "not followed yet")

	f.rec.Status = f.rec.Status.Follow(other)
	require.NoError(t, f.mover.Ship(t.Context(), f.rec))
	assert.Equal(t, line, string(f.store.stored(keyA, other)))
}

func TestShipWithoutATranscriptRuleCopiesNothing(t *testing.T) {
	f := newFixture(t)
	custom, err := harness.New("mine", schema.Harness{Adapter: harness.AdapterCustom, Command: "mine", FreshArgs: []string{"{{.Prompt}}"}})
	require.NoError(t, err)
	f.mover.harnesses["mine"] = custom
	f.rec.Spec.Harness = "mine"
	require.NoError(t, f.mover.Ship(t.Context(), f.rec))
	assert.Zero(t, f.store.sizes)
	require.NoError(t, f.store.AppendTranscript(t.Context(), keyA, f.id(), 0, []byte(userLine("one")), 1))
	err = f.mover.Restore(t.Context(), f.rec, f.id(), f.work)
	require.ErrorIs(t, err, store.ErrNoTranscript)
	require.ErrorIs(t, err, harness.ErrNoTranscriptRule)
}

func TestShipJournalsAStoreFailureAndRetries(t *testing.T) {
	f := newFixture(t)
	f.write(t, userLine("one"))
	f.store.fail = errors.New("connection refused")
	require.Error(t, f.mover.Ship(t.Context(), f.rec))
	failed := f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, "store", failed[0].Attrs["reason"])
	f.store.fail = nil
	require.NoError(t, f.mover.Ship(t.Context(), f.rec))
	assert.Equal(t, userLine("one")[:40], string(f.store.stored(keyA, f.id()))[:40])
}

func TestRestoreWritesTheStoredCopyWhereTheHarnessLooks(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	stored := userLine("one") + userLine("two")
	require.NoError(t, f.store.AppendTranscript(ctx, keyA, f.id(), 0, []byte(stored), 1))

	// Another host: its own config dir and workdir.
	g := newFixture(t)
	g.store = f.store
	g.mover.store = f.store
	g.rec.Status.HarnessSessionID = f.id()
	tr, err := g.ad.Transcript(g.work, f.id())
	require.NoError(t, err)
	require.False(t, tr.Exists)
	require.NoError(t, g.mover.Restore(ctx, g.rec, f.id(), g.work))

	tr, err = g.ad.Transcript(g.work, f.id())
	require.NoError(t, err)
	assert.True(t, tr.Exists, "claude --resume finds it")
	got, err := os.ReadFile(tr.Path)
	require.NoError(t, err)
	assert.Equal(t, stored, string(got))
	info, err := os.Stat(tr.Path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	dirInfo, err := os.Stat(filepath.Dir(tr.Path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dirInfo.Mode().Perm())
	leftovers, err := filepath.Glob(filepath.Join(filepath.Dir(tr.Path), ".loopd-restore-*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers)
	restored := g.events.named(journal.TranscriptRestored)
	require.Len(t, restored, 1)
	assert.Equal(t, "false", restored[0].Attrs["kept"])

	// The conversation goes on there; the copy grows by offset from it.
	g.store.gen[keyA] = 2
	g.rec.Lease = desired.Lease{Owner: "a", Generation: 2}
	third := userLine("three")
	g.path = tr.Path
	g.write(t, third)
	require.NoError(t, g.mover.Ship(ctx, g.rec))
	assert.Equal(t, stored+third, string(f.store.stored(keyA, f.id())))
}

func TestRestoreKeepsALocalCopyAtLeastAsLong(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	stored := userLine("one")
	require.NoError(t, f.store.AppendTranscript(ctx, keyA, f.id(), 0, []byte(stored), 1))
	local := stored + userLine("two")
	f.write(t, local)
	require.NoError(t, f.mover.Restore(ctx, f.rec, f.id(), f.work))
	got, err := os.ReadFile(f.path)
	require.NoError(t, err)
	assert.Equal(t, local, string(got))
	restored := f.events.named(journal.TranscriptRestored)
	require.Len(t, restored, 1)
	assert.Equal(t, "true", restored[0].Attrs["kept"])

	// A shorter local file is replaced.
	require.NoError(t, os.WriteFile(f.path, []byte("{"), 0o600))
	require.NoError(t, f.mover.Restore(ctx, f.rec, f.id(), f.work))
	got, err = os.ReadFile(f.path)
	require.NoError(t, err)
	assert.Equal(t, stored, string(got))
}

func TestRestoreWithNothingStored(t *testing.T) {
	f := newFixture(t)
	err := f.mover.Restore(t.Context(), f.rec, f.id(), f.work)
	require.ErrorIs(t, err, store.ErrNoTranscript)
	assert.NoFileExists(t, f.path)
	// An id the harness refuses never names a file.
	err = f.mover.Restore(t.Context(), f.rec, "../../etc/passwd", f.work)
	require.ErrorIs(t, err, store.ErrNoTranscript)
	require.ErrorIs(t, err, harness.ErrInvalidSessionID)
}

func TestRunShipsTheItemsThisHostHolds(t *testing.T) {
	f := newFixture(t)
	mine := f.rec
	theirs := f.rec
	theirs.Key = desired.Key{Owner: "acme", Repo: "api", Number: 8}
	theirs.Lease.Owner = "b"
	f.store.gen[theirs.Key] = 1
	f.write(t, userLine("one"))
	calls := make(chan struct{}, 100)
	fail := true
	records := func(context.Context) ([]desired.Record, error) {
		calls <- struct{}{}
		if fail {
			fail = false
			return nil, errors.New("database is locked")
		}
		return []desired.Record{mine, theirs}, nil
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.mover.Run(ctx, records, 10*time.Millisecond) }()
	require.Eventually(t, func() bool { return len(f.store.stored(keyA, f.id())) > 0 }, 5*time.Second, 10*time.Millisecond)
	stop := errors.New("stop")
	cancel(stop)
	require.ErrorIs(t, <-done, stop)
	assert.Empty(t, f.store.stored(theirs.Key, f.id()), "another host's item is not copied by this one")
	failed := f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, "records_unreadable", failed[0].Attrs["reason"])
}

func TestShipJournalsAnUnreadableLocalTranscript(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.MkdirAll(filepath.Join(f.path, "sub"), 0o700)) // a directory stands where the file goes
	require.Error(t, f.mover.Ship(t.Context(), f.rec))
	failed := f.events.named(journal.TranscriptShipFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, "unreadable", failed[0].Attrs["reason"])
	assert.Empty(t, f.store.appends)
}
