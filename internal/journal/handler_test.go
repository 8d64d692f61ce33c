package journal

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memJournal is an in-memory Appender.
type memJournal struct {
	mu     sync.Mutex
	events []Event
}

func (m *memJournal) AppendEvent(_ context.Context, e Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
	return nil
}

func TestHandlerJournalsOnlyItsNames(t *testing.T) {
	var out bytes.Buffer
	j := &memJournal{}
	log := slog.New(NewHandler(slog.NewTextHandler(&out, nil), j, ConfigReloaded, ConfigInvalid)).With("path", "/etc/loopd.yaml")

	log.Warn(string(ConfigInvalid), "err", "line 3: unknown key", "work_item", "o/r#1")
	log.Info("something.else", "k", "v")

	require.Len(t, j.events, 1)
	e := j.events[0]
	assert.Equal(t, ConfigInvalid, e.Name)
	assert.Equal(t, slog.LevelWarn, e.Level)
	assert.Equal(t, "o/r#1", e.WorkItem)
	assert.Equal(t, map[string]string{"path": "/etc/loopd.yaml", "err": "line 3: unknown key"}, e.Attrs)
	assert.Contains(t, out.String(), "msg=config.invalid")
	assert.Contains(t, out.String(), "msg=something.else", "every record still reaches the log")
}

func TestRecorderLogsAndJournals(t *testing.T) {
	var out bytes.Buffer
	j := &memJournal{}
	r := NewRecorder(slog.New(slog.NewTextHandler(&out, nil)), j, time.Now)
	r.Record(context.Background(), slog.LevelInfo, SessionSpawned, "o/r#1", "session", "loop-o-r-1", "n", 3)

	require.Len(t, j.events, 1)
	assert.Equal(t, SessionSpawned, j.events[0].Name)
	assert.Equal(t, "o/r#1", j.events[0].WorkItem)
	assert.Equal(t, map[string]string{"session": "loop-o-r-1", "n": "3"}, j.events[0].Attrs)
	assert.Contains(t, out.String(), `msg=session.spawned work_item=o/r#1 session=loop-o-r-1 n=3`)
}

// flakyJournal fails every append while down is true.
type flakyJournal struct {
	memJournal
	down bool
}

func (f *flakyJournal) AppendEvent(ctx context.Context, e Event) error {
	if f.down {
		return errors.New("database is locked")
	}
	return f.memJournal.AppendEvent(ctx, e)
}

func TestRecordLaterLogsNowAndJournalsOnFlush(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	j := &flakyJournal{down: true}
	r := NewRecorder(slog.New(slog.NewTextHandler(&out, nil)), j, time.Now)
	r.RecordLater(ctx, slog.LevelError, DeliveryRejected, "o/r#1", "reason", "store_failed", "n", 1)
	r.RecordLater(ctx, slog.LevelError, DeliveryRejected, "o/r#1", "reason", "store_failed", "n", 2)

	assert.Equal(t, 2, strings.Count(out.String(), "msg=delivery.rejected"), "logged at once")
	assert.Empty(t, j.events, "no write to the store on the failing path")
	require.Error(t, r.Flush(ctx), "a store still down keeps the rows")
	assert.Empty(t, j.events)

	j.down = false
	require.NoError(t, r.Flush(ctx))
	require.Len(t, j.events, 2)
	assert.Equal(t, "1", j.events[0].Attrs["n"], "oldest first")
	assert.Equal(t, "2", j.events[1].Attrs["n"])
	require.NoError(t, r.Flush(ctx))
	assert.Len(t, j.events, 2, "each row is written once")
}

func TestRecordLaterIsBounded(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	j := &flakyJournal{down: true}
	r := NewRecorder(slog.New(slog.NewTextHandler(&out, nil)), j, time.Now)
	for i := range MaxDeferred + 3 {
		r.RecordLater(ctx, slog.LevelError, DeliveryRejected, "", "n", i)
	}
	j.down = false
	require.NoError(t, r.Flush(ctx))
	require.Len(t, j.events, MaxDeferred)
	assert.Equal(t, "3", j.events[0].Attrs["n"], "the oldest rows are the ones dropped")
	assert.Contains(t, out.String(), "dropped=3")
}

// stalledJournal's appends wait until release is closed, then fail (a
// store locked by another process past its busy timeout).
type stalledJournal struct {
	memJournal
	entered chan struct{}
	release chan struct{}
}

func (s *stalledJournal) AppendEvent(context.Context, Event) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.release
	return errors.New("database is locked")
}

// TestRecordLaterNeverWaitsForAFlush: while a Flush waits on a locked
// store, RecordLater (which a webhook's 503 waits for) returns at once;
// the rows the Flush could not write come back first, before the new one.
func TestRecordLaterNeverWaitsForAFlush(t *testing.T) {
	ctx := context.Background()
	j := &stalledJournal{entered: make(chan struct{}, 1), release: make(chan struct{})}
	r := NewRecorder(slog.New(slog.DiscardHandler), j, time.Now)
	r.RecordLater(ctx, slog.LevelError, DeliveryRejected, "", "n", 1)
	flushed := make(chan error, 1)
	go func() { flushed <- r.Flush(ctx) }()
	<-j.entered

	recorded := make(chan struct{})
	go func() {
		r.RecordLater(ctx, slog.LevelError, DeliveryRejected, "", "n", 2)
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(5 * time.Second):
		t.Fatal("RecordLater waited for the Flush in progress")
	}
	close(j.release)
	require.Error(t, <-flushed)

	ok := &memJournal{}
	r.store = ok
	require.NoError(t, r.Flush(ctx))
	require.Len(t, ok.events, 2)
	assert.Equal(t, "1", ok.events[0].Attrs["n"], "the row the failed Flush held comes first")
	assert.Equal(t, "2", ok.events[1].Attrs["n"])
}
