package webhook

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// stalledLength is the Content-Length of the hostile requests: 20 MiB,
// under the 25 MiB cap, so that only the new limits stop them.
const stalledLength = 20 << 20

// forgedSignature has the form of a real signature and matches no body.
var forgedSignature = "sha256=" + strings.Repeat("0", 64)

// serve runs h behind NewServer(h, l) on loopback and returns its address.
func serve(t testing.TB, h http.Handler, l ServerLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := NewServer(h, l)
	go func() { _ = srv.Serve(l.Listener(ln, nil)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawPost opens a connection to addr and writes the headers of a webhook
// POST with the given extra header lines, then head, the first bytes of
// its body. The caller closes the connection.
func rawPost(t testing.TB, addr string, extra []string, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("POST / HTTP/1.1\r\nHost: loopd\r\nContent-Type: application/json\r\n")
	b.WriteString("X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: d-1\r\n")
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + head)
	_, err = io.WriteString(c, b.String())
	require.NoError(t, err)
	return c
}

// answer reads the status of the response on c, waiting at most wait.
func answer(c net.Conn, wait time.Duration) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// answerAndClose reads everything the server sends on c until it closes
// the connection, waiting at most wait, and returns the response's status.
func answerAndClose(c net.Conn, wait time.Duration) (int, error) {
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return 0, err
	}
	all, err := io.ReadAll(c)
	if err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all)), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestRejectedBeforeBodyIsRead(t *testing.T) {
	contentLength := "Content-Length: " + strconv.Itoa(stalledLength)
	tests := []struct {
		name   string
		extra  []string
		code   int
		reason string
	}{
		{name: "missing_signature", extra: []string{contentLength}, code: http.StatusUnauthorized, reason: reasonMissingSignature},
		{name: "sha1_signature", extra: []string{contentLength, "X-Hub-Signature-256: sha1=" + strings.Repeat("0", 40)}, code: http.StatusUnauthorized, reason: reasonBadSignature},
		{name: "not_hex", extra: []string{contentLength, "X-Hub-Signature-256: sha256=zz"}, code: http.StatusUnauthorized, reason: reasonBadSignature},
		{name: "short_digest", extra: []string{contentLength, "X-Hub-Signature-256: sha256=00ff"}, code: http.StatusUnauthorized, reason: reasonBadSignature},
		{name: "chunked", extra: []string{"Transfer-Encoding: chunked", "X-Hub-Signature-256: " + forgedSignature}, code: http.StatusLengthRequired, reason: reasonLengthRequired},
		{name: "over_cap", extra: []string{"Content-Length: " + strconv.Itoa(26<<20), "X-Hub-Signature-256: " + forgedSignature}, code: http.StatusRequestEntityTooLarge, reason: reasonBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			// The headers and a few bytes of a body that never comes.
			head := `{"action":`
			if tt.name == "chunked" {
				head = "a\r\n" + head + "\r\n"
			}
			c := rawPost(t, e.srv.Listener.Addr().String(), tt.extra, head)
			defer c.Close()

			code, err := answerAndClose(c, 10*time.Second)

			require.NoError(t, err, "no answer and close while the body is unsent: the server waited for it")
			assert.Equal(t, tt.code, code)
			line := e.onlyRejection(t)
			assert.Equal(t, tt.reason, line["reason"])
			assert.NotEmpty(t, line["err"])
			ev := e.rejectedRow(t)
			assert.Equal(t, tt.reason, ev.Attrs["reason"])
			assert.Equal(t, line["err"], ev.Attrs["err"])
		})
	}
}

func TestSlowBodyIsCut(t *testing.T) {
	e := newEnv(t)
	// The server's limits, short so that the test is fast; the client
	// trickles a byte every 100 ms, so a server without a read bound
	// would keep it for the whole 100 s of its body.
	addr := serve(t, e.srv.Config.Handler, ServerLimits{
		ReadHeader: time.Second, Read: time.Second, Write: 2 * time.Second, Idle: time.Second,
	})
	c := rawPost(t, addr, []string{"Content-Length: 1000", "X-Hub-Signature-256: " + forgedSignature}, "{")
	defer c.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()

	// Generous: ten times the configured bound.
	code, err := answer(c, 10*time.Second)

	if err != nil {
		assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "still open after ten times the read bound")
	} else {
		assert.Equal(t, http.StatusBadRequest, code)
	}
	require.Eventually(t, func() bool { return countLogged(e, journal.DeliveryRejected) == 1 }, 10*time.Second, 10*time.Millisecond)
	line := e.onlyRejection(t)
	assert.Equal(t, reasonReadFailed, line["reason"])
	assert.Equal(t, "i/o timeout", line["err"], "no address in err, so that repeats fold in the log")
}

// onlyRejections requires every journal row to be a delivery.rejected of
// no work item for reason: unauthenticated requests store nothing else.
func (e *env) onlyRejections(t *testing.T, reason string) {
	t.Helper()
	for _, ev := range e.events(t) {
		assert.Equal(t, journal.DeliveryRejected, ev.Name)
		assert.Empty(t, ev.WorkItem)
		assert.Equal(t, reason, ev.Attrs["reason"])
	}
}

// countLogged counts the log lines whose message is name; unlike logged it
// may run in a require.Eventually condition before anything is logged.
func countLogged(e *env, name journal.Name) int {
	return strings.Count(e.logs.String(), `"msg":"`+string(name)+`"`)
}

// heapInUse returns the heap in use after a collection, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// sendStalled writes the headers of a delivery of length bytes with the
// extra header lines, then all of its body but the last byte, from one
// small buffer, so that the test itself holds little; it returns when the
// server stops reading or the body is sent.
func sendStalled(t testing.TB, addr string, length int, extra []string) net.Conn {
	c := rawPost(t, addr, append([]string{"Content-Length: " + strconv.Itoa(length)}, extra...), "")
	buf := make([]byte, 64<<10)
	for left := length - 1; left > 0; left -= len(buf) {
		if _, err := c.Write(buf[:min(len(buf), left)]); err != nil {
			break
		}
	}
	return c
}

// sendAllStalled runs n sendStalled at once and returns their connections,
// closed at the test's end.
func sendAllStalled(t testing.TB, n int, addr string, length int, extra []string) []net.Conn {
	var wg sync.WaitGroup
	conns := make([]net.Conn, n)
	for i := range conns {
		wg.Go(func() { conns[i] = sendStalled(t, addr, length, extra) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

func TestStalledLargeBodiesHeldNowhere(t *testing.T) {
	e := newEnv(t) // httptest's server has no read bound
	base := heapInUse()

	// Twelve clients send all of a 20 MiB body but its last byte, then
	// stall, each on its own connection.
	sendAllStalled(t, 12, e.srv.Listener.Addr().String(), stalledLength, []string{"X-Hub-Signature-256: " + forgedSignature})
	held := max(heapInUse(), base) - base

	assert.Less(t, held, uint64(8<<20), "no 20 MiB body is held (%d MiB held)", held>>20)
	require.Eventually(t, func() bool { return countLogged(e, journal.DeliveryRejected) == 12 }, 10*time.Second, 10*time.Millisecond)
	for _, line := range e.logged(t, journal.DeliveryRejected) {
		assert.Equal(t, reasonBodyTooLarge, line["reason"], "a body larger than the whole budget is refused unread")
	}
	assert.Empty(t, e.records(t))
	e.onlyRejections(t, reasonBodyTooLarge)
}

func TestHeaderFloodHeldBytesBounded(t *testing.T) {
	// 800 clients each send 12 KiB of headers that never end: without a
	// bound on connections each would hold its header bytes and buffers.
	e := newEnv(t)
	limits := DefaultServerLimits
	limits.MaxConns = 16
	addr := serve(t, e.srv.Config.Handler, limits)
	base := heapInUse()
	pad := strings.Repeat("a", 12<<10)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range 800 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = io.WriteString(c, "POST / HTTP/1.1\r\nHost: loopd\r\nX-Pad: "+pad)
		require.NoError(t, err)
	}
	time.Sleep(200 * time.Millisecond) // let the served ones read what they can
	held := max(heapInUse(), base) - base
	assert.Less(t, held, uint64(4<<20), "at most MaxConns connections hold header bytes (%d KiB held)", held>>10)

	// The flood ends; a real delivery is served again.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	resp, err := Replay(context.Background(), &http.Client{Timeout: 10 * time.Second}, "http://"+addr, testSecret, "issue_comment", "d-1", fixture(t, "issue_comment.created.1.json"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
}

func TestBodyBudgetCapsHeldBytes(t *testing.T) {
	e := newEnv(t) // DefaultBodyBudget; httptest's server has no read bound
	base := heapInUse()

	// Forty clients send all of a 1 MiB body but its last byte, then
	// stall: 40 MiB offered to a 16 MiB budget.
	sendAllStalled(t, 40, e.srv.Listener.Addr().String(), 1<<20, []string{"X-Hub-Signature-256: " + forgedSignature})
	held := max(heapInUse(), base) - base

	assert.Less(t, held, uint64(DefaultBodyBudget+(8<<20)), "the server holds the budget at most (%d MiB held)", held>>20)
	require.Eventually(t, func() bool { return countLogged(e, journal.DeliveryRejected) >= 24 }, 10*time.Second, 10*time.Millisecond)
	for _, line := range e.logged(t, journal.DeliveryRejected) {
		assert.Equal(t, reasonOverBudget, line["reason"])
	}
	assert.Empty(t, e.records(t))
	e.onlyRejections(t, reasonOverBudget)
}

func TestBudgetFreedAfterRefusal(t *testing.T) {
	// A budget of 64 KiB, which a stalled 60 KiB body spends: a real
	// delivery (15 KB) is refused until the stalled body is cut, then taken.
	e := newEnv(t, func(o *Options) { o.BodyBudget = 64 << 10 })
	addr := serve(t, e.srv.Config.Handler, ServerLimits{ReadHeader: 3 * time.Second, Read: 3 * time.Second, Write: 5 * time.Second})
	c := sendStalled(t, addr, 60<<10, []string{"X-Hub-Signature-256: " + forgedSignature})
	defer c.Close()
	body := fixture(t, "issue_comment.created.1.json")
	// Probes signed with another secret: refused for the budget once the
	// stalled body holds it, for their signature before.
	require.Eventually(t, func() bool {
		resp, err := Replay(context.Background(), http.DefaultClient, "http://"+addr, []byte("probe"), "issue_comment", "probe", body)
		if err != nil {
			return false
		}
		code, _ := readResponse(t, resp)
		return code == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == bodyBudgetRetryAfter
	}, 3*time.Second, 10*time.Millisecond, "the stalled body spent the budget")

	require.Eventually(t, func() bool {
		resp, err := Replay(context.Background(), http.DefaultClient, "http://"+addr, testSecret, "issue_comment", "d-1", body)
		if err != nil {
			return false
		}
		code, _ := readResponse(t, resp)
		return code == http.StatusAccepted
	}, 10*time.Second, 100*time.Millisecond)
	assert.Len(t, e.records(t), 1)
}

func TestStoreLockedAnsweredInTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	store, err := sqlstore.OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	e := newEnv(t, func(o *Options) {
		o.Store = store
		o.Recorder = journal.NewRecorder(o.Log, store, o.Now)
	})
	e.store = store
	// Another process's connection holds the write lock on the same file.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	locker, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = locker.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	body := fixture(t, "issue_comment.created.1.json")

	// GitHub's client: it gives up after 10 s. Four deliveries at once:
	// the ones queued behind the first must not wait the store's busy
	// timeout again after their turn comes.
	github := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	codes := make([]int, 4)
	errs := make([]error, 4)
	for i := range codes {
		wg.Go(func() {
			resp, err := Replay(context.Background(), github, e.srv.URL, testSecret, "issue_comment", fmt.Sprintf("d-%d", i+1), body)
			if errs[i] = err; err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	for i := range codes {
		require.NoError(t, errs[i], "delivery %d: no answer within GitHub's 10 s", i+1)
		assert.Equal(t, http.StatusServiceUnavailable, codes[i])
	}
	lines := e.logged(t, journal.DeliveryRejected)
	require.Len(t, lines, 4, "each rejection is logged at once")
	for _, line := range lines {
		assert.Equal(t, reasonStoreFailed, line["reason"])
	}

	_, err = locker.ExecContext(context.Background(), "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, locker.Close())
	assert.Empty(t, e.records(t), "nothing half-stored")
	assert.Empty(t, e.events(t), "the rejection waits for the store")
	require.NoError(t, e.recorder.Flush(context.Background()))
	evs := e.events(t)
	require.Len(t, evs, 4, "the deferred rejections reach the journal once the store takes writes")
	for _, ev := range evs {
		assert.Equal(t, journal.DeliveryRejected, ev.Name)
		assert.Equal(t, reasonStoreFailed, ev.Attrs["reason"])
	}
	code, _ := e.replay(t, "issue_comment", "d-1", body)
	assert.Equal(t, http.StatusAccepted, code, "the delivery id was not claimed: a redelivery is taken")
}

func TestAnswerTimeoutBoundsStoreWait(t *testing.T) {
	// A store that waits as long as the request's context lets it.
	e := newEnv(t, func(o *Options) {
		o.Store = blockingStore{}
		o.AnswerTimeout = 100 * time.Millisecond
	})

	code, _ := e.replay(t, "issue_comment", "d-1", fixture(t, "issue_comment.created.1.json"))

	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, reasonStoreFailed, e.onlyRejection(t)["reason"])
	assert.Empty(t, e.events(t))
}

// blockingStore is an Ingester that never takes a delivery: it waits for
// the context to end.
type blockingStore struct{}

func (blockingStore) Ingest(ctx context.Context, _ store.Ingest) (store.IngestResult, error) {
	<-ctx.Done()
	return store.IngestResult{}, fmt.Errorf("ingest: %w", context.Cause(ctx))
}

func (blockingStore) Heads(ctx context.Context, _, _, _ string) ([]desired.Key, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("heads: %w", context.Cause(ctx))
}

func (blockingStore) Get(ctx context.Context, _ desired.Key) (desired.Record, error) {
	<-ctx.Done()
	return desired.Record{}, fmt.Errorf("get: %w", context.Cause(ctx))
}

// BenchmarkStalledConnections measures what 100 stalled hostile
// connections cost the real handler behind NewServer with
// DefaultServerLimits (without the bound per address). Each sends the headers of a 20 MiB delivery and
// three bytes of its body (the few_bytes cases), or all of a 1 MiB body
// but its last byte (full_body: 100 MiB offered to the 16 MiB budget),
// then nothing. It reports the process's resident set
// (VmRSS: server and clients, since both run in this process) and the heap
// in use after a collection, both in MB, at their highest over b.N rounds.
func BenchmarkStalledConnections(b *testing.B) {
	for _, bc := range []struct {
		name     string
		extra    []string
		fullBody bool
	}{
		{name: "missing_signature/few_bytes"},
		{name: "forged_signature/few_bytes", extra: []string{"X-Hub-Signature-256: " + forgedSignature}},
		{name: "forged_signature/full_body", extra: []string{"X-Hub-Signature-256: " + forgedSignature}, fullBody: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var entered sync.WaitGroup
			h := New(Options{
				Secret: testSecret, Log: slog.New(slog.DiscardHandler), Now: time.Now, Config: defaultConfig,
				Store: blockingStore{}, Recorder: journal.NewRecorder(slog.New(slog.DiscardHandler), nil, time.Now),
			})
			// The 100 come from one address here, as from 100 in a real
			// flood: the bound per address would refuse most of them.
			limits := DefaultServerLimits
			limits.MaxConnsPerAddress = 0
			addr := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entered.Done()
				h.ServeHTTP(w, r)
			}), limits)
			extra := append([]string{"Content-Length: " + strconv.Itoa(stalledLength)}, bc.extra...)
			var rss, heap float64
			for b.Loop() {
				entered.Add(100)
				conns := make([]net.Conn, 100)
				var sent sync.WaitGroup
				for i := range conns {
					if bc.fullBody {
						sent.Go(func() { conns[i] = sendStalled(b, addr, 1<<20, bc.extra) })
					} else {
						conns[i] = rawPost(b, addr, extra, `{"a`)
					}
				}
				sent.Wait()
				entered.Wait()
				heap = max(heap, float64(heapInUse())/1e6)
				rss = max(rss, vmRSS(b)/1e6)
				for _, c := range conns {
					c.Close()
				}
			}
			b.ReportMetric(rss, "rss-MB")
			b.ReportMetric(heap, "heap-MB")
		})
	}
}

// vmRSS returns this process's resident set in bytes (proc(5), VmRSS).
func vmRSS(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			require.NoError(b, err)
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
