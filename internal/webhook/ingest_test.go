package webhook

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// storeEnv is newEnv over a store whose file the test can also open, as
// another process would.
func storeEnv(t *testing.T, opts ...envOption) (*env, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loopd.db")
	store, err := desired.OpenSQLite(context.Background(), path)
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
