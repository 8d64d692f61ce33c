package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// ingestConcurrency is the number of deliveries BenchmarkIngestHTTP keeps
// in flight at once (issue 12's goal is stated at 32).
const ingestConcurrency = 32

// BenchmarkIngestHTTP measures signed, durable ingest over real HTTP: 32
// clients POST the 14 KB issue_comment fixture, signed, each under its own
// X-GitHub-Delivery, to the real handler over a real SQLite file, and each
// waits for its 202 (the store has committed the delivery and its journal
// row). It reports deliveries/s, the p99 latency of one request, the
// deliveries lost (accepted but not stored: counted in the store after the
// run, must be 0), and the ratio of deliveries/s to the raw fdatasync rate
// of the same directory, measured in the same run (fdatasyncRate).
func BenchmarkIngestHTTP(b *testing.B) {
	dir := b.TempDir()
	syncs := fdatasyncRate(b, dir, 200)
	store, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, fmt.Sprintf("loopd-%d.db", b.N)))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	benchIngestHTTP(b, store, syncs)
}

// benchIngestHTTP is BenchmarkIngestHTTP's run over store; syncs is the
// fdatasync rate its ratio is reported against.
func benchIngestHTTP(b *testing.B, store store.Store, syncs float64) {
	// A comment of its own per delivery: the same body under another id
	// would be a replay (store.Ingest.Identity).
	bodies, sigs := comments(b, b.N)
	log := slog.New(slog.DiscardHandler)
	cfg := defaultConfig()
	srv := httptest.NewServer(New(Options{
		Secret:   testSecret,
		Config:   func() schema.GHWebhook { return cfg },
		Store:    store,
		Recorder: journal.NewRecorder(log, store, time.Now),
		Log:      log,
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: ingestConcurrency}}
	defer client.CloseIdleConnections()

	var (
		next      atomic.Int64
		latencies = make([]time.Duration, b.N)
		failed    atomic.Int64
		wg        sync.WaitGroup
	)
	b.ResetTimer()
	start := time.Now()
	for range ingestConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				code := post(client, srv.URL, sigs[i], fmt.Sprintf("bench-%d", i), bodies[i])
				latencies[i] = time.Since(t0)
				if code != http.StatusAccepted {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d deliveries not answered 202", n, b.N)
	}
	r, err := store.Get(context.Background(), desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 1})
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "deliveries/s")
	b.ReportMetric(float64(latencies[(len(latencies)*99)/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N-len(r.Pending)), "lost")
	b.ReportMetric(rate/syncs, "ratio-to-fdatasync")
}

// post sends one signed delivery and returns the status code, or 0 when
// the request failed.
func post(client *http.Client, url, sig, id string, body []byte) int {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkFdatasync is the disk's reference for BenchmarkIngestHTTP: one
// 4 KiB write and one fdatasync(2) per op, to a file in a test temp dir
// (the directory the store's file is in). A group commit cannot ack more
// commits a second than this; its deliveries/s over this is the ratio
// BenchmarkIngestHTTP reports.
func BenchmarkFdatasync(b *testing.B) {
	f, buf := syncFile(b, b.TempDir())
	for b.Loop() {
		writeSync(b, f, buf)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fdatasync/s")
}

// fdatasyncRate measures n ops of BenchmarkFdatasync in dir and returns
// their rate per second, for a ratio measured in the same run.
func fdatasyncRate(b *testing.B, dir string, n int) float64 {
	f, buf := syncFile(b, dir)
	start := time.Now()
	for range n {
		writeSync(b, f, buf)
	}
	return float64(n) / time.Since(start).Seconds()
}

// syncFile creates a file in dir, closed at the end of b, and a 4 KiB
// buffer to write to it.
func syncFile(b *testing.B, dir string) (*os.File, []byte) {
	f, err := os.CreateTemp(dir, "sync")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f, make([]byte, 4<<10)
}

// writeSync appends buf to f and waits for fdatasync(2).
func writeSync(b *testing.B, f *os.File, buf []byte) {
	if _, err := f.Write(buf); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClassify measures the decoding and classification of one 14 KB
// issue_comment payload, the work the handler does between the signature
// check and the store.
func BenchmarkClassify(b *testing.B) {
	body, err := os.ReadFile(filepath.Join(fixturesDir, "issue_comment.created.1.json"))
	if err != nil {
		b.Fatal(err)
	}
	classify := classifiers["issue_comment"]
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p, err := decodePayload(body)
		if err == nil {
			_, _, err = classify(p)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
