package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopd/loopd/store"
)

// maxBatch bounds the writes one group commit holds, so that one batch's
// transaction, and the wait of its first write, stay short.
const maxBatch = 256

// committer group-commits this process's ingests and journal rows: the
// writes that wait at the same time share one transaction, and so one
// fsync (sqliteParams' synchronous=FULL; PostgreSQL's WAL flush at commit),
// and one wait for the writers' lock, instead of queueing for one each.
// Each write still returns only once the commit that holds it is done.
type committer struct {
	reqs chan *batchReq // unbuffered: a write queued here can still give up
	// Counts the tests read: writes blocked on reqs, writes the
	// committer has taken, batches committed.
	waiting, taken, commits atomic.Int64
	closing                 chan struct{}
	done                    chan struct{}
	once                    sync.Once
}

// batchReq is one write waiting for a group commit.
type batchReq struct {
	ctx  context.Context
	fn   func(ctx context.Context, tx *sql.Tx) error
	done chan error // buffered: the committer never waits for the writer
}

// startCommitter starts s's committer goroutine; stopCommitter ends it.
func (s *sqlStore) startCommitter() {
	s.group = &committer{reqs: make(chan *batchReq), closing: make(chan struct{}), done: make(chan struct{})}
	go s.commitLoop()
}

// stopCommitter lets the batch in progress finish, refuses the writes
// still waiting (ErrClosed) and ends the committer. It may be called more
// than once.
func (s *sqlStore) stopCommitter() {
	s.group.once.Do(func() { close(s.group.closing) })
	<-s.group.done
}

// batched runs fn in a write transaction shared with every other batched
// write waiting at the same time (group commit), in a savepoint of its
// own: an error of fn rolls back fn's writes alone and is returned to this
// caller alone, while a transaction that cannot begin or commit fails every
// write of the batch. It returns once the commit that holds fn's writes is
// done, or fails. fn gets a context that carries ctx's values but is never
// cancelled: the interrupt of a cancelled statement (SQLite's, or
// PostgreSQL's cancel request) would roll back the whole shared
// transaction. A write whose ctx ends before its turn is not run; the wait
// for another writer's lock (process or host) is bounded by the earliest
// deadline of the batch (busyTimeout without one). When ctx ends while its
// batch is still waiting for this process's own writes (writeSem) or
// running, batched returns ctx's cause at once: its caller answers within
// its deadline, and fn, if it had started, may still commit (an ingest is
// idempotent by delivery id, so GitHub's redelivery finds it stored).
func (s *sqlStore) batched(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	r := &batchReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.group.waiting.Add(1)
	select {
	case s.group.reqs <- r:
		s.group.waiting.Add(-1)
	case <-s.group.closing:
		s.group.waiting.Add(-1)
		return store.ErrClosed
	case <-ctx.Done():
		s.group.waiting.Add(-1)
		return context.Cause(ctx)
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// commitLoop takes the writes that wait, up to maxBatch of them, commits
// them as one batch, and starts over. It never waits to gather a batch: the
// writes that arrive while one commits make the next.
func (s *sqlStore) commitLoop() {
	g := s.group
	defer close(g.done)
	batch := make([]*batchReq, 0, maxBatch)
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		case <-g.closing:
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		g.taken.Add(int64(len(batch)))
		s.commitBatch(batch)
		clear(batch)
	}
}

// commitBatch runs batch in one write transaction and answers each write.
func (s *sqlStore) commitBatch(batch []*batchReq) {
	busy := busyTimeout
	for _, r := range batch {
		busy = min(busy, busyFor(r.ctx))
	}
	errs := make([]error, len(batch))
	s.writeSem <- struct{}{}
	err := s.d.writeTx(context.Background(), s.db, busy, func(tx *sql.Tx) error {
		for i, r := range batch {
			// A write whose context ended before its turn (while the
			// batch waited for the lock) is not run.
			if errs[i] = context.Cause(r.ctx); errs[i] != nil {
				continue
			}
			if len(batch) == 1 {
				// The transaction is this write's alone: its failure
				// rolls back the whole, with no savepoint's two round
				// trips to a PostgreSQL server.
				errs[i] = r.fn(context.WithoutCancel(r.ctx), tx)
				return errs[i]
			}
			if _, err := tx.Exec(`SAVEPOINT batched`); err != nil {
				return err
			}
			if errs[i] = r.fn(context.WithoutCancel(r.ctx), tx); errs[i] != nil {
				// A failed ROLLBACK TO means the database already rolled the
				// whole transaction back (a full disk, an I/O error).
				if _, err := tx.Exec(`ROLLBACK TO batched`); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(`RELEASE batched`); err != nil {
				return err
			}
		}
		return nil
	})
	<-s.writeSem
	if err == nil {
		s.group.commits.Add(1)
	}
	for i, r := range batch {
		if errs[i] == nil {
			errs[i] = err
		}
		r.done <- errs[i]
	}
}

// busyFor is how long a write under ctx may wait for another process's
// write lock: busyTimeout, or less when ctx's deadline is sooner.
func busyFor(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(busyTimeout, max(time.Until(dl), 0))
	}
	return busyTimeout
}
