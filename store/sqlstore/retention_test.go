package sqlstore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// TestMigrationToSchema10VacuumsIncrementally: a file made before schema
// 10 (auto_vacuum NONE) is switched to auto_vacuum INCREMENTAL when it is
// opened, its rows kept; a new file is made in that mode.
func TestMigrationToSchema10VacuumsIncrementally(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	db, err := sql.Open("sqlite", path+"?"+sqliteParams)
	require.NoError(t, err)
	for _, m := range migrations[:9] {
		_, err := db.Exec(m)
		require.NoError(t, err)
	}
	_, err = db.Exec(`PRAGMA user_version = 9`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO events (time, name, level, work_item, attrs) VALUES (?, 'item.held', 0, 'acme/api#42', '{}')`, t0.UnixNano())
	require.NoError(t, err)
	var mode int
	require.NoError(t, db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	require.Zero(t, mode, "a file of schema 9 has no auto_vacuum")
	require.NoError(t, db.Close())

	s, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	var v int
	require.NoError(t, s.db.QueryRow(`PRAGMA user_version`).Scan(&v))
	assert.Equal(t, schemaVersion, v)
	require.NoError(t, s.db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	assert.Equal(t, 2, mode, "INCREMENTAL")
	events, err := s.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	assert.Len(t, events, 1, "the rows stay")

	fresh, _ := openStore(t)
	require.NoError(t, fresh.db.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	assert.Equal(t, 2, mode, "a new file is INCREMENTAL from the start")
}

// TestVacuumGivesPrunedPagesBack: once the journal is pruned, Vacuum gives
// the free pages back in steps of vacuumPages, and the file shrinks by
// what it reports.
func TestVacuumGivesPrunedPagesBack(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()
	attrs := map[string]string{"text": strings.Repeat("x", 1000)}
	// Rows in transactions of their own would take long under synchronous
	// FULL; one transaction writes them.
	require.NoError(t, s.write(ctx, func(tx *sql.Tx) error {
		for i := range 10_000 {
			e := journal.Event{Time: t0.Add(time.Duration(i) * time.Second), Name: journal.DispatchSent, WorkItem: "acme/api#42", Attrs: attrs}
			if err := appendEvent(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	}))
	checkpoint := func() int64 {
		t.Helper()
		// The WAL's pages reach the main file at a checkpoint.
		_, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		require.NoError(t, err)
		info, err := os.Stat(path)
		require.NoError(t, err)
		return info.Size()
	}
	full := checkpoint()
	require.Greater(t, full, int64(10_000_000))

	n, err := s.PruneEvents(ctx, t0.Add(time.Hour*24), 0)
	require.NoError(t, err)
	assert.Equal(t, int64(10_000), n)
	assert.Equal(t, full, checkpoint(), "a delete alone frees pages inside the file")

	freed, err := s.Vacuum(ctx)
	require.NoError(t, err)
	assert.Greater(t, freed, int64(vacuumPages*4096), "more than one step")
	after := checkpoint()
	assert.Equal(t, full-freed, after)
	var free int
	require.NoError(t, s.db.QueryRow(`PRAGMA freelist_count`).Scan(&free))
	assert.Zero(t, free)

	freed, err = s.Vacuum(ctx)
	require.NoError(t, err)
	assert.Zero(t, freed, "nothing left to give back")
}

// TestForgetInAnotherProcessEmptiesTheStatusCache: `loopd forget` runs in
// a process of its own; the daemon's handle, whose status cache holds the
// forgotten item, lets the entry go at its next full read, which no
// longer finds the item, and keeps the others'.
func TestForgetInAnotherProcessEmptiesTheStatusCache(t *testing.T) {
	ctx := context.Background()
	daemon, path := openStore(t)
	other := desired.Key{Owner: "acme", Repo: "web", Number: 7}
	closed := true
	for _, in := range []store.Ingest{comment(keyAPI, "d1", t0), comment(other, "o1", t0),
		{DeliveryID: "close", Key: keyAPI, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/src/api", Closed: &closed, StateAt: t0}} {
		_, err := daemon.Ingest(ctx, in)
		require.NoError(t, err)
	}
	recs, err := daemon.Records(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.ElementsMatch(t, []string{keyAPI.String(), other.String()}, cachedStatuses(daemon))

	forget, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	require.NoError(t, forget.Forget(ctx, keyAPI))
	require.NoError(t, forget.Close())

	recs, err = daemon.Records(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, other, recs[0].Key)
	assert.Equal(t, []string{other.String()}, cachedStatuses(daemon))
}

// cachedStatuses returns the keys of the items s's status cache holds.
func cachedStatuses(s *SQLite) []string {
	s.statuses.mu.Lock()
	defer s.statuses.mu.Unlock()
	var keys []string
	for k := range s.statuses.m {
		keys = append(keys, k)
	}
	return keys
}
