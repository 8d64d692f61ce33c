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
// The head repository and the author follow the latest payload that names
// them.
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
	fork.HeadRepo = "bob/api"
	ingest(t, st, fork)
	r = get(t, st, keyAPI)
	assert.Equal(t, "bob", r.Spec.HeadPusher)
	assert.Equal(t, "bob/api", r.Spec.HeadRepo)
	assert.Equal(t, "alice", r.Spec.Author)
}

// check: a CI failure's prompt is queued only on an item the store holds,
// only for its recorded head commit (or any, while none is recorded), and
// once per claim: a later delivery whose Conflicts were claimed queues
// nothing, and each of these claims its id. A queued one keeps its commit.
func (s suite) check(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	ci := func(id, commit string, claims, conflicts []string) store.Ingest {
		in := comment(keyAPI, id, t0)
		in.Delivery.Event, in.Delivery.Commit = "check_run", commit
		in.Check = &desired.Check{Commit: commit, Claims: claims, Conflicts: conflicts}
		return in
	}
	res, err := st.Ingest(ctx, ci("c0", "aaa", []string{"check:lint"}, []string{"check:lint"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Unknown: true}, res, "CI never creates an item")

	opened := comment(keyAPI, "d1", t0)
	opened.Kind = desired.KindPullRequest
	ingest(t, st, opened)
	res, err = st.Ingest(ctx, ci("c1", "aaa", []string{"check:lint", "suite:7"}, []string{"check:lint"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Queued: true}, res, "no head recorded yet: taken")

	res, err = st.Ingest(ctx, ci("c2", "aaa", []string{"rollup:7"}, []string{"suite:7"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Deduplicated: true}, res)
	res, err = st.Ingest(ctx, ci("c2", "aaa", nil, nil))
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "a deduplicated delivery claims its id")

	push := comment(keyAPI, "d2", t0)
	push.HeadSHA, push.StateAt = "bbb", t0.Add(time.Minute)
	ingest(t, st, push)
	res, err = st.Ingest(ctx, ci("c3", "aaa", []string{"check:test"}, []string{"check:test"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{StaleCommit: true}, res)
	res, err = st.Ingest(ctx, ci("c4", "BBB", []string{"check:lint"}, []string{"check:lint"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Deduplicated: true}, res, "a claim is per item, not per commit: the caller puts the commit in it")
	res, err = st.Ingest(ctx, ci("c5", "BBB", []string{"bbb:check:lint"}, []string{"bbb:check:lint"}))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Queued: true}, res, "commits compare case-insensitively")

	var commits []string
	for _, d := range get(t, st, keyAPI).Pending {
		commits = append(commits, d.ID+"="+d.Commit)
	}
	assert.Equal(t, []string{"d1=", "c1=aaa", "d2=", "c5=BBB"}, commits)
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
