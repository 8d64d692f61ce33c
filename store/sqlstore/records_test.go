package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// TestMigrationToSchema7KeepsPendingDeliveries: a file written at schema
// 6, before the compact columns, with deliveries pending (one framed with
// a digest, one from before digests) and one delivered, opens at the
// current version; its pending deliveries come compact with the facts
// taken from their prompts, and each prompt is still there, byte for
// byte, for the send.
func TestMigrationToSchema7KeepsPendingDeliveries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.db")
	body := "body:\n\tfix it\n"
	framed := desired.EventHeader("issue_comment", "created", keyAPI.String(), "octocat", "d-new") + desired.FrameBegin("d-new") + body + desired.FrameEnd("d-new", body)
	legacy := "[loopd] issue_comment.created on acme/api#42 by octocat (delivery d-old)\n<<<github-data d-old\nold\ngithub-data d-old>>>\n"
	writeSchema6(t, path, map[string]string{"d-done": "[loopd] opened\nfirst", "d-new": framed, "d-old": legacy})

	s, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	var v int
	require.NoError(t, s.db.QueryRow(`PRAGMA user_version`).Scan(&v))
	assert.Equal(t, schemaVersion, v)

	got, err := s.Get(context.Background(), keyAPI)
	require.NoError(t, err)
	want := []desired.Delivery{
		{ID: "d-new", Event: "issue_comment", Action: "created", Sender: "octocat", Size: len(framed),
			Header: "[loopd] issue_comment.created on acme/api#42 by octocat (delivery d-new)", Digest: desired.BodyDigest(body), ReceivedAt: t0},
		{ID: "d-old", Event: "issue_comment", Action: "created", Sender: "octocat", Size: len(legacy),
			Header: "[loopd] issue_comment.created on acme/api#42 by octocat (delivery d-old)", ReceivedAt: t0},
	}
	assert.Equal(t, want, got.Pending)
	for id, prompt := range map[string]string{"d-new": framed, "d-old": legacy} {
		p, err := s.Prompt(context.Background(), keyAPI, id)
		require.NoError(t, err)
		assert.Equal(t, prompt, p, id)
	}
	var plan string
	require.NoError(t, s.db.QueryRow(`EXPLAIN QUERY PLAN SELECT work_item, `+compactColumns+`
		FROM deliveries WHERE state = 'pending' ORDER BY work_item, seq`).Scan(new(int), new(int), new(int), &plan))
	assert.Equal(t, "SCAN deliveries USING COVERING INDEX deliveries_pending", plan, "a pass reads the index alone, never a body")
}

// writeSchema6 writes the file path as loopd wrote it at schema 6: the
// item keyAPI with deliveries (id → prompt), "d-done" delivered and the
// others pending, in id order.
func writeSchema6(t *testing.T, path string, deliveries map[string]string) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?"+sqliteParams)
	require.NoError(t, err)
	defer db.Close()
	for _, m := range migrations[:6] {
		_, err := db.Exec(m)
		require.NoError(t, err)
	}
	_, err = db.Exec(`PRAGMA user_version = 6`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO work_items (key, owner, repo, number, kind, harness, cwd, closed, held, generation, status, updated_at)
		VALUES ('acme/api#42', 'acme', 'api', 42, 'issue', 'claude-code', '/src/api', 0, 0, 3, '{"Phase":"Running"}', 1)`)
	require.NoError(t, err)
	for _, id := range []string{"d-done", "d-new", "d-old"} {
		state := "pending"
		if id == "d-done" {
			state = "delivered"
		}
		_, err := db.Exec(`INSERT INTO deliveries (id, work_item, event, action, sender, prompt, received_at, state)
			VALUES (?, 'acme/api#42', 'issue_comment', 'created', 'octocat', ?, ?, ?)`, id, deliveries[id], t0.UnixNano(), state)
		require.NoError(t, err)
	}
}

// TestStatusDecodedOnceStaysTheStores: a status decoded before is given
// again without a decode only while its row holds the same text: a write
// through another handle and an edit by hand are read, and a caller that
// changes what it was given changes nothing for the next.
func TestStatusDecodedOnceStaysTheStores(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	exit := 1
	st := desired.Status{Phase: desired.PhaseRunning, RestartHistory: desired.RestartHistory{RetiredSessionIDs: []string{"a"}, LastExitStatus: &exit}, DeliveryState: desired.DeliveryState{DeliveredAt: []time.Time{t0}},
		LimitState: desired.LimitState{ReleasedLimits: []desired.SeenLimit{{Kind: "five_hour"}}}}
	require.NoError(t, s.PutStatus(ctx, keyAPI, st))

	for range 2 { // decoded, then given again
		recs, err := s.Records(ctx)
		require.NoError(t, err)
		require.Equal(t, st, recs[0].Status)
		got := recs[0].Status
		got.RetiredSessionIDs[0], got.DeliveredAt[0], *got.LastExitStatus, got.ReleasedLimits[0].Kind = "b", t0.Add(time.Hour), 2, "weekly"
	}
	again, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Equal(t, st, again.Status, "what a caller did to its copy is not the store's")

	other, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer other.Close()
	st.Phase, st.Reason = desired.PhaseExited, "crash"
	require.NoError(t, other.PutStatus(ctx, keyAPI, st))
	again, err = s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Equal(t, st, again.Status, "written by another process")

	require.NoError(t, EditStatus(s, keyAPI, `{"Phase":"Stopped","Reason":"by hand"}`))
	recs, err := s.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, desired.Status{Phase: desired.PhaseStopped, Reason: "by hand"}, recs[0].Status)

	require.NoError(t, EditStatus(s, keyAPI, `{"Phase":"Gone"}`))
	recs, err = s.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, desired.PhaseNeedsAttention, recs[0].Status.Phase, "an unreadable status is still reported")
	assert.Equal(t, int64(1), recs[0].Status.AttentionGeneration)
}

// TestPendingFollowsEveryChangeOfTheSet: the pending deliveries a handle
// gives follow what other handles do to them (a delivery from the middle
// delivered while a new one came, the last one dropped, all delivered),
// and an append to what one call gave shows in no other.
func TestPendingFollowsEveryChangeOfTheSet(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()
	other := desired.Key{Owner: "acme", Repo: "web", Number: 1}
	for _, id := range []string{"d1", "d2", "d3"} {
		_, err := s.Ingest(ctx, comment(keyAPI, id, t0))
		require.NoError(t, err)
	}
	_, err := s.Ingest(ctx, comment(other, "o1", t0))
	require.NoError(t, err)
	ids := func() map[string][]string {
		t.Helper()
		recs, err := s.Records(ctx)
		require.NoError(t, err)
		out := map[string][]string{}
		for _, r := range recs {
			for _, d := range r.Pending {
				out[r.Key.String()] = append(out[r.Key.String()], d.ID)
			}
		}
		return out
	}
	require.Equal(t, map[string][]string{"acme/api#42": {"d1", "d2", "d3"}, "acme/web#1": {"o1"}}, ids())

	w, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, w.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning}, "d2"))
	_, err = w.Ingest(ctx, comment(keyAPI, "d4", t0))
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"acme/api#42": {"d1", "d3", "d4"}, "acme/web#1": {"o1"}}, ids(), "as many as before, one newer")

	require.NoError(t, w.Drop(ctx, keyAPI, "d4"))
	assert.Equal(t, map[string][]string{"acme/api#42": {"d1", "d3"}, "acme/web#1": {"o1"}}, ids())
	r, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	require.Len(t, r.Pending, 2)
	_ = append(r.Pending, desired.Delivery{ID: "mine"})
	require.NoError(t, w.PutStatus(ctx, other, desired.Status{Phase: desired.PhaseRunning}, "o1"))
	assert.Equal(t, map[string][]string{"acme/api#42": {"d1", "d3"}}, ids(), "an append to a given slice is the caller's")
}

// TestStatusWithRetiredFieldsReads: a status stored by an earlier loopd
// with a field since removed (ObservedGeneration, never written by any
// pass) still reads, whole, with nothing lost of the fields that remain.
func TestStatusWithRetiredFieldsReads(t *testing.T) {
	st, err := parseStatus(`{"Phase":"Running","Reason":"delivered","ObservedGeneration":3,"HarnessSessionID":"7f3c"}`)
	require.NoError(t, err)
	assert.Equal(t, desired.PhaseRunning, st.Phase)
	assert.Equal(t, "delivered", st.Reason)
	assert.Equal(t, "7f3c", st.HarnessSessionID)
}
