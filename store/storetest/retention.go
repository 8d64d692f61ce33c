package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// pruneEvents: PruneEvents deletes exactly the journal rows older than its
// bound, in batches of the size asked (several batches here), whatever
// their work item, and reports how many; the rows at or after the bound
// stay, in order; another prune finds nothing.
func (s suite) pruneEvents(t *testing.T) {
	st, another := s.open(t)
	ctx := context.Background()
	const old, kept = 25, 3
	var want []journal.Event
	for i := range old + kept {
		e := journal.Event{Time: t0.Add(time.Duration(i) * time.Minute), Name: journal.DispatchSent, Level: slog.LevelInfo,
			WorkItem: fmt.Sprintf("acme/api#%d", i%4+1), Attrs: map[string]string{"n": fmt.Sprint(i)}}
		require.NoError(t, st.AppendEvent(ctx, e))
		if i >= old {
			want = append(want, e)
		}
	}
	bound := t0.Add(old * time.Minute)
	n, err := st.PruneEvents(ctx, bound, 4)
	require.NoError(t, err)
	assert.Equal(t, int64(old), n)
	got, err := another().Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, want, withoutIDs(got))

	n, err = st.PruneEvents(ctx, bound, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to prune")
	_, err = st.Vacuum(ctx)
	require.NoError(t, err)
}

// forgetItem: Forget refuses an open item and an unknown key and removes
// nothing then; on a closed item it removes the item and every row of
// its own (deliveries, session report, the CI of its commits, outbox calls, stored
// transcripts), so that its delivery ids are free again and the key can
// be made anew; other items and the journal stay.
func (s suite) forgetItem(t *testing.T) {
	st, another := s.open(t)
	ctx := context.Background()
	other := desired.Key{Owner: "acme", Repo: "web", Number: 7}
	opened := comment(keyAPI, "d1", t0)
	opened.Kind = desired.KindPullRequest
	ingest(t, st, opened, comment(keyAPI, "d2", t0), comment(other, "o1", t0))
	ingest(t, st, ciEvent("c1", "aaa", 7, 1, true, "lint"))
	sent, err := st.SendCI(ctx, keyAPI, "aaa", desired.Delivery{ID: desired.CIDeliveryID(keyAPI, "aaa"), Prompt: "lint failed"})
	require.NoError(t, err)
	require.Equal(t, store.CIQueued, sent)
	require.NoError(t, st.WriteStatus(ctx, keyAPI, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseRunning},
		Delivered: []string{"d1"}, Calls: []desired.Call{{Kind: desired.CallAnnounce, Body: "hi", Marker: "m"}}}))
	require.NoError(t, st.WriteStatus(ctx, other, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseRunning},
		Calls: []desired.Call{{Kind: desired.CallAnnounce, Body: "hi", Marker: "m"}}}))
	require.NoError(t, st.ReportSession(ctx, keyAPI, desired.SessionReport{SessionID: "s1", Source: "startup", At: t0}))
	fleet, isFleet := st.(store.Fleet)
	if isFleet {
		require.NoError(t, fleet.AppendTranscript(ctx, keyAPI, "s1", 0, []byte("{}\n"), 0))
	}
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: t0, Name: journal.SessionSpawned, WorkItem: keyAPI.String()}))

	assert.ErrorIs(t, st.Forget(ctx, keyAPI), store.ErrNotClosed)
	assert.Len(t, get(t, st, keyAPI).Pending, 2, "an open item keeps everything")
	assert.ErrorIs(t, st.Forget(ctx, desired.Key{Owner: "acme", Repo: "none", Number: 1}), store.ErrNotFound)

	ingest(t, st, stateChange(keyAPI, "close", true, t0.Add(time.Minute)))
	require.NoError(t, st.Forget(ctx, keyAPI))

	h := another()
	_, err = h.Get(ctx, keyAPI)
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, st.Forget(ctx, keyAPI), store.ErrNotFound, "forgotten once")
	recs := records(t, h)
	require.Len(t, recs, 1)
	assert.Equal(t, other, recs[0].Key)
	calls, err := h.Calls(ctx, store.CallFilter{})
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, other, calls[0].Key, "only the other item's call stays")
	events, err := h.Events(ctx, store.EventFilter{WorkItem: keyAPI.String()})
	require.NoError(t, err)
	assert.Len(t, events, 1, "the journal keeps the item's rows until they age out")

	// Its delivery ids are free: a redelivery makes the item anew, with
	// no session report, no claim and no transcript of the old one.
	res, err := h.Ingest(ctx, comment(keyAPI, "d1", t0.Add(time.Hour)))
	require.NoError(t, err)
	assert.True(t, res.Created)
	assert.True(t, res.Queued)
	again := get(t, h, keyAPI)
	assert.Nil(t, again.Report)
	assert.Equal(t, desired.Status{Phase: desired.PhaseIdle}, again.Status)
	res, err = h.Ingest(ctx, ciEvent("c1", "aaa", 7, 1, true, "lint"))
	require.NoError(t, err)
	assert.Equal(t, store.IngestResult{Collected: true, CIReady: true}, res, "the old item's CI is gone: its prompt no longer counts")
	if isFleet {
		n, err := fleet.TranscriptSize(ctx, keyAPI, "s1")
		require.NoError(t, err)
		assert.Zero(t, n, "the old item's transcript is gone")
	}
}
