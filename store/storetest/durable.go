package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// lockWait is how long the lock cases let Lock wait for a held lock. It
// bounds the wait; nothing is timed.
const lockWait = 200 * time.Millisecond

// events: the journal returns rows oldest first by time, then by order of
// appending (not by order of appending alone), filtered by work item, by an
// inclusive Since and to the newest Limit.
func (s suite) events(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	a, b := keyAPI.String(), "acme/web#1"
	all := []journal.Event{
		{Time: t0, Name: journal.ConfigReloaded, Level: slog.LevelInfo},
		{Time: t0.Add(1 * time.Second), Name: journal.SessionSpawned, Level: slog.LevelInfo, WorkItem: a,
			Attrs: map[string]string{"session": "loop-acme-api-42", "resumed": "false"}},
		{Time: t0.Add(2 * time.Second), Name: journal.SessionSpawned, Level: slog.LevelInfo, WorkItem: b, Attrs: map[string]string{}},
		{Time: t0.Add(3 * time.Second), Name: journal.SessionResumeFailed, Level: slog.LevelWarn, WorkItem: a,
			Attrs: map[string]string{"reason": "pane_died"}},
		{Time: t0.Add(4 * time.Second), Name: journal.DispatchDelivered, Level: slog.LevelInfo, WorkItem: a},
	}
	// Appended out of time order: the journal orders by time.
	for _, i := range []int{0, 1, 3, 2, 4} {
		require.NoError(t, st.AppendEvent(ctx, all[i]))
	}

	tests := []struct {
		name   string
		filter store.EventFilter
		want   []journal.Event
	}{
		{name: "everything", filter: store.EventFilter{}, want: all},
		{name: "work_item", filter: store.EventFilter{WorkItem: a}, want: []journal.Event{all[1], all[3], all[4]}},
		{name: "since_is_inclusive", filter: store.EventFilter{Since: t0.Add(2 * time.Second)}, want: all[2:]},
		{name: "limit_keeps_newest", filter: store.EventFilter{Limit: 2}, want: all[3:]},
		{name: "limit_above_count", filter: store.EventFilter{Limit: 50}, want: all},
		{name: "combined", filter: store.EventFilter{WorkItem: a, Since: t0.Add(time.Second), Limit: 2}, want: []journal.Event{all[3], all[4]}},
		{name: "no_match", filter: store.EventFilter{WorkItem: "acme/none#1"}, want: nil},
		{name: "names", filter: store.EventFilter{Names: []string{string(journal.SessionSpawned), string(journal.DispatchDelivered)}},
			want: []journal.Event{all[1], all[2], all[4]}},
		{name: "names_then_limit", filter: store.EventFilter{Names: []string{string(journal.SessionSpawned)}, Limit: 1}, want: []journal.Event{all[2]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.Events(ctx, tt.filter)
			require.NoError(t, err)
			assert.Equal(t, tt.want, withoutIDs(got))
		})
	}

	// Ids grow in the order of appending, whatever the rows' times say;
	// AfterID selects the rows appended after one.
	got, err := st.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	ids := map[journal.Name][]int64{}
	for _, e := range got {
		require.Positive(t, e.ID)
		ids[e.Name] = append(ids[e.Name], e.ID)
	}
	// Appended as all[0], all[1], all[3], all[2], all[4].
	require.Less(t, ids[journal.SessionResumeFailed][0], ids[journal.SessionSpawned][1], "all[3] was appended before all[2]")
	after, err := st.Events(ctx, store.EventFilter{AfterID: ids[journal.SessionResumeFailed][0]})
	require.NoError(t, err)
	assert.Equal(t, []journal.Event{all[2], all[4]}, withoutIDs(after))

	// Rows of the same time keep the order they were appended in.
	same := []journal.Event{
		{Time: t0.Add(time.Hour), Name: journal.DispatchSent, WorkItem: b},
		{Time: t0.Add(time.Hour), Name: journal.DispatchFailed, WorkItem: b},
		{Time: t0.Add(time.Hour), Name: journal.DispatchDelivered, WorkItem: b},
	}
	for _, e := range same {
		require.NoError(t, st.AppendEvent(ctx, e))
	}
	got, err = st.Events(ctx, store.EventFilter{Since: t0.Add(time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, same, withoutIDs(got))
}

// withoutIDs returns events with their journal ids cleared, to compare
// them with the events that were appended.
func withoutIDs(events []journal.Event) []journal.Event {
	for i := range events {
		events[i].ID = 0
	}
	return events
}

// durable: everything a store was told survives closing it and opening
// the backing store again: items, statuses, holds, reports, pending and
// delivered deliveries, the journal, and the claims on delivery ids.
func (s suite) durable(t *testing.T) {
	st, open := s.open(t)
	ctx := context.Background()
	web := desired.Key{Owner: "acme", Repo: "web", Number: 1}
	ingest(t, st, comment(keyAPI, "d1", t0), comment(keyAPI, "d2", t0.Add(time.Second)), stateChange(web, "s1", true, t0))
	require.NoError(t, st.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{SpawnedAt: t0}}, "d1"))
	require.NoError(t, st.SetHeld(ctx, keyAPI, true))
	require.NoError(t, st.ReportSession(ctx, keyAPI, desired.SessionReport{SessionID: "7f3c", Source: "startup", At: t0}))
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: t0, Name: journal.SessionSpawned, WorkItem: keyAPI.String(),
		Attrs: map[string]string{"session": desired.SessionName(keyAPI)}}))
	wantRecs := records(t, st)
	require.Len(t, wantRecs, 2)
	wantEvents, err := st.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, wantEvents, 1)
	require.NoError(t, st.Close())

	again := open()
	assert.Equal(t, wantRecs, records(t, again))
	events, err := again.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	assert.Equal(t, wantEvents, events)
	for _, id := range []string{"d1", "d2", "s1"} {
		res, err := again.Ingest(ctx, comment(keyAPI, id, t0))
		require.NoError(t, err)
		assert.True(t, res.Duplicate, "the claim on %s survives a restart", id)
	}
	assert.Equal(t, wantRecs, records(t, again))
}

// concurrentIngest: many goroutines ingesting at once on one handle lose
// no delivery and count every generation.
func (s suite) concurrentIngest(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	const workers, each = 6, 10
	keys := []desired.Key{{Owner: "acme", Repo: "api", Number: 1}, {Owner: "acme", Repo: "api", Number: 2}, {Owner: "acme", Repo: "web", Number: 3}}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := st.Ingest(ctx, comment(keys[(w+i)%len(keys)], fmt.Sprintf("w%d-%d", w, i), t0))
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recs := records(t, st)
	require.Len(t, recs, len(keys))
	ids := map[string]bool{}
	for _, r := range recs {
		// Generation 1 at creation, then one per further delivery.
		assert.Equal(t, int64(len(r.Pending)), r.Spec.Generation, r.Key.String())
		for _, d := range r.Pending {
			ids[d.ID] = true
		}
	}
	assert.Len(t, ids, workers*each)
}

// sameIDRace: racers ingesting one delivery id, on one handle or spread
// over two, get exactly one acceptance and one queued delivery.
func (s suite) sameIDRace(t *testing.T) {
	for _, handles := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d_handles", handles), func(t *testing.T) {
			first, open := s.open(t)
			ctx := context.Background()
			stores := []store.Store{first}
			for len(stores) < handles {
				stores = append(stores, open())
			}
			const racers = 8
			var (
				wg       sync.WaitGroup
				accepted atomic.Int32
				errs     = make(chan error, racers)
			)
			for i := range racers {
				wg.Go(func() {
					res, err := stores[i%len(stores)].Ingest(ctx, comment(keyAPI, "same", t0))
					if err == nil && !res.Duplicate {
						accepted.Add(1)
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			assert.Equal(t, int32(1), accepted.Load())
			got := get(t, first, keyAPI)
			assert.Len(t, got.Pending, 1)
			assert.Equal(t, int64(1), got.Spec.Generation)
		})
	}
}

// concurrentWriters: every writing method, called at once from two
// handles (a daemon and a cron pass), loses no write: each item ends with
// every delivery, its last status and its hold, and the journal holds
// every row.
func (s suite) concurrentWriters(t *testing.T) {
	daemon, open := s.open(t)
	cron := open()
	ctx := context.Background()
	const items, rounds = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*items*rounds*4)
	for h, st := range []store.Store{daemon, cron} {
		for n := 1; n <= items; n++ {
			k := desired.Key{Owner: "acme", Repo: fmt.Sprintf("h%d", h), Number: n}
			wg.Go(func() {
				for i := range rounds {
					id := fmt.Sprintf("%s-%d", k, i)
					_, err := st.Ingest(ctx, comment(k, id, t0))
					errs <- err
					errs <- st.PutStatus(ctx, k, desired.Status{Phase: desired.PhaseRunning, DeliveryState: desired.DeliveryState{SendAttempts: i}}, id)
					errs <- st.SetHeld(ctx, k, i%2 == 1)
					errs <- st.AppendEvent(ctx, journal.Event{Time: t0.Add(time.Duration(i) * time.Second),
						Name: journal.DispatchDelivered, WorkItem: k.String(), Attrs: map[string]string{"delivery": id}})
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	recs := records(t, daemon)
	require.Len(t, recs, 2*items)
	for _, r := range recs {
		assert.Empty(t, r.Pending, "%s: every delivery was marked", r.Key)
		assert.Equal(t, rounds-1, r.Status.SendAttempts, "%s: the last status stands", r.Key)
		assert.True(t, r.Spec.Held, "%s: the last hold stands", r.Key)
		// Created at 1; then per round one delivery (but the first) and
		// one SetHeld.
		assert.Equal(t, int64(2*rounds), r.Spec.Generation, r.Key.String())
		evs, err := cron.Events(ctx, store.EventFilter{WorkItem: r.Key.String()})
		require.NoError(t, err)
		assert.Len(t, evs, rounds, r.Key.String())
	}
}

// lock: the reconcile lock excludes a second Lock on the same handle and
// on another one until unlock; the loser's error wraps ErrLocked and its
// context's error. The lock stays held after the context that took it
// ends (a pass takes it with a bounded wait and holds it to the end), a
// waiter gets it once it is released and not before, unlock may be called
// twice, and a free lock is taken even with an ended context.
func (s suite) lock(t *testing.T) {
	st, open := s.open(t)
	other := open()
	ctx := context.Background()

	taking, cancel := context.WithCancel(ctx)
	unlock, err := st.Lock(taking)
	require.NoError(t, err)
	cancel()

	for _, l := range []struct {
		name  string
		store store.Store
	}{
		{name: "same_handle", store: st},
		{name: "other_handle", store: other},
	} {
		t.Run(l.name, func(t *testing.T) {
			short, cancel := context.WithTimeout(ctx, lockWait)
			defer cancel()
			_, err := l.store.Lock(short)
			assert.ErrorIs(t, err, store.ErrLocked)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
	}

	var released atomic.Bool
	got := make(chan error, 1)
	go func() {
		unlock2, err := other.Lock(ctx)
		if err == nil {
			if !released.Load() {
				err = errors.New("lock taken while held")
			}
			unlock2()
		}
		got <- err
	}()
	released.Store(true)
	unlock()
	unlock() // a second call is harmless
	require.NoError(t, <-got)

	done, cancel := context.WithCancel(ctx)
	cancel()
	unlock3, err := st.Lock(done)
	require.NoError(t, err, "a free lock is taken even with an ended context")
	unlock3()
}

// journalWithIngest: Ingest.Journal is called once with what Ingest did,
// a redelivery and an unknown item included, and its rows are in the
// journal once Ingest returns; many concurrent ingests leave exactly one
// row per delivery, each beside its delivery.
func (s suite) journalWithIngest(t *testing.T) {
	st, _ := s.open(t)
	ctx := context.Background()
	var calls []store.IngestResult
	row := func(in store.Ingest) store.Ingest {
		in.Journal = func(res store.IngestResult) []journal.Event {
			calls = append(calls, res)
			return []journal.Event{{Time: t0, Name: journal.DeliveryAccepted, Level: slog.LevelInfo, WorkItem: in.Key.String(),
				Attrs: map[string]string{"delivery": in.DeliveryID, "duplicate": fmt.Sprint(res.Duplicate), "unknown": fmt.Sprint(res.Unknown)}}}
		}
		return in
	}
	snapshot := stateChange(desired.Key{Owner: "acme", Repo: "none", Number: 1}, "s1", true, t0)
	snapshot.Snapshot = true
	for _, in := range []store.Ingest{row(comment(keyAPI, "d1", t0)), row(comment(keyAPI, "d1", t0)), row(snapshot)} {
		_, err := st.Ingest(ctx, in)
		require.NoError(t, err)
	}
	assert.Equal(t, []store.IngestResult{{Created: true, Queued: true}, {Duplicate: true}, {Unknown: true}}, calls)
	events, err := st.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	var got []map[string]string
	for _, e := range events {
		got = append(got, e.Attrs)
	}
	assert.Equal(t, []map[string]string{
		{"delivery": "d1", "duplicate": "false", "unknown": "false"},
		{"delivery": "d1", "duplicate": "true", "unknown": "false"},
		{"delivery": "s1", "duplicate": "false", "unknown": "true"},
	}, got)

	// Concurrent deliveries, one row each, written with the delivery.
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			in := comment(keyAPI, fmt.Sprintf("c%d", i), t0)
			in.Journal = func(store.IngestResult) []journal.Event {
				return []journal.Event{{Time: t0, Name: journal.DeliveryAccepted, WorkItem: keyAPI.String(),
					Attrs: map[string]string{"delivery": in.DeliveryID}}}
			}
			_, err := st.Ingest(ctx, in)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	events, err = st.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	rows := map[string]int{}
	for _, e := range events {
		rows[e.Attrs["delivery"]]++
	}
	for _, d := range get(t, st, keyAPI).Pending {
		if d.ID != "d1" {
			assert.Equal(t, 1, rows[d.ID], "journal rows of %s", d.ID)
			delete(rows, d.ID)
		}
	}
	delete(rows, "d1")
	delete(rows, "s1")
	assert.Empty(t, rows, "rows without a delivery")
}
