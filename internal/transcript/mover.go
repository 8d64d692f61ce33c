// Package transcript moves a conversation with its work item from one host
// to another: the host that holds an item's lease copies the transcript
// its harness writes into the shared store, by offset, as it grows (Ship,
// Run), and a host that takes the item over writes the stored copy back
// where its own harness looks for it in the item's new workdir (Restore),
// so that the usual verified resume continues the same conversation
// (docs/design.md, "Conversations move with their item"). Where the
// harness writes its transcript is each adapter's rule (internal/harness:
// Adapter.Transcript, harness.RestoreTarget); this package only copies.
package transcript

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// ChunkSize bounds one append to the store, in bytes: a transcript that
// grew by more is copied in several appends, each fenced.
const ChunkSize = 1 << 20

// Sentinel errors of Ship.
var (
	// ErrShrunk means the local transcript is shorter than the stored
	// copy (rewritten or truncated since): nothing is appended, as that
	// would corrupt the copy, which stays as it is.
	ErrShrunk = errors.New("local transcript is shorter than the stored copy")
	// ErrRewritten means the local transcript no longer holds, where the
	// stored copy ends, the bytes this host last copied there: it was
	// rewritten, and nothing is appended.
	ErrRewritten = errors.New("local transcript no longer extends the stored copy")
)

// errLocal marks a failure to find or read the local transcript, as
// opposed to the store's.
var errLocal = errors.New("local transcript")

// The reasons of transcript.ship_failed.
const (
	reasonShrunk            = "shrunk"
	reasonRewritten         = "rewritten"
	reasonFenced            = "fenced"
	reasonOffset            = "offset"
	reasonStore             = "store"
	reasonUnreadable        = "unreadable"
	reasonRecordsUnreadable = "records_unreadable"
)

// tailSize is how many of the last bytes copied the Mover keeps per
// transcript, to tell a rewritten file from a grown one.
const tailSize = 256

// Store is the part of a store (store.Fleet) that keeps the copies of
// the transcripts.
type Store interface {
	TranscriptSize(ctx context.Context, k desired.Key, id string) (int64, error)
	AppendTranscript(ctx context.Context, k desired.Key, id string, off int64, data []byte, gen int64) error
	Transcript(ctx context.Context, k desired.Key, id string) ([]byte, error)
}

// Mover copies the transcripts of the items this host holds into the
// store, and writes stored ones back. Its methods are safe for concurrent
// use; the copies of one transcript are made one at a time.
type Mover struct {
	store     Store
	harnesses map[string]harness.Adapter
	host      string
	rec       *journal.Recorder
	now       func() time.Time

	mu     sync.Mutex
	copies map[copyKey]*copyState
}

// copyKey names one conversation's transcript of one item.
type copyKey struct {
	item desired.Key
	id   string
}

// copyState is what the Mover knows of one transcript's copy.
type copyState struct {
	sync.Mutex // held while the transcript is copied
	// known is whether stored, path and tail are known; stored is how
	// many bytes the store holds, path where the local file was found.
	known  bool
	stored int64
	path   string
	// tail is the last bytes up to stored, as this host copied or
	// restored them; nil when not known.
	tail []byte
	// shrunk is the local size last journaled as shrunk or rewritten,
	// so that one episode is journaled once.
	shrunk int64
}

// NewMover returns a Mover for host (schema.Host.HostName), copying into
// store the transcripts of the items whose harness (by name) is in
// harnesses, and journaling with rec.
func NewMover(store Store, harnesses map[string]harness.Adapter, host string, rec *journal.Recorder) *Mover {
	return &Mover{store: store, harnesses: harnesses, host: host, rec: rec, now: time.Now, copies: map[copyKey]*copyState{}}
}

// conversation returns r's harness and the id of the conversation it is
// in (Status.HarnessSessionID, which a reported /clear moves once the
// planner follows it), ok false when there is none to copy.
func (m *Mover) conversation(r desired.Record) (harness.Adapter, string, bool) {
	a := m.harnesses[r.Spec.Harness]
	if a == nil {
		return nil, "", false
	}
	id := r.Status.HarnessSessionID
	return a, id, id != "" && a.ValidSessionID(id)
}

// state returns the copy state of k, made on first use.
func (m *Mover) state(k copyKey) *copyState {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.copies[k]
	if s == nil {
		s = &copyState{}
		m.copies[k] = s
	}
	return s
}

// Ship appends to the store what it lacks of r's current transcript: the
// conversation's (Status.HarnessSessionID), found where r's harness writes it for
// r's workdir, under r.Lease.Generation. It copies whole lines only (a
// line being written waits for the next Ship), from the stored size on,
// in appends of at most ChunkSize bytes. The stored size is read once and
// then followed in memory. An item whose harness has no transcript rule,
// or no conversation yet, has nothing to copy.
//
// A local file shorter than the stored copy (ErrShrunk), or that no
// longer ends, where the copy ends, with what this host last copied
// (ErrRewritten), is not appended from. Ship journals each failure
// (transcript.ship_failed, one per episode for those two) and returns it;
// the caller need not journal it again. The error wraps
// store.ErrFenced when the lease moved, and store.ErrTranscriptOffset
// when the store holds another size than this host thought (the next
// Ship reads it again).
func (m *Mover) Ship(ctx context.Context, r desired.Record) error {
	a, id, ok := m.conversation(r)
	if !ok {
		return nil
	}
	s := m.state(copyKey{r.Key, id})
	s.Lock()
	defer s.Unlock()
	err := m.ship(ctx, r, a, id, s)
	if err != nil {
		if !errors.Is(err, store.ErrFenced) && !errors.Is(err, ErrShrunk) && !errors.Is(err, ErrRewritten) {
			// What the store holds is read again next time.
			s.known, s.tail = false, nil
		}
		m.journalShip(ctx, r, a, id, s, err)
	}
	return err
}

func (m *Mover) ship(ctx context.Context, r desired.Record, a harness.Adapter, id string, s *copyState) error {
	f, err := m.open(a, r.Workdir(), id, s)
	if err != nil {
		return fmt.Errorf("ship transcript %s of %s: %w: %w", id, r.Key, errLocal, err)
	}
	if f == nil {
		return nil
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ship transcript %s of %s: %w: %w", id, r.Key, errLocal, err)
	}
	if !s.known {
		stored, err := m.store.TranscriptSize(ctx, r.Key, id)
		if err != nil {
			return fmt.Errorf("ship transcript %s of %s: %w", id, r.Key, err)
		}
		s.known, s.stored = true, stored
	}
	size := info.Size()
	switch {
	case size < s.stored:
		return fmt.Errorf("ship transcript %s of %s: %w", id, r.Key, ErrShrunk)
	case size == s.stored:
		return nil
	}
	if s.tail != nil {
		got := make([]byte, len(s.tail))
		if _, err := f.ReadAt(got, s.stored-int64(len(s.tail))); err != nil || string(got) != string(s.tail) {
			return fmt.Errorf("ship transcript %s of %s: %w", id, r.Key, ErrRewritten)
		}
	}
	end, err := lastLineEnd(f, s.stored, size)
	if err != nil {
		return fmt.Errorf("ship transcript %s of %s: %w: read %s: %w", id, r.Key, errLocal, s.path, err)
	}
	buf := make([]byte, min(ChunkSize, end-s.stored))
	for s.stored < end {
		chunk := buf[:min(int64(len(buf)), end-s.stored)]
		if _, err := f.ReadAt(chunk, s.stored); err != nil {
			return fmt.Errorf("ship transcript %s of %s: %w: read %s: %w", id, r.Key, errLocal, s.path, err)
		}
		if err := m.store.AppendTranscript(ctx, r.Key, id, s.stored, chunk, r.Lease.Generation); err != nil {
			return fmt.Errorf("ship transcript %s of %s: %w", id, r.Key, err)
		}
		s.stored += int64(len(chunk))
		s.tail = keepTail(s.tail, chunk)
	}
	s.shrunk = 0
	return nil
}

// open opens the local transcript of id for cwd: at the path found last,
// else where the adapter says it is. It returns nil, nil when there is
// none (yet), or no transcript rule.
func (m *Mover) open(a harness.Adapter, cwd, id string, s *copyState) (*os.File, error) {
	if s.path != "" {
		f, err := os.Open(s.path)
		if err == nil {
			return f, nil
		}
		s.path = ""
	}
	tr, err := a.Transcript(cwd, id)
	if err != nil {
		return nil, err
	}
	if !tr.Known || tr.Path == "" {
		return nil, nil
	}
	f, err := os.Open(tr.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.path = tr.Path
	return f, nil
}

// lastLineEnd returns the offset just past the last newline of f between
// from and size, from when there is none.
func lastLineEnd(f io.ReaderAt, from, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > from; {
		start := max(from, end-int64(len(buf)))
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] == '\n' {
				return start + int64(i) + 1, nil
			}
		}
		end = start
	}
	return from, nil
}

// keepTail returns the last tailSize bytes of tail followed by chunk.
func keepTail(tail, chunk []byte) []byte {
	if len(chunk) >= tailSize {
		return append([]byte(nil), chunk[len(chunk)-tailSize:]...)
	}
	out := append(append([]byte(nil), tail...), chunk...)
	return out[max(0, len(out)-tailSize):]
}

// journalShip journals err of a Ship of r's transcript id: a shrunk or
// rewritten file once per local size, every other failure each time (the
// serve's Limiter folds repeats).
func (m *Mover) journalShip(ctx context.Context, r desired.Record, a harness.Adapter, id string, s *copyState, err error) {
	reason := reasonStore
	switch {
	case errors.Is(err, ErrShrunk), errors.Is(err, ErrRewritten):
		reason = reasonShrunk
		if errors.Is(err, ErrRewritten) {
			reason = reasonRewritten
		}
		size := int64(-1)
		if info, serr := os.Stat(s.path); serr == nil {
			size = info.Size()
		}
		if size == s.shrunk {
			return
		}
		s.shrunk = size
		m.rec.Record(ctx, slog.LevelWarn, journal.TranscriptShipFailed, r.Key.String(), journal.KeyReason, reason,
			journal.KeyHarness, a.Name(), journal.KeyHarnessSessionID, id, journal.KeyPath, s.path,
			journal.KeyBytes, size, journal.KeyStored, s.stored, journal.KeyErr, err)
		return
	case errors.Is(err, store.ErrFenced):
		reason = reasonFenced
	case errors.Is(err, store.ErrTranscriptOffset):
		reason = reasonOffset
	case errors.Is(err, errLocal):
		reason = reasonUnreadable
	}
	m.rec.Record(ctx, slog.LevelWarn, journal.TranscriptShipFailed, r.Key.String(), journal.KeyReason, reason,
		journal.KeyHarness, a.Name(), journal.KeyHarnessSessionID, id, journal.KeyErr, err)
}

// Run ships, every interval (schema.TranscriptShipInterval when it is not
// positive), the transcript of every item that records returns and this
// host holds (Lease.Owner), until ctx ends; it returns ctx's cause then.
// A failure to read the records is journaled and waits for the next
// tick, as every Ship failure does: Run never loops faster than every.
func (m *Mover) Run(ctx context.Context, records func(context.Context) ([]desired.Record, error), every time.Duration) error {
	if every <= 0 {
		every = schema.TranscriptShipInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if rs, err := records(ctx); err != nil {
			if ctx.Err() == nil {
				m.rec.Record(ctx, slog.LevelWarn, journal.TranscriptShipFailed, "", journal.KeyReason, reasonRecordsUnreadable, journal.KeyErr, err)
			}
		} else {
			m.shipAll(ctx, rs)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// shipAll ships the transcripts of the items of rs this host holds, and
// forgets what it knew of every other.
func (m *Mover) shipAll(ctx context.Context, rs []desired.Record) {
	held := map[copyKey]bool{}
	for _, r := range rs {
		if r.Lease.Owner != m.host || ctx.Err() != nil {
			continue
		}
		if _, id, ok := m.conversation(r); ok {
			held[copyKey{r.Key, id}] = true
			_ = m.Ship(ctx, r) // journaled by Ship
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.copies {
		if !held[k] {
			delete(m.copies, k)
		}
	}
}

// Restore writes the stored transcript of conversation id of r back where
// r's harness looks for it when run in cwd (harness.RestoreTarget): its
// directories made 0700, the file 0600, written whole to a temporary file
// that is then renamed into place. A local transcript at that path at
// least as long as what would be written is kept as it is (never
// overwritten). It journals transcript.restored. The error wraps
// store.ErrNoTranscript when the store holds none, or when r's harness
// cannot say where the transcript goes (harness.ErrNoTranscriptRule, an
// id it refuses): the item then starts fresh. Restore's own failures are
// left to the caller to journal.
func (m *Mover) Restore(ctx context.Context, r desired.Record, id, cwd string) error {
	a := m.harnesses[r.Spec.Harness]
	if a == nil {
		return fmt.Errorf("restore transcript %s of %s: harness %q: %w: %w", id, r.Key, r.Spec.Harness, harness.ErrNoTranscriptRule, store.ErrNoTranscript)
	}
	if !a.ValidSessionID(id) {
		return fmt.Errorf("restore transcript %q of %s: %w: %w", id, r.Key, harness.ErrInvalidSessionID, store.ErrNoTranscript)
	}
	data, err := m.store.Transcript(ctx, r.Key, id)
	if err != nil {
		return fmt.Errorf("restore transcript %s of %s: %w", id, r.Key, err)
	}
	path, out, err := harness.RestoreTarget(a, cwd, id, data, m.now())
	if errors.Is(err, harness.ErrNoTranscriptRule) {
		return fmt.Errorf("restore transcript of %s: %w: %w", r.Key, err, store.ErrNoTranscript)
	}
	if err != nil {
		return fmt.Errorf("restore transcript of %s: %w", r.Key, err)
	}
	s := m.state(copyKey{r.Key, id})
	s.Lock()
	defer s.Unlock()
	kept := false
	if info, err := os.Lstat(path); err == nil && info.Mode().IsRegular() && info.Size() >= int64(len(out)) {
		kept = true
	} else if err := writeAtomic(path, out); err != nil {
		return fmt.Errorf("restore transcript %s of %s: %w", id, r.Key, err)
	}
	// The store holds data, which the file extends (the adapter may have
	// appended to it), so the next Ship copies from there; a kept local
	// file that does not extend it is not copied from (ErrRewritten).
	s.known, s.stored, s.path, s.shrunk = true, int64(len(data)), path, 0
	s.tail = keepTail(nil, data)
	m.rec.Record(ctx, slog.LevelInfo, journal.TranscriptRestored, r.Key.String(), journal.KeyHarness, a.Name(),
		journal.KeyHarnessSessionID, id, journal.KeyPath, path, journal.KeyBytes, len(out), journal.KeyKept, kept)
	return nil
}

// writeAtomic writes data to path through a temporary file in its
// directory (made 0700 with its parents) that is synced, made 0600 and
// renamed over path: a reader sees the old file or the whole new one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".loopd-restore-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(0o600), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
