package webhook

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

const (
	// headSHA is pull request 2's head in the fixtures; forkSHA pull
	// request 3's, from the fork Octocoders/Hello-World.
	headSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	forkSHA = "d6fde92930d4715a2b49857d24b940956b26d2d3"
)

var pr3 = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 3}

// ciEnv is an env whose handler counts the commits it reports ready
// (Options.CIReady), with a CIFlusher over its store whose clock the test
// sets.
type ciEnv struct {
	*env
	ready   atomic.Int32
	now     atomic.Pointer[time.Time]
	flusher *CIFlusher
}

func newCIEnv(t *testing.T) *ciEnv {
	c := &ciEnv{}
	c.env = newEnv(t, func(o *Options) { o.CIReady = func() { c.ready.Add(1) } })
	c.flusher = NewCIFlusher(c.store, func() schema.GHWebhook { return *c.cfg.Load() }, c.recorder, nil)
	c.setNow(time.Now())
	c.flusher.Now = func() time.Time { return *c.now.Load() }
	return c
}

func (c *ciEnv) setNow(t time.Time) { c.now.Store(&t) }

// flush runs one flush and returns when the next quiet period ends.
func (c *ciEnv) flush(t *testing.T) time.Time {
	t.Helper()
	next, err := c.flusher.Flush(context.Background())
	require.NoError(t, err)
	return next
}

// lastReason returns the reason of the newest journal row.
func (e *env) lastReason(t *testing.T) string {
	t.Helper()
	evs := e.events(t)
	require.NotEmpty(t, evs)
	return evs[len(evs)-1].Attrs["reason"]
}

// runPayload derives a check run of pull request 2 (listed in the payload,
// its head head): run id named name, completed with conclusion, or
// created when conclusion is "".
func runPayload(t *testing.T, id int64, name, conclusion, sha, head string) []byte {
	t.Helper()
	return derive(t, "check_run.completed.1.json", func(m map[string]any) {
		o := obj(t, m, "check_run")
		o["id"], o["name"], o["head_sha"] = id, name, sha
		o["details_url"] = "https://ci.example/runs/" + name
		if conclusion == "" {
			m["action"], o["status"], o["conclusion"] = "created", "queued", nil
		} else {
			o["conclusion"] = conclusion
		}
		obj(t, o["pull_requests"].([]any)[0].(map[string]any), "head")["sha"] = head
		m["sender"] = map[string]any{"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
	})
}

// TestCIFailuresOfOneCommitAreOnePrompt: the failed checks of one head
// commit become one prompt once every check run seen has completed,
// naming each failed check with its conclusion, details URL and output
// (framed, sanitized, cut at MaxCIOutput); nothing is queued before, and
// created or successful runs say nothing; the suite completing after, a
// replay of the same body under a new delivery id and a redelivery change
// nothing.
func TestCIFailuresOfOneCommitAreOnePrompt(t *testing.T) {
	e := newCIEnv(t)
	code, _ := e.replay(t, "check_run", "c-0", runPayload(t, 1, "lint", "failure", headSHA, headSHA))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Empty(t, e.records(t), "CI never creates an item")
	assert.Equal(t, reasonNoWorkItem, e.lastReason(t))

	e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, headSHA, e.onlyRecord(t).Spec.HeadSHA)
	steps := []struct {
		id     string
		body   []byte
		reason string // "" for accepted
	}{
		{"c-1", runPayload(t, 1, "lint", "", headSHA, headSHA), reasonCINotCompleted},
		{"c-2", runPayload(t, 2, "test", "", headSHA, headSHA), reasonCINotCompleted},
		{"c-3", runPayload(t, 3, "docs", "success", headSHA, headSHA), reasonCINotFailed},
		{"c-4", runPayload(t, 1, "lint", "failure", headSHA, headSHA), ""},
	}
	for _, s := range steps {
		code, _ := e.replay(t, "check_run", s.id, s.body)
		assert.Equal(t, http.StatusAccepted, code, s.id)
		assert.Equal(t, s.reason, e.lastReason(t), s.id)
	}
	assert.Len(t, e.onlyRecord(t).Pending, 1, "nothing queued while a run is open")
	assert.Zero(t, e.ready.Load())
	assert.False(t, e.flush(t).IsZero(), "the commit waits for its quiet period")
	assert.Len(t, e.onlyRecord(t).Pending, 1)

	timedOut := derive(t, "check_run.completed.1.json", func(m map[string]any) {
		o := obj(t, m, "check_run")
		o["id"], o["name"], o["conclusion"] = 2, "test", "timed_out"
		o["details_url"] = "https://ci.example/runs/test"
		obj(t, o, "output")["text"] = strings.Repeat("é", MaxCIOutput) + "\x1b[201~"
		m["sender"] = map[string]any{"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
	})
	code, _ = e.replay(t, "check_run", "c-5", timedOut)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, int32(1), e.ready.Load(), "every run seen completed: the prompt can go")
	assert.True(t, e.flush(t).IsZero())

	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 2)
	d := rec.Pending[1]
	d.Prompt = e.prompt(t, rec, 1)
	assert.Equal(t, desired.CIDeliveryID(pr2, headSHA), d.ID)
	assert.Equal(t, headSHA, d.Commit)
	assert.True(t, strings.HasPrefix(d.Prompt, "[loopd] ci.failed on Codertocat/Hello-World#2 by github-actions[bot] (delivery "+d.ID+")\n"), d.Prompt)
	for _, want := range []string{"commit: " + headSHA + "\n", "failed_checks: 2\n",
		"check: lint\nconclusion: failure\nurl: https://ci.example/runs/lint\n",
		"check: test\nconclusion: timed_out\nurl: https://ci.example/runs/test\noutput_cut: "} {
		assert.Contains(t, d.Prompt, want)
	}
	assert.NotContains(t, d.Prompt, "docs")
	assert.NotContains(t, d.Prompt, "\x1b")
	assert.Less(t, len(d.Prompt), MaxCIOutput+2048)
	assert.Equal(t, desired.SeenWhole, desired.FrameOf(d).Check(d.Prompt), "the prompt is one whole frame")
	evs := e.events(t)
	last := evs[len(evs)-1]
	assert.Equal(t, journal.DeliveryAccepted, last.Name)
	assert.Equal(t, reasonCIComplete, last.Attrs["reason"])
	assert.Equal(t, "2", last.Attrs["failed_checks"])

	suite := derive(t, "check_suite.completed.1.json", func(m map[string]any) {
		o := obj(t, m, "check_suite")
		o["conclusion"], o["head_sha"] = "failure", headSHA
		obj(t, o["pull_requests"].([]any)[0].(map[string]any), "head")["sha"] = headSHA
	})
	code, _ = e.replay(t, "check_suite", "c-6", suite)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, reasonCIDuplicate, e.lastReason(t), "the commit had its prompt")
	code, _ = e.replay(t, "check_run", "c-7", timedOut)
	assert.Equal(t, http.StatusOK, code, "a replay under a new delivery id is a redelivery")
	code, _ = e.replay(t, "check_run", "c-5", timedOut)
	assert.Equal(t, http.StatusOK, code)
	e.flush(t)
	assert.Len(t, e.onlyRecord(t).Pending, 2)

	// A new head re-arms: its own failures are its own prompt.
	const next = "4444444444444444444444444444444444444444"
	e.replay(t, "pull_request", "d-push", derive(t, "pull_request.synchronize.1.json", func(m map[string]any) {
		obj(t, obj(t, m, "pull_request"), "head")["sha"] = next
		m["after"] = next
		obj(t, m, "pull_request")["updated_at"] = "2030-01-01T00:00:00Z"
	}))
	code, _ = e.replay(t, "check_run", "c-8", runPayload(t, 9, "lint", "failure", headSHA, headSHA))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, reasonStaleCommit, e.lastReason(t), "a failure of the old head")
	e.replay(t, "check_run", "c-9", runPayload(t, 10, "lint", "failure", next, next))
	e.flush(t)
	rec = e.onlyRecord(t)
	require.Len(t, rec.Pending, 4)
	assert.Equal(t, desired.CIDeliveryID(pr2, next), rec.Pending[3].ID)
}

// TestCIOfAForkIsRoutedByItsCommit: GitHub names no pull request for the
// checks of a fork's pull request (pull_requests is empty, a check's
// head_branch null): they reach the pull request items whose head is
// their commit, never one whose branch has the fork's branch name; the
// prompt waits for the suite a workflow run announced, and names the
// failed check run rather than its suite's roll-up. A commit no item has
// as its head is journaled with the commit and gets nothing.
func TestCIOfAForkIsRoutedByItsCommit(t *testing.T) {
	e := newCIEnv(t)
	e.replay(t, "pull_request", "d-fork", fixture(t, "pull_request.opened.5.json"))
	// A pull request of the base repository whose branch has the fork's
	// branch name, at another commit.
	e.replay(t, "pull_request", "d-same", derive(t, "pull_request.opened.1.json", func(m map[string]any) {
		obj(t, obj(t, m, "pull_request"), "head")["ref"] = "patch-1"
	}))
	require.Len(t, e.records(t), 2)
	pending := func(k desired.Key) int {
		r, err := e.store.Get(context.Background(), k)
		require.NoError(t, err)
		return len(r.Pending)
	}

	for _, s := range []struct{ event, fixture, reason string }{
		{"workflow_run", "workflow_run.requested.1.json", reasonCINotCompleted},
		{"check_run", "check_run.created.1.json", reasonCINotCompleted},
		{"check_run", "check_run.completed.3.json", ""},
	} {
		code, _ := e.replay(t, s.event, "d-"+s.fixture, fixture(t, s.fixture))
		assert.Equal(t, http.StatusAccepted, code, s.fixture)
		evs := e.events(t)
		last := evs[len(evs)-1]
		assert.Equal(t, pr3.String(), last.WorkItem, s.fixture)
		assert.Equal(t, s.reason, last.Attrs["reason"], s.fixture)
	}
	e.flush(t)
	assert.Equal(t, 1, pending(pr3), "the workflow's suite is still running")
	assert.Zero(t, e.ready.Load())

	code, _ := e.replay(t, "check_suite", "d-suite", fixture(t, "check_suite.completed.2.json"))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, int32(1), e.ready.Load())
	e.flush(t)
	require.Equal(t, 2, pending(pr3))
	assert.Equal(t, 1, pending(pr2), "never routed by the branch name")
	r, err := e.store.Get(context.Background(), pr3)
	require.NoError(t, err)
	prompt := e.prompt(t, r, 1)
	assert.Contains(t, prompt, "failed_checks: 1\ncheck: test\nconclusion: failure\n")
	assert.Contains(t, prompt, "1 test failed")
	assert.NotContains(t, prompt, "check: GitHub Actions", "the suite's roll-up is said by its run")

	code, _ = e.replay(t, "workflow_run", "d-wf", fixture(t, "workflow_run.completed.2.json"))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, reasonCIDuplicate, e.lastReason(t))

	other := derive(t, "check_run.completed.3.json", func(m map[string]any) {
		obj(t, m, "check_run")["head_sha"] = "5555555555555555555555555555555555555555"
	})
	code, _ = e.replay(t, "check_run", "d-other", other)
	assert.Equal(t, http.StatusAccepted, code)
	evs := e.events(t)
	last := evs[len(evs)-1]
	assert.Equal(t, journal.DeliveryIgnored, last.Name)
	assert.Equal(t, reasonNoPullRequest, last.Attrs["reason"])
	assert.Equal(t, "5555555555555555555555555555555555555555", last.Attrs["commit"])
	assert.Equal(t, 2, pending(pr3))
}

// TestCIOfOneCommitReachesEveryItemAtIt: two open pull requests whose head
// is the fork's commit each get the failure, the second under the
// delivery's id and its number; a redelivery is a duplicate on both.
func TestCIOfOneCommitReachesEveryItemAtIt(t *testing.T) {
	e := newCIEnv(t)
	e.replay(t, "pull_request", "d-3", fixture(t, "pull_request.opened.5.json"))
	e.replay(t, "pull_request", "d-4", derive(t, "pull_request.opened.5.json", func(m map[string]any) {
		m["number"] = 4
		obj(t, m, "pull_request")["number"] = 4
		obj(t, obj(t, m, "pull_request"), "base")["ref"] = "release"
	}))
	code, msg := e.replay(t, "check_run", "d-fail", fixture(t, "check_run.completed.3.json"))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Contains(t, msg, "#3")
	assert.Contains(t, msg, "#4")
	assert.Equal(t, int32(2), e.ready.Load())
	e.flush(t)
	for _, r := range e.records(t) {
		require.Len(t, r.Pending, 2, r.Key)
		assert.Equal(t, desired.CIDeliveryID(r.Key, forkSHA), r.Pending[1].ID)
	}
	code, _ = e.replay(t, "check_run", "d-fail", fixture(t, "check_run.completed.3.json"))
	assert.Equal(t, http.StatusOK, code)
}

// TestCIQuietPeriod: failures whose commit still has a run open wait for
// the route's reactions.ciQuietSeconds after the commit's last event, then
// go as they are (reason ci_quiet); a commit that stopped being the head
// meanwhile gets nothing, journaled stale_commit.
func TestCIQuietPeriod(t *testing.T) {
	e := newCIEnv(t)
	cfg := defaultConfig()
	r := cfg.Routing.Repos["Codertocat/Hello-World"]
	r.Reactions.CIQuietSeconds = 60
	cfg.Routing.Repos["Codertocat/Hello-World"] = r
	e.cfg.Store(&cfg)
	e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	e.replay(t, "check_run", "c-1", runPayload(t, 2, "test", "", headSHA, headSHA))
	before := time.Now()
	e.replay(t, "check_run", "c-2", runPayload(t, 1, "lint", "failure", headSHA, headSHA))

	next := e.flush(t)
	assert.WithinRange(t, next, before.Add(time.Minute), time.Now().Add(time.Minute))
	assert.Len(t, e.onlyRecord(t).Pending, 1)
	e.setNow(next)
	assert.True(t, e.flush(t).IsZero())
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 2)
	assert.Contains(t, e.prompt(t, rec, 1), "failed_checks: 1\ncheck: lint\n")
	assert.Equal(t, reasonCIQuiet, e.lastReason(t))

	// Another head, a failure with a run open, then a push before the
	// quiet period ends: nothing goes out.
	push := func(id, sha, at string) {
		e.replay(t, "pull_request", id, derive(t, "pull_request.synchronize.1.json", func(m map[string]any) {
			obj(t, obj(t, m, "pull_request"), "head")["sha"] = sha
			m["after"] = sha
			obj(t, m, "pull_request")["updated_at"] = at
		}))
	}
	const second, third = "6666666666666666666666666666666666666666", "7777777777777777777777777777777777777777"
	push("d-push", second, "2030-01-01T00:00:00Z")
	e.replay(t, "check_run", "c-3", runPayload(t, 5, "test", "", second, second))
	e.replay(t, "check_run", "c-4", runPayload(t, 4, "lint", "failure", second, second))
	push("d-push-2", third, "2030-01-01T00:01:00Z")
	e.setNow(time.Now().Add(time.Hour))
	assert.True(t, e.flush(t).IsZero())
	assert.Len(t, e.onlyRecord(t).Pending, 4, "the opening, lint's prompt and the two pushes")
	evs := e.events(t)
	last := evs[len(evs)-1]
	assert.Equal(t, journal.DeliveryIgnored, last.Name)
	assert.Equal(t, reasonStaleCommit, last.Attrs["reason"])
	assert.Equal(t, second, last.Attrs["commit"])
}

// TestCIReactionOff: with reactions.ciFailure off, a failure is ignored
// with its reason and nothing of it is recorded.
func TestCIReactionOff(t *testing.T) {
	e := newCIEnv(t)
	e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	off := false
	cfg := defaultConfig()
	r := cfg.Routing.Repos["Codertocat/Hello-World"]
	r.Reactions.CIFailure = &off
	cfg.Routing.Repos["Codertocat/Hello-World"] = r
	e.cfg.Store(&cfg)
	e.replay(t, "check_run", "c-1", runPayload(t, 1, "lint", "failure", headSHA, headSHA))
	assert.Equal(t, reasonCIReactionOff, e.lastReason(t))
	e.setNow(time.Now().Add(time.Hour))
	e.flush(t)
	assert.Len(t, e.onlyRecord(t).Pending, 1)
}
