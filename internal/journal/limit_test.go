package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a settable time source.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// limitedLog is a JSON logger behind a Limiter with a one-minute window on
// a fake clock.
func limitedLog(t *testing.T, maxFailures int) (*slog.Logger, *Limiter, *fakeClock, *bytes.Buffer) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	lim := NewLimiter(time.Minute, maxFailures, clock.now)
	var out bytes.Buffer
	return slog.New(lim.Handler(slog.NewJSONHandler(&out, nil))), lim, clock, &out
}

// lines decodes the JSON log lines in out.
func lines(t *testing.T, out *bytes.Buffer) []map[string]any {
	t.Helper()
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		got = append(got, m)
	}
	return got
}

func TestLimiterFoldsRepeatsWithCount(t *testing.T) {
	log, lim, clock, out := limitedLog(t, 0)
	ctx := context.Background()
	diskFull := errors.New("write loopd.db: no space left on device")

	// A pass that fails every second for three minutes, then recovers.
	for i := range 180 {
		log.Error(string(ReconcileFailed), "err", diskFull, "reconcile_id", i)
		clock.advance(time.Second)
		lim.Flush(ctx)
	}
	for range 180 {
		clock.advance(time.Second)
		lim.Flush(ctx)
	}

	got := lines(t, out)
	require.Len(t, got, 4, out.String())
	assert.NotContains(t, got[0], KeyRepeated, "the first occurrence passes as it is")
	assert.Equal(t, float64(0), got[0]["reconcile_id"])
	total := 0
	for _, l := range got[1:] {
		assert.Equal(t, string(ReconcileFailed), l["msg"])
		assert.Equal(t, diskFull.Error(), l["err"])
		total += int(l[KeyRepeated].(float64))
	}
	assert.Equal(t, 179, total, "every suppressed occurrence is counted once")
	assert.Equal(t, float64(179), got[3]["reconcile_id"], "a summary is the latest occurrence")
	assert.Empty(t, lim.seen, "a failure quiet for a whole window is forgotten")

	out.Reset()
	log.Error(string(ReconcileFailed), "err", diskFull)
	assert.Len(t, lines(t, out), 1, "a failure that comes back after a quiet window passes at once")
}

func TestLimiterIdentity(t *testing.T) {
	log, lim, _, out := limitedLog(t, 0)
	ctx := context.Background()

	for range 3 {
		// Failures that differ in an identifying attribute all pass once.
		log.Error(string(ReconcileFailed), "err", "disk full")
		log.Error(string(ReconcileFailed), "err", "lock held")
		log.Error(string(DispatchFailed), "err", "disk full", "work_item", "o/r#1", "reason", "paste_failed")
		log.Error(string(DispatchFailed), "err", "disk full", "work_item", "o/r#2", "reason", "paste_failed")
		log.Error(string(DispatchFailed), "err", "disk full", "work_item", "o/r#2", "reason", "enter_failed")
		log.Warn(string(ReconcileFailed), "err", "disk full")
		// Through With, work_item still identifies.
		log.With("work_item", "o/r#3").Error(string(DispatchFailed), "err", "disk full", "reason", "paste_failed")
		// Other attributes do not: a client cannot make each line new.
		log.Warn(string(DeliveryRejected), "reason", "bad_signature", "err", "signature mismatch", "remote_addr", fmt.Sprint(time.Now().UnixNano()))
		// Not failures: no err, or below Warn.
		log.Warn(string(SessionResumeFailed), "work_item", "o/r#1", "reason", "pane_died")
		log.Info(string(DeliveryAccepted), "err", "not a failure at info")
	}
	require.Len(t, lines(t, out), 8+2*3)

	out.Reset()
	lim.FlushAll(ctx)
	got := lines(t, out)
	require.Len(t, got, 8, "one summary per identity")
	for _, l := range got {
		assert.Equal(t, float64(2), l[KeyRepeated], l)
	}
}

func TestLimiterMemoryIsBounded(t *testing.T) {
	log, lim, _, out := limitedLog(t, 4)

	// Each occurrence a new err text, as a client that varies its input
	// would make it.
	for i := range 1000 {
		log.Warn(string(DeliveryRejected), "reason", "read_failed", "err", fmt.Sprintf("error %d", i))
	}

	assert.LessOrEqual(t, len(lim.seen), 5, "at most 4 identities, and one per message past that")
	assert.Len(t, lines(t, out), 5)
	out.Reset()
	lim.FlushAll(context.Background())
	got := lines(t, out)
	require.Len(t, got, 1)
	assert.Equal(t, float64(995), got[0][KeyRepeated], "the folded identities are still counted")
	assert.Equal(t, "error 999", got[0]["err"])
}

func TestLimiterLateOccurrenceCarriesCount(t *testing.T) {
	// Without Run, the first occurrence after the window carries the count.
	log, _, clock, out := limitedLog(t, 0)
	for range 5 {
		log.Error(string(ReconcileFailed), "err", "disk full")
	}
	clock.advance(time.Minute)
	log.Error(string(ReconcileFailed), "err", "disk full")

	got := lines(t, out)
	require.Len(t, got, 2)
	assert.Equal(t, float64(4), got[1][KeyRepeated])
}

func TestLimiterJournalRows(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	lim := NewLimiter(time.Minute, 0, clock.now)
	j := &memJournal{}
	var out bytes.Buffer
	rec := NewRecorder(slog.New(lim.Handler(slog.NewTextHandler(&out, nil))), lim.Appender(j), clock.now)
	ctx := context.Background()

	for range 30 {
		rec.Record(ctx, slog.LevelError, ReconcileFailed, "", "err", "disk full")
		rec.Record(ctx, slog.LevelInfo, DeliveryAccepted, "o/r#1")
		clock.advance(time.Second)
	}
	lim.FlushAll(ctx)

	var failed []Event
	accepted := 0
	for _, e := range j.events {
		switch e.Name {
		case ReconcileFailed:
			failed = append(failed, e)
		case DeliveryAccepted:
			accepted++
		}
	}
	assert.Equal(t, 30, accepted, "records that are not failures are all journaled")
	require.Len(t, failed, 2)
	assert.NotContains(t, failed[0].Attrs, KeyRepeated)
	assert.Equal(t, "29", failed[1].Attrs[KeyRepeated])
	assert.Equal(t, 2, strings.Count(out.String(), string(ReconcileFailed)), "the log is limited alike")
}

func TestLimiterRowThatFailedToWriteIsNoWindow(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	lim := NewLimiter(time.Minute, 0, clock.now)
	j := &flakyJournal{down: true}
	rows := lim.Appender(j)
	ctx := context.Background()
	e := Event{Name: ReconcileFailed, Level: slog.LevelError, Attrs: map[string]string{"err": "database is locked"}}

	require.Error(t, rows.AppendEvent(ctx, e), "the store fails the first occurrence")
	j.down = false
	clock.advance(time.Second)
	require.NoError(t, rows.AppendEvent(ctx, e))
	require.Len(t, j.events, 1, "an occurrence after an unwritten first one is written, not counted as its repeat")
	assert.NotContains(t, j.events[0].Attrs, KeyRepeated)
}

func TestRecordLaterRowsAreNeverFolded(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	lim := NewLimiter(time.Minute, 0, clock.now)
	j := &flakyJournal{down: true}
	var out bytes.Buffer
	rec := NewRecorder(slog.New(lim.Handler(slog.NewTextHandler(&out, nil))), lim.Appender(j), clock.now)
	ctx := context.Background()

	for _, id := range []string{"d-1", "d-2", "d-3"} {
		rec.RecordLater(ctx, slog.LevelError, DeliveryRejected, "o/r#1", "delivery", id, "reason", "store_failed", "err", "SQLITE_BUSY")
		require.Error(t, rec.Flush(ctx), "the store is still locked")
		clock.advance(time.Second)
	}
	j.down = false
	require.NoError(t, rec.Flush(ctx))
	var ids []string
	for _, e := range j.events {
		ids = append(ids, e.Attrs["delivery"])
	}
	assert.Equal(t, []string{"d-1", "d-2", "d-3"}, ids, "each rejected delivery keeps its own row for the operator to redeliver")
}
