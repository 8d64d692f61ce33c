package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

var testSecret = []byte("It's a Secret to Everybody")

// receivedAt is the fixed clock of every test handler.
var receivedAt = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// fixturesDir holds the GitHub webhook example payloads the tests send
// (testdata/github-webhooks/README.md says where they come from).
var fixturesDir = filepath.Join("..", "..", "testdata", "github-webhooks")

// fixture returns the bytes of one fixture file; a missing one fails the
// test.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixturesDir, name))
	require.NoError(t, err)
	return b
}

// derive returns the fixture name re-encoded after edit changed its parsed
// JSON.
func derive(t *testing.T, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(fixture(t, name), &m))
	edit(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// commentIDs numbers the comments tests derive from one fixture
// (newComment).
var commentIDs atomic.Int64

// newComment makes the comment of payload m a new one with body: a comment
// id of its own, so that it is not a replay of the fixture's comment (an
// event's identity: desired.Ingest.Identity).
func newComment(t *testing.T, m map[string]any, body string) {
	t.Helper()
	c := obj(t, m, "comment")
	c["id"], c["body"] = 900000000+commentIDs.Add(1), body
}

// comments returns n comments of issue_comment.created.1.json, each with
// an id of its own (newComment), signed with testSecret: n deliveries
// that are no replays of each other.
func comments(tb testing.TB, n int) (bodies [][]byte, sigs []string) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(fixturesDir, "issue_comment.created.1.json"))
	require.NoError(tb, err)
	var m map[string]any
	require.NoError(tb, json.Unmarshal(raw, &m))
	c := m["comment"].(map[string]any)
	for range n {
		c["id"] = 900000000 + commentIDs.Add(1)
		b, err := json.Marshal(m)
		require.NoError(tb, err)
		bodies, sigs = append(bodies, b), append(sigs, Sign(testSecret, b))
	}
	return bodies, sigs
}

// obj returns m[key] as an object, for editing nested fixture JSON.
func obj(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	o, ok := m[key].(map[string]any)
	require.True(t, ok, "fixture has no object %q", key)
	return o
}

// lockedBuffer is a log sink safe for the server goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a handler over a real SQLite store behind a real HTTP server.
type env struct {
	srv      *httptest.Server
	store    store.Store
	cfg      atomic.Pointer[schema.GHWebhook]
	triggers atomic.Int32
	logs     *lockedBuffer
	recorder *journal.Recorder
	// metrics is the registry of the handler's Metrics.
	metrics *prometheus.Registry
}

// defaultConfig authorizes Codertocat (spelled in another case, as logins
// compare case-insensitively) and routes the fixtures' repository.
func defaultConfig() schema.GHWebhook {
	return schema.GHWebhook{
		AuthorizedUsers: []string{"someone", "CODERTOCAT"},
		Routing: schema.Routing{Repos: map[string]schema.Route{
			"Codertocat/Hello-World": {Harness: "claude-code", Workdir: "/srv/agents/{{.Owner}}/{{.Repo}}/{{.Kind}}-{{.Number}}"},
		}},
	}
}

type envOption func(*Options)

func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, store.Close()) })

	e := &env{store: store, logs: &lockedBuffer{}}
	cfg := defaultConfig()
	e.cfg.Store(&cfg)
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	// The rejections of unauthenticated requests are journaled as serve
	// does it: from a queue with its own goroutine.
	rejections := journal.NewAsync(store, 0, log)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rejections.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	e.metrics = prometheus.NewRegistry()
	o := Options{
		Secret:     testSecret,
		Config:     func() schema.GHWebhook { return *e.cfg.Load() },
		Store:      store,
		Recorder:   journal.NewRecorder(log, store, func() time.Time { return receivedAt }),
		Rejections: journal.NewRecorder(log, rejections, func() time.Time { return receivedAt }),
		Metrics:    NewMetrics(e.metrics),
		Trigger:    func() { e.triggers.Add(1) },
		Log:        log,
		Now:        func() time.Time { return receivedAt },
	}
	for _, f := range opts {
		f(&o)
	}
	e.recorder = o.Recorder
	e.srv = httptest.NewServer(New(o))
	t.Cleanup(e.srv.Close)
	return e
}

// replay sends body signed with testSecret and returns the status and the
// answer's text.
func (e *env) replay(t *testing.T, event, id string, body []byte) (int, string) {
	t.Helper()
	resp, err := Replay(context.Background(), e.srv.Client(), e.srv.URL, testSecret, event, id, body)
	require.NoError(t, err)
	return readResponse(t, resp)
}

// send posts body with exactly the headers given, for requests Replay
// would not make.
func (e *env) send(t *testing.T, method string, header http.Header, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, e.srv.URL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	return readResponse(t, resp)
}

func readResponse(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// logged returns the log lines whose message is name, decoded.
func (e *env) logged(t *testing.T, name journal.Name) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == string(name) {
			out = append(out, m)
		}
	}
	return out
}

// onlyRejection requires exactly one delivery.rejected log line and
// returns it.
func (e *env) onlyRejection(t *testing.T) map[string]any {
	t.Helper()
	lines := e.logged(t, journal.DeliveryRejected)
	require.Len(t, lines, 1, e.logs.String())
	return lines[0]
}

func (e *env) records(t *testing.T) []desired.Record {
	t.Helper()
	recs, err := e.store.Records(context.Background())
	require.NoError(t, err)
	return recs
}

// prompt returns the stored prompt of rec's pending delivery i: records
// carry none (desired.Delivery.Compact).
func (e *env) prompt(t *testing.T, rec desired.Record, i int) string {
	t.Helper()
	p, err := e.store.Prompt(context.Background(), rec.Key, rec.Pending[i].ID)
	require.NoError(t, err)
	return p
}

func (e *env) events(t *testing.T) []journal.Event {
	t.Helper()
	evs, err := e.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	return evs
}

// onlyEvent requires exactly one journal row and returns it.
func (e *env) onlyEvent(t *testing.T) journal.Event {
	t.Helper()
	evs := e.events(t)
	require.Len(t, evs, 1, "journal rows: %+v", evs)
	return evs[0]
}

// rejectedRow waits until the journal holds a row, requires exactly one,
// a delivery.rejected of no work item, and returns it: an unauthenticated
// request's rejection is journaled after its answer.
func (e *env) rejectedRow(t *testing.T) journal.Event {
	t.Helper()
	require.Eventually(t, func() bool { return len(e.events(t)) > 0 }, 10*time.Second, 5*time.Millisecond,
		"no delivery.rejected row")
	ev := e.onlyEvent(t)
	require.Equal(t, journal.DeliveryRejected, ev.Name)
	require.Empty(t, ev.WorkItem)
	return ev
}

// counted returns loopd_webhook_deliveries_total{outcome, reason}.
func (e *env) counted(t *testing.T, outcome, reason string) float64 {
	t.Helper()
	mfs, err := e.metrics.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "loopd_webhook_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["outcome"] == outcome && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// onlyRecord requires exactly one work item and returns it.
func (e *env) onlyRecord(t *testing.T) desired.Record {
	t.Helper()
	recs := e.records(t)
	require.Len(t, recs, 1)
	return recs[0]
}

var (
	issue1 = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 1}
	pr2    = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 2}
)

const (
	issueTitle = "Spelling error in the README file"
	issueURL   = "https://github.com/Codertocat/Hello-World/issues/1"
	issueBody  = "It looks like you accidently spelled 'commit' with two 't's."
	prTitle    = "Update the README with new information."
	prURL      = "https://github.com/Codertocat/Hello-World/pull/2"
	prBody     = "This is a pretty simple change that we need to pull into master."
)

// TestFixtureOutcomes sends every fixture through the handler and checks
// the outcome the package doc's table promises for its event and action.
func TestFixtureOutcomes(t *testing.T) {
	queued := map[string]bool{
		"issues.opened": true, "issues.reopened": true,
		"issue_comment.created":         true,
		"pull_request.opened":           true,
		"pull_request.reopened":         true,
		"pull_request.ready_for_review": true,
		"pull_request.synchronize":      true,
	}
	closes := map[string]bool{"issues.closed": true, "pull_request.closed": true}
	// An issue that left the repository closes an item loopd holds
	// (TestIssueGoneClosesTheItem) and makes none.
	gone := map[string]bool{"issues.deleted": true, "issues.transferred": true}
	handled := map[string]bool{"issues": true, "issue_comment": true, "pull_request": true, "pull_request_review": true}
	ci := map[string]bool{"check_run": true, "check_suite": true, "workflow_run": true}
	namesItsPR := map[string]bool{"check_run.completed.1.json": true, "check_run.completed.2.json": true, "check_suite.completed.1.json": true}

	names, err := filepath.Glob(filepath.Join(fixturesDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, path := range names {
		name := filepath.Base(path)
		parts := strings.Split(name, ".")
		event, eventAction := parts[0], parts[0]+"."+parts[1]
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			e := newEnv(t)
			code, _ := e.replay(t, event, "d-"+name, fixture(t, name))

			switch {
			case event == "ping":
				assert.Equal(t, http.StatusOK, code)
				assert.Empty(t, e.records(t))
				assert.Equal(t, "ping", e.onlyEvent(t).Attrs["reason"])
			case queued[eventAction]:
				assert.Equal(t, http.StatusAccepted, code)
				rec := e.onlyRecord(t)
				require.Len(t, rec.Pending, 1)
				d := rec.Pending[0]
				d.Prompt = e.prompt(t, rec, 0)
				assert.Equal(t, "d-"+name, d.ID)
				assert.Equal(t, event, d.Event)
				assert.Equal(t, parts[1], d.Action)
				assert.Equal(t, "Codertocat", d.Sender)
				assert.Equal(t, receivedAt, d.ReceivedAt.UTC())
				assert.True(t, strings.HasPrefix(d.Prompt,
					"[loopd] "+eventAction+" on "+rec.Key.String()+" by Codertocat (delivery d-"+name+")\n"), d.Prompt)
				assert.False(t, rec.Spec.Closed)
				assert.Equal(t, journal.DeliveryAccepted, e.onlyEvent(t).Name)
				assert.Equal(t, int32(1), e.triggers.Load())
			case closes[eventAction]:
				assert.Equal(t, http.StatusAccepted, code)
				rec := e.onlyRecord(t)
				assert.True(t, rec.Spec.Closed)
				assert.Empty(t, rec.Pending)
			case gone[eventAction]:
				assert.Equal(t, http.StatusAccepted, code)
				assert.Empty(t, e.records(t))
				assert.Equal(t, journal.DeliveryIgnored, e.onlyEvent(t).Name)
				assert.Zero(t, e.triggers.Load())
			case handled[event]:
				assert.Equal(t, http.StatusAccepted, code)
				assert.Empty(t, e.records(t))
				ev := e.onlyEvent(t)
				assert.Equal(t, journal.DeliveryIgnored, ev.Name)
				want := reasonActionNotHandled
				if eventAction == "pull_request_review.submitted" {
					want = reasonEmptyReview // the fixtures' reviews are "commented" with no body
				}
				assert.Equal(t, want, ev.Attrs["reason"])
				assert.Zero(t, e.triggers.Load())
			case ci[event]:
				// No item holds their commits: those that name a pull
				// request of their repository go to no work item, the
				// others (a fork's, octo-org's run) to no pull request.
				assert.Equal(t, http.StatusAccepted, code)
				assert.Empty(t, e.records(t))
				want := reasonNoPullRequest
				if namesItsPR[name] {
					want = reasonNoWorkItem
				}
				assert.Equal(t, want, e.onlyEvent(t).Attrs["reason"])
			default:
				assert.Equal(t, http.StatusAccepted, code)
				assert.Empty(t, e.records(t))
				assert.Equal(t, reasonEventNotHandled, e.onlyEvent(t).Attrs["reason"])
			}
		})
	}
}

// TestFixturePrompts checks the work item, spec and whole prompt of one
// fixture, or of a fixture edited where none covers the case, per effect.
func TestFixturePrompts(t *testing.T) {
	const id = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	prComment := func(m map[string]any) {
		// An issue_comment on a pull request carries pull_request links.
		is := obj(t, m, "issue")
		is["number"] = 2
		is["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
	}
	review := func(state string, body any) func(m map[string]any) {
		return func(m map[string]any) {
			r := obj(t, m, "review")
			r["state"], r["body"] = state, body
		}
	}
	reviewComment := func(m map[string]any) {
		m["action"] = "created"
		delete(m, "review")
		m["comment"] = map[string]any{
			"id":        284312630,
			"path":      "README.md",
			"diff_hunk": "@@ -1 +1 @@\n-# Hello-World",
			"body":      "Maybe you should use more emoji on this line.",
			"html_url":  prURL + "#discussion_r284312630",
			"user":      m["sender"],
		}
	}
	tests := []struct {
		name    string
		event   string
		body    func(t *testing.T) []byte
		key     desired.Key
		kind    desired.Kind
		want    PromptInput
		updated string // the payload's updated_at, recorded with a state change
	}{
		{
			name: "issues_opened", event: "issues",
			body: func(t *testing.T) []byte { return fixture(t, "issues.opened.1.json") },
			key:  issue1, kind: desired.KindIssue,
			want: PromptInput{Action: "opened", Title: issueTitle, URL: issueURL, Body: issueBody},
		},
		{
			name: "issues_reopened_opens_and_prompts", event: "issues",
			body: func(t *testing.T) []byte { return fixture(t, "issues.reopened.1.json") },
			key:  issue1, kind: desired.KindIssue, updated: "2021-10-11T16:40:56Z",
			want: PromptInput{Action: "reopened", Title: issueTitle, URL: issueURL},
		},
		{
			name: "issue_comment_created", event: "issue_comment",
			body: func(t *testing.T) []byte { return fixture(t, "issue_comment.created.1.json") },
			key:  issue1, kind: desired.KindIssue,
			want: PromptInput{
				Action: "created", Title: issueTitle,
				URL:  issueURL + "#issuecomment-492700400",
				Body: "You are totally right! I'll get this fixed right away.",
			},
		},
		{
			name: "issue_comment_on_pull_request", event: "issue_comment",
			body: func(t *testing.T) []byte { return derive(t, "issue_comment.created.1.json", prComment) },
			key:  pr2, kind: desired.KindPullRequest,
			want: PromptInput{
				Action: "created", Title: issueTitle,
				URL:  issueURL + "#issuecomment-492700400",
				Body: "You are totally right! I'll get this fixed right away.",
			},
		},
		{
			name: "pull_request_opened", event: "pull_request",
			body: func(t *testing.T) []byte { return fixture(t, "pull_request.opened.1.json") },
			key:  pr2, kind: desired.KindPullRequest,
			want: PromptInput{Action: "opened", Title: prTitle, URL: prURL, Head: "changes", Base: "master", Body: prBody},
		},
		{
			name: "pull_request_reopened_opens_and_prompts", event: "pull_request",
			body: func(t *testing.T) []byte { return fixture(t, "pull_request.reopened.1.json") },
			key:  pr2, kind: desired.KindPullRequest, updated: "2019-05-15T15:20:33Z",
			want: PromptInput{Action: "reopened", Title: prTitle, URL: prURL, Head: "changes", Base: "master", Body: prBody},
		},
		{
			name: "pull_request_ready_for_review", event: "pull_request",
			body: func(t *testing.T) []byte { return fixture(t, "pull_request.ready_for_review.1.json") },
			key:  pr2, kind: desired.KindPullRequest,
			want: PromptInput{Action: "ready_for_review", Title: prTitle, URL: prURL, Head: "changes", Base: "master", Body: prBody},
		},
		{
			name: "pull_request_synchronize", event: "pull_request",
			body: func(t *testing.T) []byte { return fixture(t, "pull_request.synchronize.1.json") },
			key:  pr2, kind: desired.KindPullRequest,
			want: PromptInput{Action: "synchronize", Title: prTitle, URL: prURL, Head: "changes", Commit: "ec26c3e57ca3a959ca5aad62de7213c562f8c821"},
		},
		{
			name: "review_changes_requested", event: "pull_request_review",
			body: func(t *testing.T) []byte {
				return derive(t, "pull_request_review.submitted.1.json", review("changes_requested", "Please fix the typo."))
			},
			key: pr2, kind: desired.KindPullRequest,
			want: PromptInput{
				Action: "submitted", Title: prTitle, URL: prURL + "#pullrequestreview-237895671", Head: "changes",
				State: "changes_requested", Body: "Please fix the typo.",
			},
		},
		{
			name: "review_approved_without_body", event: "pull_request_review",
			body: func(t *testing.T) []byte {
				return derive(t, "pull_request_review.submitted.1.json", review("approved", nil))
			},
			key: pr2, kind: desired.KindPullRequest,
			want: PromptInput{
				Action: "submitted", Title: prTitle, URL: prURL + "#pullrequestreview-237895671", Head: "changes",
				State: "approved",
			},
		},
		{
			name: "review_comment_created", event: "pull_request_review_comment",
			body: func(t *testing.T) []byte { return derive(t, "pull_request_review.submitted.1.json", reviewComment) },
			key:  pr2, kind: desired.KindPullRequest,
			want: PromptInput{
				Action: "created", Title: prTitle, URL: prURL + "#discussion_r284312630", Head: "changes",
				Path: "README.md", DiffHunk: "@@ -1 +1 @@\n-# Hello-World",
				Body: "Maybe you should use more emoji on this line.",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			code, _ := e.replay(t, tt.event, id, tt.body(t))
			require.Equal(t, http.StatusAccepted, code)

			rec := e.onlyRecord(t)
			assert.Equal(t, tt.key, rec.Key)
			assert.Equal(t, tt.kind, rec.Spec.Kind)
			assert.Equal(t, "claude-code", rec.Spec.Harness)
			assert.Equal(t, filepath.Join("/srv/agents", "Codertocat", "Hello-World", string(tt.kind)+"-"+strconv.Itoa(tt.key.Number)), rec.Spec.Cwd)
			assert.False(t, rec.Spec.Closed)
			if tt.updated != "" {
				want, err := time.Parse(time.RFC3339, tt.updated)
				require.NoError(t, err)
				assert.True(t, want.Equal(rec.Spec.StateChangedAt), "StateChangedAt %v, want %v", rec.Spec.StateChangedAt, want)
			}
			require.Len(t, rec.Pending, 1)
			want := tt.want
			want.Event, want.WorkItem, want.Sender, want.DeliveryID = tt.event, tt.key.String(), "Codertocat", id
			assert.Equal(t, Render(want), e.prompt(t, rec, 0))
		})
	}
}

func TestClosedSetsStateWithoutPrompt(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)

	code, _ = e.replay(t, "pull_request", "d-close", fixture(t, "pull_request.closed.1.json"))

	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	assert.True(t, rec.Spec.Closed)
	assert.True(t, time.Date(2019, 5, 15, 15, 21, 18, 0, time.UTC).Equal(rec.Spec.StateChangedAt))
	require.Len(t, rec.Pending, 1, "closing queues no prompt")
	assert.Equal(t, "d-open", rec.Pending[0].ID)
	assert.Equal(t, int32(2), e.triggers.Load())
}

func TestStateChangesApplyWhoeverMadeThem(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	stranger := func(m map[string]any) { obj(t, m, "sender")["login"] = "merge-bot" }

	code, _ = e.replay(t, "pull_request", "d-close", derive(t, "pull_request.closed.1.json", stranger))
	assert.Equal(t, http.StatusAccepted, code)
	assert.True(t, e.onlyRecord(t).Spec.Closed, "a close by anyone stops the agent")

	code, _ = e.replay(t, "pull_request", "d-reopen", derive(t, "pull_request.reopened.1.json", func(m map[string]any) {
		stranger(m)
		obj(t, m, "pull_request")["updated_at"] = "2030-01-01T00:00:00Z"
	}))
	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	assert.False(t, rec.Spec.Closed)
	require.Len(t, rec.Pending, 1, "but a stranger's reopen queues no instruction")
	assert.Equal(t, "d-open", rec.Pending[0].ID)
}

func TestStaleCloseIgnored(t *testing.T) {
	e := newEnv(t)
	// reopened at 2021-10-11; a close stamped 2019 arrives late.
	code, _ := e.replay(t, "issues", "d-reopen", fixture(t, "issues.reopened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	lateClose := derive(t, "issues.reopened.1.json", func(m map[string]any) {
		m["action"] = "closed"
		obj(t, m, "issue")["updated_at"] = "2019-05-15T15:20:18Z"
	})

	code, _ = e.replay(t, "issues", "d-close", lateClose)

	assert.Equal(t, http.StatusAccepted, code)
	assert.False(t, e.onlyRecord(t).Spec.Closed)
	evs := e.events(t)
	require.Len(t, evs, 2)
	assert.Equal(t, journal.DeliveryIgnored, evs[1].Name)
	assert.Equal(t, reasonStaleState, evs[1].Attrs["reason"])
	assert.Equal(t, int32(1), e.triggers.Load())
}

// issueState edits an issue payload's state and updated_at.
func issueState(t *testing.T, state, updated string) func(m map[string]any) {
	return func(m map[string]any) {
		is := obj(t, m, "issue")
		is["state"], is["updated_at"] = state, updated
	}
}

// TestStateSnapshotHeals replays a lost close or reopen: GitHub never
// retries it, and the next comment's issue.state brings the item back in
// line. A snapshot older than the recorded state is ignored; a comment
// older than the item's last open/closed change is an old event, whose
// text is not queued either (older_than_state).
func TestStateSnapshotHeals(t *testing.T) {
	closeAt := func(t *testing.T, updated string) []byte {
		return derive(t, "issues.opened.1.json", func(m map[string]any) {
			m["action"] = "closed"
			issueState(t, "closed", updated)(m)
		})
	}
	tests := []struct {
		name       string
		closeFirst string // updated_at of an issues.closed that arrives; "" for none
		comment    func(t *testing.T, m map[string]any)
		wantClosed bool
		wantStale  bool
		wantOld    bool
	}{
		{
			name: "comment_after_lost_reopen_reopens", closeFirst: "2024-01-01T00:00:00Z",
			comment:    func(t *testing.T, m map[string]any) { issueState(t, "open", "2024-01-03T00:00:00Z")(m) },
			wantClosed: false,
		},
		{
			name:       "comment_after_lost_close_closes",
			comment:    func(t *testing.T, m map[string]any) { issueState(t, "closed", "2024-01-03T00:00:00Z")(m) },
			wantClosed: true,
		},
		{
			name: "older_comment_snapshot_ignored", closeFirst: "2024-01-02T00:00:00Z",
			comment:    func(t *testing.T, m map[string]any) { issueState(t, "open", "2024-01-01T00:00:00Z")(m) },
			wantClosed: true, wantStale: true, wantOld: true,
		},
		{
			name: "comment_in_the_second_of_the_close_ignored", closeFirst: "2024-01-02T00:00:00Z",
			comment:    func(t *testing.T, m map[string]any) { issueState(t, "open", "2024-01-02T00:00:00Z")(m) },
			wantClosed: true, wantStale: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			code, _ := e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
			require.Equal(t, http.StatusAccepted, code)
			if tt.closeFirst != "" {
				code, _ = e.replay(t, "issues", "d-close", closeAt(t, tt.closeFirst))
				require.Equal(t, http.StatusAccepted, code)
				require.True(t, e.onlyRecord(t).Spec.Closed)
			}

			code, _ = e.replay(t, "issue_comment", "d-comment", derive(t, "issue_comment.created.1.json", func(m map[string]any) { tt.comment(t, m) }))

			assert.Equal(t, http.StatusAccepted, code)
			rec := e.onlyRecord(t)
			assert.Equal(t, tt.wantClosed, rec.Spec.Closed)
			evs := e.events(t)
			last := evs[len(evs)-1]
			if tt.wantOld {
				assert.Len(t, rec.Pending, 1, "an old event queues no text")
				assert.Equal(t, journal.DeliveryIgnored, last.Name)
				assert.Equal(t, reasonOutdated, last.Attrs["reason"])
				return
			}
			require.Len(t, rec.Pending, 2, "the comment is queued; on a closed item it waits for a reopen")
			assert.Equal(t, "d-comment", rec.Pending[1].ID)
			assert.Equal(t, journal.DeliveryAccepted, last.Name)
			assert.Equal(t, strconv.FormatBool(tt.wantStale), last.Attrs["stale_state"])
			assert.Equal(t, strconv.FormatBool(!tt.wantStale), last.Attrs["state_changed"])
			if !tt.wantStale {
				assert.Equal(t, strconv.FormatBool(tt.wantClosed), last.Attrs["closed"])
			}
		})
	}
}

// TestUnhandledActionsHealStateOnly: a payload whose action loopd does not
// act on (a label, an edit, an empty review) still carries the item's state
// as of its updated_at, and that snapshot heals a lost close or reopen;
// nothing is queued, and a snapshot that changes nothing is ignored as before.
func TestUnhandledActionsHealStateOnly(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	labeled := func(state, updated string) []byte {
		return derive(t, "issues.opened.1.json", func(m map[string]any) {
			m["action"] = "labeled"
			issueState(t, state, updated)(m)
		})
	}

	// The close was lost; a label added after it shows the issue closed.
	code, _ = e.replay(t, "issues", "d-labeled", labeled("closed", "2030-01-02T00:00:00Z"))
	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	assert.True(t, rec.Spec.Closed, "the label's snapshot closes the item")
	require.Len(t, rec.Pending, 1, "nothing is queued for a label")
	last := e.events(t)[len(e.events(t))-1]
	assert.Equal(t, journal.DeliveryAccepted, last.Name)
	assert.Equal(t, "true", last.Attrs["state_changed"])

	// An edited comment showing the same state changes nothing: ignored.
	code, msg := e.replay(t, "issue_comment", "d-edited", derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		m["action"] = "edited"
		issueState(t, "closed", "2030-01-03T00:00:00Z")(m)
	}))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Contains(t, msg, reasonActionNotHandled)
	assert.True(t, e.onlyRecord(t).Spec.Closed)

	// An empty review on the pull request the payload is about reopens
	// nothing here: it names another item, which it never creates.
	code, msg = e.replay(t, "pull_request_review", "d-review", derive(t, "pull_request_review.submitted.1.json", func(m map[string]any) {
		obj(t, m, "review")["body"], obj(t, m, "review")["state"] = "", "commented"
	}))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Contains(t, msg, reasonEmptyReview)
	assert.Len(t, e.records(t), 1, "a snapshot never creates an item")
}

// TestIssueGoneClosesTheItem: an issue deleted, or transferred to another
// repository, closes its item here, as a close does, whatever state its
// payload shows (open, in the repository it moved to): no event of it
// comes here again, and its agent stops. Nothing is queued.
func TestIssueGoneClosesTheItem(t *testing.T) {
	for _, action := range []string{"deleted", "transferred"} {
		t.Run(action, func(t *testing.T) {
			e := newEnv(t)
			code, _ := e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
			require.Equal(t, http.StatusAccepted, code)
			require.False(t, e.onlyRecord(t).Spec.Closed)

			// The item's own issue, shown open as of later: a transfer
			// leaves it open in the repository it moved to.
			code, _ = e.replay(t, "issues", "d-"+action, derive(t, "issues.opened.1.json", func(m map[string]any) {
				m["action"] = action
				issueState(t, "open", "2030-01-04T00:00:00Z")(m)
			}))
			assert.Equal(t, http.StatusAccepted, code)
			rec := e.onlyRecord(t)
			assert.True(t, rec.Spec.Closed, "the item is closed")
			assert.Len(t, rec.Pending, 1, "nothing more is queued")
			last := e.events(t)[len(e.events(t))-1]
			assert.Equal(t, journal.DeliveryAccepted, last.Name)
			assert.Equal(t, "true", last.Attrs["state_changed"])
		})
	}
}

// TestStrangersCommentHealsStateOnly: a comment by someone not authorized
// still shows GitHub's state, which applies, but queues nothing; when it
// shows nothing new it is ignored as before.
func TestStrangersCommentHealsStateOnly(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	stranger := func(state, updated string) []byte {
		return derive(t, "issue_comment.created.1.json", func(m map[string]any) {
			obj(t, m, "sender")["login"] = "passer-by"
			newComment(t, m, "passing by")
			issueState(t, state, updated)(m)
		})
	}

	code, _ = e.replay(t, "issue_comment", "d-1", stranger("open", "2024-01-01T00:00:00Z"))
	assert.Equal(t, http.StatusAccepted, code)
	code, _ = e.replay(t, "issue_comment", "d-2", stranger("closed", "2024-01-02T00:00:00Z"))
	assert.Equal(t, http.StatusAccepted, code)

	rec := e.onlyRecord(t)
	assert.True(t, rec.Spec.Closed)
	require.Len(t, rec.Pending, 1)
	assert.Equal(t, "d-open", rec.Pending[0].ID)
	evs := e.events(t)
	require.Len(t, evs, 3)
	assert.Equal(t, journal.DeliveryIgnored, evs[1].Name)
	assert.Equal(t, reasonUnauthorizedSender, evs[1].Attrs["reason"])
	assert.Equal(t, journal.DeliveryAccepted, evs[2].Name)
	assert.Equal(t, "true", evs[2].Attrs["state_changed"])
	assert.Equal(t, int32(2), e.triggers.Load())
}

func TestRedeliveryIsDuplicate(t *testing.T) {
	e := newEnv(t)
	body := fixture(t, "issue_comment.created.1.json")
	code, _ := e.replay(t, "issue_comment", "d-1", body)
	require.Equal(t, http.StatusAccepted, code)

	code, _ = e.replay(t, "issue_comment", "d-1", body)

	assert.Equal(t, http.StatusOK, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1)
	assert.Equal(t, "d-1", rec.Pending[0].ID)
	evs := e.events(t)
	require.Len(t, evs, 2)
	assert.Equal(t, journal.DeliveryAccepted, evs[0].Name)
	assert.Equal(t, journal.DeliveryDuplicate, evs[1].Name)
	assert.Equal(t, issue1.String(), evs[1].WorkItem)
	assert.Equal(t, int32(1), e.triggers.Load(), "a duplicate does not wake the reconciler")
}

func TestUnauthenticatedStoresNothing(t *testing.T) {
	body := fixture(t, "issue_comment.created.1.json")
	header := func(sig string) http.Header {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("X-GitHub-Event", "issue_comment")
		h.Set("X-GitHub-Delivery", "d-1")
		if sig != "" {
			h.Set("X-Hub-Signature-256", sig)
		}
		return h
	}
	tests := []struct {
		name   string
		sig    string
		reason string
	}{
		{name: "missing_signature", sig: "", reason: reasonMissingSignature},
		{name: "wrong_secret", sig: Sign([]byte("another secret"), body), reason: reasonBadSignature},
		{name: "signature_over_other_bytes", sig: Sign(testSecret, append([]byte(" "), body...)), reason: reasonBadSignature},
		{name: "not_hex", sig: "sha256=zz", reason: reasonBadSignature},
		{name: "sha1_in_sha256_header", sig: "sha1=" + strings.TrimPrefix(Sign(testSecret, body), "sha256="), reason: reasonBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)

			code, _ := e.send(t, http.MethodPost, header(tt.sig), body)

			assert.Equal(t, http.StatusUnauthorized, code)
			assert.Equal(t, tt.reason, e.onlyRejection(t)["reason"])
			ev := e.rejectedRow(t)
			assert.Equal(t, tt.reason, ev.Attrs["reason"])
			assert.Equal(t, "d-1", ev.Attrs["delivery"])
			assert.Equal(t, "issue_comment", ev.Attrs["event"])
			assert.NotEmpty(t, ev.Attrs["remote_addr"])
			assert.Empty(t, e.records(t), "an unsigned request stores no work item")
			assert.Equal(t, 1.0, e.counted(t, "rejected", tt.reason))
			assert.Zero(t, e.triggers.Load())
		})
	}
}

func TestEmptySecretRefusesEverything(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Secret = nil })
	body := fixture(t, "issue_comment.created.1.json")

	// Signed with the empty key, which anyone can compute.
	resp, err := Replay(context.Background(), e.srv.Client(), e.srv.URL, nil, "issue_comment", "d-1", body)
	require.NoError(t, err)
	code, _ := readResponse(t, resp)

	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Equal(t, reasonNoSecret, e.rejectedRow(t).Attrs["reason"])
	assert.Empty(t, e.records(t))
	line := e.onlyRejection(t)
	assert.Equal(t, "ERROR", line["level"])
	assert.Equal(t, reasonNoSecret, line["reason"])
}

func TestRejectedSignedRequests(t *testing.T) {
	signed := func(event, id, contentType string, body []byte) http.Header {
		h := http.Header{}
		h.Set("Content-Type", contentType)
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", id)
		h.Set("X-Hub-Signature-256", Sign(testSecret, body))
		return h
	}
	comment := func(t *testing.T) []byte { return fixture(t, "issue_comment.created.1.json") }
	tests := []struct {
		name        string
		event       string
		id          string
		contentType string
		body        func(t *testing.T) []byte
		code        int
		reason      string
	}{
		{
			name: "malformed_json", event: "issue_comment", id: "d-1", contentType: "application/json",
			body: func(*testing.T) []byte { return []byte(`{"action": "created", "issue": {`) },
			code: http.StatusBadRequest, reason: reasonMalformedPayload,
		},
		{
			name: "wrong_json_type", event: "issues", id: "d-1", contentType: "application/json",
			body: func(*testing.T) []byte { return []byte(`{"action": "opened", "issue": []}`) },
			code: http.StatusBadRequest, reason: reasonMalformedPayload,
		},
		{
			name: "no_repository", event: "issues", id: "d-1", contentType: "application/json",
			body: func(*testing.T) []byte {
				return []byte(`{"action": "opened", "issue": {"number": 1}, "sender": {"login": "Codertocat"}}`)
			},
			code: http.StatusBadRequest, reason: reasonMalformedPayload,
		},
		{
			name: "missing_delivery_id", event: "issue_comment", id: "", contentType: "application/json",
			body: comment, code: http.StatusBadRequest, reason: reasonBadDeliveryID,
		},
		{
			name: "delivery_id_with_space", event: "issue_comment", id: "d 1", contentType: "application/json",
			body: comment, code: http.StatusBadRequest, reason: reasonBadDeliveryID,
		},
		{
			name: "missing_event", event: "", id: "d-1", contentType: "application/json",
			body: comment, code: http.StatusBadRequest, reason: reasonMissingEvent,
		},
		{
			name: "form_encoded", event: "issue_comment", id: "d-1", contentType: "application/x-www-form-urlencoded",
			body: func(t *testing.T) []byte { return append([]byte("payload="), comment(t)...) },
			code: http.StatusUnsupportedMediaType, reason: reasonUnsupportedContent,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			body := tt.body(t)

			code, answer := e.send(t, http.MethodPost, signed(tt.event, tt.id, tt.contentType, body), body)

			assert.Equal(t, tt.code, code, answer)
			assert.Empty(t, e.records(t))
			ev := e.onlyEvent(t)
			assert.Equal(t, journal.DeliveryRejected, ev.Name)
			assert.Equal(t, tt.reason, ev.Attrs["reason"])
			assert.Zero(t, e.triggers.Load())
		})
	}
}

func TestIgnored(t *testing.T) {
	tests := []struct {
		name   string
		config func(*schema.GHWebhook)
		event  string
		body   func(t *testing.T) []byte
		code   int
		reason string
	}{
		{
			name: "ping", event: "ping",
			body: func(t *testing.T) []byte { return fixture(t, "ping.none.1.json") },
			code: http.StatusOK, reason: reasonPing,
		},
		{
			name: "event_not_handled", event: "star",
			body: func(t *testing.T) []byte {
				return derive(t, "issues.opened.1.json", func(m map[string]any) {
					m["action"] = "created"
					delete(m, "issue")
					m["starred_at"] = "2019-05-15T15:20:40Z"
				})
			},
			code: http.StatusAccepted, reason: reasonEventNotHandled,
		},
		{
			name: "action_not_handled", event: "issue_comment",
			body: func(t *testing.T) []byte { return fixture(t, "issue_comment.edited.1.json") },
			code: http.StatusAccepted, reason: reasonActionNotHandled,
		},
		{
			name:   "unauthorized_sender",
			config: func(c *schema.GHWebhook) { c.AuthorizedUsers = []string{"octocat"} },
			event:  "issue_comment",
			body:   func(t *testing.T) []byte { return fixture(t, "issue_comment.created.1.json") },
			code:   http.StatusAccepted, reason: reasonUnauthorizedSender,
		},
		{
			name:   "empty_authorized_users_authorize_nobody",
			config: func(c *schema.GHWebhook) { c.AuthorizedUsers = nil },
			event:  "issue_comment",
			body:   func(t *testing.T) []byte { return fixture(t, "issue_comment.created.1.json") },
			code:   http.StatusAccepted, reason: reasonUnauthorizedSender,
		},
		// An event that cannot start an item creates none: its state
		// applies only to an item loopd holds.
		{
			name:   "reopen_with_mention_trigger",
			config: mentionTrigger,
			event:  "issues",
			body:   func(t *testing.T) []byte { return fixture(t, "issues.reopened.1.json") },
			code:   http.StatusAccepted, reason: reasonNoMention,
		},
		{
			name:   "reopen_of_an_item_whose_body_mentions_the_trigger",
			config: mentionTrigger,
			event:  "issues",
			body: func(t *testing.T) []byte {
				return derive(t, "issues.reopened.1.json", func(m map[string]any) { obj(t, m, "issue")["body"] = "@loopd fix it" })
			},
			code: http.StatusAccepted, reason: reasonNoMention,
		},
		{
			name:   "close_with_mention_trigger",
			config: mentionTrigger,
			event:  "pull_request",
			body:   func(t *testing.T) []byte { return fixture(t, "pull_request.closed.1.json") },
			code:   http.StatusAccepted, reason: reasonNoMention,
		},
		{
			name:   "ready_for_review_with_mention_trigger",
			config: mentionTrigger,
			event:  "pull_request",
			body: func(t *testing.T) []byte {
				return derive(t, "pull_request.opened.1.json", func(m map[string]any) { m["action"] = "ready_for_review" })
			},
			code: http.StatusAccepted, reason: reasonNoMention,
		},
		{
			name:   "reopen_with_labels_trigger",
			config: func(c *schema.GHWebhook) { setTrigger(c, &schema.Trigger{Labels: []string{"agent"}}) },
			event:  "issues",
			body:   func(t *testing.T) []byte { return fixture(t, "issues.reopened.1.json") },
			code:   http.StatusAccepted, reason: reasonNotLabelled,
		},
		{
			name:   "strangers_reopen",
			config: func(c *schema.GHWebhook) { c.AuthorizedUsers = []string{"octocat"} },
			event:  "issues",
			body:   func(t *testing.T) []byte { return fixture(t, "issues.reopened.1.json") },
			code:   http.StatusAccepted, reason: reasonUnauthorizedSender,
		},
		{
			name: "no_route",
			config: func(c *schema.GHWebhook) {
				c.Routing.Repos = map[string]schema.Route{"octo-org/api": {Harness: "claude-code", Workdir: "/srv/agents/api"}}
			},
			event:  "issue_comment",
			body:   func(t *testing.T) []byte { return fixture(t, "issue_comment.created.1.json") },
			code:   http.StatusAccepted,
			reason: reasonNoRoute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.config != nil {
				cfg := defaultConfig()
				tt.config(&cfg)
				e.cfg.Store(&cfg)
			}

			code, _ := e.replay(t, tt.event, "d-1", tt.body(t))

			assert.Equal(t, tt.code, code)
			assert.Empty(t, e.records(t))
			ev := e.onlyEvent(t)
			assert.Equal(t, journal.DeliveryIgnored, ev.Name)
			assert.Equal(t, tt.reason, ev.Attrs["reason"])
			assert.Equal(t, "d-1", ev.Attrs["delivery"])
			assert.Zero(t, e.triggers.Load())
		})
	}
}

// setTrigger sets the trigger of the fixtures' route.
func setTrigger(c *schema.GHWebhook, tr *schema.Trigger) {
	r := c.Routing.Repos["Codertocat/Hello-World"]
	r.Trigger = tr
	c.Routing.Repos["Codertocat/Hello-World"] = r
}

// mentionTrigger sets trigger.mention @loopd on the fixtures' route.
func mentionTrigger(c *schema.GHWebhook) { setTrigger(c, &schema.Trigger{Mention: "@loopd"}) }

// TestReopenReachesARunningItemWithMentionTrigger: with trigger.mention,
// a reopen has no text of its own to mention it: it reaches an item loopd
// holds, with its prompt, whatever the item's body says.
func TestReopenReachesARunningItemWithMentionTrigger(t *testing.T) {
	e := newEnv(t)
	cfg := defaultConfig()
	mentionTrigger(&cfg)
	e.cfg.Store(&cfg)
	code, _ := e.replay(t, "issues", "d-open", derive(t, "issues.opened.1.json", func(m map[string]any) {
		obj(t, m, "issue")["title"] = "@loopd " + issueTitle
	}))
	require.Equal(t, http.StatusAccepted, code)
	require.Len(t, e.onlyRecord(t).Pending, 1, "the mention starts the item")

	code, _ = e.replay(t, "issues", "d-reopen", derive(t, "issues.reopened.1.json", func(m map[string]any) {
		obj(t, m, "issue")["updated_at"] = "2030-01-01T00:00:00Z"
	}))

	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 2, "the reopen reaches the item")
	assert.Equal(t, "d-reopen", rec.Pending[1].ID)
}

func TestConfigReloadTakesEffect(t *testing.T) {
	e := newEnv(t)
	cfg := defaultConfig()
	cfg.AuthorizedUsers = nil
	e.cfg.Store(&cfg)
	body := fixture(t, "issue_comment.created.1.json")
	code, _ := e.replay(t, "issue_comment", "d-1", body)
	require.Equal(t, http.StatusAccepted, code)
	require.Empty(t, e.records(t))

	cfg2 := defaultConfig()
	e.cfg.Store(&cfg2)
	code, _ = e.replay(t, "issue_comment", "d-2", body)

	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1)
	assert.Equal(t, "d-2", rec.Pending[0].ID)
}

func TestPayloadTextSanitized(t *testing.T) {
	e := newEnv(t)
	body := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, m, "comment")["body"] = "fix\x1b[201~ this\r\nnow\x07\u0085 🎉 中文\tok"
	})

	code, _ := e.replay(t, "issue_comment", "d-1", body)

	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1)
	prompt := e.prompt(t, rec, 0)
	assert.Contains(t, prompt, "body:\nfix[201~ this\nnow 🎉 中文\tok\n")
	assert.NotContains(t, prompt, "\x1b")
	assert.NotContains(t, prompt, "\r")
}

// TestHiddenTextShownInStoredPrompt sends loopd issue 6's comment, which
// GitHub shows as "LGTM, thanks!", over HTTP: the stored prompt holds no
// Tag character, and shows what they spelled, marked as hidden.
// TestQuotedAgentCommentIsDelivered: a person's comment that quotes the
// agent's comment, marker and all, is theirs: it is delivered, the quote
// as written, the marker shown as the hidden comment it is.
func TestQuotedAgentCommentIsDelivered(t *testing.T) {
	e := newEnv(t)
	body := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, m, "comment")["body"] = "> quoted agent\n> " + desired.AgentMarker(issue1) + "\n\nreal question from me"
	})

	code, _ := e.replay(t, "issue_comment", "d-1", body)

	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1, "the person's question is delivered")
	assert.Contains(t, e.prompt(t, rec, 0), "\n> quoted agent\n> ⟦hidden HTML comment: "+desired.AgentMarker(issue1)+"⟧\n\nreal question from me\n")
}

func TestHiddenTextShownInStoredPrompt(t *testing.T) {
	e := newEnv(t)
	body := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, m, "comment")["body"] = "LGTM, thanks!" + tagText(hiddenInstruction) + "\n<!-- and " + "\u200bthis -->"
	})

	code, _ := e.replay(t, "issue_comment", "d-1", body)

	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1)
	prompt := e.prompt(t, rec, 0)
	assert.Contains(t, prompt, "\nLGTM, thanks!⟦hidden tags \""+hiddenInstruction+"\"⟧\n"+
		"⟦hidden HTML comment: <!-- and ⟦hidden U+200B⟧this -->⟧\n")
	assert.False(t, strings.ContainsFunc(prompt, invisible), "no invisible code point in %q", prompt)
}

func TestLongCommentArrivesWhole(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("ab€🎉", 65536/4)
	require.Equal(t, 65536, utf8.RuneCountInString(long))
	body := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, m, "comment")["body"] = long
	})

	code, _ := e.replay(t, "issue_comment", "d-1", body)

	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 1)
	assert.Contains(t, e.prompt(t, rec, 0), "body:\n"+long+"\ngithub-data d-1 sha256=")
}

func TestOversizeBody(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBody = 1024 })
	body := fixture(t, "issue_comment.created.1.json")
	require.Greater(t, len(body), 1024)

	code, _ := e.replay(t, "issue_comment", "d-1", body)

	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, reasonBodyTooLarge, e.rejectedRow(t).Attrs["reason"])
	assert.Empty(t, e.records(t))
	assert.Equal(t, reasonBodyTooLarge, e.onlyRejection(t)["reason"])
}

func TestOnlyPost(t *testing.T) {
	e := newEnv(t)

	code, _ := e.send(t, http.MethodGet, http.Header{}, nil)

	assert.Equal(t, http.StatusMethodNotAllowed, code)
	assert.Empty(t, e.events(t))
}

func TestWorkdirFailureIs500(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Config = func() schema.GHWebhook {
			cfg := defaultConfig()
			cfg.Routing.Repos = map[string]schema.Route{"*": {Harness: "claude-code", Workdir: "relative/{{.Repo}}"}}
			return cfg
		}
	})

	code, _ := e.replay(t, "issue_comment", "d-1", fixture(t, "issue_comment.created.1.json"))

	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Empty(t, e.records(t))
	ev := e.onlyEvent(t)
	assert.Equal(t, journal.DeliveryRejected, ev.Name)
	assert.Equal(t, reasonWorkdirFailed, ev.Attrs["reason"])
	assert.NotEmpty(t, ev.Attrs["err"], "schema's own message")
	assert.Equal(t, issue1.String(), ev.WorkItem)
	assert.Zero(t, e.triggers.Load())
}

// TestRepositoryGitHubNeverSendsIs4xx: a signed payload whose repository
// name GitHub could never send ("..", a slash, a space, too long) is
// refused with 400 and the reason, not 500: a redelivery cannot help, and
// nothing is stored. The route matches every name ("*"), so only the name
// rule stands between it and a workdir.
func TestRepositoryGitHubNeverSendsIs4xx(t *testing.T) {
	e := newEnv(t, func(o *Options) {
		o.Config = func() schema.GHWebhook {
			cfg := defaultConfig()
			cfg.Routing.Repos = map[string]schema.Route{"*": {Harness: "claude-code", Workdir: "/srv/agents/{{.Owner}}/{{.Repo}}/{{.Number}}"}}
			return cfg
		}
	})
	for i, name := range []string{"..", ".", "a/b", "a b", strings.Repeat("r", 101)} {
		body := derive(t, "issue_comment.created.1.json", func(m map[string]any) { obj(t, m, "repository")["name"] = name })
		code, msg := e.replay(t, "issue_comment", "d-bad-"+strconv.Itoa(i), body)
		assert.Equal(t, http.StatusBadRequest, code, name)
		assert.Contains(t, msg, "not a GitHub owner/repo name", name)
	}
	body := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		obj(t, obj(t, m, "repository"), "owner")["login"] = "../etc"
	})
	code, _ := e.replay(t, "issue_comment", "d-bad-owner", body)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Empty(t, e.records(t))
	evs := e.events(t)
	require.Len(t, evs, 6)
	for _, ev := range evs {
		assert.Equal(t, journal.DeliveryRejected, ev.Name)
		assert.Equal(t, reasonBadRepository, ev.Attrs["reason"])
	}
	assert.Zero(t, e.triggers.Load())
}

func TestSign(t *testing.T) {
	// The example from GitHub's webhook docs, "Validating webhook deliveries".
	got := Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))

	assert.Equal(t, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17", got)
}

// TestHeadRefOfTheHeadRepository: a pull request's head branch is
// recorded with its head repository, the same repository's or a fork's
// (a fork's clone still takes refs/pull/<n>/head, and pushes to that
// branch of the fork when the fork lets maintainers push).
func TestHeadRefOfTheHeadRepository(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, "changes", e.onlyRecord(t).Spec.HeadRef)

	f := newEnv(t)
	fork := func(m map[string]any) {
		obj(t, obj(t, obj(t, m, "pull_request"), "head"), "repo")["full_name"] = "someone/Hello-World"
	}
	code, _ = f.replay(t, "pull_request", "d-open", derive(t, "pull_request.opened.1.json", fork))
	require.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, "changes", f.onlyRecord(t).Spec.HeadRef)
	assert.Equal(t, "someone/Hello-World", f.onlyRecord(t).Spec.HeadRepo)
}

// TestHeadFactsAreRecordedWhoeverSentThem: a pull request's head
// repository, its author and who pushed its head are recorded from its
// payloads (reconciler.ProjectSettingsOf judges by them): the opener
// pushed the first head, a synchronize's sender the next, even a sender
// whose events loopd does not act on (a stranger's push moves the head
// off its trusted pusher); a fork's head repository is its own.
func TestHeadFactsAreRecordedWhoeverSentThem(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	r := e.onlyRecord(t)
	assert.Equal(t, "Codertocat/Hello-World", r.Spec.HeadRepo)
	assert.Equal(t, "Codertocat", r.Spec.Author)
	assert.Equal(t, "Codertocat", r.Spec.HeadPusher)

	push := func(sender, sha string) func(m map[string]any) {
		return func(m map[string]any) {
			obj(t, m, "sender")["login"] = sender
			m["after"] = sha
			pr := obj(t, m, "pull_request")
			obj(t, pr, "head")["sha"] = sha
			pr["updated_at"] = "2030-01-01T00:00:00Z"
		}
	}
	const strangers = "2222222222222222222222222222222222222222"
	code, _ = e.replay(t, "pull_request", "d-push", derive(t, "pull_request.synchronize.1.json", push("mallory", strangers)))
	require.Equal(t, http.StatusAccepted, code)
	r = e.onlyRecord(t)
	assert.Equal(t, strangers, r.Spec.HeadSHA)
	assert.Equal(t, "mallory", r.Spec.HeadPusher, "recorded though the stranger's event reaches no agent")
	assert.Len(t, r.Pending, 1, "the stranger's push queues nothing")

	f := newEnv(t)
	fork := func(m map[string]any) {
		obj(t, obj(t, obj(t, m, "pull_request"), "head"), "repo")["full_name"] = "someone/Hello-World"
	}
	code, _ = f.replay(t, "pull_request", "d-open", derive(t, "pull_request.opened.1.json", fork))
	require.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, "someone/Hello-World", f.onlyRecord(t).Spec.HeadRepo)
}

// TestForkPullRequestNamesItsHead: a fork's pull request's prompt names
// the head repository beside its branch (the worktree's origin is the
// base repository, where a branch of the same name is another branch),
// and its maintainer_can_modify is recorded as each payload names it; a
// pull request of the repository itself names no head repository.
func TestForkPullRequestNamesItsHead(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-fork", fixture(t, "pull_request.opened.5.json"))
	require.Equal(t, http.StatusAccepted, code)
	r := e.onlyRecord(t)
	assert.True(t, r.Spec.Fork(r.Key))
	assert.True(t, r.Spec.MaintainerCanModify)
	require.Len(t, r.Pending, 1)
	assert.Contains(t, e.prompt(t, r, 0), "\nhead: patch-1\nhead_repo: Octocoders/Hello-World\nbase: master\n")

	locked := func(m map[string]any) {
		pr := obj(t, m, "pull_request")
		pr["maintainer_can_modify"] = false
		pr["updated_at"] = "2030-01-01T00:00:00Z"
		m["action"] = "edited"
	}
	code, _ = e.replay(t, "pull_request", "d-edit", derive(t, "pull_request.opened.5.json", locked))
	require.Equal(t, http.StatusAccepted, code)
	assert.False(t, e.onlyRecord(t).Spec.MaintainerCanModify, "the fork's owner took it back")

	f := newEnv(t)
	code, _ = f.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	r = f.onlyRecord(t)
	assert.False(t, r.Spec.Fork(r.Key))
	require.Len(t, r.Pending, 1)
	assert.NotContains(t, f.prompt(t, r, 0), "head_repo:")
}

// TestDeliveryCarriesItsSource: each queued delivery names what on GitHub
// it came from, for the eyes reaction that acknowledges it: a comment's
// id, a review comment's id, the item itself for an opened event; a
// review's body has no reaction API and names nothing.
func TestDeliveryCarriesItsSource(t *testing.T) {
	reviewComment := func(m map[string]any) {
		m["action"] = "created"
		delete(m, "review")
		m["comment"] = map[string]any{"id": 284312630, "path": "README.md", "body": "Use more emoji.", "user": m["sender"]}
	}
	reviewBody := func(m map[string]any) {
		obj(t, m, "review")["body"] = "Please fix the typo."
		obj(t, m, "review")["state"] = "changes_requested"
	}
	tests := []struct {
		name, event string
		body        []byte
		want        desired.Source
	}{
		{"issue_comment", "issue_comment", fixture(t, "issue_comment.created.1.json"), desired.Source{Kind: desired.SourceIssueComment}},
		{"review_comment", "pull_request_review_comment", derive(t, "pull_request_review.submitted.1.json", reviewComment),
			desired.Source{Kind: desired.SourceReviewComment, ID: 284312630}},
		{"issue_opened", "issues", fixture(t, "issues.opened.1.json"), desired.Source{Kind: desired.SourceItem}},
		{"pull_request_opened", "pull_request", fixture(t, "pull_request.opened.1.json"), desired.Source{Kind: desired.SourceItem}},
		{"review_body_has_no_reaction_api", "pull_request_review", derive(t, "pull_request_review.submitted.1.json", reviewBody), desired.Source{}},
		{"push", "pull_request", fixture(t, "pull_request.synchronize.1.json"), desired.Source{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			code, _ := e.replay(t, tt.event, "d1", tt.body)
			require.Equal(t, http.StatusAccepted, code)
			pending := e.onlyRecord(t).Pending
			require.Len(t, pending, 1)
			want := tt.want
			if want.Kind == desired.SourceIssueComment {
				var p struct{ Comment struct{ ID int64 } }
				require.NoError(t, json.Unmarshal(tt.body, &p))
				require.NotZero(t, p.Comment.ID)
				want.ID = p.Comment.ID
			}
			assert.Equal(t, want, pending[0].Source)
		})
	}
}

// TestInstallationIsRecorded: an App's delivery names the installation it
// came through (installation.id), which the item keeps for its calls; a
// delivery that names none keeps the one recorded.
func TestInstallationIsRecorded(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "pull_request", "d-open", derive(t, "pull_request.opened.1.json", func(m map[string]any) {
		m["installation"] = map[string]any{"id": 4242}
	}))
	require.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, int64(4242), e.onlyRecord(t).Spec.Installation)
	code, _ = e.replay(t, "pull_request", "d-next", derive(t, "pull_request.synchronize.1.json", func(m map[string]any) {
		delete(m, "installation")
	}))
	require.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, int64(4242), e.onlyRecord(t).Spec.Installation)
}
