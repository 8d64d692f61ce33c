package e2e

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// openStore opens the env's SQLite store; the caller closes it. It may be
// opened while the daemon runs (WAL).
func (e *env) openStore(t testing.TB) store.Store {
	t.Helper()
	if e.pgURL != "" {
		// A reader's own lock file: it never takes the daemon's.
		s, err := sqlstore.OpenPostgres(context.Background(), e.pgURL, filepath.Join(e.dir, "reader.lock"))
		require.NoError(t, err)
		return s
	}
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(e.stateDir, "loopd.db"))
	require.NoError(t, err)
	return s
}

// openFleet opens the store as a store.Fleet, closed at the end of t.
func (e *env) openFleet(t testing.TB) store.Fleet {
	t.Helper()
	s := e.openStore(t)
	t.Cleanup(func() { s.Close() })
	f, ok := s.(store.Fleet)
	require.True(t, ok, "%T is no store.Fleet", s)
	return f
}

// records returns every work item as the store holds it now.
func (e *env) records(t *testing.T) []desired.Record {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	rs, err := s.Records(context.Background())
	require.NoError(t, err)
	return rs
}

// waitClearReport waits up to timeout for the SessionStart report that a
// /clear in k's agent makes (source=clear), and returns the new
// conversation id it reports: in the store once a pass took it, or still
// in k's channel while no pass ran.
func (e *env) waitClearReport(t *testing.T, k desired.Key, timeout time.Duration) string {
	t.Helper()
	var id string
	e.waitFor(t, func() bool {
		if r, _ := e.record(t, k); r.Report != nil && r.Report.Source == "clear" {
			id = r.Report.SessionID
		}
		for _, rep := range e.channelReports(t, k) {
			if rep.Source == "clear" {
				id = rep.SessionID
			}
		}
		return id != ""
	}, timeout, "no SessionStart report of /clear")
	return id
}

// channelReports returns the reports k's channel holds, oldest first.
func (e *env) channelReports(t testing.TB, k desired.Key) []channel.Report {
	t.Helper()
	reports, err := channel.ReadReports(e.channelDir(k), 64)
	require.NoError(t, err)
	return reports
}

// channelDir is k's channel directory.
func (e *env) channelDir(k desired.Key) string {
	return channel.Dir(channel.Root(e.stateDir), desired.SessionName(k))
}

// record returns one work item; ok is false when there is none.
func (e *env) record(t testing.TB, k desired.Key) (desired.Record, bool) {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	r, err := s.Get(context.Background(), k)
	if errors.Is(err, store.ErrNotFound) {
		return desired.Record{}, false
	}
	require.NoError(t, err)
	return r, true
}

// mustRecord returns k's record, which must exist.
func (e *env) mustRecord(t testing.TB, k desired.Key) desired.Record {
	t.Helper()
	r, ok := e.record(t, k)
	require.True(t, ok, "no record for %s", k)
	return r
}

// ingestComment queues a comment with body on issue k straight into the
// store, as the webhook would, with no daemon, for the harness of the
// "*" route (claude-code when there is none); it returns the delivery id.
func (e *env) ingestComment(t *testing.T, k desired.Key, body string) string {
	t.Helper()
	id := uuid.NewString()
	harness := "claude-code"
	if route, ok := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any); ok {
		if h, ok := route["harness"].(string); ok {
			harness = h
		}
	}
	s := e.openStore(t)
	defer s.Close()
	prompt := webhook.Render(webhook.PromptInput{
		Event: "issue_comment", Action: "created", WorkItem: k.String(), Sender: "Codertocat", DeliveryID: id, Body: body,
	})
	res, err := s.Ingest(context.Background(), store.Ingest{
		DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: harness, Cwd: e.workdir(k),
		Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "Codertocat",
			Prompt: prompt, ReceivedAt: time.Now().UTC()},
	})
	require.NoError(t, err)
	require.True(t, res.Queued)
	return id
}

// prompt returns the stored prompt of k's delivery id (records carry
// none: desired.Delivery.Compact).
func (e *env) prompt(t testing.TB, k desired.Key, id string) string {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	p, err := s.Prompt(context.Background(), k, id)
	require.NoError(t, err)
	return p
}

// events returns the whole journal, oldest first.
func (e *env) events(t testing.TB) []journal.Event {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	evs, err := s.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	return evs
}

// eventsNamed returns the journal rows called name for k (every item when
// k is the zero Key), oldest first.
func (e *env) eventsNamed(t testing.TB, name journal.Name, k desired.Key) []journal.Event {
	t.Helper()
	var out []journal.Event
	for _, ev := range e.events(t) {
		if ev.Name == name && (k == desired.Key{} || ev.WorkItem == k.String()) {
			out = append(out, ev)
		}
	}
	return out
}

// deliveriesOf returns the journal's events called name for delivery id of
// issue 1.
func deliveriesOf(t *testing.T, e *env, name journal.Name, id string) []journal.Event {
	t.Helper()
	return deliveriesOfItem(t, e, name, keyIssue, id)
}

// deliveriesOfItem returns the journal's events called name for delivery
// id of k (of any item when k is the zero Key).
func deliveriesOfItem(t *testing.T, e *env, name journal.Name, k desired.Key, id string) []journal.Event {
	t.Helper()
	var out []journal.Event
	for _, ev := range e.eventsNamed(t, name, k) {
		if ev.Attrs["delivery"] == id {
			out = append(out, ev)
		}
	}
	return out
}

// waitDeliveries waits until the journal holds at least n events called
// name for delivery id of issue 1 and returns them: the executor writes a
// record's status before the events that explain it, so a test that saw
// the status must wait for the events, not read them once.
func waitDeliveries(t *testing.T, e *env, name journal.Name, id string, n int) []journal.Event {
	t.Helper()
	return waitDeliveriesOfItem(t, e, name, keyIssue, id, n)
}

// waitDeliveriesOfItem is waitDeliveries for k (any item when k is the
// zero Key).
func waitDeliveriesOfItem(t *testing.T, e *env, name journal.Name, k desired.Key, id string, n int) []journal.Event {
	t.Helper()
	var out []journal.Event
	e.waitFor(t, func() bool {
		out = deliveriesOfItem(t, e, name, k, id)
		return len(out) >= n
	}, waitShort, "journal never had %d × %s for delivery %s", n, name, id)
	return out
}

// waitFor waits until cond holds, failing the test after timeout.
func (e *env) waitFor(t *testing.T, cond func() bool, timeout time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, timeout, tick, msgAndArgs...)
}

// waitRecord waits until k's record exists and satisfies cond, and returns
// it.
func (e *env) waitRecord(t *testing.T, k desired.Key, cond func(desired.Record) bool, timeout time.Duration, msg string) desired.Record {
	t.Helper()
	var r desired.Record
	e.waitFor(t, func() bool {
		var ok bool
		r, ok = e.record(t, k)
		return ok && cond(r)
	}, timeout, "%s: %s", k, msg)
	return r
}

// waitPhase waits until k's record is in phase and returns it.
func (e *env) waitPhase(t *testing.T, k desired.Key, phase desired.Phase, timeout time.Duration) desired.Record {
	t.Helper()
	return e.waitRecord(t, k, func(r desired.Record) bool { return r.Status.Phase == phase }, timeout,
		"never reached phase "+string(phase))
}

// waitEvent waits until the journal holds at least n rows called name for
// k and returns them.
func (e *env) waitEvent(t *testing.T, name journal.Name, k desired.Key, n int, timeout time.Duration) []journal.Event {
	t.Helper()
	var evs []journal.Event
	e.waitFor(t, func() bool {
		evs = e.eventsNamed(t, name, k)
		return len(evs) >= n
	}, timeout, "journal never had %d × %s for %s", n, name, k)
	return evs
}

// waitDelivered waits for dispatch.delivered of delivery id and returns it.
func waitDelivered(t *testing.T, e *env, id string, timeout time.Duration) journal.Event {
	t.Helper()
	var got []journal.Event
	e.waitFor(t, func() bool {
		got = deliveriesOfItem(t, e, journal.DispatchDelivered, desired.Key{}, id) // an id is one item's
		return len(got) > 0
	}, timeout, "delivery %s was never confirmed", id)
	return got[0]
}
