package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// TestPruneJournal: rows older than the age go and journal.pruned says how
// many; age 0 keeps every row; a store that fails is journaled as
// journal.prune_failed (here in the log: the store is the one failing).
func TestPruneJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loopd.db")
	st, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{now.Add(-40 * 24 * time.Hour), now.Add(-31 * 24 * time.Hour), now.Add(-29 * 24 * time.Hour)} {
		require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: at, Name: journal.ItemHeld, WorkItem: "acme/api#1"}))
	}
	var log bytes.Buffer
	rec := journal.NewRecorder(slog.New(slog.NewTextHandler(&log, nil)), st, func() time.Time { return now })
	names := func() []journal.Name {
		evs, err := st.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		var out []journal.Name
		for _, e := range evs {
			out = append(out, e.Name)
		}
		return out
	}

	pruneJournal(ctx, st, rec, 0, now)
	assert.Len(t, names(), 3, "0 keeps every row")

	pruneJournal(ctx, st, rec, 30*24*time.Hour, now)
	assert.Equal(t, []journal.Name{journal.ItemHeld, journal.JournalPruned}, names())
	evs, err := st.Events(ctx, store.EventFilter{Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, "2", evs[0].Attrs[journal.KeyRows])
	assert.Equal(t, "2026-04-01T12:00:00Z", evs[0].Attrs[journal.KeyBefore])

	require.NoError(t, st.Close())
	pruneJournal(ctx, st, rec, 30*24*time.Hour, now)
	assert.Contains(t, log.String(), "msg="+string(journal.JournalPruneFailed))
}
