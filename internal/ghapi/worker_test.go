package ghapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// clock is a settable clock, read by the worker and the server alike.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Sleep moves the clock on by d, as the worker's wait between two writes.
func (c *clock) Sleep(_ context.Context, d time.Duration) error {
	c.set(c.Now().Add(d))
	return nil
}

// outbox is a real SQLite store holding keyAPI, a worker draining it into
// srv with a clock the test moves, and the calls queued.
type outbox struct {
	store  *sqlstore.SQLite
	worker *ghapi.Worker
	clock  *clock
}

func newOutbox(t *testing.T, srv *ghapitest.Server, calls ...desired.Call) outbox {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d1", Key: keyAPI, Kind: desired.KindIssue, Harness: "h", Cwd: "/w",
		Delivery: &desired.Delivery{Event: "issues", Action: "opened", Sender: "octocat", Prompt: "p"}})
	require.NoError(t, err)
	require.NoError(t, st.WriteStatus(ctx, keyAPI, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseRunning}, Calls: calls}))
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv.SetNow(clk.Now)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &ghapi.Worker{Store: st, API: tokenClient(t, srv), Journal: journal.NewRecorder(log, st, clk.Now), Now: clk.Now,
		Tries: 4, Initial: 2 * time.Second, Max: time.Minute, Limits: ghapi.NewLimits(time.Second, time.Minute, 30*time.Minute),
		Sleep: clk.Sleep}
	return outbox{store: st, worker: w, clock: clk}
}

func (o outbox) drain(t *testing.T) int {
	t.Helper()
	n, err := o.worker.Drain(context.Background())
	require.NoError(t, err)
	return n
}

func (o outbox) calls(t *testing.T) []desired.Call {
	t.Helper()
	calls, err := o.store.Calls(context.Background(), store.CallFilter{})
	require.NoError(t, err)
	return calls
}

// events returns the journal's github.* rows as name and attrs.
func (o outbox) events(t *testing.T) []journal.Event {
	t.Helper()
	evs, err := o.store.Events(context.Background(), store.EventFilter{WorkItem: keyAPI.String()})
	require.NoError(t, err)
	return evs
}

var (
	announce   = desired.Call{Kind: desired.CallAnnounce, Body: "hello\n\n<!-- loopd:announce acme/api#42 -->", Marker: "<!-- loopd:announce acme/api#42 -->"}
	react      = desired.Call{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceIssueComment, ID: 7}}
	postPath   = regexp.MustCompile(`^/repos/acme/api/issues/42/comments$`)
	reactPath  = regexp.MustCompile(`/reactions$`)
	badGateway = ghapitest.Failure{Method: "POST", Path: postPath, Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`, Times: 1}
)

// TestWorkerRetries502: a 502 is tried again after the backoff, not
// before; then the comment is posted once and the call recorded posted.
func TestWorkerRetries502(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Fail(badGateway)
	o := newOutbox(t, srv, announce)

	assert.Equal(t, 1, o.drain(t))
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallPending, c.State)
	assert.Equal(t, 1, c.Attempts)
	assert.Equal(t, 502, c.HTTPStatus)
	assert.Equal(t, "Bad Gateway", c.Error)
	assert.Equal(t, o.clock.Now().Add(2*time.Second), c.NextAttempt)

	o.clock.set(o.clock.Now().Add(time.Second))
	assert.Zero(t, o.drain(t), "not due before its backoff")
	o.clock.set(o.clock.Now().Add(time.Second))
	assert.Equal(t, 1, o.drain(t))
	c = o.calls(t)[0]
	assert.Equal(t, desired.CallPosted, c.State)
	assert.Equal(t, 2, c.Attempts)
	assert.Equal(t, 201, c.HTTPStatus)
	assert.Len(t, srv.Comments("acme", "api", 42), 1)
	assert.Equal(t, 2, srv.Count("POST", postPath))

	names := eventNames(o.events(t))
	assert.Equal(t, []journal.Name{journal.GitHubRetry, journal.GitHubPosted}, names)
}

// TestWorkerHonoursRetryAfter: a 403 with Retry-After waits what GitHub
// asked (60 s), not the 2 s backoff; a 429 with X-RateLimit-Remaining 0
// waits until X-RateLimit-Reset.
func TestWorkerHonoursRetryAfter(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: reactPath, Status: http.StatusForbidden, Header: http.Header{"Retry-After": {"60"}},
		Body: `{"message":"You have exceeded a secondary rate limit"}`, Times: 1})
	o := newOutbox(t, srv, react)
	t0 := o.clock.Now()

	assert.Equal(t, 1, o.drain(t))
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallPending, c.State)
	assert.Equal(t, 403, c.HTTPStatus)
	assert.Equal(t, t0.Add(time.Minute), c.NextAttempt)
	o.clock.set(t0.Add(59 * time.Second))
	assert.Zero(t, o.drain(t))

	reset := t0.Add(5 * time.Minute).Truncate(time.Second)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: reactPath, Status: http.StatusTooManyRequests,
		Header: http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}},
		Body:   `{"message":"API rate limit exceeded"}`, Times: 1})
	o.clock.set(t0.Add(time.Minute))
	assert.Equal(t, 1, o.drain(t))
	c = o.calls(t)[0]
	assert.Equal(t, desired.CallPending, c.State)
	assert.Equal(t, 429, c.HTTPStatus)
	assert.Equal(t, reset, c.NextAttempt)

	o.clock.set(reset)
	assert.Equal(t, 1, o.drain(t))
	assert.Equal(t, desired.CallPosted, o.calls(t)[0].State)
	assert.Equal(t, []ghapitest.Reaction{{On: "/repos/acme/api/issues/comments/7/reactions", Content: "eyes"}}, srv.Reactions())
}

// TestWorkerNoRetryOn404: a 404 (and any 4xx that is not a rate limit) is
// given up at once, recorded failed with GitHub's status and message, and
// journaled github.failed.
func TestWorkerNoRetryOn404(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: reactPath, Status: http.StatusNotFound, Body: `{"message":"Not Found"}`, Times: 1})
	o := newOutbox(t, srv, react)

	assert.Equal(t, 1, o.drain(t))
	o.clock.set(o.clock.Now().Add(time.Hour))
	assert.Zero(t, o.drain(t))
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallFailed, c.State)
	assert.Equal(t, 1, c.Attempts)
	assert.Equal(t, 404, c.HTTPStatus)
	assert.Equal(t, "Not Found", c.Error)
	assert.Equal(t, 1, srv.Count("POST", reactPath))
	evs := o.events(t)
	require.Equal(t, []journal.Name{journal.GitHubFailed}, eventNames(evs))
	assert.Equal(t, map[string]string{"call": "react", "call_id": strconv.FormatInt(c.ID, 10), "http_status": "404", "attempts": "1",
		"err": "Not Found", "reason": "not_retried"}, evs[0].Attrs)
}

// TestWorkerGivesUpAfterTries: a call that keeps failing with a 5xx is
// tried Tries times, with growing waits, then given up.
func TestWorkerGivesUpAfterTries(t *testing.T) {
	srv := ghapitest.New(t)
	f := badGateway
	f.Times = 100
	srv.Fail(f)
	o := newOutbox(t, srv, announce)
	var waits []time.Duration
	for range 10 {
		o.drain(t)
		c := o.calls(t)[0]
		if c.State != desired.CallPending {
			break
		}
		waits = append(waits, c.NextAttempt.Sub(o.clock.Now()))
		o.clock.set(c.NextAttempt)
	}
	assert.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}, waits)
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallFailed, c.State)
	assert.Equal(t, 4, c.Attempts)
	assert.Equal(t, 4, srv.Count("POST", postPath))
	assert.Equal(t, "out_of_tries", o.events(t)[3].Attrs["reason"])
}

// TestWorkerFindsTheMarkerAfterAKill: a daemon killed after GitHub took
// the comment but before the outcome was recorded left the call pending;
// the next drain lists the comments, finds the marker and posts nothing,
// so exactly one announcement exists.
func TestWorkerFindsTheMarkerAfterAKill(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, announce)
	held := srv.HoldPosts()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := o.worker.Drain(ctx)
		done <- err
	}()
	<-held
	cancel() // the daemon dies with the post in flight
	require.ErrorIs(t, <-done, context.Canceled)
	srv.Release()
	assert.Equal(t, desired.CallPending, o.calls(t)[0].State, "the outcome was never recorded")
	require.Len(t, srv.Comments("acme", "api", 42), 1, "GitHub has the comment")

	assert.Equal(t, 1, o.drain(t))
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallPosted, c.State)
	assert.Len(t, srv.Comments("acme", "api", 42), 1, "exactly one announcement")
	assert.Equal(t, 1, srv.Count("POST", postPath))
	evs := o.events(t)
	require.Equal(t, []journal.Name{journal.GitHubPosted}, eventNames(evs))
	assert.Equal(t, "true", evs[0].Attrs["found"])
}

// TestWorkerNetworkErrorRetries: no answer at all (the API
// down) is retried like a 5xx, with no status.
func TestWorkerNetworkErrorRetries(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, react)
	srv.Close()
	assert.Equal(t, 1, o.drain(t))
	c := o.calls(t)[0]
	assert.Equal(t, desired.CallPending, c.State)
	assert.Zero(t, c.HTTPStatus)
	assert.Contains(t, c.Error, "connection refused")
}

func eventNames(evs []journal.Event) []journal.Name {
	var out []journal.Name
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// TestWorkerSendsOnlyWhatDueGives: with several hosts the worker reads
// the due calls through Due (store.Fleet.DueCallsFor: this host's
// items only), and sends nothing Due leaves out.
func TestWorkerSendsOnlyWhatDueGives(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, announce)
	var asked []time.Time
	o.worker.Due = func(_ context.Context, now time.Time, limit int) ([]desired.Call, error) {
		asked = append(asked, now)
		return nil, nil // another host holds the item
	}
	assert.Equal(t, 0, o.drain(t))
	assert.Equal(t, desired.CallPending, o.calls(t)[0].State)
	assert.NotEmpty(t, asked)
	o.worker.Due = nil
	assert.Equal(t, 1, o.drain(t))
	assert.Equal(t, desired.CallPosted, o.calls(t)[0].State)
}
