package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// noCreate: a NoCreate delivery for an item the store does not hold
// writes nothing and leaves its id unclaimed; on an item it holds, it is
// queued as any other.
func (s suite) noCreate(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	in := comment(keyAPI, "d1", t0)
	in.NoCreate = true
	res, err := st.Ingest(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Unknown: true}, res)
	_, err = st.Get(ctx, keyAPI)
	require.ErrorIs(t, err, store.ErrNotFound)

	ingest(t, st, comment(keyAPI, "d0", t0))
	res, err = st.Ingest(ctx, in)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Queued: true}, res, "the id was not claimed the first time")
	assert.Len(t, get(t, st, keyAPI).Pending, 2)
}

// newOnly: a NewOnly delivery creates the item with its event; on an item
// that exists it queues nothing, claims its id and says so.
func (s suite) newOnly(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	first := comment(keyAPI, "d1", t0)
	first.NewOnly = true
	res, err := st.Ingest(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Created: true, Queued: true}, res)

	again := comment(keyAPI, "d2", t0)
	again.NewOnly = true
	res, err = st.Ingest(ctx, again)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Exists: true}, res)
	r := get(t, st, keyAPI)
	assert.Len(t, r.Pending, 1)
	assert.Equal(t, int64(1), r.Spec.Generation, "nothing queued, no spec change")
	res, err = st.Ingest(ctx, again)
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "the id was claimed")
}

// headSHA: a pull request's head commit follows the newest payload that
// names one; an older payload does not move it back.
func (s suite) headSHA(t *testing.T) {
	st, _ := s.open(t)
	in := comment(keyAPI, "d1", t0)
	in.Kind, in.HeadSHA, in.StateAt = desired.KindPullRequest, "aaa", t0
	ingest(t, st, in)
	assert.Equal(t, "aaa", get(t, st, keyAPI).Spec.HeadSHA)

	newer := comment(keyAPI, "d2", t0)
	newer.HeadSHA, newer.StateAt = "bbb", t0.Add(time.Minute)
	older := comment(keyAPI, "d3", t0)
	older.HeadSHA, older.StateAt = "aaa", t0.Add(time.Second)
	ingest(t, st, newer, older)
	assert.Equal(t, "bbb", get(t, st, keyAPI).Spec.HeadSHA)
}

// headPusher: who pushed the head is recorded with the commit it pushed;
// a head that moves with a payload of another action has no pusher, a
// payload that names the same head keeps it, a late push of the recorded
// head still names it, and a late push of an older head changes nothing.
// The head repository, the author and maintainer_can_modify follow the
// latest payload that names them.
func (s suite) headPusher(t *testing.T) {
	st, _ := s.open(t)
	at := func(id, sha, pusher string, d time.Duration) store.Ingest {
		in := comment(keyAPI, id, t0)
		in.Kind, in.HeadSHA, in.HeadPusher, in.StateAt = desired.KindPullRequest, sha, pusher, t0.Add(d)
		return in
	}
	opened := at("d1", "aaa", "alice", 0)
	opened.HeadRepo, opened.Author = "acme/api", "alice"
	ingest(t, st, opened)
	r := get(t, st, keyAPI)
	assert.Equal(t, "alice", r.Spec.HeadPusher)
	assert.Equal(t, "acme/api", r.Spec.HeadRepo)
	assert.Equal(t, "alice", r.Spec.Author)

	ingest(t, st, at("d2", "aaa", "", time.Second))
	assert.Equal(t, "alice", get(t, st, keyAPI).Spec.HeadPusher, "the same head, named by a comment")

	ingest(t, st, at("d3", "bbb", "", 2*time.Second))
	r = get(t, st, keyAPI)
	assert.Equal(t, "bbb", r.Spec.HeadSHA)
	assert.Empty(t, r.Spec.HeadPusher, "a head that moved without its push")
	assert.Equal(t, "acme/api", r.Spec.HeadRepo, "kept when a payload names none")

	ingest(t, st, at("d4", "BBB", "mallory", time.Second))
	assert.Equal(t, "mallory", get(t, st, keyAPI).Spec.HeadPusher, "the push of the recorded head, arriving late")
	ingest(t, st, at("d5", "aaa", "alice", 1500*time.Millisecond))
	r = get(t, st, keyAPI)
	assert.Equal(t, "bbb", r.Spec.HeadSHA, "an older push moves nothing")
	assert.Equal(t, "mallory", r.Spec.HeadPusher)

	fork := at("d6", "ccc", "bob", 3*time.Second)
	fork.HeadRepo, fork.CanModify = "bob/api", new(true)
	ingest(t, st, fork)
	r = get(t, st, keyAPI)
	assert.Equal(t, "bob", r.Spec.HeadPusher)
	assert.Equal(t, "bob/api", r.Spec.HeadRepo)
	assert.Equal(t, "alice", r.Spec.Author)
	assert.True(t, r.Spec.MaintainerCanModify)
	ingest(t, st, at("d7", "ccc", "", 4*time.Second))
	assert.True(t, get(t, st, keyAPI).Spec.MaintainerCanModify, "kept when a payload names none")
	closed := at("d8", "ccc", "", 5*time.Second)
	closed.CanModify = new(false)
	ingest(t, st, closed)
	assert.False(t, get(t, st, keyAPI).Spec.MaintainerCanModify, "the owner took it back")
}

// ciEvent is a check run event of keyAPI's commit: run of suite, done or
// not, failed with name when name is not "".
func ciEvent(id, commit string, suite, run int64, done bool, name string) store.Ingest {
	in := store.Ingest{DeliveryID: id, Key: keyAPI, Kind: desired.KindPullRequest, Harness: "claude-code", Cwd: "/src/api",
		CI: &desired.CI{Commit: commit, Suite: suite, Run: run, Done: done}}
	if name != "" {
		in.CI.Failure = &desired.CIFailure{Check: name, Conclusion: "failure", Suite: suite, Run: run, Rollup: run == 0}
	}
	return in
}

// ciCollects: a CI event is recorded only on an item the store holds and
// for its recorded head (or any commit while none is recorded); it queues
// nothing itself. The commit's failures are ready once every suite and run
// seen completed; SendCI queues them as the commit's one prompt, after
// which the commit's events are Deduplicated; a new head forgets the old
// commit's CI, and SendCI of a commit that stopped being the head queues
// nothing. Every such event claims its id.
func (s suite) ciCollects(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	res, err := st.Ingest(ctx, ciEvent("u0", "aaa", 7, 1, true, "lint"))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Unknown: true}, res, "CI never creates an item")

	opened := comment(keyAPI, "d1", t0)
	opened.Kind, opened.HeadSHA, opened.StateAt = desired.KindPullRequest, "aaa", t0
	ingest(t, st, opened)
	gen := get(t, st, keyAPI).Spec.Generation
	for _, step := range []struct {
		in   store.Ingest
		want store.IngestResult
	}{
		{ciEvent("c0", "aaa", 7, 0, false, ""), store.IngestResult{Collected: true}},                 // the suite requested
		{ciEvent("c1", "aaa", 7, 2, false, ""), store.IngestResult{Collected: true}},                 // test created
		{ciEvent("c2", "aaa", 7, 1, true, "lint"), store.IngestResult{Collected: true}},              // lint failed, test runs
		{ciEvent("c3", "aaa", 7, 2, true, "test"), store.IngestResult{Collected: true}},              // test failed, the suite runs
		{ciEvent("c4", "aaa", 7, 0, true, "CI"), store.IngestResult{Collected: true, CIReady: true}}, // the suite failed
	} {
		res, err := st.Ingest(ctx, step.in)
		require.NoError(t, err)
		assert.Equal(t, step.want, res, step.in.DeliveryID)
	}
	r := get(t, st, keyAPI)
	assert.Len(t, r.Pending, 1, "CI events queue nothing themselves")
	assert.Equal(t, gen, r.Spec.Generation)
	due, err := st.CICommits(ctx)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, keyAPI, due[0].Key)
	assert.Equal(t, "aaa", due[0].Commit)
	assert.True(t, due[0].Complete)
	var names []string
	for _, f := range due[0].CIFailures() {
		names = append(names, f.Check)
	}
	assert.Equal(t, []string{"lint", "test"}, names, "the suite's roll-up is left out: its runs say it")

	prompt := desired.Delivery{ID: desired.CIDeliveryID(keyAPI, "aaa"), Event: "ci", Action: "failed", Sender: "github-actions[bot]",
		Prompt: "two checks failed", ReceivedAt: t0}
	sent, err := st.SendCI(ctx, keyAPI, "AAA", prompt)
	require.NoError(t, err)
	assert.Equal(t, store.CIQueued, sent, "commits compare case-insensitively")
	sent, err = st.SendCI(ctx, keyAPI, "aaa", prompt)
	require.NoError(t, err)
	assert.Equal(t, store.CIGone, sent, "one prompt per commit")
	r = get(t, st, keyAPI)
	require.Len(t, r.Pending, 2)
	assert.Equal(t, prompt.ID, r.Pending[1].ID)
	assert.Equal(t, "aaa", r.Pending[1].Commit)
	assert.Equal(t, gen+1, r.Spec.Generation, "a queued prompt is a spec change")
	body, err := st.Prompt(ctx, keyAPI, prompt.ID)
	require.NoError(t, err)
	assert.Equal(t, "two checks failed", body)
	due, err = st.CICommits(ctx)
	require.NoError(t, err)
	assert.Empty(t, due)

	res, err = st.Ingest(ctx, ciEvent("c5", "aaa", 8, 3, true, "late"))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Deduplicated: true}, res, "the commit had its prompt")
	res, err = st.Ingest(ctx, ciEvent("c5", "aaa", 8, 3, true, "late"))
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "a deduplicated event claims its id")

	// A new head re-arms; a failure recorded on it, then a push before it
	// was sent: the prompt of a commit that is no longer the head never
	// goes out.
	push := comment(keyAPI, "d2", t0)
	push.HeadSHA, push.StateAt = "bbb", t0.Add(time.Minute)
	ingest(t, st, push)
	res, err = st.Ingest(ctx, ciEvent("c6", "aaa", 9, 4, true, "old"))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{StaleCommit: true}, res)
	ingest(t, st, ciEvent("c6b", "bbb", 9, 0, false, "")) // its suite requested
	res, err = st.Ingest(ctx, ciEvent("c7", "bbb", 9, 5, true, "lint"))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Collected: true}, res, "its suite is still running")
	due, err = st.CICommits(ctx)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.False(t, due[0].Complete)
	push = comment(keyAPI, "d3", t0)
	push.HeadSHA, push.StateAt = "ccc", t0.Add(2*time.Minute)
	ingest(t, st, push)
	sent, err = st.SendCI(ctx, keyAPI, "bbb", desired.Delivery{ID: desired.CIDeliveryID(keyAPI, "bbb"), Prompt: "x"})
	require.NoError(t, err)
	assert.Equal(t, store.CINotHead, sent)
	due, err = st.CICommits(ctx)
	require.NoError(t, err)
	assert.Empty(t, due, "a stale commit collects no more")
	assert.Len(t, get(t, st, keyAPI).Pending, 4, "the comments and the one prompt of aaa")
}

// heads: the open pull request items of a repository whose recorded head
// is a commit, whatever the case of the owner and repository; a closed
// item, an issue and another repository's item are not.
func (s suite) heads(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	pr := func(k desired.Key, id, head string) store.Ingest {
		in := comment(k, id, t0)
		in.Kind, in.HeadSHA, in.StateAt = desired.KindPullRequest, head, t0
		return in
	}
	other := desired.Key{Owner: "acme", Repo: "api", Number: 9}
	closed := desired.Key{Owner: "acme", Repo: "api", Number: 3}
	elsewhere := desired.Key{Owner: "acme", Repo: "web", Number: 4}
	issue := comment(desired.Key{Owner: "acme", Repo: "api", Number: 5}, "i1", t0)
	issue.HeadSHA = "aaa"
	ingest(t, st, pr(other, "p9", "aaa"), pr(keyAPI, "p1", "aaa"), pr(closed, "p3", "aaa"), pr(elsewhere, "p4", "aaa"), issue,
		stateChange(closed, "close", true, t0.Add(time.Minute)))
	keys, err := st.Heads(ctx, "ACME", "Api", "aaa")
	require.NoError(t, err)
	assert.Equal(t, []desired.Key{other, keyAPI}, keys)
	keys, err = st.Heads(ctx, "acme", "api", "bbb")
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// identity: an event whose identity the item holds is a replay: a
// Duplicate whatever its delivery id, claiming nothing; the same identity
// on another item is that item's; no identity is never a replay.
func (s suite) identity(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	first := comment(keyAPI, "d1", t0)
	first.Identity = "issue_comment created 7 2024-05-01T12:00:00Z"
	ingest(t, st, first)
	before := records(t, st)
	replay := first
	replay.DeliveryID, replay.Delivery = "d2", &desired.Delivery{Prompt: "please look"}
	res, err := st.Ingest(ctx, replay)
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Duplicate: true}, res)
	assert.Equal(t, before, records(t, st))
	res, err = st.Ingest(ctx, comment(keyAPI, "d2", t0))
	require.NoError(t, err)
	assert.True(t, res.Queued, "the replay claimed no delivery id, and no identity is no replay")

	elsewhere := first
	elsewhere.DeliveryID, elsewhere.Key = "d3", desired.Key{Owner: "acme", Repo: "web", Number: 1}
	elsewhere.Delivery = &desired.Delivery{Prompt: "please look"}
	res, err = st.Ingest(ctx, elsewhere)
	require.NoError(t, err)
	assert.True(t, res.Queued)
}

// oldEvent: a delivery whose payload is older than the item's last
// open/closed change queues nothing (Outdated) and claims its id; one as
// old as the change, or newer, is queued (on a closed item it waits).
func (s suite) oldEvent(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	at := func(in store.Ingest, t time.Time) store.Ingest {
		in.StateAt = t
		return in
	}
	ingest(t, st, at(comment(keyAPI, "d1", t0), t0), stateChange(keyAPI, "close", true, t0.Add(time.Hour)))
	res, err := st.Ingest(ctx, at(comment(keyAPI, "old", t0), t0.Add(time.Minute)))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Outdated: true}, res)
	res, err = st.Ingest(ctx, at(comment(keyAPI, "old", t0), t0.Add(time.Minute)))
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	res, err = st.Ingest(ctx, at(comment(keyAPI, "same", t0), t0.Add(time.Hour)))
	require.NoError(t, err)
	assert.True(t, res.Queued, "made in the second of the close")
	assert.Len(t, get(t, st, keyAPI).Pending, 2)
}

// drop: a dropped delivery is no longer pending, never part of the
// history, and its id stays claimed; an unknown key is ErrNotFound.
func (s suite) drop(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0), comment(keyAPI, "d2", t0))
	require.NoError(t, st.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning}, "d1"))
	require.NoError(t, st.Drop(ctx, keyAPI, "d2"))
	require.NoError(t, st.Drop(ctx, keyAPI, "d1"), "a delivered id is skipped")

	r := get(t, st, keyAPI)
	assert.Empty(t, r.Pending)
	h, err := st.History(ctx, keyAPI, 8)
	require.NoError(t, err)
	require.Len(t, h, 1)
	assert.Equal(t, "d1", h[0].ID)
	res, err := st.Ingest(ctx, comment(keyAPI, "d2", t0))
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.ErrorIs(t, st.Drop(ctx, desired.Key{Owner: "acme", Repo: "none", Number: 9}, "d1"), store.ErrNotFound)
}
