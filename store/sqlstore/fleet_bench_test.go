package sqlstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// benchFleet opens a new store of each backend for b.
var benchFleet = []struct {
	name string
	open func(b *testing.B) interface {
		store.Store
		store.Fleet
	}
}{
	{"sqlite", func(b *testing.B) interface {
		store.Store
		store.Fleet
	} {
		s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(b.TempDir(), "loopd.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) interface {
		store.Store
		store.Fleet
	} {
		s, err := sqlstore.OpenPostgres(context.Background(), pgtest.URL(b), filepath.Join(b.TempDir(), "loopd.lock"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
}

// fleetItems is how many items the fleet benchmarks' host holds.
const fleetItems = 1000

// leased makes fleetItems open items, each with one pending delivery, and
// leases them all to host "a" (32 ingests at once, as GitHub sends them).
func leased(b *testing.B, s interface {
	store.Store
	store.Fleet
}) desired.Host {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, fleetItems)
	sem := make(chan struct{}, 32)
	for n := 1; n <= fleetItems; n++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			k := desired.Key{Owner: "acme", Repo: "api", Number: n}
			_, err := s.Ingest(ctx, store.Ingest{DeliveryID: fmt.Sprintf("d-%d", n), Key: k, Kind: desired.KindIssue,
				Harness: "claude-code", Cwd: "/w/api", Delivery: &desired.Delivery{Event: "issue_comment", Action: "created",
					Prompt: "event=issue_comment\n" + strings.Repeat("x", 1<<10)}})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	h := desired.Host{Name: "a", Capacity: 0, LeaseTTL: 15 * time.Second}
	if err := s.Heartbeat(ctx, h); err != nil {
		b.Fatal(err)
	}
	if changes, err := s.Assign(ctx); err != nil || len(changes) != fleetItems {
		b.Fatalf("assign: %d changes, %v", len(changes), err)
	}
	return h
}

// BenchmarkHeartbeat is the cost of one lease renewal of a host holding
// 1,000 items: one Heartbeat, which renews them all (a lease lasts as long
// as its owner's heartbeats).
func BenchmarkHeartbeat(b *testing.B) {
	for _, be := range benchFleet {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			h := leased(b, s)
			for b.Loop() {
				if err := s.Heartbeat(context.Background(), h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAssignIdle is what each pass's Assign costs when nothing moves:
// 1,000 items all held by a live host.
func BenchmarkAssignIdle(b *testing.B) {
	for _, be := range benchFleet {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			leased(b, s)
			for b.Loop() {
				if changes, err := s.Assign(context.Background()); err != nil || len(changes) != 0 {
					b.Fatalf("assign: %d changes, %v", len(changes), err)
				}
			}
		})
	}
}

// BenchmarkBarePostgres32 is PostgreSQL's reference for the ingest
// benchmarks, as BenchmarkBareSQLite32 is SQLite's: the throwaway
// cluster's default durability (fsync on, synchronous_commit on), 32 rows
// of 1 KiB a commit from one pgx connection, nothing of loopd's around it.
// It reports rows/s.
func BenchmarkBarePostgres32(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE rows (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 1<<10)
	for b.Loop() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for range 32 {
			if _, err := tx.Exec(ctx, `INSERT INTO rows (body) VALUES ($1)`, body); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "rows/s")
}
