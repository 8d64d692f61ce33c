package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// TestDeliveriesCountedByOutcomeAndReason sends one request of each
// outcome over real HTTP and reads loopd_webhook_deliveries_total.
func TestDeliveriesCountedByOutcomeAndReason(t *testing.T) {
	e := newEnv(t)
	assert.Equal(t, 2, testutil.CollectAndCount(e.metrics, "loopd_webhook_deliveries_total"),
		"accepted and duplicate are exported before any delivery")
	comment := fixture(t, "issue_comment.created.1.json")

	code, _ := e.replay(t, "issue_comment", "d-1", comment)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = e.replay(t, "issue_comment", "d-1", comment)
	require.Equal(t, http.StatusOK, code)
	stranger := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, m, "sender")["login"] = "mallory"
		newComment(t, m, "hi")
	})
	code, _ = e.replay(t, "issue_comment", "d-2", stranger)
	require.Equal(t, http.StatusAccepted, code)
	code, _ = e.replay(t, "issue_comment", "d-3", []byte(`{"action": "created", "issue": {`))
	require.Equal(t, http.StatusBadRequest, code)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "issue_comment")
	h.Set("X-GitHub-Delivery", "d-4")
	h.Set("X-Hub-Signature-256", Sign([]byte("not the secret"), comment))
	code, _ = e.send(t, http.MethodPost, h, comment)
	require.Equal(t, http.StatusUnauthorized, code)

	assert.Equal(t, 1.0, e.counted(t, "accepted", ""))
	assert.Equal(t, 1.0, e.counted(t, "duplicate", ""))
	assert.Equal(t, 1.0, e.counted(t, "ignored", reasonUnauthorizedSender))
	assert.Equal(t, 1.0, e.counted(t, "rejected", reasonMalformedPayload))
	assert.Equal(t, 1.0, e.counted(t, "rejected", reasonBadSignature))
	assert.Equal(t, 5, testutil.CollectAndCount(e.metrics, "loopd_webhook_deliveries_total"),
		"one series per outcome and reason met")
}

// TestUnverifiedHeadersNotJournaled: the delivery id and event name of an
// unauthenticated request reach the journal only when they have the shape
// GitHub gives them; its text never does.
func TestUnverifiedHeadersNotJournaled(t *testing.T) {
	e := newEnv(t)
	body := fixture(t, "issue_comment.created.1.json")
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "issue_comment; DROP TABLE events")
	h.Set("X-GitHub-Delivery", "../"+strings.Repeat("x", 300))
	h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))

	code, _ := e.send(t, http.MethodPost, h, body)

	assert.Equal(t, http.StatusUnauthorized, code)
	ev := e.rejectedRow(t)
	assert.Equal(t, reasonBadSignature, ev.Attrs["reason"])
	assert.NotContains(t, ev.Attrs, "delivery")
	assert.NotContains(t, ev.Attrs, "event")
	assert.NotContains(t, ev.String(), "DROP")
}

// stalledStore is a journal that takes no row until release is closed (a
// store locked by another process), then takes them all.
type stalledStore struct {
	release chan struct{}
	mu      sync.Mutex
	rows    []journal.Event
}

func (s *stalledStore) AppendEvent(ctx context.Context, e journal.Event) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows = append(s.rows, e)
	return nil
}

func (s *stalledStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// rejectionServer is the handler as serve wires it for unauthenticated
// requests, over journal: a Limiter folding repeats, in front of an Async
// whose goroutine runs until the test ends. It returns the server and the
// Limiter and the Async, for the test to flush and drain.
func rejectionServer(t testing.TB, store journal.Appender) (*httptest.Server, *journal.Limiter, *journal.Async) {
	log := slog.New(slog.DiscardHandler)
	repeats := journal.NewLimiter(journal.DefaultRepeatWindow, journal.DefaultMaxFailures, time.Now)
	queue := journal.NewAsync(store, 0, log)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); queue.Run(ctx) }()
	cfg := defaultConfig()
	srv := httptest.NewServer(New(Options{
		Secret:     testSecret,
		Config:     func() schema.GHWebhook { return cfg },
		Store:      nil, // never reached: no request is authenticated
		Recorder:   journal.NewRecorder(log, nil, time.Now),
		Rejections: journal.NewRecorder(slog.New(repeats.Handler(log.Handler())), repeats.Appender(queue), time.Now),
		Log:        log,
	}))
	t.Cleanup(func() { srv.Close(); stop(); <-done })
	return srv, repeats, queue
}

// badSignature posts the fixture with a signature made with another
// secret and returns the status.
func badSignature(t testing.TB, client *http.Client, url string, body []byte) int {
	resp, err := Replay(context.Background(), client, url, []byte("not the secret"), "issue_comment", "d-1", body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRejectionAnsweredWhileTheStoreIsStalled: the journal's store takes
// nothing, yet the bad signature is answered 401; its row reaches the store
// once the store takes writes.
func TestRejectionAnsweredWhileTheStoreIsStalled(t *testing.T) {
	store := &stalledStore{release: make(chan struct{})}
	srv, _, _ := rejectionServer(t, store)
	body := fixture(t, "issue_comment.created.1.json")

	assert.Equal(t, http.StatusUnauthorized, badSignature(t, srv.Client(), srv.URL, body),
		"answered while the store takes nothing")
	assert.Zero(t, store.count())

	close(store.release)
	require.Eventually(t, func() bool { return store.count() == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, reasonBadSignature, store.rows[0].Attrs["reason"])
}

// TestBadSignatureFloodJournalBounded: 300 bad signatures over real HTTP to
// a real SQLite journal become one row at once and one summary row with the
// count when the repeats are flushed; every one is answered 401.
func TestBadSignatureFloodJournalBounded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, st.Close()) })
	srv, repeats, queue := rejectionServer(t, st)
	body := fixture(t, "issue_comment.created.1.json")
	const flood = 300

	for range flood {
		require.Equal(t, http.StatusUnauthorized, badSignature(t, srv.Client(), srv.URL, body))
	}
	events := func() []journal.Event {
		evs, err := st.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		return evs
	}
	require.Eventually(t, func() bool { return len(events()) == 1 }, 10*time.Second, 5*time.Millisecond)
	repeats.FlushAll(ctx)

	// The summary is written by the queue's goroutine.
	require.Eventually(t, func() bool { return len(events()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	evs := events()
	require.Len(t, evs, 2, "the first rejection, then one summary")
	for _, ev := range evs {
		assert.Equal(t, journal.DeliveryRejected, ev.Name)
		assert.Equal(t, reasonBadSignature, ev.Attrs["reason"])
	}
	assert.Equal(t, "299", evs[1].Attrs[journal.KeyRepeated])
	assert.Zero(t, queue.Dropped())
}

// BenchmarkBadSignatureFlood measures the answer to a bad signature over
// real HTTP, 16 clients per CPU at once, while the journal's store takes
// nothing (locked by another process): the answer does not wait for the
// journal, and the flood is folded into one row.
func BenchmarkBadSignatureFlood(b *testing.B) {
	store := &stalledStore{release: make(chan struct{})}
	srv, _, queue := rejectionServer(b, store)
	b.Cleanup(func() { close(store.release) }) // before the server's cleanup, which waits for Run
	body, err := os.ReadFile(filepath.Join(fixturesDir, "issue_comment.created.1.json"))
	require.NoError(b, err)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := Replay(context.Background(), client, srv.URL, []byte("not the secret"), "issue_comment", "d-1", body)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				b.Errorf("status %d, want 401", resp.StatusCode)
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(queue.Dropped()), "dropped")
}
