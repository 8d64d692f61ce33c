package sqlstore_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
	"github.com/loopd/loopd/store/storetest"
)

// TestSQLiteConformance runs the Store contract against the SQLite store,
// on a new file for each case (in a directory OpenSQLite must create).
func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, sqliteBackend)
}

// TestSQLiteFleet runs the Fleet contract against the SQLite store, which
// is no Listener.
func TestSQLiteFleet(t *testing.T) {
	storetest.RunFleet(t, sqliteBackend)
}

// sqliteBackend opens handles on a new file for each case.
var sqliteBackend = storetest.Backend{
	New: func(t *testing.T) func(*testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "state", "loopd.db")
		return func(t *testing.T) store.Store {
			s, err := sqlstore.OpenSQLite(t.Context(), path)
			require.NoError(t, err)
			return s
		}
	},
	EditStatus: func(t *testing.T, s store.Store, k desired.Key, text string) {
		require.NoError(t, sqlstore.EditStatus(s, k, text))
	},
	Listens: true,
}
