package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// Sizes of BenchmarkRecords: issue 12's goal is a pass at 1,000 items with
// a 10,000-event backlog.
const (
	benchItems   = 1000
	benchBacklog = 10000
	// benchBody is a comment's length in bytes: a few paragraphs.
	benchBody = 2 << 10
)

// fillBacklog writes items work items to s, each with a status as a live
// agent's looks after some history, and backlog pending deliveries spread
// evenly over them, each a rendered prompt of a benchBody comment, through
// Ingest's own transaction (one commit for all, not one each).
func fillBacklog(tb testing.TB, s *SQLite, items, backlog int) {
	tb.Helper()
	ctx := context.Background()
	body := strings.Repeat("The build fails on the arm64 runner; see the log above. ", benchBody/56) + "\n"
	exit := 1
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i := range backlog {
			k := desired.Key{Owner: "acme", Repo: "repo" + fmt.Sprint(i%items%10), Number: 1 + i%items}
			id := fmt.Sprintf("%08x-1d2e-11f0-8a4b-%012x", i, i)
			prompt := desired.EventHeader("issue_comment", "created", k.String(), "octocat", id) + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)
			in := store.Ingest{DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w/" + k.Repo,
				Delivery: &desired.Delivery{Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: prompt,
					ReceivedAt: t0.Add(time.Duration(i) * time.Second), Source: desired.Source{Kind: desired.SourceIssueComment, ID: int64(9e9) + int64(i)}}}
			var res store.IngestResult
			if err := s.ingest(ctx, tx, in, &res); err != nil {
				return err
			}
		}
		for n := range items {
			k := desired.Key{Owner: "acme", Repo: "repo" + fmt.Sprint(n%10), Number: 1 + n}
			st := desired.Status{Phase: desired.PhaseRunning, Reason: "delivered",
				SessionState: desired.SessionState{HarnessSessionID: "7f3c2a10-5b1e-4c7d-9f00-" + fmt.Sprintf("%012x", n),
					ConfirmedSessionID: "7f3c2a10-5b1e-4c7d-9f00-" + fmt.Sprintf("%012x", n), Session: desired.SessionName(k),
					PaneID: "%" + fmt.Sprint(n), SpawnMode: desired.SpawnResume, SpawnedAt: t0, ProbeDeadline: t0.Add(5 * time.Second),
					HarnessPID: 40000 + n, HarnessStart: 123456789},
				RestartHistory: desired.RestartHistory{LastExitStatus: &exit, LastExitReason: "pane_dead", LastExitAt: t0.Add(-time.Minute),
					RetiredSessionIDs: []string{"0b1e4c7d-9f00-7f3c-2a10-5b1e4c7d9f00"}},
				WorkspaceState: desired.WorkspaceState{Workdir: "/w/" + k.Repo + "/issue-" + fmt.Sprint(n),
					WorkdirRendered: "/w/" + k.Repo + "/issue-" + fmt.Sprint(n)},
				AttentionState: desired.AttentionState{Announced: true},
				DeliveryState:  desired.DeliveryState{DeliveredAt: []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)}}}
			text, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE work_items SET status = ? WHERE key = ?`, string(text), k.String()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkRecords measures what a reconcile pass reads of the store
// (Records) at 1,000 items, each with a live agent's status, and a backlog
// of 10,000 pending events of about 2 KiB each: its time, its allocations,
// and the heap the returned records hold (held-B: the heap in use after a
// collection, with the records, less the heap in use without them).
func BenchmarkRecords(b *testing.B) {
	s, _ := openStore(b)
	fillBacklog(b, s, benchItems, benchBacklog)
	ctx := context.Background()
	recs, err := s.Records(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if len(recs) != benchItems {
		b.Fatalf("%d records, want %d", len(recs), benchItems)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Records(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// After the loop: b.Loop's reset of the timer drops metrics reported
	// before it.
	b.ReportMetric(float64(heldBytes(b, func() any { r, _ := s.Records(ctx); return r })), "held-B")
}

// heldBytes returns how much more heap is in use after a collection while
// what load returns is held than after one without it.
func heldBytes(b *testing.B, load func() any) uint64 {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := load()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapInuse < before.HeapInuse {
		return 0
	}
	return after.HeapInuse - before.HeapInuse
}
