package statuspage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/statuspage/statuspagetest"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// script is what a hostile payload puts where the page shows GitHub's
// text: a sender's login, an action, a check's name.
const script = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`

// promptMarker is in a pending event's prompt, which the page never shows.
const promptMarker = "PROMPT-BODY-7f3c"

var (
	keyIssue = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 1}
	keyPR    = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 2}
)

// fixture is a real SQLite store holding two items: issue 1 with a
// pending event whose sender and action hold script, and a closed pull
// request 2; and journal rows, one of them with a prompt attribute.
func fixture(t *testing.T) store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-1", Key: keyIssue, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents/1",
		Delivery: &desired.Delivery{ID: "d-1", Event: "issue_comment", Action: script, Sender: script,
			Prompt: "[loopd event]\n" + promptMarker + " " + script, ReceivedAt: now}})
	require.NoError(t, err)
	closed := true
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-2", Key: keyPR, Kind: desired.KindPullRequest, Harness: "claude-code", Cwd: "/srv/agents/2",
		Closed: &closed, StateAt: now})
	require.NoError(t, err)
	require.NoError(t, st.PutStatus(ctx, keyIssue, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "crash_loop", SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", Session: desired.SessionName(keyIssue)}}))
	require.NoError(t, st.PutStatus(ctx, keyPR, desired.Status{Phase: desired.PhaseStopped, Reason: "closed"}))
	for _, e := range []journal.Event{
		{Time: now, Name: journal.DeliveryIgnored, Level: slog.LevelInfo, Attrs: map[string]string{"sender": script, "reason": "unauthorized_sender"}},
		{Time: now, Name: journal.SessionSpawned, Level: slog.LevelInfo, WorkItem: keyIssue.String(),
			Attrs: map[string]string{journal.KeyPrompt: promptMarker, journal.KeySession: desired.SessionName(keyIssue)}},
		{Time: now, Name: journal.SessionCrashLoop, Level: slog.LevelError, WorkItem: keyIssue.String(), Attrs: map[string]string{"reason": "fast_failures"}},
		// The dead pane's last lines may show the prompt the agent was given.
		{Time: now, Name: journal.SessionExited, Level: slog.LevelWarn, WorkItem: keyIssue.String(),
			Attrs: map[string]string{journal.KeyOutput: "> " + promptMarker, "reason": "crash"}},
	} {
		require.NoError(t, st.AppendEvent(ctx, e))
	}
	return st
}

func testPolicy() reconciler.Policy {
	p := reconciler.PolicyFrom(schema.DefaultPolicy(), nil, "")
	p.MaxLive, p.MaxStarts = 3, 2
	return p
}

// server serves the page of st on a mux that also holds the daemon's
// other routes, as serve's does.
func server(t *testing.T, st Store, opts ...func(*Options)) *httptest.Server {
	t.Helper()
	o := Options{Store: st, Host: "host-a", Socket: "loopd", Policy: testPolicy, Now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/webhook", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "webhook") })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	require.NoError(t, New(o).Register(mux))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestIndexShowsItemsByPhase(t *testing.T) {
	srv := server(t, fixture(t))
	code, hdr, body := get(t, srv.URL+"/")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	assert.Contains(t, hdr.Get("Content-Security-Policy"), "script-src 'self'")
	_, text := statuspagetest.DOM(t, body)
	for _, want := range []string{keyIssue.String(), "NeedsAttention", desired.SessionName(keyIssue),
		"7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", "crash_loop", "session.crash_loop", "Closed", keyPR.String(), "of 3"} {
		assert.Contains(t, text, want)
	}
	assert.Contains(t, body, `href="/items/Codertocat/Hello-World/1"`)
	assert.Regexp(t, `as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]+|as of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{2}`, text, "a time says its zone")
}

// TestWhatNeedsAPersonComesFirst: NeedsAttention, then the agents
// blocked at a screen for a person (their own group, whatever their
// phase), then the other phases; the header counts both, and each of
// the two groups says what resolves it.
func TestWhatNeedsAPersonComesFirst(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	blocked, running := desired.Key{Owner: "o", Repo: "r", Number: 3}, desired.Key{Owner: "o", Repo: "r", Number: 4}
	for i, k := range []desired.Key{blocked, running} {
		_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d-x" + strconv.Itoa(i), Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents/x"})
		require.NoError(t, err)
	}
	require.NoError(t, st.PutStatus(ctx, blocked, desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "login_required"}}))
	require.NoError(t, st.PutStatus(ctx, running, desired.Status{Phase: desired.PhaseRunning}))
	_, _, body := get(t, server(t, st).URL+"/")
	_, text := statuspagetest.DOM(t, body)
	assert.Contains(t, text, "1 need attention")
	assert.Contains(t, text, "1 blocked")
	attention, block, run := strings.Index(body, `id="phase-needsattention"`), strings.Index(body, `id="blocked"`), strings.Index(body, `id="phase-running"`)
	require.True(t, attention >= 0 && block >= 0 && run >= 0, body)
	assert.Less(t, attention, block, "NeedsAttention first")
	assert.Less(t, block, run, "then the blocked agents")
	assert.Less(t, strings.Index(body, "o/r#3"), run, "the blocked item sits in its own group, not under Running")
	assert.Greater(t, strings.Index(body, "o/r#4"), run)
	assert.Contains(t, text, resolveAttention)
	assert.Contains(t, text, resolveBlocked)
}

// TestAwaitingApprovalHasItsGroup: an agent waiting on an answer from
// GitHub sits in the AwaitingApproval group, before the blocked ones,
// with its question's id and what answers it.
func TestAwaitingApprovalHasItsGroup(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	asking, blocked := desired.Key{Owner: "o", Repo: "r", Number: 5}, desired.Key{Owner: "o", Repo: "r", Number: 6}
	for i, k := range []desired.Key{asking, blocked} {
		_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d-q" + strconv.Itoa(i), Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents/x"})
		require.NoError(t, err)
	}
	q := desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "permission_prompt"}}
	q.Question = &desired.Question{ID: "q2", Title: "Do you want to proceed?", Choices: []string{"Yes"}}
	require.NoError(t, st.PutStatus(ctx, asking, q))
	require.NoError(t, st.PutStatus(ctx, blocked, desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Blocked: "login_required"}}))
	_, _, body := get(t, server(t, st).URL+"/")
	_, text := statuspagetest.DOM(t, body)
	approval, block := strings.Index(body, `id="awaiting-approval"`), strings.Index(body, `id="blocked"`)
	require.True(t, approval >= 0 && block >= 0, body)
	assert.Less(t, approval, block)
	assert.Less(t, strings.Index(body, "o/r#5"), block, "the asking item sits in its own group")
	assert.Contains(t, text, "awaiting_approval question_id=q2")
	assert.Contains(t, text, resolveApproval)
}

// TestGitHubPauseShown: a pause of GitHub calls that holds is on the
// index, with its installation, limit, end and GitHub's message (as
// text); one that ended is not.
func TestGitHubPauseShown(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, st.PutPause(ctx, desired.Pause{Installation: "installation 77", Kind: desired.PauseSecondary,
		Until: now.Add(time.Minute), Since: now, Streak: 2, HTTPStatus: 429, Message: "secondary rate limit <b>"}))
	require.NoError(t, st.PutPause(ctx, desired.Pause{Installation: "token", Kind: desired.PausePrimary,
		Until: now.Add(-time.Minute), Since: now.Add(-time.Hour), Streak: 1, HTTPStatus: 403}))
	srv := server(t, st)
	code, _, body := get(t, srv.URL+"/")
	require.Equal(t, http.StatusOK, code, body)
	_, text := statuspagetest.DOM(t, body)
	for _, want := range []string{"GitHub calls paused", "installation 77", "secondary", "429", "secondary rate limit <b>"} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "token")
	assert.Contains(t, body, "secondary rate limit &lt;b&gt;", "GitHub's message is text")

	fresh := fixture(t)
	_, _, body = get(t, server(t, fresh).URL+"/")
	_, text = statuspagetest.DOM(t, body)
	assert.NotContains(t, text, "GitHub calls paused", "nothing when no pause holds")
}

// Whatever came from GitHub is text: the payload's <script> and <img>
// become no element of the page, on the index (the journal's sender) and
// on the item's page (the pending event's sender and action).
func TestGitHubTextIsEscaped(t *testing.T) {
	srv := server(t, fixture(t))
	for _, path := range []string{"/", "/items/Codertocat/Hello-World/1"} {
		t.Run(path, func(t *testing.T) {
			code, _, body := get(t, srv.URL+path)
			require.Equal(t, http.StatusOK, code, body)
			elements, text := statuspagetest.DOM(t, body)
			assert.Contains(t, text, script, "shown as text")
			assert.Equal(t, 1, elements["script"], "only the page's own live.js")
			assert.Zero(t, elements["img"])
			assert.NotContains(t, body, "<script>document")
		})
	}
}

// No prompt body reaches the page: a pending event shows its sender,
// event and size, and a journal row's prompt attribute is left out.
func TestNoPromptBodies(t *testing.T) {
	srv := server(t, fixture(t))
	for _, path := range []string{"/", "/items/Codertocat/Hello-World/1"} {
		_, _, body := get(t, srv.URL+path)
		assert.NotContains(t, body, promptMarker, path)
	}
	_, _, body := get(t, srv.URL+"/items/Codertocat/Hello-World/1")
	_, text := statuspagetest.DOM(t, body)
	assert.Contains(t, text, "d-1", "the pending delivery is listed")
	assert.Contains(t, text, "tmux -L loopd attach -t ="+desired.SessionName(keyIssue))
}

func TestItemPage(t *testing.T) {
	srv := server(t, fixture(t))
	tests := []struct {
		name     string
		path     string
		code     int
		location string
		want     string
	}{
		{name: "item", path: "/items/Codertocat/Hello-World/1", code: http.StatusOK, want: "session.crash_loop"},
		{name: "an_item_that_never_had_a_session_offers_no_attach", path: itemURL(keyPR), code: http.StatusOK, want: "attachnone: no session yet"},
		{name: "other_case_redirects_to_the_item", path: "/items/codertocat/HELLO-WORLD/1", code: http.StatusFound,
			location: "/items/Codertocat/Hello-World/1"},
		{name: "unknown_item", path: "/items/Codertocat/Hello-World/8", code: http.StatusNotFound,
			want: "work item Codertocat/Hello-World#8 not found"},
		{name: "unknown_repository", path: "/items/nobody/nothing/1", code: http.StatusNotFound, want: "not found"},
		{name: "not_a_number", path: "/items/Codertocat/Hello-World/x", code: http.StatusNotFound, want: "not found"},
		{name: "zero", path: "/items/Codertocat/Hello-World/0", code: http.StatusNotFound, want: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := get(t, srv.URL+tt.path)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.location, hdr.Get("Location"))
			_, text := statuspagetest.DOM(t, body)
			assert.Contains(t, text, tt.want)
		})
	}
}

// A journal attribute's value is shown cut to maxAttrValue bytes on a
// rune boundary, "…" marking the cut.
func TestLongAttributeIsCut(t *testing.T) {
	st := fixture(t)
	long := strings.Repeat("é", maxAttrValue) // two bytes each
	require.NoError(t, st.AppendEvent(context.Background(), journal.Event{Time: time.Now(), Name: journal.SessionExited,
		Level: slog.LevelWarn, WorkItem: keyIssue.String(), Attrs: map[string]string{"reason": long}}))
	code, _, body := get(t, server(t, st).URL+"/items/Codertocat/Hello-World/1")
	require.Equal(t, http.StatusOK, code)
	_, text := statuspagetest.DOM(t, body)
	assert.Contains(t, text, strings.Repeat("é", maxAttrValue/2)+"…")
	assert.NotContains(t, text, strings.Repeat("é", maxAttrValue/2+1))
}

// "/" is only "/": an unknown path stays 404, and the daemon's other
// routes answer as before; the page answers GET only.
func TestRoutesAreExact(t *testing.T) {
	srv := server(t, fixture(t))
	tests := []struct {
		method, path string
		code         int
		body         string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
		{http.MethodGet, "/items/Codertocat/Hello-World/1/more", http.StatusNotFound, ""},
		{http.MethodGet, "/static/nope.js", http.StatusNotFound, ""},
		{http.MethodGet, "/healthz", http.StatusOK, "ok"},
		{http.MethodPost, "/webhook", http.StatusOK, "webhook"},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, ""},
		{http.MethodGet, "/static/live.js", http.StatusOK, "data-live"},
		{http.MethodHead, "/", http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			assert.Equal(t, tt.code, resp.StatusCode)
			assert.Contains(t, string(b), tt.body)
		})
	}
}

func TestTurnedOffIsNotFound(t *testing.T) {
	on := true
	srv := server(t, fixture(t), func(o *Options) { o.Enabled = func() bool { return on } })
	code, _, _ := get(t, srv.URL+"/")
	assert.Equal(t, http.StatusOK, code)
	on = false
	for _, path := range []string{"/", "/items/Codertocat/Hello-World/1", "/static/status.css"} {
		code, _, _ := get(t, srv.URL+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

// The hosts sharing the store: each with its live sessions (the items it
// holds a slot for), capacity and leases.
func TestHostsTable(t *testing.T) {
	hosts := hostList{{Name: "host-a", Capacity: 3, Leases: 1, Live: true, Heartbeat: time.Now()},
		{Name: "host-b", Capacity: 0, Leases: 0, Live: false, Draining: true}}
	srv := server(t, fixture(t), func(o *Options) { o.Hosts = hosts })
	_, _, body := get(t, srv.URL+"/")
	_, text := statuspagetest.DOM(t, body)
	assert.Contains(t, text, "host-b")
	assert.Contains(t, text, "this host")
	assert.Contains(t, text, "draining")
}

type hostList []desired.Host

func (h hostList) Hosts(context.Context) ([]desired.Host, error) { return h, nil }

// A store that fails answers 500 without its error (a path of the state
// dir, say), which goes to the log as status_page.failed.
func TestStoreFailureIsLoggedNotShown(t *testing.T) {
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	srv := server(t, failing{}, func(o *Options) { o.Log = log })
	for _, path := range []string{"/", "/items/o/r/1"} {
		code, _, body := get(t, srv.URL+path)
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.NotContains(t, body, "/var/lib/loopd")
	}
	assert.Contains(t, logged.String(), "msg="+string(journal.StatusPageFailed))
	assert.Contains(t, logged.String(), "/var/lib/loopd")
}

// An outage of the store shows on every page, and a page the store could
// not serve answers 503 naming it.
func TestOutageShown(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	outages := func() []Outage { return []Outage{{What: "store listener", Since: since}} }
	srv := server(t, fixture(t), func(o *Options) { o.Outages = outages })
	code, _, body := get(t, srv.URL+"/")
	assert.Equal(t, http.StatusOK, code)
	_, text := statuspagetest.DOM(t, body)
	assert.Contains(t, text, "Store outage")
	assert.Contains(t, text, "store listener")

	srv = server(t, failing{}, func(o *Options) { o.Outages = outages })
	code, _, body = get(t, srv.URL+"/")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "store listener down since 2026-12-01T10:00:00Z")
	assert.NotContains(t, body, "/var/lib/loopd")
}

type failing struct{}

func (failing) Records(context.Context) ([]desired.Record, error) {
	return nil, errors.New("sqlite records: open /var/lib/loopd/state/loopd.db: disk I/O error")
}

func (failing) Events(context.Context, store.EventFilter) ([]journal.Event, error) {
	return nil, errors.New("sqlite events: disk I/O error")
}

func (failing) Pauses(context.Context) ([]desired.Pause, error) {
	return nil, errors.New("sqlite pauses: disk I/O error")
}

// A webhook path under one of the page's prefixes would make ServeMux
// panic; Register says so instead.
func TestRegisterConflict(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/items/a/b/1", func(http.ResponseWriter, *http.Request) {})
	err := New(Options{Store: failing{}, Policy: testPolicy, Now: time.Now}).Register(mux)
	assert.ErrorIs(t, err, ErrConflict)
}

// TestTitleAndLinkShown: the list and the item page show the item's
// title, escaped (it is text from outside), and the item page links to
// its page on GitHub.
func TestTitleAndLinkShown(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d-t", Key: keyIssue, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents/1",
		Title: "Fix it " + script, URL: "https://github.com/Codertocat/Hello-World/issues/1"})
	require.NoError(t, err)
	srv := server(t, st)
	for _, path := range []string{"/", itemURL(keyIssue)} {
		_, _, body := get(t, srv.URL+path)
		_, text := statuspagetest.DOM(t, body)
		assert.Contains(t, text, "Fix it "+script, path)
		assert.NotContains(t, body, script, "%s: escaped", path)
	}
	_, _, body := get(t, srv.URL+itemURL(keyIssue))
	assert.Contains(t, body, `href="https://github.com/Codertocat/Hello-World/issues/1"`)
}

// TestAttendedItemShowsWhoAndSince: an item a person attends shows who
// attached and since when, on the index and on its own page.
func TestAttendedItemShowsWhoAndSince(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	k := desired.Key{Owner: "o", Repo: "r", Number: 5}
	_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d-att", Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents/x"})
	require.NoError(t, err)
	since := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
	require.NoError(t, st.PutStatus(ctx, k, desired.Status{Phase: desired.PhaseRunning,
		AttendanceState: desired.AttendanceState{AttendedSince: since, AttendedBy: "octo"}}))
	srv := server(t, st)
	for _, path := range []string{"/", itemURL(k)} {
		_, _, body := get(t, srv.URL+path)
		_, text := statuspagetest.DOM(t, body)
		assert.Contains(t, text, "attended by octo since", path)
		assert.Contains(t, body, `datetime="`+since.Format(time.RFC3339)+`"`, path)
	}
}

// The outages section is on every page, hidden while nothing is out: the
// live refresh (live.js) replaces sections by id, so an outage that
// begins after the page was loaded shows without a reload, and one that
// ends goes.
func TestOutageSectionIsAlwaysThereForTheLiveRefresh(t *testing.T) {
	var down atomic.Bool
	outages := func() []Outage {
		if down.Load() {
			return []Outage{{What: "store listener", Since: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}}
		}
		return nil
	}
	srv := server(t, fixture(t), func(o *Options) { o.Outages = outages })
	for _, path := range []string{"/", "/items/Codertocat/Hello-World/1"} {
		down.Store(false)
		_, _, body := get(t, srv.URL+path)
		assert.Contains(t, body, `<section id="outages" data-live hidden>`, path)
		assert.NotContains(t, body, "Store outage", path)
		down.Store(true)
		_, _, body = get(t, srv.URL+path)
		assert.Contains(t, body, `<section id="outages" data-live>`, path)
		assert.Contains(t, body, "Store outage", path)
	}
}

// TestItemPageShowsWhoAttendedWhenAndForHowLong: an item's page shows the
// journal of its takeover: who attached and since when (item.attended),
// and on the handback for how long and how it ended (item.handed_back).
func TestItemPageShowsWhoAttendedWhenAndForHowLong(t *testing.T) {
	st := fixture(t)
	ctx := context.Background()
	since := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: since, Name: journal.ItemAttended, Level: slog.LevelInfo,
		WorkItem: keyIssue.String(), Attrs: map[string]string{"by": "octo", "since": since.Format(time.RFC3339)}}))
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: since.Add(12 * time.Minute), Name: journal.ItemHandedBack, Level: slog.LevelInfo,
		WorkItem: keyIssue.String(), Attrs: map[string]string{"by": "octo", "how": "detached", "since": since.Format(time.RFC3339),
			"attended_for": "12m0s", "deliveries": "d-1,d-2"}}))
	code, _, body := get(t, server(t, st).URL+"/items/Codertocat/Hello-World/1")
	require.Equal(t, http.StatusOK, code)
	_, text := statuspagetest.DOM(t, body)
	for _, want := range []string{"item.attended", "item.handed_back", "octo", "2026-01-01T11:00:00Z", "12m0s", "detached", "d-1,d-2"} {
		assert.Contains(t, text, want)
	}
}

// leasedStore is a Store whose records are given, over another's events
// and pauses.
type leasedStore struct {
	Store
	records []desired.Record
}

func (s leasedStore) Records(context.Context) ([]desired.Record, error) { return s.records, nil }

// TestCapacityCountsThisHostsQueue: the capacity panel's queued count is
// this host's, as its live sessions are: an item queued on another host
// of the fleet is not in it.
func TestCapacityCountsThisHostsQueue(t *testing.T) {
	queued := func(n int, owner string) desired.Record {
		k := desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: n}
		return desired.Record{Key: k, Spec: desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/srv/agents"},
			Lease:   desired.Lease{Owner: owner, Generation: 1, Expires: time.Now().Add(time.Hour)},
			Status:  desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: time.Now().Add(-time.Duration(n) * time.Minute)},
			Pending: []desired.Delivery{{ID: fmt.Sprintf("d-%d", n), Event: "issues", Action: "opened", ReceivedAt: time.Now()}}}
	}
	st := leasedStore{Store: fixture(t), records: []desired.Record{queued(3, "host-a"), queued(4, "host-b"), queued(5, "host-b")}}
	srv := server(t, st)
	_, _, body := get(t, srv.URL+"/")
	assert.Contains(t, body, `<dt>queued</dt><dd><b>1</b></dd>`, "host-a's queue alone")
}
