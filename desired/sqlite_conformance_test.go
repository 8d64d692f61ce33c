package desired_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/desired/storetest"
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
	New: func(t *testing.T) func(*testing.T) desired.Store {
		path := filepath.Join(t.TempDir(), "state", "loopd.db")
		return func(t *testing.T) desired.Store {
			s, err := desired.OpenSQLite(t.Context(), path)
			require.NoError(t, err)
			return s
		}
	},
	EditStatus: func(t *testing.T, s desired.Store, k desired.Key, text string) {
		require.NoError(t, desired.EditStatus(s, k, text))
	},
}
