package desired_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/desired/storetest"
	"github.com/loopd/loopd/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// postgresBackend opens handles on a new database of the test binary's
// throwaway cluster (pgtest), each with the same host-local lock file.
var postgresBackend = storetest.Backend{
	New: func(t *testing.T) func(*testing.T) desired.Store {
		url, lock := pgtest.URL(t), filepath.Join(t.TempDir(), "loopd.lock")
		return func(t *testing.T) desired.Store {
			s, err := desired.OpenPostgres(t.Context(), url, lock)
			require.NoError(t, err)
			return s
		}
	},
	EditStatus: func(t *testing.T, s desired.Store, k desired.Key, text string) {
		require.NoError(t, desired.EditStatus(s, k, text))
	},
}

// TestPostgresConformance runs the Store contract against the PostgreSQL
// store, on a new database for each case.
func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, postgresBackend)
}

// TestPostgresFleet runs the Fleet contract against the PostgreSQL store,
// a Listener.
func TestPostgresFleet(t *testing.T) {
	b := postgresBackend
	b.Listens = true
	storetest.RunFleet(t, b)
}
