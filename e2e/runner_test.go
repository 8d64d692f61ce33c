package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
)

// processEnv is an env whose route runs its agents as processes (runner:
// process), each run bounded by timeout seconds.
func processEnv(t *testing.T, timeout int, harnessEnv map[string]string) *env {
	t.Helper()
	e := newEnv(t, envOpts{HarnessEnv: harnessEnv})
	route := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)
	route["runner"] = "process"
	route["dispatchTimeoutSeconds"] = timeout
	e.writeConfig(t)
	t.Cleanup(func() { e.killRuns(t) })
	return e
}

// killRuns kills what is left of the runs of every item: a test that
// failed midway leaves no process behind. A run's sandbox ends with its
// wrapper's group.
func (e *env) killRuns(t testing.TB) {
	files, _ := filepath.Glob(filepath.Join(e.stateDir, "runs", "*", "*.pid"))
	for _, f := range files {
		var rec struct {
			Wrapper int `json:"wrapper_pid"`
		}
		if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &rec) == nil && rec.Wrapper > 0 {
			killFake(rec.Wrapper, loopdBin)
		}
	}
}

// runStart waits for the first start of the fake CLI in a run of issue 1
// and returns it with the host's pid of its process (hostPID under the
// run's wrapper) and the pid the run's pid file records for the harness
// (its sandbox's bwrap).
func (e *env) runStart(t *testing.T) (processStart, proc.Process, int) {
	t.Helper()
	start := e.waitStarts(t, 1, waitShort)[0]
	var rec struct {
		Wrapper int `json:"wrapper_pid"`
		Harness int `json:"harness_pid"`
	}
	e.waitFor(t, func() bool {
		run := e.mustRecord(t, keyIssue).Status.RunID
		b, err := os.ReadFile(filepath.Join(e.stateDir, "runs", desired.SessionName(keyIssue), run+".pid"))
		return run != "" && err == nil && json.Unmarshal(b, &rec) == nil
	}, waitShort, "no pid file of the run")
	p, err := proc.Lookup(hostPID(t, rec.Wrapper, start.PID))
	require.NoError(t, err)
	return start, p, rec.Harness
}

// countTurns returns how many user turns of conversation id of issue 1
// hold text.
func (e *env) countTurns(t *testing.T, id, text string) int {
	t.Helper()
	return countContaining(e.userTurns(t, keyIssue, id), text)
}

// TestProcessRunnerSurvivesKill9WithOneTurn: a run is detached from the
// daemon. A kill -9 of the daemon mid-run leaves it running; the next
// daemon finds it by its pid file, waits for it, learns its exit status
// from the wrapper's exit file (it is not the run's parent) and judges it
// by the transcript: one start, one turn, delivered once. The next event
// resumes the same conversation headless, and the transcript holds both
// turns.
func TestProcessRunnerSurvivesKill9WithOneTurn(t *testing.T) {
	t.Parallel()
	e := processEnv(t, 600, map[string]string{"FAKECLAUDE_REPLY_DELAY": "3s"})
	e.start(t)
	first := "first event " + strconv.FormatInt(time.Now().UnixNano(), 36)
	d1 := sendComment(t, e, first)
	start, harnessProc, _ := e.runStart(t)
	flag, id := start.mode()
	require.Equal(t, "--session-id", flag, "%q", start.Argv)
	assert.Contains(t, start.Argv, "-p")
	e.waitFor(t, func() bool { return e.countTurns(t, id, first) == 1 }, waitShort, "the run's turn never reached the transcript")
	require.True(t, harnessProc.Running())

	e.kill9(t)
	assert.True(t, harnessProc.Running(), "the run outlived the daemon's kill -9")
	r := e.mustRecord(t, keyIssue)
	require.NotEmpty(t, r.Status.RunID)
	b, err := os.ReadFile(filepath.Join(e.stateDir, "runs", desired.SessionName(keyIssue), r.Status.RunID+".pid"))
	require.NoError(t, err)
	var rec struct {
		Harness int `json:"harness_pid"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	assert.Contains(t, proc.Descendants([]int{rec.Harness}), harnessProc.PID, "the harness runs in the sandbox the pid file names")

	e.start(t)
	delivered := waitDelivered(t, e, d1, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.False(t, harnessProc.Running())
	assert.Equal(t, "run_done", r.Status.Reason)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	assert.Empty(t, r.Status.RunID, "judged once")
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	require.Len(t, exits, 1)
	assert.Equal(t, "0", exits[0].Attrs["exit_status"], "the exit status came from the wrapper's file to the next daemon")
	assert.Equal(t, "run_done", exits[0].Attrs["reason"])
	assert.NotEmpty(t, delivered.Attrs["via"])
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d1, 1), 1)
	assert.Len(t, e.starts(t), 1, "one start for one event")
	assert.Equal(t, 1, e.countTurns(t, id, first), "exactly one turn")
	spawned := e.eventsNamed(t, journal.SessionSpawned, keyIssue)
	require.Len(t, spawned, 1)
	assert.Contains(t, spawned[0].Attrs["log"], filepath.Join(e.stateDir, "runs"))

	second := "second event " + strconv.FormatInt(time.Now().UnixNano(), 36)
	d2 := sendComment(t, e, second)
	waitDelivered(t, e, d2, waitLong)
	starts := e.starts(t)
	require.Len(t, starts, 2)
	flag, resumed := starts[1].mode()
	assert.Equal(t, "--resume", flag, "%q", starts[1].Argv)
	assert.Equal(t, id, resumed)
	assert.Equal(t, 1, e.countTurns(t, id, first))
	assert.Equal(t, 1, e.countTurns(t, id, second), "both turns in the one transcript")
	respawned := e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Equal(t, "true", respawned[0].Attrs["resumed"])
	assert.Empty(t, e.sessions(t), "no tmux session for a process runner item")

	e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	out := e.mustRun(t, "get")
	assert.Contains(t, out, "Exited")
	assert.Contains(t, out, id)
}

// TestProcessRunnerTimeoutEndsTheRunsGroup: a run past its route's
// dispatchTimeoutSeconds is ended with its process group (the harness and
// the tool it started), dispatch.timeout is journaled, and the event,
// which had reached the conversation, is not run again.
func TestProcessRunnerTimeoutEndsTheRunsGroup(t *testing.T) {
	t.Parallel()
	// Long enough for the run to reach its turn and start its tool on a
	// loaded machine, sandbox included; a run cut short before its turn is
	// a failed run, and run again.
	e := processEnv(t, 3, map[string]string{"FAKECLAUDE_REPLY_DELAY": "1h"})
	childFile := e.fakeFile("child.pid")
	e.harness()["env"].(map[string]string)["FAKECLAUDE_CHILD_PID_FILE"] = childFile
	e.writeConfig(t)
	e.start(t)
	body := "a turn that never ends " + strconv.FormatInt(time.Now().UnixNano(), 36)
	d := sendComment(t, e, body)
	_, harnessProc, runPID := e.runStart(t)
	var child proc.Process
	e.waitFor(t, func() bool {
		b, err := os.ReadFile(childFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		child, err = proc.Lookup(hostPID(t, harnessProc.PID, n))
		return err == nil
	}, waitShort, "the harness's tool never started")

	timeouts := e.waitEvent(t, journal.DispatchTimeout, keyIssue, 1, waitShort)
	// The run's event: named when the timeout came before the spawn was
	// confirmed, "" once confirmed delivered (then the event is no longer
	// the run's to carry).
	assert.Contains(t, []string{d, ""}, timeouts[0].Attrs["delivery"])
	assert.Equal(t, "3s", timeouts[0].Attrs["timeout"])
	assert.Equal(t, strconv.Itoa(runPID), timeouts[0].Attrs["pid"], "the run's pid, its sandbox's")
	e.waitFor(t, func() bool { return !harnessProc.Running() && !child.Running() }, waitShort, "the run's group outlived its timeout")
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Equal(t, "dispatch_timeout", r.Status.Reason, "its event had reached the conversation: done, ended at its timeout")
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d, 1), 1)
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	require.Len(t, exits, 1)
	assert.Equal(t, strconv.Itoa(int(syscall.SIGTERM)), exits[0].Attrs["signal"], "SIGTERM ended it")
	time.Sleep(time.Second)
	assert.Len(t, e.starts(t), 1, "not run again")
}

// TestProcessRunnerResumeFailureFallsBackToFresh: a headless resume that
// fails in a moment ("No conversation found", exit 1) falls back to a
// fresh run that carries the same event, through the decision table
// (session.resume_failed reason=not_resumable: the CLI's own refusal), and the event is delivered
// once, in the new conversation.
func TestProcessRunnerResumeFailureFallsBackToFresh(t *testing.T) {
	t.Parallel()
	e := processEnv(t, 600, map[string]string{"FAKECLAUDE_RESUME_FAIL": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "100ms"})
	e.start(t)
	waitDelivered(t, e, sendComment(t, e, "the first event"), waitLong)
	first := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort).Status.HarnessSessionID

	body := "carried by the fallback " + strconv.FormatInt(time.Now().UnixNano(), 36)
	d := sendComment(t, e, body)
	waitDelivered(t, e, d, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	second := r.Status.HarnessSessionID
	require.NotEqual(t, first, second)

	starts := e.starts(t)
	require.Len(t, starts, 3)
	var modes []string
	for _, s := range starts {
		flag, id := s.mode()
		modes = append(modes, flag+" "+id)
	}
	assert.Equal(t, []string{"--session-id " + first, "--resume " + first, "--session-id " + second}, modes)
	failed := e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitShort)
	require.Len(t, failed, 1)
	assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
	assert.Equal(t, first, failed[0].Attrs["attempted_session_id"])
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, second), body), "the fallback carried the event, once")
	assert.Zero(t, countContaining(e.userTurns(t, keyIssue, first), body))
	assert.Zero(t, r.Status.Failures, "a failed resume is no failed run")
}

// TestProcessRunnerUnderCron: reconcile --once starts a run and returns
// without waiting for it; a later --once finds the run still in flight and
// leaves it, and the one after it has ended judges it.
func TestProcessRunnerUnderCron(t *testing.T) {
	t.Parallel()
	e := processEnv(t, 600, map[string]string{"FAKECLAUDE_REPLY_DELAY": "3s"})
	d := e.ingestComment(t, keyIssue, "an event for cron")
	began := time.Now()
	_, errOut, code := e.run(t, "reconcile", "--once")
	require.Zero(t, code, errOut)
	assert.Less(t, time.Since(began), 3*time.Second, "--once did not wait for the run")
	_, harnessProc, _ := e.runStart(t)

	out := e.mustRun(t, "reconcile", "--once", "--dry-run")
	if harnessProc.Running() {
		// The pass may first mark the run running (its id reported), then
		// waits for it; it never starts it again.
		assert.Regexp(t, `(?m)^wait `, out, "the run in flight is waited for")
		assert.NotContains(t, out, "_spawn", "and not started again:\n%s", out)
	}
	run := e.mustRecord(t, keyIssue).Status.RunID
	require.NotEmpty(t, run)
	e.waitFor(t, func() bool {
		_, err := os.Stat(filepath.Join(e.stateDir, "runs", desired.SessionName(keyIssue), run+".exit"))
		return err == nil
	}, waitShort, "the run never ended")
	assert.False(t, harnessProc.Running())
	_, errOut, code = e.run(t, "reconcile", "--once")
	require.Zero(t, code, errOut)
	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseExited, r.Status.Phase)
	assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, d, 1), 1)
	assert.Len(t, e.starts(t), 1)
}

// TestRealClaudeProcessRunnerFreshThenResume: the real Claude Code CLI,
// headless, offline: the first event runs fresh (-p --session-id), the
// second resumes it (-p --resume), both exit 1 ("Not logged in"), and both
// are delivered, judged by the one transcript that holds both turns.
func TestRealClaudeProcessRunnerFreshThenResume(t *testing.T) {
	claude := realClaude(t)
	t.Parallel()
	e := newEnv(t, envOpts{Harness: claude, HarnessEnv: map[string]string{"DISABLE_AUTOUPDATER": "1"}})
	route := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)
	route["runner"] = "process"
	e.writeConfig(t)
	e.start(t)
	first := "first headless turn " + strconv.FormatInt(time.Now().UnixNano(), 36)
	waitDelivered(t, e, sendComment(t, e, first), waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	id := r.Status.HarnessSessionID

	second := "second headless turn " + strconv.FormatInt(time.Now().UnixNano(), 36)
	waitDelivered(t, e, sendComment(t, e, second), waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the result's session_id named the same conversation")
	assert.Equal(t, 1, e.countTurns(t, id, first))
	assert.Equal(t, 1, e.countTurns(t, id, second), "both turns in the one transcript")
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 2, waitShort)
	require.Len(t, exits, 2)
	for _, ex := range exits {
		assert.Equal(t, "1", ex.Attrs["exit_status"], "offline: Not logged in")
		assert.Equal(t, "run_done", ex.Attrs["reason"])
	}
	respawned := e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Equal(t, "true", respawned[0].Attrs["resumed"])
}

// TestProcessRunnerAnnouncementSaysLogs: the announcement of an agent of
// the process runner, which has no tmux session, tells people to follow
// it with loopd logs, and names no tmux attach command; it is posted once
// across the item's runs.
func TestProcessRunnerAnnouncementSaysLogs(t *testing.T) {
	t.Parallel()
	e := processEnv(t, 600, nil)
	srv, _ := e.withGitHub(t)
	e.start(t)
	d1 := sendComment(t, e, "first event")
	waitDelivered(t, e, d1, waitLong)
	e.waitFor(t, func() bool { return len(announcements(srv)) == 1 }, waitLong, "the agent was never announced")
	body := announcements(srv)[0].Body
	assert.Contains(t, body, "as a process, one headless run per event")
	assert.Contains(t, body, "`loopd logs "+keyIssue.String()+"`")
	assert.NotContains(t, body, "tmux")

	d2 := sendComment(t, e, "second event")
	waitDelivered(t, e, d2, waitLong)
	e.settle(t)
	assert.Len(t, announcements(srv), 1, "announced once")
}
