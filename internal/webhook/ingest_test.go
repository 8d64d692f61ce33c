package webhook

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store/sqlstore"
)

// storeEnv is newEnv over a store whose file the test can also open, as
// another process would.
func storeEnv(t *testing.T, opts ...envOption) (*env, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loopd.db")
	store, err := sqlstore.OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	e := newEnv(t, append([]envOption{func(o *Options) {
		o.Store = store
		o.Recorder = journal.NewRecorder(o.Log, store, o.Now)
	}}, opts...)...)
	e.store = store
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return e, db
}

// TestAcceptedRowCommitsWithTheDelivery: the delivery.accepted row is
// written in the delivery's own transaction. When the row cannot be
// written, the delivery is not stored either and GitHub gets 503 (so it
// can be redelivered), never a 202 for a delivery the journal does not
// show; once the journal takes rows, the redelivery stores both.
func TestAcceptedRowCommitsWithTheDelivery(t *testing.T) {
	e, db := storeEnv(t)
	_, err := db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.name = 'delivery.accepted'
		BEGIN SELECT RAISE(ABORT, 'journal refused'); END`)
	require.NoError(t, err)
	body := fixture(t, "issue_comment.created.1.json")

	code, _ := e.replay(t, "issue_comment", "d-1", body)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Empty(t, e.records(t), "no delivery without its journal row")
	assert.Equal(t, reasonStoreFailed, e.onlyRejection(t)["reason"])
	assert.Empty(t, e.logged(t, journal.DeliveryAccepted), "nothing is logged as accepted")

	_, err = db.Exec(`DROP TRIGGER refuse`)
	require.NoError(t, err)
	code, _ = e.replay(t, "issue_comment", "d-1", body)
	assert.Equal(t, http.StatusAccepted, code)
	recs := e.records(t)
	require.Len(t, recs, 1)
	assert.Len(t, recs[0].Pending, 1)
	var accepted []journal.Event
	for _, ev := range e.events(t) {
		if ev.Name == journal.DeliveryAccepted {
			accepted = append(accepted, ev)
		}
	}
	require.Len(t, accepted, 1)
	assert.Equal(t, "d-1", accepted[0].Attrs["delivery"])
	assert.Equal(t, "Codertocat/Hello-World#1", accepted[0].WorkItem)
	assert.Len(t, e.logged(t, journal.DeliveryAccepted), 1)
}

// TestConcurrentDeliveriesAnsweredAfterTheirCommit: 32 clients send 64
// deliveries at once, each id twice (GitHub's redelivery racing the
// original). Each id is stored once, with one delivery.accepted row and
// one delivery.duplicate row; and when a client gets its 2xx, another
// connection to the file already sees the delivery and its row: no
// answer goes out before the commit that holds it.
func TestConcurrentDeliveriesAnsweredAfterTheirCommit(t *testing.T) {
	e, db := storeEnv(t)
	const ids, clients = 32, 32
	bodies := make([][]byte, ids) // a comment of its own per id
	for i := range bodies {
		bodies[i] = derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "please look") })
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		codes    = map[string][]int{}
		problems []string
		wg       sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= 2*ids {
					return
				}
				id := fmt.Sprintf("d-%d", n%ids)
				resp, err := Replay(context.Background(), e.srv.Client(), e.srv.URL, testSecret, "issue_comment", id, bodies[n%ids])
				if err != nil {
					mu.Lock()
					problems = append(problems, id+": "+err.Error())
					mu.Unlock()
					continue
				}
				resp.Body.Close()
				var stored, rows int
				err = db.QueryRow(`SELECT (SELECT count(*) FROM deliveries WHERE id = ?1),
					(SELECT count(*) FROM events WHERE json_extract(attrs, '$.delivery') = ?1)`, id).Scan(&stored, &rows)
				mu.Lock()
				codes[id] = append(codes[id], resp.StatusCode)
				if err != nil || stored != 1 || rows < 1 {
					problems = append(problems, fmt.Sprintf("%s answered %d: %d stored, %d rows, %v", id, resp.StatusCode, stored, rows, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	assert.Empty(t, problems)
	require.Len(t, codes, ids)
	for id, c := range codes {
		assert.ElementsMatch(t, []int{http.StatusAccepted, http.StatusOK}, c, id)
	}
	recs := e.records(t)
	require.Len(t, recs, 1)
	assert.Len(t, recs[0].Pending, ids)
	names := map[journal.Name]int{}
	for _, ev := range e.events(t) {
		names[ev.Name]++
	}
	assert.Equal(t, map[journal.Name]int{journal.DeliveryAccepted: ids, journal.DeliveryDuplicate: ids}, names)
}
