package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// retain prunes the journal (pruneJournal) once at once and then every
// schema.RetentionEvery until ctx ends, each time with the retention of
// the config current returns then, so that a reload takes effect at the
// next prune. A failure is journaled and waits for the next prune: at
// most one try an hour.
func retain(ctx context.Context, store store.Retention, rec *journal.Recorder, current func() *schema.Config, now func() time.Time) {
	t := time.NewTicker(schema.RetentionEvery)
	defer t.Stop()
	for {
		pruneJournal(ctx, store, rec, current().Retention.JournalAge(), now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pruneJournal deletes the journal rows older than age before now, in
// batches (store.DefaultPruneBatch), then gives the freed space back
// (Vacuum), and journals journal.pruned with the rows removed and the
// bytes freed, when there were any. age 0 keeps every row (and vacuums
// nothing). A failure is journaled as journal.prune_failed with the
// rows a failed prune removed before it.
func pruneJournal(ctx context.Context, store store.Retention, rec *journal.Recorder, age time.Duration, now time.Time) {
	if age <= 0 {
		return
	}
	before := now.Add(-age).UTC()
	rows, err := store.PruneEvents(ctx, before, 0)
	if err != nil {
		if ctx.Err() == nil {
			rec.Record(ctx, slog.LevelWarn, journal.JournalPruneFailed, "", journal.KeyBefore, before.Format(time.RFC3339),
				journal.KeyRows, rows, journal.KeyErr, err)
		}
		return
	}
	if rows == 0 {
		return
	}
	freed, err := store.Vacuum(ctx)
	if err != nil {
		if ctx.Err() == nil {
			rec.Record(ctx, slog.LevelWarn, journal.JournalPruneFailed, "", journal.KeyBefore, before.Format(time.RFC3339),
				journal.KeyRows, rows, journal.KeyReason, "vacuum_failed", journal.KeyErr, err)
		}
		return
	}
	rec.Record(ctx, slog.LevelInfo, journal.JournalPruned, "", journal.KeyBefore, before.Format(time.RFC3339),
		journal.KeyRows, rows, journal.KeyFreedBytes, freed)
}
