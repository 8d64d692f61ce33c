package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// vacuumPages is how many free pages one transaction of SQLite's Vacuum
// gives back at most (PRAGMA incremental_vacuum(N)): 4 MiB at SQLite's
// default page size of 4096 bytes.
const vacuumPages = 1024

// PruneEvents implements Retention.
func (s *sqlStore) PruneEvents(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = store.DefaultPruneBatch
	}
	var total int64
	for {
		var n int64
		// One batch per transaction: between two, the other writers
		// (an ingest, a pass) take their turn (writeSem queues them).
		err := s.write(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE id IN
				(SELECT id FROM events WHERE time < ? ORDER BY time, id LIMIT ?)`, timeToDB(before), batch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("%s prune events before %s: %w", s.name, before.UTC().Format(time.RFC3339), err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// ownTables are the tables whose rows belong to one work item, by their
// work_item column, children of work_items (Forget deletes them first).
var ownTables = []string{"deliveries", "session_reports", "ci_commits", "outbox", "transcripts"}

// Forget implements Retention.
func (s *sqlStore) Forget(ctx context.Context, k desired.Key) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var closed bool
		err := tx.QueryRowContext(ctx, `SELECT closed FROM work_items WHERE key = ?`, k.String()).Scan(&closed)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if !closed {
			return store.ErrNotClosed
		}
		for _, t := range ownTables {
			// The table names are this package's constants.
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE work_item = ?`, k.String()); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM work_items WHERE key = ?`, k.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("%s forget %s: %w", s.name, k, err)
	}
	// The status cache checks each row against its text, so an item made
	// again under k is read right; the entry of k goes at the next read of
	// all items, in this process and in every other (statusCache).
	return nil
}

// Vacuum implements Retention.
func (s *sqlStore) Vacuum(ctx context.Context) (int64, error) {
	var total int64
	for {
		var freed int64
		err := s.write(ctx, func(tx *sql.Tx) (err error) {
			freed, err = s.d.vacuum(ctx, tx, vacuumPages)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("%s vacuum: %w", s.name, err)
		}
		total += freed
		if freed == 0 {
			return total, nil
		}
	}
}

// vacuum gives back at most pages free pages of the file and returns how
// many bytes that was: PRAGMA incremental_vacuum
// (https://sqlite.org/pragma.html#pragma_incremental_vacuum), which frees
// nothing in a file not in auto_vacuum INCREMENTAL mode.
func (sqliteDialect) vacuum(ctx context.Context, tx *sql.Tx, pages int) (int64, error) {
	var free, size, before, after int64
	if err := tx.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return 0, err
	}
	if free == 0 {
		return 0, nil
	}
	if err := tx.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
		return 0, err
	}
	if err := tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&before); err != nil {
		return 0, err
	}
	// PRAGMA takes no bound parameters; pages is an int.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, pages)); err != nil {
		return 0, err
	}
	// The file shrinks by the free pages and by the pointer-map pages
	// (https://sqlite.org/fileformat.html) that no longer map any.
	if err := tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&after); err != nil {
		return 0, err
	}
	return (before - after) * size, nil
}

// vacuum does nothing: PostgreSQL's autovacuum reclaims the space of
// deleted rows for reuse ("Routine Vacuuming" in its manual), and a
// VACUUM FULL would lock the tables.
func (pgDialect) vacuum(context.Context, *sql.Tx, int) (int64, error) { return 0, nil }
