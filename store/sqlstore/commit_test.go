package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/store"
)

// holdWriteLock takes the write lock of the store file at path from
// another connection, as another process would, and returns its release.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), "ROLLBACK")
			assert.NoError(t, err)
			assert.NoError(t, conn.Close())
		})
	}
	t.Cleanup(release)
	return release
}

// waitFor polls cond until it holds; it fails the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queueBatch starts one Ingest of in[0] and waits until the committer has
// taken it and is waiting for the write lock held elsewhere, then starts
// the others and waits until they all wait for the committer: they make
// the next batch. It returns the results and errors, filled once done is
// closed.
func queueBatch(t *testing.T, s *SQLite, in []store.Ingest) (res []store.IngestResult, errs []error, done chan struct{}) {
	t.Helper()
	res, errs, done = make([]store.IngestResult, len(in)), make([]error, len(in)), make(chan struct{})
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Go(func() { res[i], errs[i] = s.Ingest(context.Background(), in[i]) })
	}
	run(0)
	waitFor(t, "the first write taken", func() bool { return Taken(s) == 1 })
	for i := 1; i < len(in); i++ {
		run(i)
	}
	waitFor(t, "the others queued", func() bool { return Waiting(s) == int64(len(in)-1) })
	go func() { wg.Wait(); close(done) }()
	return res, errs, done
}

// TestConcurrentIngestsShareACommit: ingests that wait at the same time
// are committed together: one commit for the write that waited for the
// lock, one for the fifteen that queued behind it. Each is stored once: a
// delivery id sent twice within the batch is a duplicate the second time,
// and a write that fails is rolled back alone.
func TestConcurrentIngestsShareACommit(t *testing.T) {
	s, path := openStore(t)
	_, err := s.db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON deliveries WHEN NEW.id = 'bad'
		BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	require.NoError(t, err)
	release := holdWriteLock(t, path)
	in := []store.Ingest{comment(keyAPI, "first", t0)}
	for i := range 13 {
		in = append(in, comment(keyAPI, fmt.Sprintf("d%d", i), t0))
	}
	in = append(in, comment(keyAPI, "d0", t0), comment(keyAPI, "bad", t0))

	res, errs, done := queueBatch(t, s, in)
	release()
	<-done

	assert.Equal(t, int64(2), Commits(s), "one commit for the first write, one for the 15 queued behind it")
	duplicates := 0
	for i := range in[:15] {
		require.NoError(t, errs[i], in[i].DeliveryID)
		if res[i].Duplicate {
			duplicates++
		}
	}
	assert.Equal(t, 1, duplicates, "d0 sent twice in one batch is stored once")
	assert.ErrorContains(t, errs[15], "refused")
	r, err := s.Get(context.Background(), keyAPI)
	require.NoError(t, err)
	assert.Len(t, r.Pending, 14, "first, d0…d12; not bad")
}

// TestFailedGroupCommitFailsEveryWrite: when the shared transaction is
// lost (here a trigger rolls the whole of it back, as SQLite does on a
// full disk), every write of the batch fails, those already run included,
// and nothing of the batch is stored; the next batch is not affected.
func TestFailedGroupCommitFailsEveryWrite(t *testing.T) {
	s, path := openStore(t)
	_, err := s.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON deliveries WHEN NEW.id = 'poison'
		BEGIN SELECT RAISE(ROLLBACK, 'transaction lost'); END`)
	require.NoError(t, err)
	release := holdWriteLock(t, path)
	in := []store.Ingest{comment(keyAPI, "first", t0), comment(keyAPI, "a", t0), comment(keyAPI, "poison", t0), comment(keyAPI, "b", t0)}

	_, errs, done := queueBatch(t, s, in)
	release()
	<-done

	require.NoError(t, errs[0])
	for i, in := range in[1:] {
		assert.Error(t, errs[i+1], in.DeliveryID)
	}
	r, err := s.Get(context.Background(), keyAPI)
	require.NoError(t, err)
	require.Len(t, r.Pending, 1)
	assert.Equal(t, "first", r.Pending[0].ID)

	_, err = s.Ingest(context.Background(), comment(keyAPI, "a", t0))
	require.NoError(t, err, "the next batch commits")
}

// TestIngestAfterCloseFails: a write after Close fails with ErrClosed,
// and Close may be called twice.
func TestIngestAfterCloseFails(t *testing.T) {
	s, _ := openStore(t)
	require.NoError(t, s.Close())
	_, err := s.Ingest(context.Background(), comment(keyAPI, "d1", t0))
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.NoError(t, s.Close())
}

// TestIngestTakenIntoABatchAnswersByItsDeadline: an ingest the committer
// has taken, whose batch waits behind this process's own write in flight
// (the reconciler's, which waits out its busy timeout on another
// process's lock), returns its deadline's error at that deadline, not
// when the batch is done: the webhook's answer is due to GitHub before.
func TestIngestTakenIntoABatchAnswersByItsDeadline(t *testing.T) {
	s, _ := openStore(t)
	s.writeSem <- struct{}{} // another write of this process, in flight
	release := sync.OnceFunc(func() { <-s.writeSem })
	t.Cleanup(release)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Ingest(ctx, comment(keyAPI, "late", t0))
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, int64(1), Taken(s), "the committer had taken it")
	assert.Less(t, took, 5*time.Second, "answered at its deadline, not after the write in flight")

	release()
	_, err = s.Ingest(context.Background(), comment(keyAPI, "late", t0))
	require.NoError(t, err, "the delivery is taken again once the store is free")
}
