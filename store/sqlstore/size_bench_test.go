package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// Sizes of BenchmarkStoreSize: issue 14's question, the store's size at
// 10,000 work items and 1,000,000 journal rows.
const (
	sizeItems  = 10_000
	sizeEvents = 1_000_000
	// sizeDeliveries is each item's delivered events: its opening and
	// two comments, each a rendered prompt of a benchBody comment.
	sizeDeliveries = 3
)

// storeSizeEnv gates BenchmarkStoreSize, which writes a file of about a
// gigabyte and takes minutes: make bench leaves it out.
const storeSizeEnv = "LOOPD_BENCH_STORE_SIZE"

// BenchmarkStoreSize fills a SQLite store with sizeItems closed work items
// (each with a live agent's status, sizeDeliveries delivered events and
// two posted GitHub calls) and sizeEvents journal rows such as a pass
// writes, then reports the file's size (db-B), its parts (items-B: the
// items with their deliveries and calls; journal-B: the journal with its
// indexes), and what a prune of half the journal and a Vacuum give back:
// the size after (pruned-B), the prune's time per row (prune-ns/row) and
// the longest batch's (batch-ms, the longest the writer's lock is held).
// Set LOOPD_BENCH_STORE_SIZE=1 and run it once:
//
//	LOOPD_BENCH_STORE_SIZE=1 go test -run '^$' -bench StoreSize -benchtime 1x -timeout 30m ./desired
func BenchmarkStoreSize(b *testing.B) {
	if os.Getenv(storeSizeEnv) == "" {
		b.Skip("set " + storeSizeEnv + "=1: it writes about a gigabyte")
	}
	s, path := openStore(b)
	ctx := context.Background()
	fillItems(b, s, sizeItems)
	items := fileSize(b, s, path)
	fillJournal(b, s, sizeEvents)
	total := fileSize(b, s, path)

	b.ResetTimer()
	var (
		pruned  int64
		longest time.Duration
	)
	start := time.Now()
	// The rows are one a second from t0: each bound takes one batch more,
	// one transaction each, as PruneEvents' own batches are.
	for pruned < sizeEvents/2 {
		began := time.Now()
		n, err := s.PruneEvents(ctx, t0.Add(time.Duration(pruned+store.DefaultPruneBatch)*time.Second), store.DefaultPruneBatch+1)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatalf("nothing pruned at %d", pruned)
		}
		longest = max(longest, time.Since(began))
		pruned += n
	}
	took := time.Since(start)
	if _, err := s.Vacuum(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	after := fileSize(b, s, path)

	b.ReportMetric(float64(total), "db-B")
	b.ReportMetric(float64(items), "items-B")
	b.ReportMetric(float64(total-items), "journal-B")
	b.ReportMetric(float64(after), "pruned-B")
	b.ReportMetric(float64(took.Nanoseconds())/float64(pruned), "prune-ns/row")
	b.ReportMetric(float64(longest.Microseconds())/1000, "batch-ms")
}

// BenchmarkPruneBatch measures one batch of PruneEvents
// (DefaultPruneBatch rows) in a journal of 200,000 rows: how long one
// prune transaction holds the writer's lock (ms/batch).
func BenchmarkPruneBatch(b *testing.B) {
	s, _ := openStore(b)
	ctx := context.Background()
	const rows = 200_000
	fillJournal(b, s, rows)
	b.ResetTimer()
	var n int
	for b.Loop() {
		if n+store.DefaultPruneBatch > rows {
			b.StopTimer()
			fillJournal(b, s, rows)
			n = 0
			b.StartTimer()
		}
		n += store.DefaultPruneBatch
		got, err := s.PruneEvents(ctx, t0.Add(time.Duration(n)*time.Second), store.DefaultPruneBatch+1)
		if err != nil || got != store.DefaultPruneBatch {
			b.Fatalf("pruned %d: %v", got, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/batch")
}

// announceBody stands for an announcement's text (AnnounceComment): a
// few lines about the agent and how to steer it.
var announceBody = strings.Repeat("loopd runs an agent (claude-code) on this issue on host loopd-host. ", 5) + "\n"

// fileSize returns the file's size in bytes once the WAL is checkpointed
// into it.
func fileSize(tb testing.TB, s *SQLite, path string) int64 {
	tb.Helper()
	if _, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return info.Size()
}

// fillItems writes n closed work items, each with a live agent's status
// (fillBacklog's), sizeDeliveries delivered deliveries of a benchBody
// comment and two posted calls (an announcement and a reaction), in one
// transaction.
func fillItems(tb testing.TB, s *SQLite, n int) {
	tb.Helper()
	ctx := context.Background()
	body := strings.Repeat("The build fails on the arm64 runner; see the log above. ", benchBody/56) + "\n"
	closed := true
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i := range n {
			k := desired.Key{Owner: "acme", Repo: "repo" + fmt.Sprint(i%10), Number: 1 + i}
			var ids []string
			for d := range sizeDeliveries {
				id := fmt.Sprintf("%08x-1d2e-11f0-8a4b-%012x", i, d)
				prompt := desired.EventHeader("issue_comment", "created", k.String(), "octocat", id) + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)
				in := store.Ingest{DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w/" + k.Repo,
					Delivery: &desired.Delivery{Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: prompt,
						ReceivedAt: t0.Add(time.Duration(i) * time.Second), Source: desired.Source{Kind: desired.SourceIssueComment, ID: int64(9e9) + int64(i)}}}
				var res store.IngestResult
				if err := s.ingest(ctx, tx, in, &res); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			var res store.IngestResult
			if err := s.ingest(ctx, tx, store.Ingest{DeliveryID: fmt.Sprintf("close-%d", i), Key: k, Closed: &closed, StateAt: t0.Add(time.Hour)}, &res); err != nil {
				return err
			}
			st := desired.Status{Phase: desired.PhaseStopped, Reason: "closed",
				SessionState: desired.SessionState{HarnessSessionID: "7f3c2a10-5b1e-4c7d-9f00-" + fmt.Sprintf("%012x", i),
					ConfirmedSessionID: "7f3c2a10-5b1e-4c7d-9f00-" + fmt.Sprintf("%012x", i), Session: desired.SessionName(k),
					SpawnMode: desired.SpawnResume, SpawnedAt: t0},
				RestartHistory: desired.RestartHistory{LastExitReason: "closed"},
				WorkspaceState: desired.WorkspaceState{Workdir: "/w/" + k.Repo + "/issue-" + fmt.Sprint(i),
					WorkdirRendered: "/w/" + k.Repo + "/issue-" + fmt.Sprint(i)},
				AttentionState: desired.AttentionState{Announced: true}}
			text, err := json.Marshal(st)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE work_items SET status = ? WHERE key = ?`, string(text), k.String()); err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'delivered', delivered_at = ? WHERE id = ?`, t0.UnixNano(), id); err != nil {
					return err
				}
			}
			for _, c := range []desired.Call{
				{Kind: desired.CallAnnounce, Body: announceBody + "<!-- loopd:announce " + k.String() + " -->", Marker: "<!-- loopd:announce " + k.String() + " -->"},
				{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceIssueComment, ID: int64(9e9) + int64(i)}},
			} {
				if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (work_item, kind, body, marker, target_kind, target_id, state, attempts,
					next_attempt, created_at, done_at, http_status, error, url, generation) VALUES (?, ?, ?, ?, ?, ?, 'posted', 1, NULL, ?, ?, 201, '', ?, 0)`,
					k.String(), string(c.Kind), c.Body, c.Marker, string(c.Target.Kind), c.Target.ID, t0.UnixNano(), t0.UnixNano(),
					"https://github.com/"+k.Owner+"/"+k.Repo+"/issues/"+fmt.Sprint(k.Number)+"#issuecomment-"+fmt.Sprint(9e9+i)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// fillJournal appends n journal rows, one a second from t0, such as the
// passes write (dispatch.delivered with its keys and a reconcile id),
// over 1,000 items, in one transaction.
func fillJournal(tb testing.TB, s *SQLite, n int) {
	tb.Helper()
	ctx := context.Background()
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i := range n {
			k := desired.Key{Owner: "acme", Repo: "repo" + fmt.Sprint(i%10), Number: 1 + i%1000}
			e := journal.Event{Time: t0.Add(time.Duration(i) * time.Second), Name: journal.DispatchDelivered, WorkItem: k.String(),
				Attrs: map[string]string{journal.KeySession: desired.SessionName(k), journal.KeyDelivery: fmt.Sprintf("%08x-1d2e-11f0-8a4b-%012x", i, i),
					journal.KeyVia: "transcript", journal.KeyHarnessSessionID: "7f3c2a10-5b1e-4c7d-9f00-" + fmt.Sprintf("%012x", i%1000),
					journal.KeyReconcileID: fmt.Sprintf("%016x", i/10)}}
			if err := appendEvent(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}
