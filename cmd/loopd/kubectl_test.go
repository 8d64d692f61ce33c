package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// The items of fleetStore, spelled as GitHub spells them.
var (
	keyRunning  = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 8}
	keyClosed   = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 9}
	keyHeld     = desired.Key{Owner: "octo-org", Repo: "api", Number: 3}
	keyStopped  = desired.Key{Owner: "octo-org", Repo: "api", Number: 4}
	keyAttended = desired.Key{Owner: "octo-org", Repo: "web", Number: 1}
)

const convID = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"

// fleetStore writes a config with its state in a new temp dir, tmux on
// socket, and a store holding one item in each state get treats apart: a
// running one with a pending event, a closed one, a held one, a stopped
// one and one that needs attention. It returns the config's path and the
// store, open.
func fleetStore(t *testing.T, socket string) (string, store.Store) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	config := writeConfig(t, dir)
	if socket != "" {
		f, err := os.OpenFile(config, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("tmux:\n  socket: " + socket + "\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	closed := true
	for i, k := range []desired.Key{keyRunning, keyClosed, keyHeld, keyStopped, keyAttended} {
		in := store.Ingest{DeliveryID: "d-" + k.String(), Key: k, Kind: desired.KindIssue, Harness: "claude-code",
			Cwd: filepath.Join(dir, "w", k.Repo), Delivery: &desired.Delivery{ID: "d-" + k.String(), Event: "issue_comment",
				Action: "created", Sender: "octocat", Prompt: "[loopd] event\nbody", ReceivedAt: now.Add(time.Duration(i) * time.Second)}}
		if k == keyClosed {
			in.Closed, in.StateAt = &closed, now
		}
		if k == keyAttended {
			in.Delivery.Sender = "evil\x1b[2Jsender" // a terminal escape, as untrusted text may hold
		}
		_, err := st.Ingest(ctx, in)
		require.NoError(t, err)
	}
	exit := 1
	require.NoError(t, st.PutStatus(ctx, keyRunning, desired.Status{Phase: desired.PhaseRunning, Reason: "delivered",
		SessionState:   desired.SessionState{HarnessSessionID: convID, Session: desired.SessionName(keyRunning), PaneID: "%3", SpawnedAt: now.Add(-time.Minute)},
		WorkspaceState: desired.WorkspaceState{Workdir: filepath.Join(dir, "w", "run")}}))
	require.NoError(t, st.PutStatus(ctx, keyClosed, desired.Status{Phase: desired.PhaseStopped, Reason: "closed"}, "d-"+keyClosed.String()))
	require.NoError(t, st.PutStatus(ctx, keyStopped, desired.Status{Phase: desired.PhaseStopped, Reason: "exited_clean"}, "d-"+keyStopped.String()))
	require.NoError(t, st.SetHeld(ctx, keyHeld, true))
	require.NoError(t, st.PutStatus(ctx, keyHeld, desired.Status{Phase: desired.PhaseStopped, Reason: "held"}, "d-"+keyHeld.String()))
	require.NoError(t, st.PutStatus(ctx, keyAttended, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "crash_loop",
		RestartHistory: desired.RestartHistory{Failures: 11, LastExitStatus: &exit, LastExitReason: "crashed", LastExitAt: now}}))
	return config, st
}

// TestResolveItemIgnoresCase: a key is found whatever its case, as the
// store spells it; an unknown one is ErrNotFound in loopd's words.
func TestResolveItemIgnoresCase(t *testing.T) {
	_, st := fleetStore(t, "")
	ctx := context.Background()
	for _, arg := range []string{"Codertocat/Hello-World#8", "codertocat/hello-world#8", "CODERTOCAT/HELLO-WORLD#8"} {
		r, err := resolveItem(ctx, st, arg)
		require.NoError(t, err, arg)
		assert.Equal(t, keyRunning, r.Key, arg)
	}
	_, err := resolveItem(ctx, st, "codertocat/hello-world#10")
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.EqualError(t, err, "work item codertocat/hello-world#10 not found")
	_, err = resolveItem(ctx, st, "codertocat/hello-world")
	assert.ErrorIs(t, err, desired.ErrBadKey)

	// Two spellings stored (a repository renamed in case): the exact one
	// wins, any other is ambiguous, never a guess.
	renamed := desired.Key{Owner: "codertocat", Repo: "hello-world", Number: 8}
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-renamed", Key: renamed, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
	require.NoError(t, err)
	r, err := resolveItem(ctx, st, "codertocat/hello-world#8")
	require.NoError(t, err)
	assert.Equal(t, renamed, r.Key)
	_, err = resolveItem(ctx, st, "CoderToCat/Hello-World#8")
	assert.EqualError(t, err, "work item CoderToCat/Hello-World#8 is ambiguous: it matches Codertocat/Hello-World#8 and codertocat/hello-world#8; give the exact key")
}

// release --budget only raises the item's budget, adding up, journaled;
// a count that is none is refused before the store is touched.
func TestReleaseBudgetRaisesOnly(t *testing.T) {
	config, st := fleetStore(t, "")
	ctx := context.Background()
	before, err := st.Get(ctx, keyRunning)
	require.NoError(t, err)
	out, err := run(t, "", "--config", config, "release", "--budget", "+200k", "codertocat/hello-world#8")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Codertocat/Hello-World#8 budget raised by 200.0k tokens (200.0k in all)")
	_, err = run(t, "", "--config", config, "release", "--budget", "1.5m", keyRunning.String())
	require.NoError(t, err)
	r, err := st.Get(ctx, keyRunning)
	require.NoError(t, err)
	assert.Equal(t, int64(1_700_000), r.Spec.BudgetRaise)
	assert.Equal(t, before.Spec.ReleaseGeneration, r.Spec.ReleaseGeneration, "no release carried out")
	evs, err := st.Events(ctx, store.EventFilter{WorkItem: keyRunning.String(), Names: []string{string(journal.ItemBudgetRaised)}})
	require.NoError(t, err)
	assert.Len(t, evs, 2)

	_, err = run(t, "", "--config", config, "release", "--budget", "+lots", keyRunning.String())
	require.ErrorIs(t, err, desired.ErrBadTokens)
	r, err = st.Get(ctx, keyRunning)
	require.NoError(t, err)
	assert.Equal(t, int64(1_700_000), r.Spec.BudgetRaise)
}

// Hold and release take a key in any case; an unknown item is "not
// found", never the store's error.
func TestHoldAndReleaseIgnoreCase(t *testing.T) {
	config, st := fleetStore(t, "")
	ctx := context.Background()
	out, err := run(t, "", "--config", config, "hold", "codertocat/hello-world#8")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Codertocat/Hello-World#8 held")
	r, err := st.Get(ctx, keyRunning)
	require.NoError(t, err)
	assert.True(t, r.Spec.Held)

	_, err = run(t, "", "--config", config, "release", "CODERTOCAT/hello-world#8")
	require.NoError(t, err)
	r, err = st.Get(ctx, keyRunning)
	require.NoError(t, err)
	assert.False(t, r.Spec.Held)

	for _, verb := range []string{"hold", "release", "get", "describe", "events", "attach", "logs"} {
		_, err := run(t, "", "--config", config, verb, "codertocat/hello-world#80")
		require.Error(t, err, verb)
		assert.EqualError(t, err, "work item codertocat/hello-world#80 not found", verb)
		assert.ErrorIs(t, err, store.ErrNotFound, verb)
	}
}

// TestHoldAndReleaseSayWhenNoServeRuns: a hold or release recorded while
// no serve holds the state dir says that nothing carries it out yet; with
// a serve running (its lock held) it says nothing more.
func TestHoldAndReleaseSayWhenNoServeRuns(t *testing.T) {
	config, _ := fleetStore(t, "")
	note := "note: no loopd serve is running on " + filepath.Join(filepath.Dir(config), "state") + ": start it, or run loopd reconcile --once"
	for _, verb := range []string{"hold", "release"} {
		out, err := run(t, "", "--config", config, verb, keyRunning.String())
		require.NoError(t, err, out)
		assert.Contains(t, out, note, verb)
	}
	unlock, err := flock.Lock(context.Background(), filepath.Join(filepath.Dir(config), "state", serveLockFile))
	require.NoError(t, err)
	defer unlock()
	for _, verb := range []string{"hold", "release"} {
		out, err := run(t, "", "--config", config, verb, keyRunning.String())
		require.NoError(t, err, out)
		assert.NotContains(t, out, "note:", verb)
	}
}

// events of an item in another case prints its events; one of an item the
// store never held but the journal names (an ignored delivery) prints them
// too.
func TestEventsOfAnItemIgnoreCase(t *testing.T) {
	config, store := fleetStore(t, "")
	ctx := context.Background()
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.SessionSpawned, WorkItem: keyRunning.String(),
		Attrs: map[string]string{"session": desired.SessionName(keyRunning)}}))
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.DeliveryIgnored, WorkItem: "acme/other#5",
		Attrs: map[string]string{"reason": "unauthorized_sender"}}))

	out, err := run(t, "", "--config", config, "events", "codertocat/HELLO-world#8")
	require.NoError(t, err)
	assert.Contains(t, out, "session.spawned Codertocat/Hello-World#8")
	assert.NotContains(t, out, "acme/other#5")

	out, err = run(t, "", "--config", config, "events", "acme/other#5")
	require.NoError(t, err)
	assert.Contains(t, out, "delivery.ignored acme/other#5 reason=unauthorized_sender")
}

// events --type keeps the names given, --limit the newest of them, and -o
// json prints one typed object a line that the documented schema accepts.
// An event type no event has is an error that suggests the name it is a
// near miss of, else its family's names: a typo under --follow would
// otherwise show nothing, forever.
func TestEventsUnknownTypeIsAnError(t *testing.T) {
	config, _ := fleetStore(t, "")
	_, err := run(t, "", "--config", config, "events", "--type", "session.exited,session.exitd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown event type "session.exitd"; did you mean session.exited?`, "a near miss: just its name")
	_, err = run(t, "", "--config", config, "events", "--type", "session.frobnicated")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did you mean one of ", "no near miss: its family")
	assert.Contains(t, err.Error(), string(journal.SessionSpawned))
	_, err = run(t, "", "--config", config, "events", "--type", "bogus")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown event type "bogus"`)
}

func TestEventsTypeLimitAndJSON(t *testing.T) {
	config, store := fleetStore(t, "")
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	for i, name := range []journal.Name{journal.SessionSpawned, journal.SessionExited, journal.SessionRespawned, journal.SessionExited, journal.ConfigReloaded} {
		item := keyRunning.String()
		if name == journal.ConfigReloaded {
			item = ""
		}
		require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: t0.Add(time.Duration(i) * time.Second), Name: name, Level: 0, WorkItem: item,
			Attrs: map[string]string{"exit_status": "1", "clean": "false", "n": string(rune('a' + i))}}))
	}
	out, err := run(t, "", "--config", config, "events", "--type", "session.exited,SESSION.RESPAWNED", "--limit", "2")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.Contains(t, lines[0], "session.respawned")
	assert.Contains(t, lines[1], "session.exited")
	assert.Contains(t, lines[1], "n=d")

	out, err = run(t, "", "--config", config, "events", "-o", "json", "--since", t0.Add(-time.Second).Format(time.RFC3339))
	require.NoError(t, err)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	validator := compileSchema(t, "events.schema.json")
	for _, l := range lines {
		require.NoError(t, validator.Validate(unmarshalJSON(t, l)), l)
	}
	var first, last map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &last))
	assert.IsType(t, float64(0), first["id"], "a number")
	assert.Equal(t, keyRunning.String(), first["work_item"])
	assert.Nil(t, last["work_item"], "null for a daemon-wide event")
	attrs := first["attrs"].(map[string]any)
	assert.Equal(t, 1.0, attrs["exit_status"], "a count or status is a number")
	assert.Equal(t, false, attrs["clean"], "a yes or no is a boolean")
	assert.Equal(t, "a", attrs["n"], "anything else is text")
	at, err := time.Parse(time.RFC3339Nano, first["time"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, t0, at, time.Millisecond)

	_, err = run(t, "", "--config", config, "events", "-o", "xml")
	assert.Error(t, err)
	_, err = run(t, "", "--config", config, "events", "--since", "yesterday")
	assert.Error(t, err)
}

// events --follow prints the rows written after it started, a row written
// late with an earlier time included, each once, and ends with its
// context.
func TestEventsFollow(t *testing.T) {
	config, store := fleetStore(t, "")
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: old, Name: journal.SessionSpawned, WorkItem: keyRunning.String()}))

	out, wait := runBackground(t, "--config", config, "events", "--follow", "--type", "session.exited,delivery.rejected")
	require.Eventually(t, func() bool { return out.Len() == 0 && wait.started() }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.SessionExited, WorkItem: keyRunning.String(),
		Attrs: map[string]string{"exit_status": "1"}}))
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.SessionStopped, WorkItem: keyRunning.String()}))
	// Written late, dated before the follow began.
	require.NoError(t, store.AppendEvent(ctx, journal.Event{Time: old.Add(time.Second), Name: journal.DeliveryRejected,
		Attrs: map[string]string{"reason": "bad_signature"}}))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "reason=bad_signature") }, 5*time.Second, 20*time.Millisecond)
	time.Sleep(2 * schema.EventsFollowPoll) // more polls: nothing twice
	require.NoError(t, wait.stop())
	got := out.String()
	assert.Equal(t, 1, strings.Count(got, "session.exited"), got)
	assert.Equal(t, 1, strings.Count(got, "delivery.rejected"), got)
	assert.NotContains(t, got, "session.stopped", "--type leaves it out")
	assert.NotContains(t, got, "session.spawned", "older than the follow, and of another type")
}

// TestEventsFollowPrintsARowAppendedAfterItsFirstRead: a row appended
// between the first read (what was printed) and the follow's start is
// printed once, not taken for one the first read printed.
func TestEventsFollowPrintsARowAppendedAfterItsFirstRead(t *testing.T) {
	_, st := fleetStore(t, "")
	// The bound of a failing run: a follow that missed the row waits for
	// it until then.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := store.EventFilter{Names: []string{string(journal.DispatchDelivered)}}
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.DispatchDelivered, WorkItem: keyRunning.String(), Attrs: map[string]string{"delivery": "d-1"}}))
	printed, err := st.Events(ctx, f)
	require.NoError(t, err)
	require.Len(t, printed, 1)
	require.NoError(t, st.AppendEvent(ctx, journal.Event{Time: time.Now(), Name: journal.DispatchDelivered, WorkItem: keyRunning.String(), Attrs: map[string]string{"delivery": "d-2"}}))

	var got []string
	err = followEvents(ctx, st, f, printed, func(e journal.Event) error {
		got = append(got, e.Attrs["delivery"])
		cancel() // the row after the first read is the one to print
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"d-2"}, got)
}

// get hides closed and stopped items but a held one unless --all; named
// items and --phase show them; -o name, wide, json and yaml print the
// same items.
func TestGetSelectsAndFormats(t *testing.T) {
	config, _ := fleetStore(t, "")
	names := func(args ...string) []string {
		t.Helper()
		out, err := run(t, "", append([]string{"--config", config, "get", "-o", "name"}, args...)...)
		require.NoError(t, err)
		return strings.Fields(out)
	}
	assert.Equal(t, []string{"Codertocat/Hello-World#8", "octo-org/api#3", "octo-org/web#1"}, names())
	assert.Equal(t, []string{"Codertocat/Hello-World#8", "Codertocat/Hello-World#9", "octo-org/api#3", "octo-org/api#4", "octo-org/web#1"}, names("--all"))
	assert.Equal(t, []string{"Codertocat/Hello-World#9"}, names("codertocat/hello-world#9"), "a closed item named is shown")
	assert.Equal(t, []string{"octo-org/web#1"}, names("--phase", "needsattention"))
	assert.Equal(t, []string{"Codertocat/Hello-World#9", "octo-org/api#3", "octo-org/api#4"}, names("--phase", "STOPPED"))

	_, err := run(t, "", "--config", config, "get", "--phase", "sleeping")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown phase "sleeping"; valid phases: Idle, Preparing, Queued`)
	_, err = run(t, "", "--config", config, "get", "--phase", "runing")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown phase "runing"; did you mean Running?`)
	_, err = run(t, "", "--config", config, "get", "-o", "xml")
	assert.Error(t, err)

	out, err := run(t, "", "--config", config, "get")
	require.NoError(t, err)
	assert.Contains(t, out, "2 closed or stopped work items not shown; --all shows them")
	assert.Equal(t, "1 item, 2 items", "1 "+plural(1, "item", "items")+", 2 "+plural(2, "item", "items"))
	_, tailErr := run(t, "", "--config", config, "logs", "octo-org/api#3", "--tail", "-3")
	require.Error(t, tailErr)
	assert.Contains(t, tailErr.Error(), "--tail -3: want a number of lines, 0 or more")
	assert.Contains(t, out, "Stopped (held)")
	assert.Contains(t, out, "crash_loop")
	out, err = run(t, "", "--config", config, "get", "--phase", "needsattention")
	require.NoError(t, err)
	assert.NotContains(t, out, "not shown", "--phase hides no item for being closed or stopped")

	out, err = run(t, "", "--config", config, "get", "-o", "wide", "codertocat/hello-world#8")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	for _, col := range []string{"WORK ITEM", "SESSION ID", "HARNESS", "PANE", "WORKDIR", "LEASE EXPIRES", "REASON"} {
		assert.Contains(t, lines[0], col)
	}
	for _, cell := range []string{"claude-code", "%3", convID, filepath.Join("w", "run")} {
		assert.Contains(t, lines[1], cell)
	}
}

// get -o json prints typed values that the documented schema accepts, and
// -o yaml the same object.
func TestGetJSONFollowsItsSchema(t *testing.T) {
	config, _ := fleetStore(t, "")
	out, err := run(t, "", "--config", config, "get", "--all", "-o", "json")
	require.NoError(t, err)
	require.NoError(t, compileSchema(t, "getoutput.schema.json").Validate(unmarshalJSON(t, out)), out)

	var list struct {
		Kind  string
		Items []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, "WorkItemList", list.Kind)
	require.Len(t, list.Items, 5)
	running, attended := list.Items[0], list.Items[4]
	assert.Equal(t, float64(8), running["number"])
	status := running["status"].(map[string]any)
	assert.Equal(t, float64(1), status["pending"])
	assert.Equal(t, false, status["conversationUnconfirmed"])
	assert.Equal(t, convID, status["conversationId"])
	_, err = time.Parse(time.RFC3339, status["spawnedAt"].(string))
	assert.NoError(t, err)
	assert.Equal(t, true, list.Items[2]["spec"].(map[string]any)["held"])
	assert.NotContains(t, list.Items[1]["status"], "spawnedAt", "no time that does not apply")
	exit := attended["status"].(map[string]any)["lastExit"].(map[string]any)
	assert.Equal(t, float64(1), exit["status"])

	yamlOut, err := run(t, "", "--config", config, "get", "--all", "-o", "yaml")
	require.NoError(t, err)
	var fromYAML any
	require.NoError(t, yaml.Unmarshal([]byte(yamlOut), &fromYAML))
	// YAML's times decode as time.Time; through JSON both are one shape.
	b, err := json.Marshal(fromYAML)
	require.NoError(t, err)
	assert.JSONEq(t, out, string(b))
}

// get --watch prints an item again when it changes, without the header,
// its columns under the header's, and ends with its context.
func TestGetWatchPrintsChanges(t *testing.T) {
	config, store := fleetStore(t, "")
	out, wait := runBackground(t, "--config", config, "get", "--watch")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "octo-org/web#1") }, 5*time.Second, 10*time.Millisecond)
	first := out.String()
	require.NoError(t, store.PutStatus(context.Background(), keyAttended, desired.Status{Phase: desired.PhaseBackingOff, Reason: "crashed"}))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "BackingOff") }, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, wait.stop())
	more := strings.TrimPrefix(out.String(), first)
	assert.Equal(t, 1, strings.Count(more, "\n"), "one row: %q", more)
	assert.Contains(t, more, "octo-org/web#1")
	assert.NotContains(t, more, "WORK ITEM")
	head := strings.SplitN(first, "\n", 2)[0]
	for _, col := range []string{"PHASE", "PENDING", "REASON"} {
		i := strings.Index(head, col)
		require.Positive(t, i, col)
		assert.Equal(t, " ", more[i-1:i], "the row's %s starts where the header's does: %q under %q", col, more, head)
		assert.NotEqual(t, " ", more[i:i+1], "the row's %s starts where the header's does: %q under %q", col, more, head)
	}
}

// get --no-headers prints the rows only, as kubectl's.
func TestGetNoHeaders(t *testing.T) {
	config, _ := fleetStore(t, "")
	with, err := run(t, "", "--config", config, "get")
	require.NoError(t, err)
	without, err := run(t, "", "--config", config, "get", "--no-headers")
	require.NoError(t, err)
	head, rows, _ := strings.Cut(with, "\n")
	assert.True(t, strings.HasPrefix(head, "WORK ITEM"), head)
	assert.NotContains(t, without, "WORK ITEM")
	assert.Equal(t, strings.Count(rows, "\n"), strings.Count(without, "\n"), "every row still: %q", without)
}

// get --watch -o json is a stream of WorkItem objects, one a line, from
// the first line on: the items listed first, then each one that changed.
func TestGetWatchJSONIsOneObjectALine(t *testing.T) {
	config, store := fleetStore(t, "")
	out, wait := runBackground(t, "--config", config, "get", "--watch", "-o", "json")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "octo-org/web#1") }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, store.PutStatus(context.Background(), keyAttended, desired.Status{Phase: desired.PhaseBackingOff, Reason: "crashed"}))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "BackingOff") }, 5*time.Second, 20*time.Millisecond)
	require.NoError(t, wait.stop())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Greater(t, len(lines), 1)
	for _, l := range lines {
		var item map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &item), "not one JSON object: %q", l)
		assert.Equal(t, "WorkItem", item["kind"], "%q", l)
	}
}

// describe shows the spec and status, where the agent runs, how to attach,
// the transcript, the pending events and the item's last events.
func TestDescribeShowsTheItem(t *testing.T) {
	config, store := fleetStore(t, "loopd-describe")
	for i := range 25 {
		require.NoError(t, store.AppendEvent(context.Background(), journal.Event{Time: time.Now().Add(time.Duration(i) * time.Millisecond),
			Name: journal.DispatchSent, WorkItem: keyRunning.String(), Attrs: map[string]string{"attempt": string(rune('A' + i))}}))
	}
	out, err := run(t, "", "--config", config, "describe", "codertocat/hello-world#8")
	require.NoError(t, err)
	// The columns' padding aside.
	out = regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	for _, want := range []string{
		"Name: Codertocat/Hello-World#8\n",
		"Harness: claude-code\n",
		"Credentials: none\n",
		"Session: " + desired.SessionName(keyRunning) + "\n",
		"Attach: tmux -L loopd-describe attach -t =" + desired.SessionName(keyRunning) + "\n",
		"Transcript: /",
		convID + ".jsonl (not there)\n",
		"Phase: Running\n",
		"Conversation ID: " + convID + "\n",
		"Held: false\n",
		"Pending events (1):\n",
		" d-Codertocat/Hello-World#8 issue_comment.created octocat ",
		"Events (last 20):\n",
		"attempt=Y\n",
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "attempt=E", "only the last 20")
	assert.NotContains(t, out, "body", "no prompt text")

	// Text from outside is quoted, never handed to the terminal.
	out, err = run(t, "", "--config", config, "describe", "octo-org/web#1")
	require.NoError(t, err)
	assert.Contains(t, out, `"evil\x1b[2Jsender"`)
	assert.NotContains(t, out, "\x1b")
	assert.Contains(t, out, "Last exit:")

	// A pull request's head facts, and what its next spawn gets of its
	// workdir's settings, and why.
	pr := desired.Key{Owner: "octo-org", Repo: "web", Number: 2}
	_, err = store.Ingest(context.Background(), openedFromAFork(pr))
	require.NoError(t, err)
	out, err = run(t, "", "--config", config, "describe", pr.String())
	require.NoError(t, err)
	out = regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	assert.Contains(t, out, "Attach: - (no session yet)", "no session ever: nothing to attach to")
	assert.NotContains(t, out, "\x1b")
	for _, want := range []string{"Head repo: someone/web\n", "Opened by: someone\n", `Head: aaa pushed by "\x1b]0;pusher"` + "\n",
		"Project settings: off (route_untrusted)\n"} {
		assert.Contains(t, out, want)
	}
}

// openedFromAFork is the ingest of pull request k opened from a fork, its
// head pushed by a login that holds a terminal escape.
func openedFromAFork(k desired.Key) store.Ingest {
	return store.Ingest{DeliveryID: "d-pr", Key: k, Kind: desired.KindPullRequest, Harness: "claude-code",
		Cwd: "/w/pr", HeadSHA: "aaa", HeadPusher: "\x1b]0;pusher", HeadRepo: "someone/web", Author: "someone", StateAt: time.Now(),
		Delivery: &desired.Delivery{ID: "d-pr", Event: "pull_request", Action: "opened", Sender: "someone", Prompt: "[loopd] event\nbody"}}
}

// describe says what credential an item's agent may ask for: an App's
// token scoped to the repository, loopd's own unscoped token only where
// the route says so, or none.
func TestDescribeShowsTheAgentsCredentials(t *testing.T) {
	k := desired.Key{Owner: "octo-org", Repo: "api", Number: 1}
	route := schema.Route{Harness: "claude-code", Workdir: "/w/{{.Number}}", Checkout: &schema.Checkout{URL: "https://github.com/{{.Owner}}/{{.Repo}}.git"}}
	cfg := func(gh *schema.GitHub, r schema.Route) *schema.Config {
		return &schema.Config{GitHub: gh, Webhooks: schema.Webhooks{GHWebhook: schema.GHWebhook{Routing: schema.Routing{Repos: map[string]schema.Route{"octo-org/*": r}}}}}
	}
	app, token := &schema.GitHub{App: &schema.GitHubApp{AppID: 1}}, &schema.GitHub{TokenEnv: "LOOPD_GITHUB_TOKEN"}
	withGH := route
	withGH.AgentGH = true
	withToken := route
	withToken.AgentCredentials = schema.AgentCredentialsToken
	noCheckout := route
	noCheckout.Checkout = nil
	assert.Equal(t, "app (an installation token of this repository alone)", credentialsShown(cfg(app, route), k))
	assert.Equal(t, "app (an installation token of this repository alone), gh too", credentialsShown(cfg(app, withGH), k))
	assert.Equal(t, "none", credentialsShown(cfg(token, route), k), "a plain token only when the route says so")
	assert.Equal(t, "token (unscoped: every repository the token reaches)", credentialsShown(cfg(token, withToken), k))
	assert.Equal(t, "none", credentialsShown(cfg(app, noCheckout), k), "nothing to push to")
	assert.Equal(t, "none", credentialsShown(cfg(nil, route), k))
	assert.Equal(t, "none", credentialsShown(cfg(app, route), desired.Key{Owner: "acme", Repo: "x", Number: 1}), "no route")
}

// attach execs tmux attach on loopd's socket with the exact session as
// target; an item without a session is an error that says so, and so is
// a stdin that is no terminal.
func TestAttachExecsTheExactSession(t *testing.T) {
	ex := tmuxtest.NewExec(t)
	config, _ := fleetStore(t, ex.Socket())
	var got []string
	prev := execve
	execve = func(bin string, argv, env []string) error { got = append([]string{bin}, argv...); return nil }
	t.Cleanup(func() { execve = prev })

	_, err := run(t, "", "--config", config, "attach", "codertocat/hello-world#8")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "work item Codertocat/Hello-World#8 has no tmux session "+desired.SessionName(keyRunning)+" on socket "+ex.Socket())
	assert.Nil(t, got, "nothing exec'd")

	session := desired.SessionName(keyRunning)
	// A session whose name the item's starts: a prefix target would be ambiguous.
	for _, name := range []string{session, session + "0"} {
		_, _, err = ex.NewSession(context.Background(), tmux.NewSession{Name: name, Argv: []string{"sleep", "60"}})
		require.NoError(t, err)
	}
	// Without a terminal, tmux attach could only fail: loopd says why.
	prevTTY := stdinIsTerminal
	t.Cleanup(func() { stdinIsTerminal = prevTTY })
	stdinIsTerminal = func() bool { return false }
	_, err = run(t, "", "--config", config, "attach", "codertocat/hello-world#8")
	require.EqualError(t, err, "attach Codertocat/Hello-World#8: attach needs a terminal: stdin is not a tty; run it from an interactive shell (loopd logs Codertocat/Hello-World#8 prints the screen)")
	assert.Nil(t, got, "nothing exec'd")
	stdinIsTerminal = func() bool { return true }

	_, err = run(t, "", "--config", config, "attach", "CODERTOCAT/hello-world#8")
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, "tmux", filepath.Base(got[0]))
	// The attach marks who attends the session (the exact target), in
	// the same tmux command (tmux.AttachArgv).
	assert.Equal(t, []string{"tmux", "-L", ex.Socket()}, got[1:4])
	assert.Equal(t, []string{"attach", "-t", "=" + session}, got[len(got)-3:])
	assert.Contains(t, got, tmux.Target(session))
}

// logs prints the agent's whole pane, its scrollback included, its lines
// trimmed; --tail N the last N.
func TestLogsPrintsTheScreenWithHistory(t *testing.T) {
	ex := tmuxtest.NewExec(t)
	config, _ := fleetStore(t, ex.Socket())
	session := desired.SessionName(keyRunning)
	_, _, err := ex.NewSession(context.Background(), tmux.NewSession{Name: session, Height: 10,
		Argv: []string{"sh", "-c", "seq 1 200 | sed 's/^/line /'; echo done; sleep 60"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		screen, err := ex.CapturePane(context.Background(), "="+session+":", false)
		return err == nil && strings.Contains(screen, "done")
	}, 5*time.Second, 20*time.Millisecond)

	out, err := run(t, "", "--config", config, "logs", "codertocat/hello-world#8")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(out, "line 1\n"), "the scrollback, not only the screen")
	assert.True(t, strings.HasSuffix(out, "line 200\ndone\n"), "no empty screen lines after the last: %q", out[max(0, len(out)-40):])
	for _, l := range strings.Split(out, "\n") {
		require.Equal(t, strings.TrimRight(l, " "), l, "no line padded to the screen's width")
	}
	out, err = run(t, "", "--config", config, "logs", "--tail", "3", "codertocat/hello-world#8")
	require.NoError(t, err)
	assert.Equal(t, "line 199\nline 200\ndone\n", out)

	_, err = run(t, "", "--config", config, "logs", "octo-org/api#3")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no tmux session")
}

// The dynamic completion of work-item keys reads the store, matches what
// was typed in any case, completes one key for a one-item verb, and
// completes nothing, quietly, when the store cannot be read.
func TestCompletionOfItemKeys(t *testing.T) {
	config, _ := fleetStore(t, "")
	complete := func(args ...string) []string {
		t.Helper()
		out, err := run(t, "", append([]string{"__complete", "--config", config}, args...)...)
		require.NoError(t, err)
		// stdout: one completion a line, then ":<directive>"; stderr
		// (merged by run): the directive in words.
		var keys []string
		directive := ""
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			switch {
			case strings.HasPrefix(l, ":"):
				directive = l
			case !strings.HasPrefix(l, "Completion ended"):
				keys = append(keys, strings.SplitN(l, "\t", 2)[0])
			}
		}
		assert.Equal(t, ":4", directive, "no file completion")
		return keys
	}
	assert.Len(t, complete("get", ""), 5)
	assert.Equal(t, []string{"Codertocat/Hello-World#8", "Codertocat/Hello-World#9"}, complete("get", "codertocat/"))
	assert.Equal(t, []string{"Codertocat/Hello-World#9"}, complete("get", "codertocat/hello-world#8", "codertocat/"), "a key given is not offered again")
	assert.Equal(t, []string{"octo-org/web#1"}, complete("describe", "OCTO-ORG/w"))
	assert.Empty(t, complete("attach", "octo-org/web#1", ""), "attach takes one item")
	assert.Empty(t, complete("--config", filepath.Join(t.TempDir(), "missing.yaml"), "get", ""))
}

// compileSchema compiles the JSON Schema file name of the schema
// directory.
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "schema", name))
	require.NoError(t, err)
	return s
}

func unmarshalJSON(t *testing.T, text string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	require.NoError(t, err, text)
	return v
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) Len() int { return len(s.String()) }

// background is a command run by runBackground.
type background struct {
	cancel context.CancelFunc
	begun  chan struct{}
	result func() error // waits once for the command's error
}

// started reports whether the command has run for two follow polls.
func (b background) started() bool {
	select {
	case <-b.begun:
		return true
	default:
		return false
	}
}

// stop ends the command's context and returns what it returned; it may be
// called again.
func (b background) stop() error {
	b.cancel()
	return b.result()
}

// runBackground starts the loopd command line args with a context that
// stop ends; its stdout and stderr go to the buffer returned.
func runBackground(t *testing.T, args ...string) (*syncBuffer, background) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(out)
	done := make(chan error, 1)
	b := background{cancel: cancel, begun: make(chan struct{}), result: sync.OnceValue(func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("the command did not end with its context")
		}
	})}
	go func() { done <- cmd.ExecuteContext(ctx) }()
	go func() { time.Sleep(2 * schema.EventsFollowPoll); close(b.begun) }()
	t.Cleanup(func() { _ = b.stop() })
	return out, b
}

// A process-runner item is one by its route, also between two runs (no
// run recorded): describe shows no attach command, attach and logs say it
// runs as a process (reconciler.ProcessRunner, the planner's rule).
func TestProcessItemBetweenRuns(t *testing.T) {
	config, _ := fleetStore(t, "loopd-process")
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(config, []byte(strings.Replace(string(data), "{harness: claude-code, ", "{harness: claude-code, runner: process, ", 1)), 0o644))

	out, err := run(t, "", "--config", config, "describe", keyRunning.String())
	require.NoError(t, err)
	assert.NotContains(t, out, "Attach:")
	assert.Contains(t, out, "loopd logs "+keyRunning.String())
	_, err = run(t, "", "--config", config, "attach", keyRunning.String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runs as a process, with no tmux session")
	_, err = run(t, "", "--config", config, "logs", keyRunning.String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runs as a process and has no run now")
}

// logs --follow prints the pane's lines as they scroll into its history,
// each once (the screen it printed first is not printed again), until
// interrupted, and then exits 0.
func TestLogsFollowPrintsLinesAsTheyScroll(t *testing.T) {
	ex := tmuxtest.NewExec(t)
	config, _ := fleetStore(t, ex.Socket())
	session := desired.SessionName(keyRunning)
	gate := filepath.Join(t.TempDir(), "go")
	_, _, err := ex.NewSession(context.Background(), tmux.NewSession{Name: session, Height: 10,
		Argv: []string{"sh", "-c", `seq 1 20 | sed 's/^/line /'; while [ ! -e "$1" ]; do sleep 0.05; done; seq 100 140 | sed 's/^/line /'; sleep 60`, "sh", gate}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		screen, err := ex.CapturePane(context.Background(), "="+session+":", false)
		return err == nil && strings.Contains(screen, "line 20")
	}, 10*time.Second, 20*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := newRootCmd()
	var out syncBuffer
	cmd.SetArgs([]string{"--config", config, "logs", "-f", "codertocat/hello-world#8"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "line 20\n") }, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "line 125\n") }, 10*time.Second, 20*time.Millisecond,
		"the lines that scrolled off: %q", out.String())
	cancel()
	require.NoError(t, <-done, "an interrupt ends --follow with success")
	got := out.String()
	for _, l := range []string{"line 1\n", "line 15\n", "line 20\n", "line 100\n", "line 125\n"} {
		assert.Equal(t, 1, strings.Count("\n"+got, "\n"+l), "%q once in %q", l, got)
	}
}

// describe says who attends an Attended item and since when, the login
// quoted; an item nobody attends says nothing of it.
func TestDescribeShowsAttendance(t *testing.T) {
	config, st := fleetStore(t, "loopd-describe")
	since := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	out, err := run(t, "", "--config", config, "describe", keyRunning.String())
	require.NoError(t, err)
	assert.NotContains(t, out, "Attended:")
	require.NoError(t, st.PutStatus(context.Background(), keyRunning, desired.Status{Phase: desired.PhaseRunning,
		AttendanceState: desired.AttendanceState{AttendedSince: since, AttendedBy: "octo\x1b[2J"}}))
	out, err = run(t, "", "--config", config, "describe", keyRunning.String())
	require.NoError(t, err)
	out = regexp.MustCompile(` +`).ReplaceAllString(out, " ")
	assert.Contains(t, out, `Attended: by "octo\x1b[2J" since `+since.Local().Format(time.RFC3339)+" (nothing is pasted or respawned until they detach)\n")
	assert.NotContains(t, out, "\x1b")
}

// TestNoSessionNamesTheHostThatRunsTheItem: on a shared store, logs and
// attach of an item another host holds say which host it runs on;
// one this host holds, or one with no lease, says no host.
func TestNoSessionNamesTheHostThatRunsTheItem(t *testing.T) {
	cfg := &schema.Config{Host: schema.Host{Name: "host-a"}, Tmux: schema.Tmux{Socket: "loopd"}}
	r := desired.Record{Key: keyRunning, Status: desired.Status{Phase: desired.PhaseRunning}}
	for _, tc := range []struct{ owner, want string }{
		{"host-b", "it runs on host host-b; run the command there"},
		{"host-a", ""},
		{"", ""},
	} {
		r.Lease.Owner = tc.owner
		err := noSession(cfg, r)
		assert.ErrorContains(t, err, "has no tmux session "+desired.SessionName(keyRunning)+" on socket loopd (phase Running)")
		if tc.want != "" {
			assert.ErrorContains(t, err, tc.want)
		} else {
			assert.NotContains(t, err.Error(), "runs on host", "owner %q", tc.owner)
		}
	}
}
