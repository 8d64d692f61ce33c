package store

import (
	"context"
	"errors"
	"time"

	"github.com/loopd/loopd/desired"
)

// ErrNotClosed means the work item is open: Forget removes closed items
// only.
var ErrNotClosed = errors.New("work item is not closed")

// DefaultPruneBatch is how many journal rows one transaction of
// PruneEvents deletes at most, so that an ingest waits for one batch,
// never for a whole prune: 27 to 44 ms on SQLite on a loaded 2-vCPU box
// (BenchmarkPruneBatch), most of it the commit's fsync.
const DefaultPruneBatch = 1000

// Retention is what a Store forgets, and how it gives the space back.
type Retention interface {
	// PruneEvents deletes the journal rows older than before (a row with
	// no time is kept), at most batch of them per write transaction
	// (DefaultPruneBatch when batch is not positive), so that no
	// transaction holds the writer's lock for long. It returns how many
	// rows it deleted, those of the batches committed before an error
	// included.
	PruneEvents(ctx context.Context, before time.Time, batch int) (int64, error)
	// Forget removes the closed work item k and every row that is its
	// own, in one transaction: the item (spec, status, lease), its
	// deliveries (pending or not: their ids are no longer claimed), its
	// session reports, the CI of its commits, outbox calls and stored
	// transcripts.
	// Its journal rows stay, until PruneEvents ages them out. The error
	// wraps ErrNotFound for an unknown key and ErrNotClosed for an open
	// item; either way nothing is removed.
	Forget(ctx context.Context, k desired.Key) error
	// Vacuum gives the free space of the store back to the file system,
	// in bounded steps, and returns how many bytes it gave back. SQLite
	// runs PRAGMA incremental_vacuum (the file is in auto_vacuum
	// INCREMENTAL mode, schema version 10), vacuumPages per write
	// transaction; PostgreSQL's autovacuum does this work itself, so its
	// Vacuum does nothing and returns 0.
	Vacuum(ctx context.Context) (int64, error)
}
