// Package storetest checks store.Store implementations against one
// conformance suite, in the manner of testing/fstest and testing/slogtest:
// a backend's own test calls Run with a Backend, and the suite speaks to
// the store only through the store.Store interface, so that every
// backend (store/sqlstore's SQLite and PostgreSQL stores) passes the
// same cases unchanged.
//
// The contract the suite holds a store to, beyond the doc comments of
// store.Store: times round-trip to the nanosecond and come back in UTC,
// a zero time stays zero, and every method is safe for concurrent use,
// from one handle and from several handles on the same backing store (as
// the daemon and a cron `loopd reconcile --once` have).
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// Backend adapts one store.Store implementation to Run.
type Backend struct {
	// New makes a new, empty backing store private to t (a file, a
	// database) and returns the function that opens a handle on it. Each
	// call of that function opens another handle on the same backing
	// store, as another process, or the same process after a restart,
	// would. The suite closes every handle it opens.
	New func(t *testing.T) (open func(t *testing.T) store.Store)
	// EditStatus overwrites the status of k in the backing store behind s
	// with text, bypassing the Store, as an operator editing the store by
	// hand would. text is the status as the backend keeps it: JSON.
	EditStatus func(t *testing.T, s store.Store, k desired.Key, text string)
	// Listens says the store is a store.Listener (RunFleet).
	Listens bool
}

// Run runs the store.Store contract against the implementation b makes,
// one subtest per behaviour, each on a new backing store: ingest and its
// dedupe by delivery id, the open/closed state and its snapshots, the
// rules that keep an event from creating an item or from being queued (a
// trigger, a replay, an old event), the CI of a pull request's commit, the head commit, a dropped
// delivery, refused
// input, record and delivery order, pending deliveries without their
// prompts and the prompt read on its own, status writes that mark deliveries
// delivered, the outbox of GitHub calls queued with a status write, the pauses of GitHub calls, unknown keys, the hold, a release, an item's history, session reports, hand-edited statuses,
// the journal and its filters, the journal rows an ingest writes with its
// change, durability across a reopen, concurrent
// writers on one and on two handles, the reconcile lock across two
// handles, the journal's pruning, and forgetting a closed item.
//
// To add a case, write a method of suite and add it to the table below.
func Run(t *testing.T, b Backend) {
	require.NotNil(t, b.New, "Backend.New")
	require.NotNil(t, b.EditStatus, "Backend.EditStatus")
	s := suite{b: b}
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ingest_creates_then_queues", s.ingestNewItem},
		{"redelivery_changes_nothing", s.redelivery},
		{"head_ref_follows_the_latest_payload", s.headRef},
		{"title_and_url_follow_the_latest_payload", s.titleAndURL},
		{"open_closed_state", s.openClosed},
		{"state_snapshot", s.stateSnapshot},
		{"snapshot_never_creates", s.snapshotNeverCreates},
		{"no_create_needs_the_item", s.noCreate},
		{"new_only_queues_on_a_new_item_only", s.newOnly},
		{"head_sha_follows_the_newest_payload", s.headSHA},
		{"head_pusher_goes_with_its_commit", s.headPusher},
		{"ci_collects_per_head_commit", s.ciCollects},
		{"heads_are_the_open_pull_requests_at_a_commit", s.heads},
		{"identity_makes_a_replay_a_duplicate", s.identity},
		{"old_event_after_a_state_change_queues_nothing", s.oldEvent},
		{"drop_takes_a_delivery_out_for_good", s.drop},
		{"close_with_delivery_is_one_change", s.closeWithDelivery},
		{"bad_input_is_refused", s.badInput},
		{"records_in_key_order", s.recordsOrder},
		{"pending_in_arrival_order", s.pendingOrder},
		{"pending_come_compact_prompt_reads_the_body", s.compactPending},
		{"put_status_marks_delivered", s.putStatusMarksDelivered},
		{"outbox_written_with_the_status", s.outboxWrittenWithTheStatus},
		{"pauses_per_installation_and_kind", s.pauses},
		{"installation_follows_the_deliveries", s.installation},
		{"due_calls_and_updates", s.dueCallsAndUpdates},
		{"unknown_key_is_not_found", s.unknownKey},
		{"set_held_bumps_generation", s.setHeld},
		{"release_is_a_spec_change", s.release},
		{"budget_raise_adds_once_per_delivery", s.budgetRaise},
		{"one_answer_per_question", s.oneAnswerPerQuestion},
		{"history_is_the_opening_and_latest_delivered", s.history},
		{"session_report_is_loaded_with_the_record", s.sessionReport},
		{"hand_edited_status_is_reported", s.handEditedStatus},
		{"events_filtered_and_ordered", s.events},
		{"durable_across_reopen", s.durable},
		{"concurrent_ingest", s.concurrentIngest},
		{"same_delivery_raced_is_taken_once", s.sameIDRace},
		{"journal_rows_go_with_the_ingest", s.journalWithIngest},
		{"concurrent_writers_on_two_handles", s.concurrentWriters},
		{"lock_excludes_other_holders", s.lock},
		{"prune_events_older_than_the_bound", s.pruneEvents},
		{"forget_removes_a_closed_item_whole", s.forgetItem},
	} {
		t.Run(tc.name, tc.run)
	}
}

type suite struct{ b Backend }

// open makes a new backing store for t and returns a handle on it and the
// function that opens more handles on it. Every handle is closed at the
// end of t.
func (s suite) open(t *testing.T) (store.Store, func() store.Store) {
	t.Helper()
	newHandle := s.b.New(t)
	another := func() store.Store {
		t.Helper()
		st := newHandle(t)
		require.NotNil(t, st)
		// A handle the case closed itself is closed again here; only the
		// case's own Close is checked.
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	return another(), another
}

// Fixed values of the cases.
var (
	keyAPI = desired.Key{Owner: "acme", Repo: "api", Number: 42}
	// t0 has nanoseconds and is in UTC: times round-trip exactly.
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

// comment is an Ingest that queues one issue_comment delivery on k.
func comment(k desired.Key, id string, at time.Time) store.Ingest {
	return store.Ingest{
		DeliveryID: id,
		Key:        k,
		Kind:       desired.KindIssue,
		Harness:    "claude-code",
		Cwd:        "/src/" + k.Repo,
		Delivery: &desired.Delivery{
			ID: id, Event: "issue_comment", Action: "created", Sender: "octocat",
			Prompt: "event=issue_comment delivery=" + id + "\nplease look", ReceivedAt: at,
		},
	}
}

// stateChange is an Ingest that only sets the open/closed state of k.
func stateChange(k desired.Key, id string, closed bool, at time.Time) store.Ingest {
	return store.Ingest{DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/src/" + k.Repo,
		Closed: &closed, StateAt: at}
}

// ingest applies every in to st and fails the test on an error.
func ingest(t *testing.T, st store.Store, in ...store.Ingest) {
	t.Helper()
	for _, i := range in {
		_, err := st.Ingest(context.Background(), i)
		require.NoError(t, err, "ingest %s %s", i.Key, i.DeliveryID)
	}
}

// get returns the record of k, which must exist.
func get(t *testing.T, st store.Store, k desired.Key) desired.Record {
	t.Helper()
	r, err := st.Get(context.Background(), k)
	require.NoError(t, err)
	return r
}

// records returns every record of st.
func records(t *testing.T, st store.Store) []desired.Record {
	t.Helper()
	recs, err := st.Records(context.Background())
	require.NoError(t, err)
	return recs
}
