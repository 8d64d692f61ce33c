package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/schema"
)

// The process runner with the Codex and Gemini adapters (their headless
// forms, harness.Headless), end to end through the real binary.

// asProcessRunner makes every route of e run its agents as processes,
// each run bounded by timeout seconds, and ends what is left of them when
// the test ends: the daemon first (so that it starts no more), then every
// run's process group by its pid file (endRunGroups).
func (e *env) asProcessRunner(t *testing.T, timeout int) {
	t.Helper()
	route := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)
	route["runner"] = "process"
	route["dispatchTimeoutSeconds"] = timeout
	e.writeConfig(t)
	t.Cleanup(func() {
		e.signalDaemon(t, syscall.SIGTERM)
		e.endRunGroups(t)
	})
}

// endRunGroups kills the process group of every run the pid files under
// the state dir name, while its wrapper (the group's leader) is the
// process the file recorded: a real CLI writes no start log, and Gemini's
// outlive their parent.
func (e *env) endRunGroups(t testing.TB) {
	files, _ := filepath.Glob(filepath.Join(e.stateDir, "runs", "*", "*.pid"))
	for _, f := range files {
		var rec struct {
			Wrapper      int    `json:"wrapper_pid"`
			WrapperStart uint64 `json:"wrapper_start"`
			Harness      int    `json:"harness_pid"`
			HarnessStart uint64 `json:"harness_start"`
		}
		if !readJSONFile(f, &rec) {
			continue
		}
		if (proc.Process{PID: rec.Wrapper, Start: rec.WrapperStart}).Running() {
			_ = syscall.Kill(-rec.Wrapper, syscall.SIGKILL)
		}
		if (proc.Process{PID: rec.Harness, Start: rec.HarnessStart}).Running() {
			_ = syscall.Kill(rec.Harness, syscall.SIGKILL)
		}
	}
}

// runLogs returns the logs of the runs of k, oldest first.
func (e *env) runLogs(t *testing.T, k desired.Key) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(e.stateDir, "runs", desired.SessionName(k), "*.log"))
	require.NoError(t, err)
	slices.Sort(logs)
	return logs
}

// runOutputID is the conversation id the output of the latest run of k
// names, as the adapter reads it (harness.Headless.HeadlessSessionID).
func (e *env) runOutputID(t *testing.T, k desired.Key, ad harness.Adapter) string {
	t.Helper()
	logs := e.runLogs(t, k)
	require.NotEmpty(t, logs)
	out, err := os.ReadFile(logs[len(logs)-1])
	require.NoError(t, err)
	return ad.(harness.Headless).HeadlessSessionID(out)
}

// codexProcessEnv is newCodexEnv with the process runner, the fake's
// knobs in harnessEnv and its start log in e.startLog.
func codexProcessEnv(t *testing.T, command string, timeout int, harnessEnv map[string]string) (*env, harness.Adapter) {
	t.Helper()
	e, ad := newCodexEnv(t, command, false, nil)
	h := e.config["harnesses"].(map[string]any)["codex"].(map[string]any)
	env := h["env"].(map[string]string)
	env["FAKECODEX_START_LOG"] = e.startLog
	for k, v := range harnessEnv {
		env[k] = v
	}
	e.asProcessRunner(t, timeout)
	return e, ad
}

// codexStart returns whether a start of codex is an exec resume, and of
// which id; it fails the test when it is no headless exec --json that
// reads its prompt from stdin.
func codexStart(t *testing.T, s processStart) (resume bool, id string) {
	t.Helper()
	argv := s.Argv[1:]
	require.GreaterOrEqual(t, len(argv), 3, "%q", s.Argv)
	require.Equal(t, "exec", argv[0], "%q", s.Argv)
	assert.Contains(t, argv, "--json")
	assert.Equal(t, "-", argv[len(argv)-1], "the prompt is on stdin: %q", s.Argv)
	// The route's extraArgs come between exec and resume.
	if !slices.Contains(argv, "resume") {
		return false, ""
	}
	return true, argv[len(argv)-2]
}

// TestProcessRunnerCodexLearnsTheIDAndResumes: a route of the codex
// adapter with runner: process. The first event runs codex exec --json,
// which cannot pin an id: loopd learns it, and the run's output (its
// thread.started) and the rollout it wrote agree on it. The next event
// resumes it with exec resume <id>, and the one rollout holds both turns,
// each delivered once.
func TestProcessRunnerCodexLearnsTheIDAndResumes(t *testing.T) {
	t.Parallel()
	e, ad := codexProcessEnv(t, fakeCodexBin, 600, map[string]string{"FAKECODEX_REPLY_DELAY": "1500ms"})
	e.start(t)
	first := "first event " + uuid.NewString()
	d1 := sendComment(t, e, first)
	waitDelivered(t, e, d1, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	id := r.Status.HarnessSessionID
	require.True(t, ad.ValidSessionID(id), "a learned id: %q", id)
	assert.False(t, r.Status.IDUnconfirmed)
	assert.Equal(t, "run_done", r.Status.Reason)

	starts := e.starts(t)
	require.Len(t, starts, 1)
	resume, _ := codexStart(t, starts[0])
	assert.False(t, resume, "a fresh run: %q", starts[0].Argv)
	assert.Equal(t, id, e.runOutputID(t, keyIssue, ad), "the output's thread.started names the learned id")
	started, err := ad.(harness.SessionLearner).SessionsStarted(r.Workdir(), time.Time{})
	require.NoError(t, err)
	require.Len(t, started, 1, "one rollout in the workdir")
	assert.Equal(t, id, started[0].ID, "the rollout names the learned id")
	followed := e.eventsNamed(t, journal.SessionFollowed, keyIssue)
	require.Len(t, followed, 1, "learned once: the rollout and the output agree")
	assert.Equal(t, id, followed[0].Attrs["harness_session_id"])

	second := "second event " + uuid.NewString()
	d2 := sendComment(t, e, second)
	waitDelivered(t, e, d2, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	starts = e.starts(t)
	require.Len(t, starts, 2)
	resume, resumed := codexStart(t, starts[1])
	assert.True(t, resume, "%q", starts[1].Argv)
	assert.Equal(t, id, resumed)
	assert.Equal(t, id, e.runOutputID(t, keyIssue, ad))
	respawned := e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Equal(t, "true", respawned[0].Attrs["resumed"])
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), first))
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), second), "both turns in the one rollout")
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d1, 1), 1)
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d2, 1), 1)
	assert.Len(t, e.eventsNamed(t, journal.SessionFollowed, keyIssue), 1)
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
	assert.Empty(t, e.sessions(t), "no tmux session for a process runner item")
}

// TestProcessRunnerCodexUnconfirmedUnderCron: reconcile --once starts a
// fresh codex exec and returns: until a pass learns the id, loopd get
// shows it unconfirmed. The run's rollout names it, a later --once learns
// it (session.followed source=rollout) and judges the run by that
// rollout: delivered once.
func TestProcessRunnerCodexUnconfirmedUnderCron(t *testing.T) {
	t.Parallel()
	e, ad := codexProcessEnv(t, fakeCodexBin, 600, map[string]string{"FAKECODEX_REPLY_DELAY": "1s"})
	body := "an event for cron " + uuid.NewString()
	d := e.ingestComment(t, keyIssue, body)
	e.mustRun(t, "reconcile", "--once")
	e.waitStarts(t, 1, waitShort)
	r := e.mustRecord(t, keyIssue)
	require.NotEmpty(t, r.Status.RunID)
	assert.True(t, r.Status.IDUnconfirmed)
	assert.Empty(t, r.Status.HarnessSessionID)
	assert.Contains(t, e.mustRun(t, "get"), "unconfirmed")

	e.waitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(e.stateDir, "runs", desired.SessionName(keyIssue), r.Status.RunID+".exit"))
		return err == nil
	}, waitShort, "the run never ended")
	for range 3 {
		if e.mustRecord(t, keyIssue).Status.Phase == desired.PhaseExited {
			break
		}
		e.mustRun(t, "reconcile", "--once")
	}
	r = e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseExited, r.Status.Phase)
	assert.False(t, r.Status.IDUnconfirmed)
	id := r.Status.HarnessSessionID
	assert.Equal(t, id, e.runOutputID(t, keyIssue, ad))
	followed := e.eventsNamed(t, journal.SessionFollowed, keyIssue)
	require.Len(t, followed, 1)
	assert.Equal(t, "rollout", followed[0].Attrs["source"])
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), body))
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d, 1), 1)
	assert.NotContains(t, e.mustRun(t, "get"), "unconfirmed")
}

// TestProcessRunnerCodexResumeFailureFallsBackToFresh: an exec resume that
// Codex refuses ("no rollout found for thread id", exit 1) falls back to a
// fresh exec that carries the same event (session.resume_failed
// reason=not_resumable), and a rollout gone before the next event is a fresh
// exec at once (reason=transcript_missing); each event lands once, in the
// new conversation, and no failure is counted.
func TestProcessRunnerCodexResumeFailureFallsBackToFresh(t *testing.T) {
	t.Parallel()
	e, ad := codexProcessEnv(t, fakeCodexBin, 600, map[string]string{"FAKECODEX_RESUME_FAIL": "1", "FAKECODEX_RESUME_FAIL_DELAY": "100ms"})
	e.start(t)
	waitDelivered(t, e, sendComment(t, e, "the first event"), waitLong)
	first := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort).Status.HarnessSessionID
	require.NotEmpty(t, first)

	body := "carried by the fallback " + uuid.NewString()
	d := sendComment(t, e, body)
	waitDelivered(t, e, d, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	second := r.Status.HarnessSessionID
	require.NotEqual(t, first, second)
	require.NotEmpty(t, second)
	var modes []string
	for _, s := range e.starts(t) {
		resume, id := codexStart(t, s)
		modes = append(modes, map[bool]string{false: "fresh", true: "resume " + id}[resume])
	}
	assert.Equal(t, []string{"fresh", "resume " + first, "fresh"}, modes)
	failed := e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitShort)
	require.Len(t, failed, 1)
	assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
	assert.Equal(t, first, failed[0].Attrs["attempted_session_id"])
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, second), body), "the fallback carried the event, once")
	assert.Zero(t, countContaining(codexMessages(t, e, ad, keyIssue, first), body))
	assert.Zero(t, r.Status.Failures, "a failed resume is no failed run")

	tr, err := ad.Transcript(r.Workdir(), second)
	require.NoError(t, err)
	require.NoError(t, os.Remove(tr.Path))
	e.dropStoredTranscript(t, keyIssue, second) // else it is restored from there
	third := "after the rollout was lost " + uuid.NewString()
	d = sendComment(t, e, third)
	waitDelivered(t, e, d, waitLong)
	failed = e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 2, waitShort)
	assert.Equal(t, "transcript_missing", failed[1].Attrs["reason"])
	assert.Equal(t, second, failed[1].Attrs["attempted_session_id"])
	r = e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.NotEqual(t, second, r.Status.HarnessSessionID)
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, r.Status.HarnessSessionID), third))
	assert.Len(t, e.starts(t), 4, "no resume of a rollout that is gone")
}

// codexOfflineTimeout is the Codex CLI offline through the process
// runner: exec writes the rollout with the event, then waits on the
// network forever. The run ends only at dispatchTimeoutSeconds
// (dispatch.timeout, its group ended); the rollout holds the event, so it
// is judged delivered, never run again. The next event resumes the same
// conversation the same way, and the rollout holds both turns, once each.
func codexOfflineTimeout(t *testing.T, e *env, ad harness.Adapter) {
	e.start(t)
	first := "offline first " + uuid.NewString()
	d1 := sendComment(t, e, first)
	// The event may be confirmed in the rollout while the run waits, or
	// at its end: either way once.
	e.waitEvent(t, journal.DispatchTimeout, keyIssue, 1, waitLong)
	waitDelivered(t, e, d1, waitShort)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	id := r.Status.HarnessSessionID
	require.True(t, ad.ValidSessionID(id), "learned from the rollout: %q", id)
	assert.Equal(t, "dispatch_timeout", r.Status.Reason, "done, ended at its timeout")
	assert.Equal(t, id, e.runOutputID(t, keyIssue, ad), "the output named it too")
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), first), "exactly one turn")

	second := "offline second " + uuid.NewString()
	d2 := sendComment(t, e, second)
	e.waitEvent(t, journal.DispatchTimeout, keyIssue, 2, waitLong)
	waitDelivered(t, e, d2, waitShort)
	r = e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	respawned := e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Equal(t, "true", respawned[0].Attrs["resumed"])
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), first))
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, id), second), "both turns in the one rollout")
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 2, waitShort)
	require.Len(t, exits, 2, "two runs, none run again")
	for _, ex := range exits {
		assert.Equal(t, "dispatch_timeout", ex.Attrs["reason"])
		assert.Equal(t, strconv.Itoa(int(syscall.SIGTERM)), ex.Attrs["signal"], "ended by its timeout")
	}
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d1, 1), 1)
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d2, 1), 1)
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
	assert.Len(t, e.runLogs(t, keyIssue), 2)
}

func TestProcessRunnerCodexOfflineEndsAtItsTimeout(t *testing.T) {
	t.Parallel()
	e, ad := codexProcessEnv(t, fakeCodexBin, 2, map[string]string{"FAKECODEX_OFFLINE": "1"})
	codexOfflineTimeout(t, e, ad)
}

func TestRealCodexProcessRunnerEndsAtItsTimeout(t *testing.T) {
	path := os.Getenv("LOOPD_REAL_CODEX")
	if path == "" {
		t.Skip("LOOPD_REAL_CODEX is not set")
	}
	t.Parallel()
	e, ad := codexProcessEnv(t, path, 3, nil)
	codexOfflineTimeout(t, e, ad)
}

// readJSONFile decodes the JSON file path into v and reports whether it
// could.
func readJSONFile(path string, v any) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Unmarshal(b, v) == nil
}

// geminiProcessEnv is newGeminiEnv with the process runner, the workdir's
// project settings trusted (Gemini runs headless only in a trusted folder;
// issue 1 gets them), and the fake's start log in e.startLog.
func geminiProcessEnv(t *testing.T, extra map[string]string) geminiEnv {
	t.Helper()
	g := newGeminiEnv(t, extra)
	g.harness()["env"].(map[string]string)["FAKEGEMINI_START_LOG"] = g.startLog
	g.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["projectSettings"] = "trusted"
	g.asProcessRunner(t, 600)
	return g
}

// TestProcessRunnerGeminiUntrustedWorkdirNeedsAttention: Gemini refuses a
// headless run in a folder it does not trust (exit 55), as every workdir
// is whose project settings are off: the run is named so
// (exit_cause=untrusted_workdir), its event stays pending, and under
// restartPolicy Never the item needs attention, not run again by itself.
func TestProcessRunnerGeminiUntrustedWorkdirNeedsAttention(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, nil)
	g.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["projectSettings"] = "untrusted"
	g.policy()["restartPolicy"] = "Never"
	g.writeConfig(t)
	g.start(t)
	d := sendComment(t, g.env, "an event for an untrusted folder "+uuid.NewString())
	r := g.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	require.NotNil(t, r.Status.LastExitStatus)
	assert.Equal(t, harness.GeminiExitUntrustedWorkdir, *r.Status.LastExitStatus)
	failed := waitDeliveries(t, g.env, journal.DispatchFailed, d, 1)
	require.Len(t, failed, 1)
	assert.Equal(t, harness.CauseUntrustedWorkdir, failed[0].Attrs["exit_cause"], "%v", failed[0].Attrs)
	require.Len(t, g.starts(t), 1)
	g.settle(t)
	assert.Len(t, g.starts(t), 1, "not run again by itself")
	assert.Len(t, g.mustRecord(t, keyIssue).Pending, 1, "the event waits")
}

// geminiStart returns the session flag of a headless start of gemini and
// the id after it; it fails the test when the start is not headless with
// --output-format json.
func geminiStart(t *testing.T, s processStart) (flag, id string) {
	t.Helper()
	format, _ := flagValue(s.Argv, "--output-format")
	assert.Equal(t, "json", format, "%q", s.Argv)
	for _, a := range s.Argv {
		assert.False(t, strings.HasPrefix(a, "--prompt"), "the prompt is on stdin: %q", s.Argv)
	}
	return s.mode()
}

// TestProcessRunnerGeminiFreshThenResume: a route of the gemini adapter
// with runner: process. The first event runs gemini --session-id <new id>
// headless, after loopd provisioned its settings (retention off); the
// next resumes it with --resume <id>, and the one chat file holds both
// turns, each delivered once.
func TestProcessRunnerGeminiFreshThenResume(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, nil)
	g.start(t)
	first := "first event " + uuid.NewString()
	d1 := sendComment(t, g.env, first)
	waitDelivered(t, g.env, d1, waitLong)
	r := g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	id := r.Status.HarnessSessionID
	require.Regexp(t, uuidPattern, id)
	settings, err := os.ReadFile(filepath.Join(g.home, ".gemini", "settings.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"general":{"sessionRetention":{"enabled":false}}}`, string(settings), "retention provisioned before the run")

	second := "second event " + uuid.NewString()
	d2 := sendComment(t, g.env, second)
	waitDelivered(t, g.env, d2, waitLong)
	r = g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	starts := g.starts(t)
	require.Len(t, starts, 2)
	var modes []string
	for _, s := range starts {
		flag, sid := geminiStart(t, s)
		modes = append(modes, flag+" "+sid)
	}
	assert.Equal(t, []string{"--session-id " + id, "--resume " + id}, modes)
	assert.Equal(t, id, g.runOutputID(t, keyIssue, geminiAdapter(t, g)))
	assert.Equal(t, 1, countContaining(g.turns(t, keyIssue, id), first))
	assert.Equal(t, 1, countContaining(g.turns(t, keyIssue, id), second), "both turns in the one chat file")
	assert.Len(t, waitDeliveries(t, g.env, journal.DispatchDelivered, d1, 1), 1)
	assert.Len(t, waitDeliveries(t, g.env, journal.DispatchDelivered, d2, 1), 1)
	respawned := g.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Equal(t, "true", respawned[0].Attrs["resumed"])
	assert.Empty(t, g.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}

// TestProcessRunnerGeminiRefusedResumeFallsBack: a headless resume that
// Gemini refuses (exit 42, "Error resuming session") falls back to a fresh
// run that carries the same event, journaled as session.resume_failed
// reason=not_resumable exit_cause=session_error; no failure is counted.
func TestProcessRunnerGeminiRefusedResumeFallsBack(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, map[string]string{"FAKEGEMINI_RESUME_FAIL": "1"})
	g.start(t)
	waitDelivered(t, g.env, sendComment(t, g.env, "the first event"), waitLong)
	first := g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort).Status.HarnessSessionID

	body := "carried by the fallback " + uuid.NewString()
	d := sendComment(t, g.env, body)
	waitDelivered(t, g.env, d, waitLong)
	r := g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	second := r.Status.HarnessSessionID
	require.NotEqual(t, first, second)
	var modes []string
	for _, s := range g.starts(t) {
		flag, id := geminiStart(t, s)
		modes = append(modes, flag+" "+id)
	}
	assert.Equal(t, []string{"--session-id " + first, "--resume " + first, "--session-id " + second}, modes)
	failed := g.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitShort)
	require.Len(t, failed, 1)
	assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
	assert.Equal(t, harness.CauseSessionError, failed[0].Attrs["exit_cause"])
	assert.Equal(t, first, failed[0].Attrs["attempted_session_id"])
	assert.Equal(t, 1, countContaining(g.turns(t, keyIssue, second), body), "the fallback carried the event, once")
	assert.Zero(t, countContaining(g.turns(t, keyIssue, first), body))
	assert.Zero(t, r.Status.Failures, "a refused resume is no failed run")
	assert.Empty(t, g.eventsNamed(t, journal.SessionCrashLoop, keyIssue))
}

// geminiNoAuthBudget is a Gemini CLI without an auth method under the
// process runner: every run exits 41. Each is a failed dispatch
// (dispatch.failed exit_cause=auth_missing, the event still pending),
// the runs back off, and past the restart budget of 2 the item needs
// attention and runs no more: three runs, never a hot loop.
func geminiNoAuthBudget(t *testing.T, e *env, runs func() int) {
	e.start(t)
	d := sendComment(t, e, "an event no run can take "+uuid.NewString())
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitRuns)
	assert.Equal(t, 3, r.Status.Failures)
	loops := e.waitEvent(t, journal.SessionCrashLoop, keyIssue, 1, waitShort)
	assert.Equal(t, "restart_budget_exhausted", loops[0].Attrs["reason"])
	failed := waitDeliveries(t, e, journal.DispatchFailed, d, 1)
	require.Len(t, failed, 3)
	for _, f := range failed {
		assert.Equal(t, harness.CauseAuthMissing, f.Attrs["exit_cause"], "%v", f.Attrs)
		assert.Equal(t, "41", f.Attrs["exit_status"])
	}
	exits := e.eventsNamed(t, journal.SessionExited, keyIssue)
	require.Len(t, exits, 3)
	assert.Equal(t, harness.CauseAuthMissing, exits[2].Attrs["exit_cause"])
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchDelivered, d))
	assert.Contains(t, e.mustRun(t, "get"), "NeedsAttention")
	e.settle(t)
	assert.Equal(t, 3, runs(), "no run past the budget")
	assert.Equal(t, desired.PhaseNeedsAttention, e.mustRecord(t, keyIssue).Status.Phase)
}

// noAuthPolicy is the restart policy of geminiNoAuthBudget: a budget of
// two retries, the second after a backoff of 1 s, fast failures out of
// reach.
var noAuthPolicy = map[string]any{"restartBudget": 2, "backoffInitialSeconds": 1, "backoffMaxSeconds": 2, "maxFastFailures": 10}

func TestProcessRunnerGeminiNoAuthBacksOffToNeedsAttention(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, map[string]string{"FAKEGEMINI_AUTH": "0"})
	maps.Copy(g.policy(), noAuthPolicy)
	g.writeConfig(t)
	geminiNoAuthBudget(t, g.env, func() int { return len(g.starts(t)) })
	starts := g.starts(t)
	exits := g.eventsNamed(t, journal.SessionExited, keyIssue)
	require.Len(t, starts, 3)
	assert.GreaterOrEqual(t, starts[2].Time.Sub(exits[1].Time), 900*time.Millisecond, "the second retry waited its backoff")
	for _, s := range starts {
		flag, _ := geminiStart(t, s)
		assert.Equal(t, "--session-id", flag, "no conversation to resume: %q", s.Argv)
	}
}

// TestProcessRunnerGeminiNoAuthUnderNeverNeedsAttention: under
// restartPolicy Never a run that exits 41 keeps its event pending and
// needs attention; it is not run again by itself (it would fail again in
// seconds, forever), and a new event earns one more attempt.
func TestProcessRunnerGeminiNoAuthUnderNeverNeedsAttention(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, map[string]string{"FAKEGEMINI_AUTH": "0"})
	g.policy()["restartPolicy"] = "Never"
	g.writeConfig(t)
	g.start(t)
	d := sendComment(t, g.env, "an event no run can take "+uuid.NewString())
	// The pass that records the exit writes NeedsAttention with the run's
	// reason first, then the restart policy's.
	g.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseNeedsAttention && r.Status.Reason == "restart_policy_never"
	}, waitLong, "the item never needed attention under restartPolicy Never")
	attention := g.waitEvent(t, journal.SessionNeedsAttention, keyIssue, 1, waitShort)
	assert.Equal(t, "restart_policy_never", attention[0].Attrs["reason"])
	require.Len(t, waitDeliveries(t, g.env, journal.DispatchFailed, d, 1), 1)
	g.settle(t)
	assert.Len(t, g.starts(t), 1, "not run again by itself")
	assert.Equal(t, desired.PhaseNeedsAttention, g.mustRecord(t, keyIssue).Status.Phase)

	sendComment(t, g.env, "a new event "+uuid.NewString())
	g.waitStarts(t, 2, waitShort)
	g.waitEvent(t, journal.SessionNeedsAttention, keyIssue, 2, waitShort)
	g.settle(t)
	assert.Len(t, g.starts(t), 2, "one more attempt")
}

// geminiAdapter is the gemini adapter as g's daemon sees its files.
func geminiAdapter(t *testing.T, g geminiEnv) harness.Adapter {
	t.Helper()
	a, err := harness.New("gemini", schema.Harness{Adapter: harness.AdapterGemini, Command: "gemini", Env: map[string]string{"GEMINI_CLI_HOME": g.home}})
	require.NoError(t, err)
	return a
}

// newRealGeminiEnv is an env whose harness is the real Gemini CLI
// (LOOPD_REAL_GEMINI; 0.61.0 was measured), offline and without an auth
// method, with its config dir in the test's dir, and returns that dir
// (GEMINI_CLI_HOME). Gemini outlives its terminal and its parent: when the
// test ends, the daemon is stopped first, then the process group of every
// pane and every run is ended.
func newRealGeminiEnv(t *testing.T, policy map[string]any) (*env, string) {
	t.Helper()
	bin := os.Getenv("LOOPD_REAL_GEMINI")
	if bin == "" {
		t.Skip("LOOPD_REAL_GEMINI is not set")
	}
	e := newEnv(t, envOpts{Policy: policy})
	home := filepath.Join(e.dir, "gemini-home")
	h := e.harness()
	h["adapter"], h["command"], h["env"] = harness.AdapterGemini, bin, map[string]string{"GEMINI_CLI_HOME": home}
	e.writeConfig(t)
	t.Cleanup(func() {
		e.signalDaemon(t, syscall.SIGTERM)
		e.endPaneGroups(t)
		e.endRunGroups(t)
	})
	return e, home
}

// endPaneGroups ends the process group of every pane on e's tmux server.
func (e *env) endPaneGroups(t testing.TB) {
	out, err := exec.Command("tmux", "-L", e.socket, "list-panes", "-a", "-F", "#{pane_pid}").Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			if p, err := proc.Lookup(pid); err == nil {
				_, _ = p.EndGroup(context.Background(), syscall.SIGHUP, time.Second, 20*time.Millisecond)
			}
		}
	}
}

// TestRealGeminiTmuxStopsAtItsDialog: a fresh spawn of the real CLI in
// tmux, offline and without an auth method, stops at its folder-trust or
// auth dialog: loopd get shows the item blocked with the dialog's reason,
// and the agent is left there (no exit, no respawn, no crash loop).
func TestRealGeminiTmuxStopsAtItsDialog(t *testing.T) {
	e, _ := newRealGeminiEnv(t, nil)
	t.Parallel()
	e.start(t)
	sendComment(t, e, "a comment for a blocked agent "+uuid.NewString())
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Blocked != "" }, waitLong, "never blocked")
	assert.Contains(t, []harness.Block{harness.BlockWorkspaceTrust, harness.BlockLoginRequired}, r.Status.Blocked)
	assert.Contains(t, e.mustRun(t, "get"), "blocked reason="+r.Status.Blocked)
	e.settle(t)
	assert.Empty(t, e.eventsNamed(t, journal.SessionExited, keyIssue))
	assert.Empty(t, e.eventsNamed(t, journal.SessionCrashLoop, keyIssue))
	assert.Len(t, e.daemonLines(t, journal.SessionStarting), 1, "one spawn")
	assert.True(t, e.hasSession(t, keyIssue))
}

// TestRealGeminiProcessRunnerNoAuthNeedsAttention: every headless run of
// the real CLI without an auth method exits 41 (geminiNoAuthBudget).
func TestRealGeminiProcessRunnerNoAuthNeedsAttention(t *testing.T) {
	e, _ := newRealGeminiEnv(t, noAuthPolicy)
	t.Parallel()
	e.asProcessRunner(t, 600)
	geminiNoAuthBudget(t, e, func() int { return len(e.runLogs(t, keyIssue)) })
}

// TestRealGeminiProcessRunnerResumeWithoutAuthKeepsTheConversation: under
// restartPolicy Never, a run that exits 41 needs attention, and is not run
// again by itself. Then a conversation whose chat file exists (hand-made
// as the reference does, which the real CLI accepts) is resumed headless
// for the next event; without an auth method the resume exits 41
// (exit_cause=auth_missing), which is no refusal to resume: the
// conversation is kept, not replaced, and the item needs attention again.
func TestRealGeminiProcessRunnerResumeWithoutAuthKeepsTheConversation(t *testing.T) {
	e, home := newRealGeminiEnv(t, map[string]any{"restartPolicy": "Never"})
	t.Parallel()
	e.asProcessRunner(t, 600)
	e.start(t)
	sendComment(t, e, "the first event "+uuid.NewString())
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	require.NotNil(t, r.Status.LastExitStatus)
	require.Equal(t, 41, *r.Status.LastExitStatus)
	e.settle(t)
	require.Len(t, e.runLogs(t, keyIssue), 1, "not run again by itself")
	id := r.Status.HarnessSessionID
	require.Regexp(t, uuidPattern, id)
	ad, err := harness.New("gemini", schema.Harness{Adapter: harness.AdapterGemini, Command: "gemini", Env: map[string]string{"GEMINI_CLI_HOME": home}})
	require.NoError(t, err)
	tr, err := ad.Transcript(r.Workdir(), id)
	require.NoError(t, err)
	require.Empty(t, tr.Path, "a run without auth wrote no chat file")
	handMadeChat(t, home, r.Workdir(), id)
	tr, err = ad.Transcript(r.Workdir(), id)
	require.NoError(t, err)
	require.True(t, tr.Exists, "loopd counts the hand-made chat file as resumable")

	sendComment(t, e, "the second event "+uuid.NewString())
	e.waitFor(t, func() bool {
		return len(e.runLogs(t, keyIssue)) == 2 && e.mustRecord(t, keyIssue).Status.Phase == desired.PhaseNeedsAttention
	}, waitLong, "the resume never ran")
	e.settle(t)
	starting := e.daemonLines(t, journal.SessionStarting)
	require.Len(t, starting, 2)
	assert.Equal(t, []string{"fresh", "resume"}, []string{logField(starting[0], "mode"), logField(starting[1], "mode")})
	assert.Equal(t, id, logField(starting[1], "harness_session_id"))
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "no auth is no refusal to resume")
	assert.Equal(t, id, e.mustRecord(t, keyIssue).Status.HarnessSessionID)
	exits := e.eventsNamed(t, journal.SessionExited, keyIssue)
	require.NotEmpty(t, exits)
	assert.Equal(t, harness.CauseAuthMissing, exits[len(exits)-1].Attrs["exit_cause"])
	assert.Empty(t, e.eventsNamed(t, journal.DispatchDelivered, keyIssue), "offline, nothing reached a conversation")
}

// handMadeChat writes a chat file of conversation id for the project of
// workdir, as the reference does (harness-cli-facts.md, section 3): the
// metadata line and one user message, in the chats dir of the slug that
// the CLI registered for workdir in projects.json of the item's own
// config dir (its GEMINI_CLI_HOME under home's loopd-items).
func handMadeChat(t *testing.T, home, workdir, id string) {
	t.Helper()
	items, err := filepath.Glob(filepath.Join(home, ".gemini", "loopd-items", "*", ".gemini"))
	require.NoError(t, err)
	require.Len(t, items, 1, "the item's own config dir")
	config := items[0]
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	require.True(t, readJSONFile(filepath.Join(config, "projects.json"), &reg), "the CLI registered no project")
	slug := reg.Projects[workdir]
	require.NotEmpty(t, slug, "%v", reg.Projects)
	chats := filepath.Join(config, "tmp", slug, "chats")
	require.NoError(t, os.MkdirAll(chats, 0o700))
	now := time.Now().UTC()
	hash := sha256.Sum256([]byte(workdir))
	meta, err := json.Marshal(map[string]any{"sessionId": id, "projectHash": hex.EncodeToString(hash[:]), "startTime": now, "lastUpdated": now, "kind": "main"})
	require.NoError(t, err)
	msg, err := json.Marshal(map[string]any{"id": uuid.NewString(), "timestamp": now, "type": "user", "content": []map[string]string{{"text": "hand made"}}})
	require.NoError(t, err)
	name := "session-" + now.Format("2006-01-02T15-04") + "-" + id[:8] + ".jsonl"
	require.NoError(t, os.WriteFile(filepath.Join(chats, name), append(append(meta, '\n'), append(msg, '\n')...), 0o600))
}
