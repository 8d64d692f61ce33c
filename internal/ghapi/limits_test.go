package ghapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
)

// reactions returns n reactions, on comments 1 to n.
func reactions(n int) []desired.Call {
	calls := make([]desired.Call, n)
	for i := range calls {
		calls[i] = desired.Call{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceIssueComment, ID: int64(i + 1)}}
	}
	return calls
}

// gaps returns the gaps between consecutive times.
func gaps(at []time.Time) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]))
	}
	return out
}

func (o outbox) pauses(t *testing.T) []desired.Pause {
	t.Helper()
	p, err := o.store.Pauses(context.Background())
	require.NoError(t, err)
	return p
}

// TestSecondaryLimitPausesTheInstallation: GitHub answers content writes
// with its secondary limit (403, no Retry-After) for 72 s while reads
// pass. The first write that meets it pauses every write of the
// installation for 60 s: none of the other nine is sent; the one probe
// after the pause meets it again and the pause doubles to 120 s; the probe
// after that goes through, and the ten calls drain one at a time, a second
// apart. A limited answer is no try. The pause is in the store while it
// holds (loopd get, another loopd) and gone once a write went through.
func TestSecondaryLimitPausesTheInstallation(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, reactions(10)...)
	t0 := o.clock.Now()
	srv.LimitWrites(ghapitest.SecondaryLimit{Until: t0.Add(72 * time.Second), Status: http.StatusForbidden})

	o.drain(t)
	limited, landed := srv.Writes()
	assert.Equal(t, 1, limited)
	assert.Empty(t, landed)
	require.Len(t, o.pauses(t), 1)
	p := o.pauses(t)[0]
	assert.Equal(t, desired.Pause{Installation: "token", Kind: desired.PauseSecondary, Until: t0.Add(time.Minute), Since: t0, Streak: 1,
		HTTPStatus: 403, Message: p.Message}, p)
	assert.Contains(t, p.Message, "secondary rate limit")
	for _, c := range o.calls(t) {
		assert.Equal(t, desired.CallPending, c.State)
		assert.Zero(t, c.Attempts, "a limited answer is no try")
	}
	evs := o.events(t)
	require.Equal(t, []journal.Name{journal.GitHubPaused}, eventNames(evs))
	assert.Equal(t, "secondary", evs[0].Attrs["limit"])
	assert.Equal(t, "token", evs[0].Attrs["installation"])
	assert.Equal(t, "1m0s", evs[0].Attrs["pause"])

	o.clock.set(t0.Add(59 * time.Second))
	assert.Zero(t, o.drain(t), "nothing is sent while the pause holds")
	o.clock.set(t0.Add(time.Minute))
	assert.Equal(t, 1, o.drain(t), "one probe")
	limited, _ = srv.Writes()
	assert.Equal(t, 2, limited)
	assert.Equal(t, t0.Add(3*time.Minute), o.pauses(t)[0].Until, "the limit persists: the pause doubles")
	assert.Equal(t, 2, o.pauses(t)[0].Streak)

	o.clock.set(t0.Add(3 * time.Minute))
	assert.Equal(t, 10, o.drain(t))
	limited, landed = srv.Writes()
	assert.Equal(t, 2, limited, "at most one probe per pause")
	require.Len(t, landed, 10)
	for _, g := range gaps(landed) {
		assert.GreaterOrEqual(t, g, time.Second)
	}
	assert.Empty(t, o.pauses(t), "a write went through: the pause is over")
	for _, c := range o.calls(t) {
		assert.Equal(t, desired.CallPosted, c.State)
		assert.Equal(t, 1, c.Attempts)
	}
}

// TestTooManyRequestsWaitsRetryAfter: a 429 with retry-after: 30 pauses
// every write for 30 s, as asked, each time the limit is met: a 72 s
// block costs one probe per pause, and the calls behind the first are
// never sent into it.
func TestTooManyRequestsWaitsRetryAfter(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, reactions(5)...)
	t0 := o.clock.Now()
	srv.LimitWrites(ghapitest.SecondaryLimit{Until: t0.Add(72 * time.Second), Status: http.StatusTooManyRequests, RetryAfter: 30 * time.Second})

	for o.clock.Now().Before(t0.Add(5 * time.Minute)) {
		o.drain(t)
		next := o.clock.Now().Add(time.Second)
		if ps := o.pauses(t); len(ps) > 0 && ps[0].Until.After(o.clock.Now()) {
			next = ps[0].Until
		}
		o.clock.set(next)
	}
	limited, landed := srv.Writes()
	assert.Equal(t, 3, limited, "at 0, 30 and 60 s")
	require.Len(t, landed, 5)
	assert.Equal(t, t0.Add(90*time.Second), landed[0], "the probe after the third pause")
	for _, g := range gaps(landed) {
		assert.GreaterOrEqual(t, g, time.Second)
	}
	var paused []string
	for _, ev := range o.events(t) {
		if ev.Name == journal.GitHubPaused {
			paused = append(paused, ev.Attrs["pause"]+" "+ev.Attrs["http_status"])
		}
	}
	assert.Equal(t, []string{"30s 429", "30s 429", "30s 429"}, paused)
}

// TestPrimaryLimitWaitsForTheReset: a primary limit (x-ratelimit-remaining
// 0) pauses every call, reads too, until x-ratelimit-reset.
func TestPrimaryLimitWaitsForTheReset(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, announce, react)
	t0 := o.clock.Now()
	reset := t0.Add(10 * time.Minute).Truncate(time.Second)
	srv.LimitAll(reset)

	o.drain(t)
	before := len(srv.Requests())
	p := o.pauses(t)
	require.Len(t, p, 1)
	assert.Equal(t, desired.PausePrimary, p[0].Kind)
	assert.Equal(t, reset, p[0].Until)
	o.clock.set(reset.Add(-time.Second))
	assert.Zero(t, o.drain(t))
	assert.Len(t, srv.Requests(), before, "no call of any kind before the reset")

	o.clock.set(reset)
	assert.Equal(t, 2, o.drain(t))
	assert.Len(t, srv.Comments("acme", "api", 42), 1)
	assert.Len(t, srv.Reactions(), 1)
	assert.Empty(t, o.pauses(t))
}

// TestPauseOutlivesARestart: a worker started after the pause began (a
// restarted daemon, another loopd on the store) honours it.
func TestPauseOutlivesARestart(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, reactions(3)...)
	t0 := o.clock.Now()
	srv.LimitWrites(ghapitest.SecondaryLimit{Until: t0.Add(time.Hour), Status: http.StatusForbidden})
	o.drain(t)
	o.worker.Limits = ghapi.NewLimits(time.Second, time.Minute, 30*time.Minute)
	o.clock.set(t0.Add(30 * time.Second))
	assert.Zero(t, o.drain(t))
	limited, _ := srv.Writes()
	assert.Equal(t, 1, limited)
}

// TestAnswerLostAfterThePostLanded: GitHub took the announcement but its
// answer never came (the connection dropped): the call is retried, finds
// its marker among the bot's comments, and posts nothing more. Exactly one
// announcement.
func TestAnswerLostAfterThePostLanded(t *testing.T) {
	srv := ghapitest.New(t)
	o := newOutbox(t, srv, announce)
	srv.LoseAnswers(1)

	assert.Equal(t, 1, o.drain(t))
	c := o.calls(t)[0]
	require.Equal(t, desired.CallPending, c.State)
	assert.Zero(t, c.HTTPStatus, "no answer came")
	require.Len(t, srv.Comments("acme", "api", 42), 1, "the post landed")

	o.clock.set(c.NextAttempt)
	assert.Equal(t, 1, o.drain(t))
	c = o.calls(t)[0]
	assert.Equal(t, desired.CallPosted, c.State)
	assert.Len(t, srv.Comments("acme", "api", 42), 1, "exactly one announcement")
	assert.Equal(t, 1, srv.Count("POST", postPath))
	posted := o.events(t)
	assert.Equal(t, "true", posted[len(posted)-1].Attrs["found"])
}

// TestLimitsGapBetweenWrites: outside any pause, writes of one
// installation go at least Gap apart; another installation's do not wait
// for them.
func TestLimitsGapBetweenWrites(t *testing.T) {
	l := ghapi.NewLimits(time.Second, time.Minute, 30*time.Minute)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wait, _, ok := l.Admit("installation 1", t0)
	require.True(t, ok)
	assert.Zero(t, wait)
	l.Wrote("installation 1", t0, true)
	wait, _, ok = l.Admit("installation 1", t0.Add(300*time.Millisecond))
	require.True(t, ok)
	assert.Equal(t, 700*time.Millisecond, wait)
	wait, _, _ = l.Admit("installation 2", t0.Add(300*time.Millisecond))
	assert.Zero(t, wait)
	l.Wrote("installation 1", t0.Add(time.Second), false) // a comment found: nothing written
	wait, _, _ = l.Admit("installation 1", t0.Add(1500*time.Millisecond))
	assert.Zero(t, wait)

	p := l.Limited("installation 2", ghapi.Verdict{Limit: desired.PauseSecondary, HTTPStatus: 403}, t0)
	_, until, ok := l.Admit("installation 2", t0.Add(time.Second))
	assert.False(t, ok)
	assert.Equal(t, p.Until, until)
	_, _, ok = l.Admit("installation 1", t0.Add(time.Second))
	assert.True(t, ok, "the pause is per installation")

	// Without Retry-After, a minute, doubling while it persists, at most
	// MaxPause.
	var pauses []time.Duration
	for range 7 {
		p := l.Limited("installation 3", ghapi.Verdict{Limit: desired.PauseSecondary, HTTPStatus: 403}, t0)
		pauses = append(pauses, p.Until.Sub(t0))
	}
	assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute,
		30 * time.Minute, 30 * time.Minute}, pauses)
}

// TestPausesOnMetrics: /metrics shows each pause held, with the seconds
// it has left, 0 once it ended.
func TestPausesOnMetrics(t *testing.T) {
	l := ghapi.NewLimits(time.Second, time.Minute, 30*time.Minute)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l.Limited("installation 7", ghapi.Verdict{Limit: desired.PauseSecondary, HTTPStatus: 403}, t0)
	l.Limited("token", ghapi.Verdict{Limit: desired.PausePrimary, After: 10 * time.Second, HTTPStatus: 403}, t0)
	now := t0.Add(20 * time.Second)
	err := testutil.CollectAndCompare(l.Collector(func() time.Time { return now }), strings.NewReader(`
# HELP loopd_github_paused_seconds Seconds left of a pause of an installation's GitHub calls that a rate limit asked for (limit: secondary holds its content writes, primary every call); 0 once it ended.
# TYPE loopd_github_paused_seconds gauge
loopd_github_paused_seconds{installation="installation 7",limit="secondary"} 40
loopd_github_paused_seconds{installation="token",limit="primary"} 0
`))
	assert.NoError(t, err)
}
