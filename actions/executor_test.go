package actions_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
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
	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// rig is an executor wired to a stateful tmux fake, a real SQLite store and
// the real claude-code adapter.
type rig struct {
	exec  *actions.Executor
	tmux  *tmuxtest.Fake
	store *sqlstore.SQLite
	key   desired.Key
	cwd   string
	// claudeDir is the harness's CLAUDE_CONFIG_DIR.
	claudeDir string
	now       time.Time
	ids       []string
	log       *bytes.Buffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state", "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	ad, err := harness.New("claude-code", schema.Harness{Command: "claude", Env: map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(dir, "claude")}})
	require.NoError(t, err)
	r := &rig{tmux: tmuxtest.NewFake(), store: store, key: desired.Key{Owner: "octo-org", Repo: "api", Number: 7},
		cwd: filepath.Join(dir, "work", "7"), claudeDir: filepath.Join(dir, "claude"), now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), log: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(r.log, nil))
	n := 0
	r.exec = &actions.Executor{
		Tmux: r.tmux, Store: store, Harnesses: map[string]harness.Adapter{"claude-code": ad},
		Journal: journal.NewRecorder(log, store, func() time.Time { return r.now }), Log: log,
		Now: func() time.Time { return r.now },
		NewID: func() string {
			n++
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
			r.ids = append(r.ids, id)
			return id
		},
		Socket: "loopd-test", Owner: rigOwner, StormWindow: time.Hour, PasteWait: 50 * time.Millisecond,
		Launcher: launch.Launcher{Exe: "/opt/loopd", Dir: filepath.Join(dir, "state", "launch")},
	}
	// The CLI draws a paste in its input box, as Claude Code 2.1.197 does.
	pasted := screen(t, "draft-pasted.txt")
	r.tmux.PastedScreen = func(tmux.NewSession, string) string { return pasted }
	return r
}

// rigOwner is the owner mark of the rig's loopd.
var rigOwner = tmux.NewOwner("/srv/loopd/state").ID

// launchEnv returns the environment session's launcher would give the
// harness: the env file named in its launcher argv (followed by a
// sandbox's, if any), which must still be there (the Fake runs no
// launcher) and private.
func (r *rig) launchEnv(t *testing.T, session string) map[string]string {
	t.Helper()
	spec, ok := r.tmux.Spec(session)
	require.True(t, ok, "no session %s", session)
	require.GreaterOrEqual(t, len(spec.Launcher), 5)
	require.Equal(t, []string{"/opt/loopd", "launch", "--env-file"}, spec.Launcher[:3])
	require.Equal(t, "--", spec.Launcher[4])
	info, err := os.Stat(spec.Launcher[3])
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	env, err := launch.ReadEnvFile(spec.Launcher[3])
	require.NoError(t, err)
	return env
}

// ingest queues one delivery for the rig's item and returns the record.
func (r *rig) ingest(t *testing.T, id, prompt string) desired.Record {
	t.Helper()
	_, err := r.store.Ingest(context.Background(), store.Ingest{DeliveryID: id, Key: r.key, Kind: desired.KindIssue,
		Harness: "claude-code", Cwd: r.cwd, Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: prompt}})
	require.NoError(t, err)
	return r.get(t)
}

// livePane starts the item's session with a live pane in the fake and
// returns its name and pane id.
func (r *rig) livePane(t *testing.T) (session, pane string) {
	t.Helper()
	session = desired.SessionName(r.key)
	pane, _, err := r.tmux.NewSession(context.Background(), tmux.NewSession{Name: session, Dir: "/", Argv: []string{"claude", "x"}, Owner: rigOwner})
	require.NoError(t, err)
	return session, pane
}

func (r *rig) get(t *testing.T) desired.Record {
	t.Helper()
	rec, err := r.store.Get(context.Background(), r.key)
	require.NoError(t, err)
	return rec
}

func (r *rig) events(t *testing.T) []string {
	t.Helper()
	evs, err := r.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Name))
	}
	return out
}

// named returns the journal rows named name, oldest first.
func (r *rig) named(t *testing.T, name journal.Name) []journal.Event {
	t.Helper()
	evs, err := r.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	var out []journal.Event
	for _, e := range evs {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// spawn is the spawn of rec that boots with d, planned as the planner does:
// the delivery by its id, with no body.
func (r *rig) spawn(rec desired.Record, d desired.Delivery) actions.Spawn {
	return actions.Spawn{Key: r.key, Session: desired.SessionName(r.key), Harness: "claude-code", Cwd: r.cwd,
		DeliveryID: d.ID, Probe: 5 * time.Second, Reason: actions.ReasonNewEvent}
}

func screen(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "harness", "testdata", "claude-2.1.197", name))
	require.NoError(t, err)
	return string(b)
}

func TestFreshSpawnRecordsIntentThenPane(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	plan := []actions.Action{actions.PrepareWorkspace{Key: r.key, Dir: r.cwd, Reason: actions.ReasonFirstSpawn, Failures: 1},
		actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}}

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, plan)
	require.Equal(t, actions.Result{Applied: 2}, res)

	sess := desired.SessionName(r.key)
	// The prompt names its spawn (the boot line), and a new conversation
	// is told to mark its own comments.
	boot := r.get(t).Status.BootID
	require.NotEmpty(t, boot)
	assert.Equal(t, []string{"claude", "--session-id", r.ids[0], "--setting-sources", "user", "--strict-mcp-config", "--", "[loopd] issue_comment.created\nhello\n\n[loopd-boot " + boot + "]\n\n" + desired.AgentBrief(r.key)},
		r.tmux.Argv(sess))
	assert.Contains(t, desired.AgentBrief(r.key), "<!-- loopd:agent "+r.key.String()+" -->")
	assert.Equal(t, map[string]string{"LOOPD_WORK_ITEM": r.key.String(), "DISABLE_AUTOUPDATER": "1",
		"CLAUDE_CONFIG_DIR": r.claudeDir}, r.launchEnv(t, sess), "the harness env and the work item, through the file")
	assert.DirExists(t, r.cwd)
	st := r.get(t).Status
	assert.Equal(t, desired.PhaseSpawning, st.Phase)
	assert.Equal(t, r.ids[0], st.HarnessSessionID)
	assert.Equal(t, desired.SpawnFresh, st.SpawnMode)
	assert.Equal(t, "d-1", st.SpawnDeliveryID)
	assert.Equal(t, r.now.Add(5*time.Second), st.ProbeDeadline)
	assert.NotEmpty(t, st.PaneID)
	assert.Len(t, r.get(t).Pending, 1, "the boot delivery stays pending until the spawn is confirmed")
}

// A refused resume is recorded as a fact; the executor does not decide the
// fallback (reconciler.TestRefusedResumeFallsBackToFreshOnTheNextPass).
func TestRefusedResumeIsRecordedNotFallenBackFrom(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	require.NoError(t, os.MkdirAll(r.cwd, 0o755))
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	rec.Status = desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: old}}
	r.tmux.FailNext("NewSession", errors.New("tmux: server exited unexpectedly"))
	s := r.spawn(rec, rec.Pending[0])
	s.Respawn = true

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.ResumeSpawn{Spawn: s, ResumeID: old}})
	assert.Equal(t, actions.Result{Failed: 1, Retry: true, Replan: true}, res, "the next pass decides at once")

	assert.Empty(t, r.tmux.Sessions(), "no fallback spawned by the executor")
	assert.Empty(t, r.ids, "no fresh id minted")
	got := r.get(t)
	assert.Equal(t, desired.PhaseSpawning, got.Status.Phase)
	assert.Equal(t, desired.SpawnResume, got.Status.SpawnMode)
	assert.Empty(t, got.Status.PaneID)
	assert.Contains(t, got.Status.SpawnRefused, "server exited unexpectedly")
	assert.Equal(t, old, got.Status.HarnessSessionID)
	assert.Len(t, got.Pending, 1)
	assert.Equal(t, []string{string(journal.DispatchFailed)}, r.events(t))
}

func TestRefusedFreshSpawnIsRecordedAndKeepsDelivery(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	r.tmux.FailNext("NewSession", tmux.ErrCommandTooLong)

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	assert.Equal(t, actions.Result{Failed: 1, Retry: true, Replan: true}, res)

	got := r.get(t)
	assert.Equal(t, desired.PhaseSpawning, got.Status.Phase, "the backoff is the planner's (reconciler plan row fresh_spawn_refused_backs_off_through_the_restart_decision)")
	assert.Zero(t, got.Status.Failures)
	assert.NotEmpty(t, got.Status.SpawnRefused)
	assert.Len(t, got.Pending, 1)
	assert.Contains(t, r.events(t), string(journal.DispatchFailed))
	assert.Empty(t, r.tmux.Sessions())
	assert.Empty(t, r.launchFiles(t), "no launcher will read the env file of a refused spawn")
}

// launchFiles lists the env files waiting for a launcher.
func (r *rig) launchFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(r.exec.Launcher.Dir, "*"))
	require.NoError(t, err)
	return files
}

// A harness's env values (API keys go there) reach it through the env
// file, never through tmux's argv.
func TestSpawnPutsNoEnvValueOnArgv(t *testing.T) {
	r := newRig(t)
	ad, err := harness.New("claude-code", schema.Harness{Command: "claude", Env: map[string]string{
		"ANTHROPIC_API_KEY": "sk-test-SECRET-123", "CLAUDE_CONFIG_DIR": t.TempDir(),
	}})
	require.NoError(t, err)
	r.exec.Harnesses["claude-code"] = ad
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	sess := desired.SessionName(r.key)
	spec, ok := r.tmux.Spec(sess)
	require.True(t, ok)
	for _, a := range slices.Concat(spec.Launcher, spec.Argv, []string{spec.Dir}) {
		assert.NotContains(t, a, "sk-test-SECRET-123")
	}
	assert.Equal(t, "sk-test-SECRET-123", r.launchEnv(t, sess)["ANTHROPIC_API_KEY"])
}

// A spawn records the names its harness shows as the pane's foreground
// process, so that a later config that changes the command tells the
// agent still running the old one from a shell left in its pane
// (reconciler, harness_changed).
func TestSpawnRecordsTheHarnessNames(t *testing.T) {
	r := newRig(t)
	ad, err := harness.New("claude-code", schema.Harness{Command: "/opt/claude-v1/claude-wrapper", Env: map[string]string{"CLAUDE_CONFIG_DIR": t.TempDir()}})
	require.NoError(t, err)
	r.exec.Harnesses["claude-code"] = ad
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, []string{"claude-wrapper", "claude"}, r.get(t).Status.HarnessNames)
}

// A workdir removed between the plan and the spawn is a refusal: tmux
// would start the pane elsewhere. The planner blocks the item on the next
// pass (reconciler plan row refused_spawn_with_its_workdir_gone_blocks).
func TestRespawnNeverRecreatesMissingWorkdir(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	rec.Status = desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"}}
	s := r.spawn(rec, rec.Pending[0])
	s.Respawn = true
	plan := []actions.Action{actions.ResumeSpawn{Spawn: s, ResumeID: rec.Status.HarnessSessionID}}

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, plan)
	assert.Equal(t, actions.Result{Failed: 1, Retry: true, Replan: true}, res)
	rec = r.get(t)
	assert.NoDirExists(t, r.cwd)
	assert.Empty(t, r.tmux.Sessions())
	assert.Contains(t, rec.Status.SpawnRefused, "no such file or directory")
	assert.Len(t, rec.Pending, 1)
	assert.Contains(t, r.log.String(), "reason=workspace_missing")

	// The planner's Block is logged once, however often it is planned.
	block := []actions.Action{actions.Block{Key: r.key, Reason: actions.ReasonWorkspaceMissing, Detail: r.cwd}}
	for range 2 {
		res = r.exec.Execute(context.Background(), []desired.Record{rec}, block)
		assert.Equal(t, actions.Result{Failed: 1}, res, "waits for the operator, no fast retry")
		rec = r.get(t)
	}
	assert.Equal(t, []string{string(journal.DispatchFailed), string(journal.WorkspaceMissing)}, r.events(t), "logged once")
}

func TestDeliverPromptOnlyWhenReady(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-2", "[loopd] issue_comment.created\nline one\nline two")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	deliver := []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2"}}

	r.tmux.SetScreen(sess, screen(t, "busy.txt"))
	res := r.exec.Execute(ctx, []desired.Record{rec}, deliver)
	assert.Equal(t, actions.Result{Retry: true}, res, "a busy harness is retried, not failed")
	assert.Empty(t, r.tmux.Pasted(sess), "nothing is pasted into a busy harness")

	r.tmux.SetScreen(sess, screen(t, "blocked-trust.txt"))
	for range 2 {
		r.exec.Execute(ctx, []desired.Record{rec}, deliver)
		rec = r.get(t)
	}
	assert.Empty(t, r.tmux.Pasted(sess))
	assert.Equal(t, 1, strings.Count(strings.Join(r.events(t), " "), string(journal.DispatchBlocked)), "a blocked dialog is reported once")
	assert.Empty(t, r.tmux.Keys(sess), "a bare Enter is never sent blind")

	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
	res = r.exec.Execute(ctx, []desired.Record{rec}, deliver)
	assert.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, []string{"[loopd] issue_comment.created\nline one\nline two"}, r.tmux.Pasted(sess))
	assert.Equal(t, []string{"Enter"}, r.tmux.Keys(sess))
	got := r.get(t)
	assert.Len(t, got.Pending, 1, "pending until the transcript shows it")
	assert.Equal(t, "d-2", got.Status.SendingDeliveryID)
	assert.Equal(t, r.now, got.Status.SentAt)
	assert.Equal(t, 1, got.Status.SendAttempts)

	// The Enter was lost: the retry submits what sits in the input box
	// instead of pasting a second copy.
	r.tmux.SetScreen(sess, screen(t, "draft-pasted.txt"))
	retry := []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2", Retry: true}}
	res = r.exec.Execute(ctx, []desired.Record{got}, retry)
	assert.Equal(t, actions.Result{Applied: 1}, res)
	assert.Len(t, r.tmux.Pasted(sess), 1)
	assert.Equal(t, []string{"Enter", "Enter"}, r.tmux.Keys(sess))
	assert.Equal(t, 2, r.get(t).Status.SendAttempts)

	res = r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{actions.ConfirmDelivery{Key: r.key, Session: sess, DeliveryID: "d-2", Verified: true}})
	assert.Equal(t, actions.Result{Applied: 1}, res)
	got = r.get(t)
	assert.Empty(t, got.Pending, "delivered: the delivery's own record says so")
	assert.Empty(t, got.Status.SendingDeliveryID)
	assert.Equal(t, []string{"dispatch.blocked", "dispatch.sent", "dispatch.sent", "dispatch.delivered"}, r.events(t))
}

// TestDeliverPromptPastesTheHandbackPromptFirstOnce: the first paste after
// a handback carries loopd's prompt naming what queued before the event's
// frame, and the status no longer owes it; the event's frame is untouched.
func TestDeliverPromptPastesTheHandbackPromptFirstOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-2", "[loopd] issue_comment.created\nline one")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	rec.Status.HandBackUntold = true
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
	preamble := desired.HandBackPrompt(r.key, []string{"[loopd] issue_comment.created"})
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2",
		Preamble: preamble, Told: []string{"d-2"}}})
	assert.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, []string{preamble + "\n\n[loopd] issue_comment.created\nline one"}, r.tmux.Pasted(sess))
	assert.False(t, r.get(t).Status.HandBackUntold, "told once")
}

// TestSendsReadTheStoredPrompt: the plan and the records carry no prompt
// bodies; a paste and a spawn's argv carry the delivery's prompt as the
// store holds it, byte for byte. A prompt the store cannot give stops the
// send before anything is recorded or sent, and says why in the journal.
func TestSendsReadTheStoredPrompt(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	prompt := "[loopd] issue_comment.created\n<<<github-data d-2\n\tcaf\u00e9 \U0001F600\n/exit\ngithub-data d-2>>>\n"
	rec := r.ingest(t, "d-2", prompt)
	require.Empty(t, rec.Pending[0].Prompt, "the record holds no body")
	require.Equal(t, len(prompt), rec.Pending[0].Size)
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2"}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, []string{prompt}, r.tmux.Pasted(sess))
	sent := r.named(t, journal.DispatchSent)
	require.Len(t, sent, 1)
	assert.Equal(t, strconv.Itoa(len(prompt)), sent[0].Attrs["bytes"])

	// A delivery the store does not hold for the item.
	rec = r.get(t)
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
	res = r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-9"}})
	assert.Equal(t, actions.Result{Failed: 1, Retry: true}, res)
	assert.Len(t, r.tmux.Pasted(sess), 1, "nothing more pasted")
	assert.Equal(t, rec.Status, r.get(t).Status, "no send recorded")
	failed := r.named(t, journal.DispatchFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, "d-9", failed[0].Attrs["delivery"])
	assert.Equal(t, string(actions.ReasonPromptUnreadable), failed[0].Attrs["reason"])
	assert.Contains(t, failed[0].Attrs["err"], store.ErrNoDelivery.Error())

	// A resume boots with the stored prompt, whole.
	require.NoError(t, os.MkdirAll(r.cwd, 0o755))
	rec.Status = desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"}, DeliveryState: desired.DeliveryState{SendingDeliveryID: "d-2"}}
	s := r.spawn(rec, rec.Pending[0])
	s.Respawn = true
	res = r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.ResumeSpawn{Spawn: s, ResumeID: rec.Status.HarnessSessionID}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	boot := r.get(t).Status.BootID
	assert.Equal(t, []string{"claude", "--resume", rec.Status.HarnessSessionID, "--setting-sources", "user", "--strict-mcp-config", "--", desired.WithBootLine(prompt, boot)}, r.tmux.Argv(sess))
}

func TestDeliverPromptLeavesAnOperatorsDraftAlone(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-2", "[loopd] x\ny")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{PaneID: pane}}
	r.tmux.SetScreen(sess, screen(t, "draft-typed.txt"))

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2"}})
	assert.Equal(t, actions.Result{Retry: true}, res)
	assert.Empty(t, r.tmux.Pasted(sess))
	assert.Empty(t, r.tmux.Keys(sess))
	assert.Equal(t, []string{"dispatch.blocked"}, r.events(t))
}

func TestMarkRunningDeliversBootEventAndRecordExitRetires(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	rec.Status = desired.Status{Phase: desired.PhaseSpawning, SessionState: desired.SessionState{HarnessSessionID: old, SpawnMode: desired.SpawnResume, SpawnDeliveryID: "d-1", PaneID: "%3"}}
	sess := desired.SessionName(r.key)

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{
		actions.MarkRunning{Key: r.key, Session: sess, PaneID: "%3", SessionID: old, Mode: desired.SpawnResume, Confirmed: true, DeliveryID: "d-1", Respawn: true, Reason: actions.ReasonConfirmed},
		actions.RecordExit{Key: r.key, Session: sess, ExitStatus: 1, Phase: desired.PhaseBackingOff, Failures: 3, NextAttempt: r.now.Add(4 * time.Second), Retire: "fast_failures", Reason: actions.ReasonCrash},
	})
	require.Equal(t, actions.Result{Applied: 2}, res)
	got := r.get(t)
	assert.Empty(t, got.Pending, "the boot event is delivered")
	assert.Empty(t, got.Status.SpawnDeliveryID)
	history, err := r.store.History(ctx, r.key, desired.ReplayLatest)
	require.NoError(t, err)
	require.Len(t, history, 1)
	assert.Equal(t, "d-1", history[0].ID)
	assert.Equal(t, old, got.Status.ConfirmedSessionID)
	assert.Equal(t, []string{old}, got.Status.RetiredSessionIDs)
	assert.Equal(t, desired.PhaseBackingOff, got.Status.Phase)
	require.NotNil(t, got.Status.LastExitStatus)
	assert.Equal(t, 1, *got.Status.LastExitStatus)
	assert.Equal(t, []string{"session.respawned", "dispatch.delivered", "session.exited", "session.crash_loop"}, r.events(t))
	assert.Contains(t, r.log.String(), `attach="tmux -L loopd-test attach -t =`+sess+`"`)
}

// A status write that changes the phase stamps PhaseSince with the
// executor's clock; one that keeps the phase keeps the stamp.
func TestPhaseChangeStampsPhaseSince(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	sess := desired.SessionName(r.key)
	exit := func(status int) actions.RecordExit {
		return actions.RecordExit{Key: r.key, Session: sess, ExitStatus: status, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: r.now.Add(time.Minute), Reason: actions.ReasonCrash}
	}
	require.Equal(t, actions.Result{Applied: 1}, r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{exit(1)}))
	entered := r.now
	assert.Equal(t, entered, r.get(t).Status.PhaseSince, "BackingOff entered now")
	r.now = r.now.Add(30 * time.Second)
	require.Equal(t, actions.Result{Applied: 1}, r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{exit(2)}))
	assert.Equal(t, entered, r.get(t).Status.PhaseSince, "still BackingOff: the stamp stays")
}

func TestStopSessionKillsAndMarksStopped(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, _ := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	// As if the pane had died before its launcher read the file.
	_, _, err := r.exec.Launcher.Prepare(sess, map[string]string{"K": "v"}, 0)
	require.NoError(t, err)
	require.Len(t, r.launchFiles(t), 1)

	rec.Status.SendingDeliveryID = "d-1"
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.StopSession{Key: r.key, Session: sess, Reason: actions.ReasonClosed, Delivered: "d-1"}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Empty(t, r.tmux.Sessions())
	got := r.get(t)
	assert.Equal(t, desired.PhaseStopped, got.Status.Phase)
	assert.Empty(t, got.Pending, "the paste that landed before the stop is delivered")
	assert.Empty(t, got.Status.SendingDeliveryID)
	assert.Equal(t, []string{"dispatch.delivered", "session.stopped"}, r.events(t))
	assert.Empty(t, r.launchFiles(t), "a launcher that never ran left nothing behind")
}

func TestFailedActionSkipsTheItemsLaterActions(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	r.tmux.FailNext("KillSession", errors.New("tmux: lost server"))
	s := r.spawn(rec, rec.Pending[0])
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{
		actions.FreshSpawn{Spawn: s},
		actions.DeliverPrompt{Key: r.key, Session: s.Session, DeliveryID: "d-1"},
	})
	// The refused spawn is a fact the next pass plans on at once.
	assert.Equal(t, actions.Result{Failed: 1, Retry: true, Replan: true}, res)
	assert.Empty(t, r.tmux.Sessions())
	assert.Empty(t, r.tmux.Pasted(s.Session))
}

// The dead CLI's input box stays on the screen after a wrapper leaves a
// shell in the pane (issue 6, item 13): the screen says ready, but the
// paste is refused inside tmux because the foreground process is not the
// harness, and the refusal is journaled.
func TestDeliverPromptNeverReachesAShellLeftInThePane(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-3", "[loopd] issue_comment.created\ntouch /tmp/pwned")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
	r.tmux.SetForeground(sess, "sh")
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-3"}})
	assert.Equal(t, 1, res.Failed)
	assert.Empty(t, r.tmux.Input(sess), "no byte reached the shell")
	assert.Equal(t, []string{"dispatch.failed"}, r.events(t))
	assert.Contains(t, r.log.String(), "reason=foreground_not_harness")
	assert.Len(t, r.get(t).Pending, 1, "the event stays pending for the next spawn")
}

// A session of the item's name that another loopd made is neither killed
// to make room for a spawn nor stopped on a close (issue 6, item 5).
func TestForeignSessionIsNeverKilled(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess := desired.SessionName(r.key)
	other := tmux.NewOwner("/other/state").ID
	_, _, err := r.tmux.NewSession(ctx, tmux.NewSession{Name: sess, Dir: "/", Argv: []string{"claude", "x"}, Owner: other})
	require.NoError(t, err)
	rec := r.ingest(t, "d-1", "[loopd] issues.opened\nhello")
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	assert.Zero(t, res.Failed, "a foreign session is a wait, not a failure")
	assert.Equal(t, []string{sess}, r.tmux.Sessions(), "the other loopd's session lives on")
	assert.Equal(t, "session_foreign", r.get(t).Status.Reason)
	assert.Contains(t, r.events(t), "session.foreign")

	stop := []actions.Action{actions.StopSession{Key: r.key, Session: sess, Reason: actions.ReasonClosed}}
	res = r.exec.Execute(ctx, []desired.Record{r.get(t)}, stop)
	assert.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, []string{sess}, r.tmux.Sessions(), "a close does not kill another loopd's session")
	assert.Equal(t, desired.PhaseStopped, r.get(t).Status.Phase)
}

// The executor carries out the release the planner chose, and journals it.
func TestReleaseIsCarriedOutAndJournaled(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	old := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	require.NoError(t, r.store.PutStatus(context.Background(), r.key, desired.Status{Phase: desired.PhaseNeedsAttention, SessionState: desired.SessionState{HarnessSessionID: old}, RestartHistory: desired.RestartHistory{Failures: 11}}))
	require.NoError(t, r.store.Release(context.Background(), r.key, true))
	rec = r.get(t)
	sess := desired.SessionName(r.key)

	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{
		actions.Release{Key: r.key, Session: sess, Generation: rec.Spec.ReleaseGeneration, Fresh: true, RetireID: old, Phase: desired.PhaseBackingOff}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	got := r.get(t)
	assert.False(t, got.ReleasePending())
	assert.Equal(t, desired.PhaseBackingOff, got.Status.Phase)
	assert.Zero(t, got.Status.Failures)
	assert.True(t, got.Status.FreshRequested)
	assert.Equal(t, []string{old}, got.Status.RetiredSessionIDs)
	assert.Equal(t, []string{string(journal.ItemReleased)}, r.events(t))
	assert.Contains(t, r.log.String(), "retired_session_id="+old)
}

// A transient workspace failure backs off from when it happened, by the
// delay the planner decided: git can take minutes, and a backoff counted
// from the plan would already be over when the failure is recorded.
func TestWorkspaceFailureBacksOffFromTheFailure(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	// Every git command times out at once: a transient failure.
	r.exec.Workspaces = &workspace.Manager{Root: filepath.Join(dir, "mirrors"), Timeout: time.Nanosecond}
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	r.now = r.now.Add(5 * time.Minute) // the plan was made earlier; git ran long
	a := actions.PrepareWorkspace{Key: r.key, Dir: r.cwd, Reason: actions.ReasonFirstSpawn, Failures: 1, Retry: true, RetryAfter: 4 * time.Second,
		Checkout: &actions.Checkout{URL: "file://" + filepath.Join(dir, "remote.git"), Mode: actions.CheckoutIssue, Branch: "loopd/issue-7"}}
	r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{a})
	assert.Equal(t, 1, r.exec.WaitWorkspaces(), "one failure recorded")
	got, err := r.store.Get(context.Background(), r.key)
	require.NoError(t, err)
	assert.Equal(t, desired.PhaseBackingOff, got.Status.Phase, got.Status.WorkspaceError)
	assert.Equal(t, r.now.Add(4*time.Second), got.Status.NextAttempt)
	assert.Zero(t, got.Status.PrepareStarted)
}

// stallingGit is a "git" that never answers, as on a remote that stalls;
// started is closed once it runs.
func stallingGit(t *testing.T) (git string, started <-chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	git, pidFile := filepath.Join(dir, "git"), filepath.Join(dir, "pid")
	require.NoError(t, os.WriteFile(git, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 600\n"), 0o755))
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		for i := 0; i < 1000; i++ {
			if _, err := os.Stat(pidFile); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return git, ch
}

// prepareAction is the PrepareWorkspace of the rig's item from url.
func (r *rig) prepareAction(url string) actions.PrepareWorkspace {
	return actions.PrepareWorkspace{Key: r.key, Session: desired.SessionName(r.key), Dir: r.cwd, Reason: actions.ReasonFirstSpawn, Failures: 1, Retry: true,
		Checkout: &actions.Checkout{URL: url, Mode: actions.CheckoutIssue, Branch: "loopd/issue-7"}}
}

// A worktree is made outside the pass: Execute returns while git stalls,
// the item Preparing (journaled workspace.preparing) and its spawn
// skipped, not failed; the same action again starts no second worker.
// Cancelled (the daemon stops), the preparation is recorded as
// interrupted, with the context gone: no failure counted, no backoff,
// Idle for the next start; no workspace.failed, no "timeout".
func TestWorkspacePreparedOutsideThePassAndInterruptedOnStop(t *testing.T) {
	r := newRig(t)
	git, started := stallingGit(t)
	r.exec.Workspaces = &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors"), Git: git}
	woken := make(chan struct{}, 4)
	r.exec.Wake = func() { woken <- struct{}{} }
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prep := r.prepareAction("file:///nowhere/repo.git")
	spawn := actions.FreshSpawn{Spawn: actions.Spawn{Key: r.key, Session: prep.Session, Harness: "claude-code", Cwd: r.cwd, DeliveryID: "d-1", Prompt: "x"}}

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{prep, spawn})
	assert.Zero(t, res.Failed)
	assert.False(t, res.Retry)
	<-started
	got := r.get(t)
	assert.Equal(t, desired.PhasePreparing, got.Status.Phase)
	assert.Equal(t, r.now, got.Status.PrepareStarted)
	assert.Empty(t, r.tmux.Sessions(), "the spawn waits for the worktree")
	assert.Equal(t, 1, r.exec.Preparing())
	require.Len(t, r.named(t, journal.WorkspacePreparing), 1)

	res = r.exec.Execute(ctx, []desired.Record{got}, []actions.Action{prep, spawn})
	assert.Zero(t, res.Failed)
	assert.Len(t, r.named(t, journal.WorkspacePreparing), 1, "no second worker for the item")

	cancel()
	assert.Zero(t, r.exec.WaitWorkspaces())
	<-woken
	got = r.get(t)
	assert.Equal(t, desired.PhaseIdle, got.Status.Phase)
	assert.Equal(t, string(actions.ReasonWorkspaceInterrupted), got.Status.Reason)
	assert.Zero(t, got.Status.Failures, "a stop is not a failure of the workspace")
	assert.Zero(t, got.Status.NextAttempt)
	assert.Zero(t, got.Status.PrepareStarted)
	assert.Len(t, got.Pending, 1)
	interrupted := r.named(t, journal.WorkspaceInterrupted)
	require.Len(t, interrupted, 1)
	assert.Contains(t, interrupted[0].Attrs["err"], "context canceled")
	assert.Empty(t, r.named(t, journal.WorkspaceFailed))
	assert.NotContains(t, r.log.String(), "timeout")
}

// A pull request's new head is fetched outside the pass: Execute returns
// while git stalls, the fetch in flight on the status (journaled
// workspace.preparing reason=head_fetching), and the item gets no second
// worker. A stop cuts it short with no outcome recorded (the next pass
// fetches again); a fetch that fails records it (journaled
// workspace.failed reason=head_fetch_failed), and the event stays pending.
func TestHeadFetchOutsideThePass(t *testing.T) {
	r := newRig(t)
	git, started := stallingGit(t)
	mirrors := filepath.Join(t.TempDir(), "mirrors")
	r.exec.Workspaces = &workspace.Manager{Root: mirrors, Git: git}
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fetch := actions.FetchHead{Key: r.key, DeliveryID: "d-1", URL: "file:///nowhere/repo.git", PR: 7, Commit: "abc1234"}

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{fetch})
	assert.Zero(t, res.Failed)
	<-started
	got := r.get(t)
	assert.Equal(t, desired.HeadFetch{Commit: "abc1234", Started: r.now}, got.Status.HeadFetch)
	preparing := r.named(t, journal.WorkspacePreparing)
	require.Len(t, preparing, 1)
	assert.Equal(t, string(actions.ReasonHeadFetching), preparing[0].Attrs["reason"])
	res = r.exec.Execute(ctx, []desired.Record{got}, []actions.Action{fetch})
	assert.Zero(t, res.Failed)
	assert.Len(t, r.named(t, journal.WorkspacePreparing), 1, "no second worker for the item")

	cancel()
	r.exec.WaitWorkspaces()
	got = r.get(t)
	assert.Empty(t, got.Status.HeadFetch.Outcome, "a stopped fetch has no outcome")
	assert.Empty(t, r.named(t, journal.WorkspaceFailed))

	r.exec.Workspaces = &workspace.Manager{Root: mirrors}
	r.exec.Execute(context.Background(), []desired.Record{got}, []actions.Action{fetch})
	r.exec.WaitWorkspaces()
	got = r.get(t)
	assert.Equal(t, desired.HeadFetchFailed, got.Status.HeadFetch.Outcome)
	assert.Len(t, got.Pending, 1)
	failed := r.named(t, journal.WorkspaceFailed)
	require.Len(t, failed, 1)
	assert.Equal(t, string(actions.ReasonHeadFetchFailed), failed[0].Attrs["reason"])
	assert.Equal(t, "d-1", failed[0].Attrs["delivery"])
}

// The worker's outcome is recorded under the reconcile lock on the status
// that still names its preparation: made, the item goes Idle
// (workspace_ready) for the spawn; an item closed meanwhile keeps its
// phase, and the outcome is only journaled.
func TestWorkspacePreparedOutcome(t *testing.T) {
	remote := workspacetest.NewRemote(t, workspacetest.Options{})
	r := newRig(t)
	r.exec.Workspaces = &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors")}
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	unlock, err := r.store.Lock(context.Background()) // a pass holds the lock
	require.NoError(t, err)
	r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{r.prepareAction(remote.URL)})
	mirror, err := workspace.Mirror(r.exec.Workspaces.Root, remote.URL)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(r.cwd, "README"))
		return err == nil && !workspace.Busy(mirror)
	}, 10*time.Second, 10*time.Millisecond, "the worktree was not made")
	assert.Equal(t, desired.PhasePreparing, r.get(t).Status.Phase, "the outcome waits for the reconcile lock")
	unlock()
	assert.Zero(t, r.exec.WaitWorkspaces())
	got := r.get(t)
	assert.Equal(t, desired.PhaseIdle, got.Status.Phase)
	assert.Equal(t, string(actions.ReasonWorkspaceReady), got.Status.Reason)
	assert.Equal(t, "loopd/issue-7", workspacetest.Git(t, r.cwd, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Len(t, r.named(t, journal.WorkspacePrepared), 1)

	// Closed while a second item's worktree is made: its Stopped stays.
	r.key.Number = 8
	r.cwd = filepath.Join(filepath.Dir(r.cwd), "8")
	rec = r.ingest(t, "d-2", "[loopd] x\ny")
	unlock, err = r.store.Lock(context.Background())
	require.NoError(t, err)
	r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{r.prepareAction(remote.URL)})
	rec = r.get(t)
	st := rec.Status
	st.Phase = desired.PhaseStopped
	require.NoError(t, r.store.PutStatus(context.Background(), r.key, st))
	unlock()
	r.exec.WaitWorkspaces()
	assert.Equal(t, desired.PhaseStopped, r.get(t).Status.Phase)
	// The outcome is only journaled, with the phase that stayed.
	prepared := r.named(t, journal.WorkspacePrepared)
	require.Len(t, prepared, 2)
	assert.Equal(t, string(desired.PhaseStopped), prepared[1].Attrs["phase"])
}

// TestDropDeliveryTakesItOutForGood: a dropped delivery is no longer
// pending, is journaled dispatch.dropped with its reason, and a later
// confirmation of another counts it for the loop breaker, not the dropped.
func TestDropDeliveryTakesItOutForGood(t *testing.T) {
	r := newRig(t)
	r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec := r.ingest(t, "d-2", "[loopd] pull_request.synchronize\npush")
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{
		actions.DropDelivery{Key: r.key, DeliveryID: "d-2", Commit: "abc1234", Reason: actions.ReasonOwnPush},
		actions.ConfirmDelivery{Key: r.key, Session: desired.SessionName(r.key), DeliveryID: "d-1", Verified: true, Via: actions.ViaPaste},
	})
	require.Equal(t, actions.Result{Applied: 2}, res)
	got := r.get(t)
	assert.Empty(t, got.Pending)
	assert.Equal(t, []time.Time{r.now}, got.Status.DeliveredAt, "one delivery counted, when it reached the conversation")
	assert.Equal(t, []string{string(journal.DispatchDropped), string(journal.DispatchDelivered)}, r.events(t))
	assert.Contains(t, r.log.String(), "reason=own_push")
}

// TestDeliverPromptPressesEnterOnlyOnceThePasteShows: after a paste, the
// pane is captured until its input box shows the text, and only then is
// Enter pressed; a paste that never shows gets no Enter, the send stays in
// flight for the planner's retry, and dispatch.failed says why.
func TestDeliverPromptPressesEnterOnlyOnceThePasteShows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shows bool
	}{{"shown_late", true}, {"never_shown", false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			ctx := context.Background()
			r.exec.PasteWait = 5 * time.Second
			if !tc.shows {
				r.exec.PasteWait = 100 * time.Millisecond
			}
			r.tmux.PastedScreen = nil // the CLI has not drawn it yet
			sess, pane := r.livePane(t)
			rec := r.ingest(t, "d-2", "[loopd] issue_comment.created\nline one")
			rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
			r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
			drawn := make(chan struct{})
			if tc.shows {
				go func() {
					defer close(drawn)
					for !slices.Contains(r.tmux.Calls(), "Paste") {
						time.Sleep(time.Millisecond)
					}
					time.Sleep(30 * time.Millisecond) // a few captures see the empty box
					require.Empty(t, r.tmux.Keys(sess), "no Enter before the paste shows")
					r.tmux.SetScreen(sess, screen(t, "draft-pasted.txt"))
				}()
			} else {
				close(drawn)
			}
			res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-2"}})
			<-drawn
			assert.Len(t, r.tmux.Pasted(sess), 1)
			assert.Equal(t, "d-2", r.get(t).Status.SendingDeliveryID, "the send is in flight")
			if tc.shows {
				assert.Equal(t, actions.Result{Applied: 1}, res)
				assert.Equal(t, []string{"Enter"}, r.tmux.Keys(sess))
				assert.Equal(t, []string{"dispatch.sent"}, r.events(t))
				return
			}
			assert.Equal(t, actions.Result{Retry: true}, res)
			assert.Empty(t, r.tmux.Keys(sess), "no Enter into a box that does not show the paste")
			assert.Equal(t, []string{"dispatch.failed"}, r.events(t))
			assert.Contains(t, r.log.String(), "reason=paste_not_shown")
		})
	}
}

// TestBlockNotHeadlessIsADispatchFailure: an item of a process route whose
// harness has no headless form is blocked once, journaled as the dispatch
// failure it is (not as a missing workspace), and waits for the operator.
func TestBlockNotHeadlessIsADispatchFailure(t *testing.T) {
	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] issues.opened")
	block := []actions.Action{actions.Block{Key: r.key, Reason: actions.ReasonNotHeadless, Detail: "cur"}}
	for range 2 {
		res := r.exec.Execute(context.Background(), []desired.Record{rec}, block)
		assert.Equal(t, actions.Result{Failed: 1}, res, "waits for the operator, no fast retry")
		rec = r.get(t)
	}
	assert.Equal(t, "harness_not_headless", rec.Status.Reason)
	assert.Equal(t, []string{string(journal.DispatchFailed)}, r.events(t), "logged once")
	assert.Contains(t, r.log.String(), "has no headless form")
}

// TestFreshSpawnThatReplacesAConversationNotifiesOnce: a fresh spawn that
// replaces the conversation an item was in records why and what the new
// one was given (desired.Status.Replaced), and the outbox gets one notice
// (issue 21, case 10); the spawn redone after it never ran (its transcript
// missing, resume_failed reason=transcript_missing) is the same
// replacement and queues none; a fresh spawn that replaces nothing (the
// item's first) queues none either.
func TestFreshSpawnThatReplacesAConversationNotifiesOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.exec.Talk = func(desired.Record) desired.Talk {
		return desired.Talk{Notify: true, Host: "build-1", Socket: "loopd-test"}
	}
	require.NoError(t, os.MkdirAll(r.cwd, 0o755))
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	notices := func() []desired.Call {
		calls, err := r.store.Calls(ctx, store.CallFilter{WorkItem: r.key.String()})
		require.NoError(t, err)
		return slices.DeleteFunc(calls, func(c desired.Call) bool { return c.Kind != desired.CallNotify })
	}

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Nil(t, r.get(t).Status.Replaced, "the first conversation replaces none")
	assert.Empty(t, notices())

	old := r.get(t).Status.HarnessSessionID
	rec = r.get(t)
	s := r.spawn(rec, rec.Pending[0])
	s.Respawn, s.Reason = true, actions.ReasonResumeFailed
	res = r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: s, ResumeFailed: actions.ResumeNotResumable, AttemptedID: old}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	st := r.get(t).Status
	require.NotNil(t, st.Replaced)
	assert.Equal(t, desired.Replacement{From: old, Why: "not_resumable", Event: "d-1"}, *st.Replaced)
	got := notices()
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Body, "the harness said it cannot resume the last one (`not_resumable`, conversation `"+old+"`)")
	assert.Contains(t, got[0].Body, "was given event d-1")

	// That spawn died before its prompt landed: the next one replaces a
	// conversation that never ran.
	rec = r.get(t)
	res = r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: s, ResumeFailed: actions.ResumeTranscriptMissing,
		AttemptedID: rec.Status.HarnessSessionID}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, desired.Replacement{From: old, Why: "not_resumable", Event: "d-1"}, *r.get(t).Status.Replaced)
	assert.Len(t, notices(), 1, "one notice for one conversation replaced")

	// A resume clears it.
	rec = r.get(t)
	res = r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.ResumeSpawn{Spawn: s, ResumeID: rec.Status.HarnessSessionID}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Nil(t, r.get(t).Status.Replaced)
}

// TestRecordExitLeavesNoScreenBlocked: an agent that died at a screen
// waiting for a person (a login, say) is no longer blocked once its exit
// is recorded: get, the page and /metrics show a backing-off item, not
// one a person could unblock at a dead pane.
func TestRecordExitLeavesNoScreenBlocked(t *testing.T) {
	st := desired.Status{Phase: desired.PhaseRunning}
	st.Blocked = "login_required"
	got := actions.RecordExit{ExitStatus: -1, Signal: 9, Phase: desired.PhaseBackingOff, Failures: 1, Reason: actions.ReasonCrash}.Apply(st, time.Now())
	assert.Empty(t, got.BlockedBy())
	assert.Equal(t, desired.PhaseBackingOff, got.Phase)
}
