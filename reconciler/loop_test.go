package reconciler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// passRig runs whole passes against a stateful tmux fake, a real SQLite
// store and the real claude-code adapter, with a hand-moved clock.
type passRig struct {
	rc      *Reconciler
	watcher *observed.Watcher
	tmux    *tmuxtest.Fake
	store   *sqlstore.SQLite
	ad      harness.Adapter
	now     time.Time
	ids     int
	key     desired.Key
	cwd     string
	// logs holds every line logged, as JSON, debug level included.
	logs *bytes.Buffer
}

func newPassRig(t *testing.T) *passRig {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	ad, err := harness.New("claude-code", schema.Harness{Command: "claude", Env: map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dir, "claude")}})
	require.NoError(t, err)
	r := &passRig{tmux: tmuxtest.NewFake(), store: store, ad: ad, now: t0, key: key, cwd: filepath.Join(dir, "work"), logs: &bytes.Buffer{}}
	log := slog.New(journal.WithPassID(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	clock := func() time.Time { return r.now }
	r.tmux.Now = clock
	rec := journal.NewRecorder(log, store, clock)
	hs := map[string]harness.Adapter{"claude-code": ad}
	p := testPolicy()
	r.watcher = &observed.Watcher{Tmux: r.tmux, Log: log,
		Server: tmux.ServerOptions{PaneDiedChannel: "loopd-pane-died", HistoryLimit: 2000, Owner: testServerOwner}}
	r.rc = &Reconciler{
		Store: store, Observer: &observed.Observer{Tmux: r.tmux, Harnesses: hs, Log: log}, Watcher: r.watcher,
		Journal: rec, Log: log, Now: clock, Policy: func() Policy { return p }, Interval: time.Minute,
		Executor: &actions.Executor{Tmux: r.tmux, Store: store, Harnesses: hs, Journal: rec, Log: log, Now: clock, Owner: testOwner,
			NewID:    func() string { r.ids++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", r.ids) },
			Launcher: launch.Launcher{Exe: "loopd", Dir: filepath.Join(dir, "launch")}},
	}
	return r
}

func (r *passRig) pass(t *testing.T, dryRun bool) PassResult {
	t.Helper()
	res, err := r.rc.Pass(context.Background(), dryRun)
	require.NoError(t, err)
	return res
}

func (r *passRig) record(t *testing.T) desired.Record {
	t.Helper()
	rec, err := r.store.Get(context.Background(), r.key)
	require.NoError(t, err)
	return rec
}

// turn appends one user turn to the transcript of id, as the harness does
// when a prompt is submitted.
func (r *passRig) turn(t *testing.T, id, text string) {
	t.Helper()
	tr, err := r.ad.Transcript(r.cwd, id)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path), 0o755))
	f, err := os.OpenFile(tr.Path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = fmt.Fprintf(f, `{"type":"user","timestamp":%q,"sessionId":%q,"message":{"role":"user","content":%q}}`+"\n", r.now.Format(time.RFC3339), id, text)
	require.NoError(t, err)
}

// boot appends the prompt the item's pane was started with (its last
// argument) to the transcript of id as one user turn, as the harness does
// with its positional prompt: the boot prompt lands.
func (r *passRig) boot(t *testing.T, id string) {
	t.Helper()
	argv := r.tmux.Argv(desired.SessionName(r.key))
	require.NotEmpty(t, argv)
	r.turn(t, id, argv[len(argv)-1])
}

// framed is the prompt of delivery id with body, framed as ingest renders
// it (desired.FrameBegin, FrameEnd) after its header line.
func framed(header, id, body string) string {
	return header + "\n" + desired.FrameBegin(id) + body + "\n" + desired.FrameEnd(id, body+"\n")
}

// openedPrompt is the prompt of the item's first event, d-1.
var openedPrompt = framed("[loopd] issues.opened", "d-1", "fix it")

// opened queues the item's first event, d-1.
func (r *passRig) opened(t *testing.T) {
	t.Helper()
	_, err := r.store.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: r.key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: r.cwd,
		Delivery: &desired.Delivery{ID: "d-1", Event: "issues", Action: "opened", Sender: "octocat", Prompt: openedPrompt}})
	require.NoError(t, err)
}

// running brings the item to a running agent: its first event spawned,
// the boot prompt in the transcript, the probe over. It returns the
// conversation id.
func (r *passRig) running(t *testing.T) string {
	t.Helper()
	r.opened(t)
	r.pass(t, false)
	id := r.record(t).Status.HarnessSessionID
	r.boot(t, id)
	r.now = r.now.Add(6 * time.Second)
	r.pass(t, false)
	require.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)
	return id
}

func names(plan []actions.Action) []string {
	var out []string
	for _, a := range plan {
		out = append(out, a.Name())
	}
	return out
}

// TestPassesCarryAnItemThroughCrashAndVerifiedResume walks one item through
// fresh spawn, probe, crash, resume and its confirmation, pass by pass, and
// checks the end state after each.
func TestPassesCarryAnItemThroughCrashAndVerifiedResume(t *testing.T) {
	r := newPassRig(t)
	sess := desired.SessionName(r.key)
	r.opened(t)

	res := r.pass(t, false)
	require.Equal(t, []string{"prepare_workspace", "fresh_spawn"}, names(res.Plan))
	assert.Equal(t, 5*time.Second, res.RequeueAfter, "the probe is requeued, never slept on")
	id := r.record(t).Status.HarnessSessionID
	boot := r.record(t).Status.BootID
	assert.Equal(t, []string{"claude", "--session-id", id, "--setting-sources", "user", "--strict-mcp-config", "--", openedPrompt + "\n\n" + desired.BootLine(boot) + "\n\n" + desired.AgentBrief(r.key)}, r.tmux.Argv(sess))
	opts, ok := r.tmux.Options()
	require.True(t, ok, "the server is started with its options before the first spawn")
	assert.Equal(t, tmux.ServerOptions{PaneDiedChannel: "loopd-pane-died", HistoryLimit: 2000, Owner: testServerOwner}, opts)

	r.boot(t, id)
	r.now = r.now.Add(6 * time.Second)
	res = r.pass(t, false)
	require.Equal(t, []string{"mark_running"}, names(res.Plan))
	rec := r.record(t)
	assert.Equal(t, desired.PhaseRunning, rec.Status.Phase)
	assert.Empty(t, rec.Pending)

	r.now = r.now.Add(time.Hour)
	r.tmux.Exit(sess, 1)
	res = r.pass(t, false)
	require.Equal(t, []string{"record_exit", "resume_spawn"}, names(res.Plan))
	assert.Equal(t, []string{"claude", "--resume", id, "--setting-sources", "user", "--strict-mcp-config", "--", desired.WithBootLine(desired.NudgePrompt(r.key, desired.NudgeExited), r.record(t).Status.BootID)}, r.tmux.Argv(sess))
	assert.Len(t, r.tmux.Sessions(), 1, "one session per item, never a second agent")

	r.now = r.now.Add(6 * time.Second)
	res = r.pass(t, false)
	require.Equal(t, []string{"wait"}, names(res.Plan))
	assert.Equal(t, actions.ReasonAwaitingConfirm, res.Plan[0].(actions.Wait).Reason, "alive is not proof")

	r.boot(t, id)
	res = r.pass(t, false)
	require.Equal(t, []string{"mark_running"}, names(res.Plan))
	rec = r.record(t)
	assert.Equal(t, desired.PhaseRunning, rec.Status.Phase)
	assert.Equal(t, id, rec.Status.HarnessSessionID, "a resume keeps the conversation id")
	assert.Equal(t, sess, rec.Status.Session)
	spec, ok := r.tmux.Spec(sess)
	require.True(t, ok)
	assert.Equal(t, r.cwd, spec.Dir, "a resume runs in the recorded cwd")
	assert.Equal(t, id, rec.Status.ConfirmedSessionID)
	assert.Empty(t, rec.Pending)
	history, err := r.store.History(context.Background(), r.key, desired.ReplayLatest)
	require.NoError(t, err)
	require.Len(t, history, 1)
	assert.Equal(t, "d-1", history[0].ID, "the boot event is recorded delivered")
}

// TestEveryLineOfAPassCarriesItsReconcileID runs two passes, the first
// with a spawn tmux refuses, and checks that every log line and journal row
// each pass wrote carries the same reconcile_id, and that the two passes'
// ids differ.
func TestEveryLineOfAPassCarriesItsReconcileID(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	r.opened(t)
	r.tmux.FailNext("NewSession", errors.New("tmux: server exited unexpectedly"))

	// linesOf runs one pass and returns the log lines and journal rows it
	// wrote.
	seen := 0
	linesOf := func() (logs []map[string]any, rows []journal.Event) {
		r.logs.Reset()
		r.pass(t, false)
		for line := range strings.Lines(r.logs.String()) {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			logs = append(logs, m)
		}
		all, err := r.store.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		rows, seen = all[seen:], len(all)
		return logs, rows
	}
	idOf := func(logs []map[string]any, rows []journal.Event) string {
		require.NotEmpty(t, logs)
		id, _ := logs[0][journal.KeyReconcileID].(string)
		require.NotEmpty(t, id, "the first line carries a reconcile_id: %v", logs[0])
		for _, l := range logs {
			assert.Equal(t, id, l[journal.KeyReconcileID], "log line %v", l)
		}
		for _, e := range rows {
			assert.Equal(t, id, e.Attrs[journal.KeyReconcileID], "journal row %s", e)
		}
		return id
	}

	logs, rows := linesOf()
	msgs := map[any]bool{}
	for _, l := range logs {
		msgs[l["msg"]] = true
	}
	assert.True(t, msgs[string(journal.ActionFailed)], "the refused spawn is logged: %v", logs)
	require.NotEmpty(t, rows, "the refused spawn is journaled")
	require.Equal(t, journal.WorkspacePrepared, rows[0].Name, "the workdir is made before the first spawn")
	assert.Equal(t, journal.DispatchFailed, rows[1].Name)
	first := idOf(logs, rows)

	logs, rows = linesOf()
	assert.True(t, slices.ContainsFunc(logs, func(l map[string]any) bool { return l["msg"] == string(journal.SessionStarting) }),
		"the next pass spawns: %v", logs)
	second := idOf(logs, rows)
	assert.NotEqual(t, first, second, "each pass has its own id")
}

// TestErrorsNameEachLayerOnce follows one failure from tmux up through a
// pass: a spawn whose argv tmux refuses as too long. Each layer (tmux,
// the executor) adds its operation and identity once, so no part of the
// message the journal and the log show is repeated.
func TestErrorsNameEachLayerOnce(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	p := testPolicy()
	p.MaxBootPrompt = 64 << 10 // let a long event reach tmux's argv
	r.rc.Policy = func() Policy { return p }
	_, err := r.store.Ingest(ctx, store.Ingest{DeliveryID: "d-1", Key: r.key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: r.cwd,
		Delivery: &desired.Delivery{ID: "d-1", Prompt: "[loopd] issues.opened\n" + strings.Repeat("x", 20<<10)}})
	require.NoError(t, err)

	res := r.pass(t, false)
	require.Equal(t, []string{"prepare_workspace", "fresh_spawn"}, names(res.Plan))
	events, err := r.store.Events(ctx, store.EventFilter{WorkItem: r.key.String()})
	require.NoError(t, err)
	require.NotEmpty(t, events)
	failed := events[len(events)-1]
	require.Equal(t, journal.DispatchFailed, failed.Name)
	msgs := []string{failed.Attrs[journal.KeyErr], r.record(t).Status.SpawnRefused}
	for line := range strings.Lines(r.logs.String()) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == string(journal.ActionFailed) {
			msgs = append(msgs, m[journal.KeyErr].(string))
		}
	}
	require.Len(t, msgs, 3)
	for _, msg := range msgs {
		assert.Contains(t, msg, "new session "+desired.SessionName(r.key)+": ", "tmux names its operation and the session")
		assert.Contains(t, msg, tmux.ErrCommandTooLong.Error())
		parts := strings.Split(msg, ": ")
		for i, part := range parts {
			assert.NotContains(t, parts[i+1:], part, "%q is repeated in %q", part, msg)
		}
	}
}

// TestDryRunChangesNothing plans against live state and checks that neither
// tmux nor the store moved.
func TestDryRunChangesNothing(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	_, err := r.store.Ingest(ctx, store.Ingest{DeliveryID: "d-1", Key: r.key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: r.cwd,
		Delivery: &desired.Delivery{ID: "d-1", Prompt: "[loopd] x\ny"}})
	require.NoError(t, err)
	before, err := r.store.Records(ctx)
	require.NoError(t, err)

	res := r.pass(t, true)
	require.Equal(t, []string{"prepare_workspace", "fresh_spawn"}, names(res.Plan))
	assert.True(t, res.Changed())
	after, err := r.store.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Empty(t, r.tmux.Sessions())
	assert.NoDirExists(t, r.cwd)
}

// TestPassLockWaitBoundsOnlyTheWaitForTheLock: with the lock held elsewhere
// a pass gives up after LockWait with ErrLocked; with it free, the same
// short LockWait does not cut the pass short. It runs on synctest's clock.
func TestPassLockWaitBoundsOnlyTheWaitForTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newPassRig(t)
		r.opened(t)
		r.rc.LockWait = time.Second
		unlock, err := r.store.Lock(t.Context())
		require.NoError(t, err)
		start := time.Now()
		_, err = r.rc.Pass(t.Context(), false)
		require.ErrorIs(t, err, store.ErrLocked)
		assert.Equal(t, time.Second, time.Since(start), "the pass waited LockWait for the lock, no more")
		assert.Empty(t, r.tmux.Sessions())

		unlock()
		res := r.pass(t, false)
		assert.Equal(t, []string{"prepare_workspace", "fresh_spawn"}, names(res.Plan))
		assert.Len(t, r.tmux.Sessions(), 1)
	})
}

func TestNeedsFacts(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Record)) desired.Record {
		r := rec(st)
		f(&r)
		return r
	}
	same := func(*desired.Record) {}
	tests := []struct {
		name string
		rec  desired.Record
		snap observed.Snapshot
		want bool
	}{
		{"running_live_pane", rec(running()), alive(), false},
		{"running_pane_left_with_a_shell", rec(running()), stray("bash"), true},
		{"running_dead_pane", rec(running()), dead(1), true},
		{"running_with_a_paste_in_flight", rec(sending(t0, 1)), alive(), true},
		{"spawning", rec(spawning(desired.SpawnResume)), alive(), true},
		{"backing_off", with(running(), func(r *desired.Record) { r.Status.Phase = desired.PhaseBackingOff }), dead(1), true},
		{"exited_at_rest", with(running(), func(r *desired.Record) { r.Status.Phase = desired.PhaseExited }), dead(0), false},
		{"exited_with_an_event", with(running(), func(r *desired.Record) { r.Status.Phase = desired.PhaseExited; r.Pending = []desired.Delivery{ev1} }), dead(0), true},
		{"needs_attention_at_rest", with(running(), func(r *desired.Record) { r.Status.Phase = desired.PhaseNeedsAttention }), dead(1), false},
		{"needs_attention_released", with(running(), func(r *desired.Record) {
			r.Status.Phase, r.Spec.ReleaseGeneration = desired.PhaseNeedsAttention, r.Spec.Generation
		}), dead(1), true},
		{"closed", with(running(), func(r *desired.Record) { r.Spec.Closed = true }), dead(1), false},
		{"closed_with_a_paste_in_flight", with(sending(t0, 1), func(r *desired.Record) { r.Spec.Closed = true }), alive(), true},
		{"new_item", rec(desired.Status{}, ev1), gone(), true},
		{"idle_at_rest", with(desired.Status{}, same), gone(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, needsFacts(tt.rec, tt.snap, testPolicy()))
		})
	}
}

// exited records the item as exited cleanly from conversation id in its
// workdir, with d-1 delivered, and returns the record.
func (r *passRig) exited(t *testing.T, id string) desired.Record {
	t.Helper()
	require.NoError(t, os.MkdirAll(r.cwd, 0o755))
	st := desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: id, SpawnMode: desired.SpawnFresh, SpawnedAt: r.now.Add(-time.Hour)}, RestartHistory: desired.RestartHistory{LastExitAt: r.now.Add(-time.Minute)}}
	require.NoError(t, r.store.PutStatus(context.Background(), r.key, st, "d-1"))
	return r.record(t)
}

// event queues one more comment, id.
func (r *passRig) event(t *testing.T, id, text string) {
	t.Helper()
	_, err := r.store.Ingest(context.Background(), store.Ingest{DeliveryID: id, Key: r.key, Kind: desired.KindIssue,
		Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: framed("[loopd] issue_comment.created", id, text)}})
	require.NoError(t, err)
}

// A resume that tmux refuses is recorded by the executor; the very next
// pass (requeued at once) counts it as a crash of the same conversation
// and resumes it again with the same event: tmux's refusal (issue 21,
// case 3: "server exited unexpectedly") says nothing of the conversation.
func TestRefusedResumeIsResumedAgainOnTheNextPass(t *testing.T) {
	r := newPassRig(t)
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	r.opened(t)
	r.exited(t, old)
	r.turn(t, old, openedPrompt)
	r.event(t, "d-2", "and the docs")
	sess := desired.SessionName(r.key)

	r.tmux.FailNext("NewSession", errors.New("tmux: server exited unexpectedly"))
	res := r.pass(t, false)
	require.Equal(t, []string{"resume_spawn"}, names(res.Plan))
	assert.Equal(t, 1, res.Result.Failed)
	assert.True(t, res.Requeue)
	assert.Zero(t, res.RequeueAfter, "the next pass decides at once")
	assert.Empty(t, r.tmux.Sessions())

	res = r.pass(t, false)
	require.Equal(t, []string{"record_exit", "resume_spawn"}, names(res.Plan))
	argv := r.tmux.Argv(sess)
	require.NotEmpty(t, argv)
	assert.Equal(t, []string{"--resume", old}, argv[1:3], "the same conversation")
	assert.Contains(t, argv[len(argv)-1], "and the docs", "with the same event")
	assert.Empty(t, r.events(t, journal.SessionResumeFailed), "no conversation abandoned")
	st := r.record(t).Status
	assert.Equal(t, 1, st.Failures, "counted as a failure")
	assert.Equal(t, old, st.HarnessSessionID)
	assert.Len(t, r.record(t).Pending, 1, "pending until its frame is in the conversation")
}

// A fresh spawn that replaces a conversation replays the item's opening
// event and its latest ones, each in its untrusted frame as stored.
func TestFreshFallbackReplaysTheItemsEvents(t *testing.T) {
	r := newPassRig(t)
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	body := "fix the parser"
	_, err := r.store.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: r.key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: r.cwd,
		Delivery: &desired.Delivery{ID: "d-1", Event: "issues", Action: "opened", Sender: "octocat",
			Prompt: "[loopd] issues.opened\n" + desired.FrameBegin("d-1") + body + "\n" + desired.FrameEnd("d-1", body+"\n")}})
	require.NoError(t, err)
	r.exited(t, old) // no transcript of old: it goes fresh (transcript_missing)
	r.event(t, "d-2", "and the docs")

	res := r.pass(t, false)
	require.Equal(t, []string{"fresh_spawn"}, names(res.Plan))
	prompt := r.tmux.Argv(desired.SessionName(r.key))
	boot := prompt[len(prompt)-1]
	assert.True(t, strings.HasPrefix(boot, "[loopd] issue_comment.created\n"+desired.FrameBegin("d-2")+"and the docs"), "the event first: %q", boot)
	assert.Equal(t, desired.SeenWhole, desired.FrameOf(desired.Delivery{ID: "d-1", Prompt: boot}).Check(boot), "the opening event replayed whole")
	assert.LessOrEqual(t, len(boot), schema.DefaultMaxBootPrompt)
}

// events returns the journal rows named name.
func (r *passRig) events(t *testing.T, name journal.Name) []journal.Event {
	t.Helper()
	all, err := r.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	var out []journal.Event
	for _, e := range all {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// TestAnUndoneDrainKeepsTheItemsGiven: a host set draining, then taken
// back into service (loopd drain --undo) before its next heartbeat, hands
// over nothing: its pass reads the flag from the store before it stops an
// agent, and the item it was given stays its own, running.
func TestAnUndoneDrainKeepsTheItemsGiven(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	h := &Hosting{Fleet: r.store, Host: desired.Host{Name: "h1", LeaseTTL: time.Hour},
		Clock: &LeaseClock{Elapsed: func() time.Duration { return 0 }}, Journal: r.rc.Journal}
	r.rc.Hosting = h
	r.rc.Executor.Fleet, r.rc.Executor.Host, r.rc.Executor.LeaseValid = r.store, "h1", h.ValidAt
	id := r.running(t)
	require.Equal(t, "h1", r.record(t).Lease.Owner)

	require.NoError(t, r.store.SetDraining(ctx, "h1", true))
	require.NoError(t, h.Heartbeat(ctx))
	require.True(t, h.Draining())
	require.NoError(t, r.store.SetDraining(ctx, "h1", false)) // loopd drain --undo

	res := r.pass(t, false)
	assert.NotContains(t, names(res.Plan), "handover")
	assert.False(t, h.Draining(), "the pass read the flag back")
	got := r.record(t)
	assert.Equal(t, "h1", got.Lease.Owner)
	assert.Equal(t, desired.PhaseRunning, got.Status.Phase)
	assert.Equal(t, id, got.Status.HarnessSessionID)
	assert.Len(t, r.tmux.Sessions(), 1, "its agent runs on")
	assert.Empty(t, r.events(t, journal.LeaseReleased))

	// Set draining again, the next pass hands the item over at once.
	require.NoError(t, r.store.SetDraining(ctx, "h1", true))
	require.NoError(t, h.Heartbeat(ctx))
	res = r.pass(t, false)
	assert.Contains(t, names(res.Plan), "handover")
	assert.Empty(t, r.record(t).Lease.Owner)
}

// TestPassHandlesTheDeadFirst: a pass woken by an agent's death
// (TriggerDied) respawns its item before it observes the whole fleet,
// and plans the rest after; the next pass, with no death named, observes
// once.
func TestPassHandlesTheDeadFirst(t *testing.T) {
	r := newPassRig(t)
	r.running(t)
	sess := desired.SessionName(r.key)
	r.now = r.now.Add(time.Hour)
	r.tmux.Exit(sess, 1)
	r.rc.TriggerDied(sess, "loop-gone")
	before := len(r.tmux.Calls())
	res := r.pass(t, false)
	require.Equal(t, []string{"record_exit", "resume_spawn", "wait"}, names(res.Plan), "the respawn, then the rest of the pass")
	listed := func(calls []string) []string {
		return slices.DeleteFunc(calls, func(c string) bool { return c != "ListPanes" && c != "NewSession" })
	}
	assert.Equal(t, []string{"ListPanes", "NewSession", "ListPanes"}, listed(r.tmux.Calls()[before:]))

	before = len(r.tmux.Calls())
	r.pass(t, false)
	assert.Equal(t, []string{"ListPanes"}, listed(r.tmux.Calls()[before:]))
}

// pausingStore is a store whose next Records call stands for a host
// paused past its lease right after the read: pause runs after it.
type pausingStore struct {
	store.Store
	pause func()
}

func (s *pausingStore) Records(ctx context.Context) ([]desired.Record, error) {
	recs, err := s.Store.Records(ctx)
	if s.pause != nil {
		s.pause()
		s.pause = nil
	}
	return recs, err
}

// TestAPassPausedPastItsLeaseAfterItReadSpawnsNothing: a host paused past
// its lease right after its pass read the records, and whose heartbeat
// renewed its lease clock before the pass planned (issue 23: another host
// may have taken the items over and resumed their conversations
// meanwhile), spawns nothing of what it read: the pass was drawn under
// the epoch before the lapse. The next pass, under the new epoch, does.
func TestAPassPausedPastItsLeaseAfterItReadSpawnsNothing(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	var now time.Duration
	ttl := time.Hour
	h := &Hosting{Fleet: r.store, Host: desired.Host{Name: "h1", LeaseTTL: ttl},
		Clock: &LeaseClock{Elapsed: func() time.Duration { return now }}, Journal: r.rc.Journal}
	r.rc.Hosting = h
	r.rc.Executor.Fleet, r.rc.Executor.Host, r.rc.Executor.LeaseValid = r.store, "h1", h.ValidAt
	r.opened(t)
	require.NoError(t, h.Heartbeat(ctx))
	_, err := h.Assign(ctx)
	require.NoError(t, err)
	require.Equal(t, "h1", r.record(t).Lease.Owner)

	paused := &pausingStore{Store: r.store, pause: func() {
		now += ttl // SIGSTOPped past the lease
		h.Clock.Renew(now, ttl)
	}}
	r.rc.Store = paused
	res := r.pass(t, false)
	assert.NotContains(t, names(res.Plan), "fresh_spawn")
	assert.NotContains(t, r.tmux.Calls(), "NewSession")
	assert.Equal(t, uint64(2), h.Clock.Epoch())

	res = r.pass(t, false)
	assert.Contains(t, names(res.Plan), "fresh_spawn")
	assert.Contains(t, r.tmux.Calls(), "NewSession")
}
