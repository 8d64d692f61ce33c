package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// EditStatus overwrites the status column of k with text, as an operator
// editing the file by hand would (storetest.Backend.EditStatus).
func EditStatus(st store.Store, k desired.Key, text string) error {
	s := coreOf(st)
	res, err := s.db.ExecContext(context.Background(), `UPDATE work_items SET status = ? WHERE key = ?`, text, k.String())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("edit status of %s: %d rows, %v", k, n, err)
	}
	return nil
}

// Commits returns how many group commits s has made (committer.commits).
func Commits(s *SQLite) int64 { return s.group.commits.Load() }

// Waiting returns how many writes wait for s's committer to take them.
func Waiting(s *SQLite) int64 { return s.group.waiting.Load() }

// Taken returns how many writes s's committer has taken.
func Taken(s *SQLite) int64 { return s.group.taken.Load() }

// coreOf returns the SQL core of a SQLite or Postgres store.
func coreOf(st store.Store) *sqlStore {
	switch s := st.(type) {
	case *SQLite:
		return s.sqlStore
	case *Postgres:
		return s.sqlStore
	}
	panic(fmt.Sprintf("%T is not a store of this package", st))
}

// HoldWrite runs a write of the Postgres store st that takes the writers'
// lock and then waits for release, as a writer frozen inside its
// transaction would; it returns the write's error.
func HoldWrite(st *Postgres, release <-chan struct{}) error {
	return st.write(context.Background(), func(*sql.Tx) error {
		<-release
		return nil
	})
}
