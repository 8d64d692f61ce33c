package e2e

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

func trustPromptEnv(t *testing.T) *env {
	return newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_TRUST_PROMPT": "1"},
		Policy:     map[string]any{"confirmTimeoutSeconds": 2},
	})
}

// TestOperatorWhoLetTheBootPromptThroughBringsTheItemBack: a boot prompt
// held behind a dialog past the confirm timeout needs attention; the
// person who answers the dialog lets the CLI submit it, and the item goes
// back to Running by that alone, its event delivered from the
// conversation, once; a release after it sends nothing again.
func TestOperatorWhoLetTheBootPromptThroughBringsTheItemBack(t *testing.T) {
	t.Parallel()
	e := trustPromptEnv(t)
	body := "fix the flaky test " + uuid.NewString()
	delivery, id := stuckAtTrustDialog(t, e, body)

	pressEnter(t, e)
	e.waitTurn(t, keyIssue, id, body, waitShort, "the boot prompt never reached the transcript after Enter")
	ev := waitDelivered(t, e, delivery, waitShort)
	assert.Equal(t, "true", ev.Attrs["verified"], "%v", ev.Attrs)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, "unblocked", r.Status.Reason)
	assert.Empty(t, r.Pending)

	e.mustRun(t, "release", keyIssue.String())
	e.waitEvent(t, journal.ItemReleased, keyIssue, 1, waitShort)
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), body), "one turn for one delivery")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, delivery), "never pasted")
	assert.Len(t, deliveriesOf(t, e, journal.DispatchDelivered, delivery), 1)
	assert.Len(t, e.argvLog(t), 1, "never respawned")
}

func TestNewEventAfterOperatorLetTheBootPromptThroughIsPastedAlone(t *testing.T) {
	t.Parallel()
	e := trustPromptEnv(t)
	body := "first " + uuid.NewString()
	first, id := stuckAtTrustDialog(t, e, body)
	pressEnter(t, e)
	e.waitTurn(t, keyIssue, id, body, waitShort, "the boot prompt never reached the transcript after Enter")

	next := "second " + uuid.NewString()
	second := sendComment(t, e, next)
	assert.Equal(t, "transcript", waitDelivered(t, e, first, waitShort).Attrs["via"])
	assert.Equal(t, "paste", waitDelivered(t, e, second, waitShort).Attrs["via"])
	e.settle(t)
	turns := e.userTurns(t, keyIssue, id)
	assert.Equal(t, 1, countContaining(turns, body), "the first event once")
	assert.Equal(t, 1, countContaining(turns, next), "the second event once")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, first))
}

// pasteByHand pastes text into k's pane and submits it, as an earlier
// daemon would have.
func pasteByHand(t *testing.T, e *env, k desired.Key, text string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), "tmux", "-L", e.socket, "load-buffer", "-b", "by-hand", "-")
	cmd.Stdin = strings.NewReader(text)
	require.NoError(t, cmd.Run())
	_, err := e.tmux(t, "paste-buffer", "-p", "-d", "-b", "by-hand", "-t", paneTarget(k))
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	e.sendKeys(t, k, "Enter")
}

func TestRestartThatLostTheSendRecordDoesNotPasteAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID

	// A daemon pasted this event and died before it recorded the send.
	e.stop(t)
	body := "pasted before the crash " + uuid.NewString()
	delivery := e.ingestComment(t, keyIssue, body)
	pending, _ := e.record(t, keyIssue)
	require.Len(t, pending.Pending, 1)
	pasteByHand(t, e, keyIssue, e.prompt(t, keyIssue, pending.Pending[0].ID))
	e.waitTurn(t, keyIssue, id, body, waitShort, "the paste never reached the transcript")

	e.start(t)
	ev := waitDelivered(t, e, delivery, waitShort)
	assert.Equal(t, "transcript", ev.Attrs["via"], "%v", ev.Attrs)
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), body), "one turn for one delivery")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, delivery))
}

func TestPastedTabsAreVerifiedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "first comment "+uuid.NewString())

	body := "| a\t| b\t|\ntrailing  \n漢字 😀 " + uuid.NewString()
	delivery := sendComment(t, e, body)
	ev := waitDelivered(t, e, delivery, waitShort)
	assert.Equal(t, "true", ev.Attrs["verified"], "%v", ev.Attrs)
	assert.Equal(t, "paste", ev.Attrs["via"])
	// The CLI stores a pasted tab as four spaces.
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, r.Status.HarnessSessionID), strings.ReplaceAll(body, "\t", "    ")))
	assert.Empty(t, e.eventsNamed(t, journal.DispatchMangled, keyIssue))
}

func TestMangledPasteNeedsAttentionAndIsResentOnlyOnRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_MANGLE": "1"}})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID

	tag := uuid.NewString()
	delivery := sendComment(t, e, "two  spaces "+tag)
	var mangled []journal.Event
	e.waitFor(t, func() bool {
		mangled = deliveriesOf(t, e, journal.DispatchMangled, delivery)
		return len(mangled) == 1
	}, waitShort, "the mangled paste was not reported")
	assert.Equal(t, "1", mangled[0].Attrs["copies"])
	na := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitShort)
	assert.Equal(t, "delivery_mangled", na.Status.Reason)
	require.Len(t, na.Pending, 1, "a mangled event is not delivered")
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), tag), "not sent again by itself")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchDelivered, delivery))

	// The operator releases: one more copy, mangled again, and loopd stops
	// again rather than loop.
	e.mustRun(t, "release", keyIssue.String())
	e.waitFor(t, func() bool {
		mangled = deliveriesOf(t, e, journal.DispatchMangled, delivery)
		return len(mangled) == 2
	}, waitShort, "the resent paste was not reported")
	assert.Equal(t, "2", mangled[1].Attrs["copies"])
	e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitShort)
	e.settle(t)
	assert.Equal(t, 2, countContaining(e.userTurns(t, keyIssue, id), tag), "exactly one resend per release")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchDelivered, delivery))
}

func TestPromptStoredBeforeDigestsIsVerifiedByItsMarker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	startWithComment(t, e, "first comment "+uuid.NewString())

	// A pending delivery from a database written before the end line
	// carried a digest.
	id := uuid.NewString()
	s := e.openStore(t)
	_, err := s.Ingest(context.Background(), store.Ingest{
		DeliveryID: id, Key: keyIssue, Kind: desired.KindIssue, Harness: "claude-code", Cwd: e.workdir(keyIssue),
		Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "Codertocat", ReceivedAt: time.Now().UTC(),
			Prompt: "[loopd] issue_comment.created on " + keyIssue.String() + " by Codertocat (delivery " + id + ")\n" +
				"<<<github-data " + id + "\nbody:\nold\tformat\ngithub-data " + id + ">>>\n"},
	})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	ev := waitDelivered(t, e, id, waitShort)
	assert.Equal(t, "true", ev.Attrs["verified"], "%v", ev.Attrs)
	assert.Equal(t, "paste", ev.Attrs["via"])
}

// TestStoreFromBeforeCompactRecordsDeliversItsPendingEvents: a store that
// a loopd before compact records wrote (schema 6: no size, header line or
// digest beside a prompt), with two events pending on an item that has no
// agent yet, is migrated when the daemon opens it. The first event boots
// the agent, the second is pasted, each verified whole in the
// conversation, each once.
func TestStoreFromBeforeCompactRecordsDeliversItsPendingEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	first, second := "first comment "+uuid.NewString(), "second comment "+uuid.NewString()
	d1, d2 := e.ingestComment(t, keyIssue, first), e.ingestComment(t, keyIssue, second)
	downgradeToSchema6(t, e)

	e.start(t)
	ev := waitDelivered(t, e, d1, waitLong)
	assert.Equal(t, "boot_prompt", ev.Attrs["via"], "%v", ev.Attrs)
	ev = waitDelivered(t, e, d2, waitLong)
	assert.Equal(t, map[string]string{"via": "paste", "verified": "true"}, map[string]string{"via": ev.Attrs["via"], "verified": ev.Attrs["verified"]})
	r := e.mustRecord(t, keyIssue)
	assert.Empty(t, r.Pending)
	turns := e.userTurns(t, keyIssue, r.Status.HarnessSessionID)
	assert.Equal(t, 1, countContaining(turns, first), "%q", turns)
	assert.Equal(t, 1, countContaining(turns, second), "%q", turns)
}

// downgradeToSchema6 turns e's store, with the daemon stopped, into the
// file a loopd at schema 6 would have written with the same rows: without
// the deliveries' answers (v18), the items' installations (v16), the items' titles and pages (v15), a fork's maintainer_can_modify (v14), GitHub's pauses (v13), without deliveries' identities, the items by head
// and CI by commit in place of check claims (v12), without
// what a pull request's head decides (v11), without the Fleet's tables and
// columns (v8 and v9's), and without the compact columns of pending
// deliveries and their index (v7).
func downgradeToSchema6(t *testing.T, e *env) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(e.stateDir, "loopd.db"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`ALTER TABLE work_items DROP COLUMN budget_raise;
		ALTER TABLE work_items DROP COLUMN installation;
		ALTER TABLE work_items DROP COLUMN url;
		ALTER TABLE work_items DROP COLUMN title;
		ALTER TABLE work_items DROP COLUMN maintainer_can_modify;
		DROP TABLE github_pauses;
		DROP TABLE ci_commits;
		CREATE TABLE check_claims (
			work_item TEXT NOT NULL REFERENCES work_items (key),
			claim     TEXT NOT NULL,
			delivery  TEXT NOT NULL,
			PRIMARY KEY (work_item, claim)
		) STRICT;
		DROP INDEX work_items_by_head;
		ALTER TABLE work_items DROP COLUMN flipped_at;
		DROP INDEX deliveries_by_identity;
		ALTER TABLE deliveries DROP COLUMN identity;
		ALTER TABLE work_items DROP COLUMN head_repo;
		ALTER TABLE work_items DROP COLUMN author;
		ALTER TABLE work_items DROP COLUMN head_pusher;
		DROP TABLE transcripts;
		DROP TABLE hosts;
		DROP INDEX work_items_by_lease_owner;
		ALTER TABLE work_items DROP COLUMN lease_owner;
		ALTER TABLE work_items DROP COLUMN lease_generation;
		ALTER TABLE outbox DROP COLUMN generation;
		DROP INDEX deliveries_pending;
		DROP INDEX deliveries_by_answer;
		ALTER TABLE deliveries DROP COLUMN answer_to;
		ALTER TABLE deliveries DROP COLUMN answer;
		ALTER TABLE deliveries DROP COLUMN prompt_bytes;
		ALTER TABLE deliveries DROP COLUMN prompt_header;
		ALTER TABLE deliveries DROP COLUMN frame_digest;
		CREATE INDEX deliveries_pending ON deliveries (work_item, seq) WHERE state = 'pending';
		PRAGMA user_version = 6;`)
	require.NoError(t, err)
}
