package webhook

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/store/sqlstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// BenchmarkIngestHTTPPostgres is BenchmarkIngestHTTP over the PostgreSQL
// store, on a database of the throwaway cluster (pgtest), whose files are
// in the same temp dir as the SQLite run's: 32 signed deliveries in flight
// over real HTTP, each answered once its transaction committed. Its
// ratio-to-fdatasync is against the fdatasync rate of that temp dir,
// measured in the same run.
func BenchmarkIngestHTTPPostgres(b *testing.B) {
	url := pgtest.URL(b)
	syncs := fdatasyncRate(b, os.TempDir(), 200)
	store, err := sqlstore.OpenPostgres(context.Background(), url, filepath.Join(b.TempDir(), "loopd.lock"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	benchIngestHTTP(b, store, syncs)
}
