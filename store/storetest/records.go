package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// recordsOrder: Records returns items by owner, repo and then number
// (numerically), each with its pending delivery.
func (s suite) recordsOrder(t *testing.T) {
	st, _ := s.open(t)
	keys := []desired.Key{
		{Owner: "acme", Repo: "api", Number: 10}, {Owner: "beta", Repo: "x", Number: 1}, {Owner: "acme", Repo: "api", Number: 9},
		{Owner: "acme", Repo: "web", Number: 1}, {Owner: "Acme", Repo: "api", Number: 1},
	}
	for i, k := range keys {
		ingest(t, st, comment(k, fmt.Sprintf("d%d", i), t0))
	}
	var got []desired.Key
	for _, r := range records(t, st) {
		got = append(got, r.Key)
		assert.Len(t, r.Pending, 1, r.Key.String())
	}
	assert.Equal(t, []desired.Key{
		{Owner: "Acme", Repo: "api", Number: 1}, {Owner: "acme", Repo: "api", Number: 9}, {Owner: "acme", Repo: "api", Number: 10},
		{Owner: "acme", Repo: "web", Number: 1}, {Owner: "beta", Repo: "x", Number: 1},
	}, got)
}

// pendingOrder: pending deliveries come back in arrival order, not in the
// order of their ids or times, and stay in it when some in the middle are
// delivered; Records and Get agree.
func (s suite) pendingOrder(t *testing.T) {
	st, _ := s.open(t)
	ids := []string{"z", "a", "m", "b", "y"}
	for i, id := range ids {
		// Received times run backwards: arrival order is not time order.
		ingest(t, st, comment(keyAPI, id, t0.Add(-time.Duration(i)*time.Second)))
	}
	pendingIDs := func() []string {
		var out []string
		for _, d := range get(t, st, keyAPI).Pending {
			out = append(out, d.ID)
		}
		return out
	}
	assert.Equal(t, ids, pendingIDs())

	require.NoError(t, st.PutStatus(context.Background(), keyAPI, desired.Status{Phase: desired.PhaseRunning}, "a", "b"))
	assert.Equal(t, []string{"z", "m", "y"}, pendingIDs())
	recs := records(t, st)
	require.Len(t, recs, 1)
	assert.Equal(t, get(t, st, keyAPI), recs[0])
}

// putStatusMarksDelivered: PutStatus writes the whole status and, in the
// same call, takes the listed pending deliveries of the item out of
// Pending; ids of another item or of none are skipped, marking again is a
// no-op, and a status write is not a spec change.
func (s suite) putStatusMarksDelivered(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	other := desired.Key{Owner: "acme", Repo: "web", Number: 7}
	ingest(t, st, comment(keyAPI, "d1", t0), comment(keyAPI, "d2", t0), comment(keyAPI, "d3", t0), comment(other, "o1", t0))
	exit := 1
	status := desired.Status{
		Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c", Session: desired.SessionName(keyAPI), PaneID: "%3", SpawnMode: desired.SpawnResume, SpawnedAt: t0, BootID: "b-1"},
		RestartHistory: desired.RestartHistory{LastExitStatus: &exit},
	}

	// "o1" belongs to another item and "nope" to none: both are skipped.
	require.NoError(t, st.PutStatus(ctx, keyAPI, status, "d1", "d2", "o1", "nope"))
	got := get(t, st, keyAPI)
	assert.Equal(t, status, got.Status)
	assert.Equal(t, []desired.Delivery{comment(keyAPI, "d3", t0).Delivery.Compact()}, got.Pending)
	assert.Equal(t, int64(3), got.Spec.Generation, "a status write is not a spec change")
	assert.Len(t, get(t, st, other).Pending, 1)

	// Marking again is a no-op.
	require.NoError(t, st.PutStatus(ctx, keyAPI, status, "d1"))
	assert.Len(t, get(t, st, keyAPI).Pending, 1)

	// A later status replaces the whole of the earlier one.
	require.NoError(t, st.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseExited}))
	assert.Equal(t, desired.Status{Phase: desired.PhaseExited}, get(t, st, keyAPI).Status)
}

// compactPending: Records and Get give pending deliveries without their
// prompts, with the prompt's size in bytes, header line and frame digest
// instead (desired.Delivery.Compact); Prompt gives the prompt back byte
// for byte, in any state, only to the item the delivery belongs to.
func (s suite) compactPending(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	body := "body:\n\tindented\u00a0caf\u00e9 \U0001F600\n/exit\n"
	in := comment(keyAPI, "d1", t0)
	in.Delivery.Prompt = desired.EventHeader("issue_comment", "created", keyAPI.String(), "octocat", "d1") +
		desired.FrameBegin("d1") + body + desired.FrameEnd("d1", body)
	prompt := in.Delivery.Prompt
	other := desired.Key{Owner: "acme", Repo: "web", Number: 1}
	ingest(t, st, in, comment(other, "o1", t0))

	want := *in.Delivery
	want.Prompt = ""
	want.Size = len(prompt)
	want.Header = "[loopd] issue_comment.created on acme/api#42 by octocat (delivery d1)"
	want.Digest = desired.BodyDigest(body)
	assert.Equal(t, []desired.Delivery{want}, get(t, st, keyAPI).Pending, "get")
	for _, r := range records(t, st) {
		require.Len(t, r.Pending, 1, r.Key.String())
		assert.Empty(t, r.Pending[0].Prompt, "records hold no bodies: %s", r.Key)
		if r.Key == keyAPI {
			assert.Equal(t, want, r.Pending[0], "records")
		}
	}
	assert.Equal(t, desired.FrameOf(desired.Delivery{ID: "d1", Prompt: prompt}), desired.FrameOf(want), "the frame as the prompt carries it")

	got, err := st.Prompt(ctx, keyAPI, "d1")
	require.NoError(t, err)
	assert.Equal(t, prompt, got, "byte for byte")
	require.NoError(t, st.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning}, "d1"))
	got, err = st.Prompt(ctx, keyAPI, "d1")
	require.NoError(t, err)
	assert.Equal(t, prompt, got, "a delivered prompt is still there")

	_, err = st.Prompt(ctx, other, "d1")
	assert.ErrorIs(t, err, store.ErrNoDelivery, "another item's delivery")
	_, err = st.Prompt(ctx, keyAPI, "nope")
	assert.ErrorIs(t, err, store.ErrNoDelivery)
	assert.ErrorContains(t, err, "nope")
}

// unknownKey: every method that names an item wraps ErrNotFound, names the
// key, and touches no other item.
func (s suite) unknownKey(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0))
	unknown := desired.Key{Owner: "acme", Repo: "api", Number: 43}

	tests := []struct {
		name string
		call func() error
	}{
		{name: "get", call: func() error { _, err := st.Get(ctx, unknown); return err }},
		{name: "put_status", call: func() error {
			return st.PutStatus(ctx, unknown, desired.Status{Phase: desired.PhaseRunning}, "d1")
		}},
		{name: "set_held", call: func() error { return st.SetHeld(ctx, unknown, true) }},
		{name: "release", call: func() error { return st.Release(ctx, unknown, true) }},
		{name: "raise_budget", call: func() error { return st.RaiseBudget(ctx, unknown, 5) }},
		{name: "history", call: func() error { _, err := st.History(ctx, unknown, 3); return err }},
		{name: "prompt", call: func() error { _, err := st.Prompt(ctx, unknown, "d1"); return err }},
		{name: "report_session", call: func() error {
			return st.ReportSession(ctx, unknown, desired.SessionReport{SessionID: "x", Source: "startup"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			assert.ErrorIs(t, err, store.ErrNotFound)
			assert.ErrorContains(t, err, unknown.String())
		})
	}
	got := get(t, st, keyAPI)
	assert.Len(t, got.Pending, 1, "d1 of another item was not marked")
	assert.False(t, got.Spec.Held)
	assert.Nil(t, got.Report)
	assert.Len(t, records(t, st), 1, "nothing was created")
}

// setHeld: the hold is set and cleared, and every call bumps the
// generation, even one that changes nothing, so the reconciler looks again.
func (s suite) setHeld(t *testing.T) {
	st, _ := s.open(t)
	ingest(t, st, comment(keyAPI, "d1", t0))

	for i, held := range []bool{true, true, false} {
		require.NoError(t, st.SetHeld(context.Background(), keyAPI, held))
		got := get(t, st, keyAPI)
		assert.Equal(t, held, got.Spec.Held)
		assert.Equal(t, int64(2+i), got.Spec.Generation)
	}
}

// sessionReport: an item has no report until its harness makes one; the
// latest replaces the earlier, and comes with the record from Get and
// Records.
func (s suite) sessionReport(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	k := desired.Key{Owner: "o", Repo: "r", Number: 1}
	ingest(t, st, store.Ingest{DeliveryID: "d-1", Key: k, Kind: desired.KindIssue, Harness: "h", Cwd: "/w"})
	assert.Nil(t, get(t, st, k).Report)

	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, st.ReportSession(ctx, k, desired.SessionReport{SessionID: "a", Source: "startup", At: at}))
	require.NoError(t, st.ReportSession(ctx, k, desired.SessionReport{SessionID: "b", Source: "clear", At: at.Add(time.Second)}))
	want := &desired.SessionReport{SessionID: "b", Source: "clear", At: at.Add(time.Second)}
	recs := records(t, st)
	require.Len(t, recs, 1)
	assert.Equal(t, want, recs[0].Report, "the latest report replaces the earlier")
	assert.Equal(t, want, get(t, st, k).Report)
	assert.Equal(t, int64(1), recs[0].Spec.Generation, "a report is not a spec change")
}

// handEditedStatus: a status edited by hand into something unreadable is
// reported, not returned as an error: the item comes back NeedsAttention
// with the reason, its deliveries and whatever fields did decode; the other
// items are unaffected, and a fresh status write (an operator release)
// heals it.
func (s suite) handEditedStatus(t *testing.T) {
	tests := []struct {
		name   string
		status string
		reason string // part of the reason after "status unreadable: "
		keep   func(t *testing.T, st desired.Status)
	}{
		{name: "not_json", status: `{"Phase": "Running",`, reason: "unexpected end of JSON input"},
		{name: "null", status: `null`, reason: `unknown phase ""`},
		{name: "unknown_phase", status: `{"Phase": "Runing"}`, reason: `unknown phase "Runing"`},
		{
			name:   "wrong_field_type",
			status: `{"Phase": "Running", "HarnessSessionID": "7f3c", "FastFailures": "three"}`,
			reason: "FastFailures",
			keep: func(t *testing.T, st desired.Status) {
				assert.Equal(t, "7f3c", st.HarnessSessionID, "fields that decode are kept")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := s.open(t)
			healthy := desired.Key{Owner: "acme", Repo: "web", Number: 1}
			ingest(t, st, comment(keyAPI, "d1", t0), comment(healthy, "d2", t0))
			s.b.EditStatus(t, st, keyAPI, tt.status)

			recs, err := st.Records(context.Background())
			require.NoError(t, err, "one bad row must not hide the others")
			require.Len(t, recs, 2)
			assert.Equal(t, desired.PhaseIdle, recs[1].Status.Phase)
			got := get(t, st, keyAPI)
			assert.Equal(t, recs[0], got)

			assert.Equal(t, desired.PhaseNeedsAttention, got.Status.Phase)
			assert.True(t, strings.HasPrefix(got.Status.Reason, "status unreadable: "), got.Status.Reason)
			assert.Contains(t, got.Status.Reason, tt.reason)
			assert.Equal(t, got.Spec.Generation, got.Status.AttentionGeneration)
			assert.Len(t, got.Pending, 1, "deliveries are kept")
			if tt.keep != nil {
				tt.keep(t, got.Status)
			}

			// An operator release writes a fresh status.
			require.NoError(t, st.PutStatus(context.Background(), keyAPI, desired.Status{Phase: desired.PhaseIdle}))
			assert.Equal(t, desired.Status{Phase: desired.PhaseIdle}, get(t, st, keyAPI).Status)
		})
	}
}

// release: a release is a spec change. It clears the hold, bumps the
// generation, records that generation and whether it asked for a new
// conversation, and leaves the status to the reconciler.
func (s suite) release(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0))
	require.NoError(t, st.SetHeld(ctx, keyAPI, true))
	before := get(t, st, keyAPI)
	status := desired.Status{Phase: desired.PhaseNeedsAttention, RestartHistory: desired.RestartHistory{Failures: 4}}
	require.NoError(t, st.PutStatus(ctx, keyAPI, status))

	require.NoError(t, st.Release(ctx, keyAPI, true))
	got := get(t, st, keyAPI)
	assert.False(t, got.Spec.Held, "a release clears the hold")
	assert.Equal(t, before.Spec.Generation+1, got.Spec.Generation)
	assert.Equal(t, got.Spec.Generation, got.Spec.ReleaseGeneration)
	assert.True(t, got.Spec.ReleaseFresh)
	assert.True(t, got.ReleasePending())
	assert.Equal(t, status, got.Status, "the status is the reconciler's to change")

	require.NoError(t, st.Release(ctx, keyAPI, false))
	got = get(t, st, keyAPI)
	assert.False(t, got.Spec.ReleaseFresh)
	assert.Equal(t, before.Spec.Generation+2, got.Spec.ReleaseGeneration)
	got.Status.ReleasedGeneration = got.Spec.ReleaseGeneration
	require.NoError(t, st.PutStatus(ctx, keyAPI, got.Status))
	assert.False(t, get(t, st, keyAPI).ReleasePending(), "carried out")
}

// budgetRaise: a raise is a spec change that adds up, by an operator's
// command or by an authorized comment's delivery, whose redelivery raises
// nothing; the status is left to the reconciler.
func (s suite) budgetRaise(t *testing.T) {
	st, reopen := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0))
	before := get(t, st, keyAPI)
	require.NoError(t, st.RaiseBudget(ctx, keyAPI, 200_000))
	got := get(t, st, keyAPI)
	assert.Equal(t, int64(200_000), got.Spec.BudgetRaise)
	assert.Equal(t, before.Spec.Generation+1, got.Spec.Generation)
	assert.Equal(t, before.Status, got.Status, "the status is the reconciler's to change")

	raise := store.Ingest{DeliveryID: "d2", Key: keyAPI, Kind: desired.KindIssue, NoCreate: true, BudgetRaise: 50_000}
	ingest(t, st, raise, raise)
	got = get(t, reopen(), keyAPI)
	assert.Equal(t, int64(250_000), got.Spec.BudgetRaise, "the redelivery raised nothing; kept across a reopen")
	assert.Equal(t, before.Spec.Generation+2, got.Spec.Generation)
	assert.Empty(t, got.Pending[1:], "a raise queues nothing")
}

// oneAnswerPerQuestion: an answer is stored pending with the delivery,
// its answer read back with the compact pending ones; a second answer to
// the same question (another delivery, another identity), a redelivery
// and a replay queue nothing; an answer to another question, or to none,
// is queued; all of it kept across a reopen.
func (s suite) oneAnswerPerQuestion(t *testing.T) {
	st, reopen := s.open(t)
	ctx := context.Background()
	ingest(t, st, comment(keyAPI, "d1", t0))
	answer := func(id, identity string, a desired.Answer) store.Ingest {
		in := comment(keyAPI, id, t0.Add(time.Minute))
		in.NoCreate, in.Identity, in.Delivery.Answer = true, identity, &a
		return in
	}
	first := answer("a1", "comment 1", desired.Answer{Question: "q1", Choice: 2})
	res, err := st.Ingest(ctx, first)
	require.NoError(t, err)
	assert.True(t, res.Queued)
	assert.False(t, res.Answered)
	for _, again := range []store.Ingest{first, answer("a1r", "comment 1", desired.Answer{Question: "q1", Choice: 2})} {
		res, err := st.Ingest(ctx, again)
		require.NoError(t, err)
		assert.True(t, res.Duplicate, "a redelivery and a replay are duplicates")
	}
	gen := get(t, st, keyAPI).Spec.Generation
	res, err = st.Ingest(ctx, answer("a2", "comment 2", desired.Answer{Question: "q1", Choice: 1}))
	require.NoError(t, err)
	assert.True(t, res.Answered, "a second answer to q1")
	assert.Equal(t, gen, get(t, st, keyAPI).Spec.Generation, "it changed nothing")
	assert.False(t, res.Queued)
	res, err = st.Ingest(ctx, answer("a2", "comment 2", desired.Answer{Question: "q1", Choice: 1}))
	require.NoError(t, err)
	assert.True(t, res.Duplicate, "its id is claimed")
	ingest(t, st, answer("a3", "comment 3", desired.Answer{Question: "q2", Words: true, Choice: 3}),
		answer("a4", "comment 4", desired.Answer{Choice: 1}), answer("a5", "comment 5", desired.Answer{Choice: 1}))

	got := get(t, reopen(), keyAPI)
	var ids []string
	var answers []desired.Answer
	for _, d := range got.Pending {
		ids = append(ids, d.ID)
		if d.Answer != nil {
			answers = append(answers, *d.Answer)
		}
	}
	assert.Equal(t, []string{"d1", "a1", "a3", "a4", "a5"}, ids, "answers to no question are each kept, to be refused")
	assert.Equal(t, []desired.Answer{{Question: "q1", Choice: 2}, {Question: "q2", Choice: 3, Words: true}, {Choice: 1}, {Choice: 1}}, answers)
	recs, err := st.Records(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, got.Pending, recs[0].Pending, "Records reads the answers as Get does")
}

// history: an item's history is its opening delivery and its latest
// delivered ones, delivered only, in arrival order, each once.
func (s suite) history(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	other := desired.Key{Owner: "acme", Repo: "web", Number: 7}
	var ids []string
	for i := 1; i <= 12; i++ {
		id := fmt.Sprintf("d%02d", i)
		ids = append(ids, id)
		ingest(t, st, comment(keyAPI, id, t0.Add(time.Duration(i)*time.Second)))
	}
	ingest(t, st, comment(other, "o1", t0))

	got, err := st.History(ctx, keyAPI, 3)
	require.NoError(t, err)
	assert.Empty(t, got, "pending events are not history")

	// d01..d10 delivered; d11, d12 still pending.
	require.NoError(t, st.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning}, ids[:10]...))
	require.NoError(t, st.PutStatus(ctx, other, desired.Status{Phase: desired.PhaseRunning}, "o1"))
	got, err = st.History(ctx, keyAPI, 3)
	require.NoError(t, err)
	var gotIDs []string
	for _, d := range got {
		gotIDs = append(gotIDs, d.ID)
	}
	assert.Equal(t, []string{"d01", "d08", "d09", "d10"}, gotIDs, "the opening event, then the latest, in arrival order")
	assert.Equal(t, *comment(keyAPI, "d01", t0.Add(time.Second)).Delivery, got[0])

	got, err = st.History(ctx, keyAPI, 20)
	require.NoError(t, err)
	assert.Len(t, got, 10, "each once")
}
