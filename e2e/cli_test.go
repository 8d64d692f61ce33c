package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// planEntry is one action of `reconcile -o json`, its fields typed.
type planEntry struct {
	Action string         `json:"action"`
	Fields map[string]any `json:"fields"`
}

func TestReconcileDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	delivery := e.ingestComment(t, keyIssue, "a comment for the dry run")
	before := e.records(t)
	eventsBefore := e.events(t)
	require.Len(t, before, 1)

	out := e.mustRun(t, "reconcile", "--once", "--dry-run")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "the workspace, then the spawn:\n%s", out)
	assert.True(t, strings.HasPrefix(lines[0], "prepare_workspace "), lines[0])
	for _, kv := range []string{"work_item=" + keyIssue.String(), "reason=first_spawn", "cwd=" + e.workdir(keyIssue)} {
		assert.Contains(t, strings.Fields(lines[0]), kv)
	}
	assert.True(t, strings.HasPrefix(lines[1], "fresh_spawn "), lines[1])
	for _, kv := range []string{"work_item=" + keyIssue.String(), "reason=new_event", "delivery=" + delivery,
		"session=" + desired.SessionName(keyIssue)} {
		assert.Contains(t, strings.Fields(lines[1]), kv)
	}

	jsonOut := e.mustRun(t, "reconcile", "--once", "--dry-run", "-o", "json")
	var plan []planEntry
	require.NoError(t, json.Unmarshal([]byte(jsonOut), &plan), jsonOut)
	require.Len(t, plan, 2)
	assert.Equal(t, "prepare_workspace", plan[0].Action)
	assert.Equal(t, "first_spawn", plan[0].Fields["reason"])
	assert.Equal(t, 1.0, plan[0].Fields["failures_on_error"], "a number: the failure count a failed preparation would record")
	assert.Equal(t, "fresh_spawn", plan[1].Action)
	assert.Equal(t, keyIssue.String(), plan[1].Fields["work_item"])
	assert.Equal(t, "new_event", plan[1].Fields["reason"])
	assert.Equal(t, delivery, plan[1].Fields["delivery"])

	_, _, code := e.run(t, "reconcile", "--once", "--dry-run", "--detailed-exitcode")
	assert.Equal(t, 2, code, "changes planned")

	assert.Equal(t, before, e.records(t), "the store is unchanged")
	assert.Equal(t, eventsBefore, e.events(t), "the journal is unchanged")
	assert.Empty(t, e.sessions(t), "no tmux session")
	assert.NoDirExists(t, e.workdir(keyIssue), "no workdir")
	assert.Empty(t, e.starts(t), "no agent started")
}

func TestReconcileOnceDetailedExitcode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	body := "a comment for cron " + uuid.NewString()
	e.ingestComment(t, keyIssue, body)

	_, errOut, code := e.run(t, "reconcile", "--once", "--detailed-exitcode")
	require.Equal(t, 2, code, "the first pass spawns: %s", errOut)
	require.True(t, e.hasSession(t, keyIssue))
	var log [][]string
	e.waitFor(t, func() bool { log = e.argvLog(t); return len(log) == 1 }, waitShort, "the agent never started")
	_, fresh := flagValue(log[0], "--session-id")
	assert.True(t, fresh)

	// Later cron passes confirm the spawn; then there is nothing to do.
	e.waitFor(t, func() bool {
		_, _, code := e.run(t, "reconcile", "--once", "--detailed-exitcode")
		r, _ := e.record(t, keyIssue)
		return code == 0 && r.Status.Phase == desired.PhaseRunning
	}, waitShort, "cron passes never settled on Running")
	out, _, code := e.run(t, "reconcile", "--once", "--dry-run", "--detailed-exitcode")
	assert.Equal(t, 0, code)
	assert.Equal(t, "No changes.\n", out, "nothing planned")
	r, _ := e.record(t, keyIssue)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, r.Status.HarnessSessionID), body))
	assert.Len(t, e.argvLog(t), 1, "one process start in all")
}

func TestMalformedConfigNamesKeyAndLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		edit   func(yml string) (string, int) // the new text and the line of the fault
		reason string
	}{
		{
			name: "wrong_type",
			edit: func(yml string) (string, int) {
				out := strings.Replace(yml, "intervalSeconds: 1", "intervalSeconds: soon", 1)
				return out, lineOf(out, "intervalSeconds: soon")
			},
			reason: "reconcile.intervalSeconds",
		},
		{
			name: "unknown_key",
			edit: func(yml string) (string, int) {
				out := strings.Replace(yml, "tmux:\n", "tmux:\n    bogusKey: 1\n", 1)
				return out, lineOf(out, "bogusKey: 1")
			},
			reason: "bogusKey",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			yml, err := os.ReadFile(e.configPath)
			require.NoError(t, err)
			bad, line := tc.edit(string(yml))
			require.NotEqual(t, string(yml), bad)
			require.NotZero(t, line)
			require.NoError(t, os.WriteFile(e.configPath, []byte(bad), 0o600))
			for _, args := range [][]string{
				{"config", "validate"},
				{"reconcile", "--once", "--dry-run"},
			} {
				out, errOut, code := e.run(t, args...)
				assert.Equal(t, 1, code, "%v: %s%s", args, out, errOut)
				assert.Contains(t, errOut, tc.reason, "%v names the key", args)
				assert.Contains(t, errOut, fmt.Sprintf("%s:%d:", e.configPath, line), "%v names the line", args)
			}
		})
	}
}

// lineOf returns the 1-based line of text that contains sub, 0 if none.
func lineOf(text, sub string) int {
	n := 0
	for line := range strings.Lines(text) {
		n++
		if strings.Contains(line, sub) {
			return n
		}
	}
	return 0
}

func TestConfigValidateExample(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	example, err := filepath.Abs(filepath.Join("..", "loopd.example.yaml"))
	require.NoError(t, err)
	// A PATH without the example's harness command "claude" (bwrap
	// stays: the example's agents run sandboxed): the route that uses it
	// could run nothing, which is an error naming where the command was
	// looked for.
	bwrap, err := exec.LookPath("bwrap")
	require.NoError(t, err, "the agents' sandbox needs bubblewrap")
	path := t.TempDir() + ":" + filepath.Dir(bwrap)
	out, errOut, code := e.runEnv(t, []string{"PATH=" + path}, "config", "validate", example)
	assert.Equal(t, 1, code, errOut)
	assert.NotContains(t, out, "ok")
	assert.Contains(t, errOut, `harness claude-code: command "claude" not on PATH "`+path+`"`)
	// With it installed, the example is valid.
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755))
	out, errOut, code = e.runEnv(t, []string{"PATH=" + bin + ":" + filepath.Dir(bwrap), "LOOPD_WEBHOOK_SECRET=s3cret"}, "config", "validate", example)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok")
	assert.Empty(t, errOut, "no warning")
	// Without the webhook secret's variable, serve would refuse to start:
	// validate says so, as a warning (it may run where serve does not).
	out, errOut, code = e.runEnv(t, []string{"PATH=" + bin + ":" + filepath.Dir(bwrap), "LOOPD_WEBHOOK_SECRET="}, "config", "validate", example)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok")
	assert.Contains(t, errOut, "warning: webhook secret: environment variable LOOPD_WEBHOOK_SECRET is empty; set it to the secret configured on GitHub (here; serve refuses to start without it)")
}

// TestHoldAndReleaseWakeServe: with the resync timer an hour away, a
// `loopd hold` and a `loopd release` from another process still reach the
// running serve at once: the store wakes its listener (SQLite's wake
// file), as an ingest does.
func TestHoldAndReleaseWakeServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{IntervalSeconds: 3600})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID

	e.mustRun(t, "hold", keyIssue.String())
	e.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitShort, "hold did not stop the session")
	e.mustRun(t, "release", keyIssue.String())
	back := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, back.Status.HarnessSessionID, "the release resumed the same conversation")
}

func TestHoldStopsAndReleaseResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Policy: map[string]any{"restartPolicy": "Always"}})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID

	out, errOut, code := e.run(t, "hold", keyIssue.String())
	require.Zero(t, code, errOut)
	assert.Equal(t, keyIssue.String()+" held; the next pass stops its session\n", out, "one line for a person")
	assert.Empty(t, errOut, "no log lines without --log-level debug")
	held := e.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	assert.True(t, held.Spec.Held)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitShort, "hold did not stop the session")
	e.waitEvent(t, journal.SessionStopped, keyIssue, 1, waitShort)
	assert.Equal(t, keyIssue.String()+" already held\n", e.mustRun(t, "hold", keyIssue.String()))
	assert.Len(t, e.eventsNamed(t, journal.ItemHeld, keyIssue), 1, "a second hold journals nothing")

	// The agent is gone, and even restartPolicy Always does not bring it
	// back, nor does a new event.
	body := "a comment while held " + uuid.NewString()
	sendComment(t, e, body)
	e.waitEvent(t, journal.DeliveryAccepted, keyIssue, 2, waitShort)
	e.settle(t)
	assert.False(t, e.hasSession(t, keyIssue), "a held item is not respawned")
	assert.Len(t, e.argvLog(t), 1)
	still, _ := e.record(t, keyIssue)
	assert.Equal(t, desired.PhaseStopped, still.Status.Phase)
	assert.Len(t, still.Pending, 1, "the comment waits")

	e.mustRun(t, "release", keyIssue.String())
	e.waitTurn(t, keyIssue, id, body, waitShort, "the held comment never reached the same transcript")
	back := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.False(t, back.Spec.Held)
	assert.Equal(t, id, back.Status.HarnessSessionID)
	log := e.argvLog(t)
	require.Len(t, log, 2)
	got, ok := flagValue(log[1], "--resume")
	assert.True(t, ok, "release resumes: %q", log[1])
	assert.Equal(t, id, got)
	assert.Len(t, e.eventsNamed(t, journal.ItemReleased, keyIssue), 1)
	starts := e.daemonLines(t, journal.SessionStarting)
	require.Len(t, starts, 2)
	assert.Contains(t, starts[1], " reason=released ", "brought back by the release, not by a death")
}

func TestSecondServeOnOneStateDirIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	_, errOut, code := e.run(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "another loopd serve is running on it (serve.lock is locked): stop it, or give this one another stateDir")
	assert.NotContains(t, errOut, "deadline", "the lock's wait says nothing to a person")
	select {
	case <-e.daemonDone:
		t.Fatal("the first daemon exited")
	default:
	}
}

func TestReconcileLockExcludesConcurrentPasses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", withComment("hello")))
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	e.stop(t)
	lockPath := filepath.Join(e.stateDir, "loopd.db.lock")
	assert.FileExists(t, lockPath, "the daemon's passes take the lock file")

	// --lock-wait bounds the wait for the lock, not the pass: with the lock
	// free, a pass that takes longer than 1ms still runs to the end.
	out, errOut, code := e.run(t, "reconcile", "--once", "--lock-wait", "1ms")
	require.Equal(t, 0, code, "%s%s", out, errOut)

	store := e.openStore(t)
	defer store.Close()
	unlock, err := store.Lock(context.Background())
	require.NoError(t, err)
	defer unlock()

	out, errOut, code = e.run(t, "reconcile", "--once", "--lock-wait", "1ms")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, errOut, "lock held by another process")

	// A pass with time to wait starts when the lock is released.
	body := "queued behind the lock " + uuid.NewString()
	e.ingestComment(t, keyIssue, body)
	cmd := exec.Command(loopdBin, "reconcile", "--once", "--lock-wait", "30s", "--config", e.configPath)
	cmd.Env = e.procEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	e.waitFor(t, func() bool { return opened(cmd.Process.Pid, lockPath) }, waitShort, "the pass never tried the lock")
	assert.Equal(t, 0, countContaining(e.userTurns(t, keyIssue, e.mustRecord(t, keyIssue).Status.HarnessSessionID), body),
		"nothing is delivered while the lock is held")
	unlock()
	require.NoError(t, cmd.Wait(), stderr.String())
	id := e.mustRecord(t, keyIssue).Status.HarnessSessionID
	e.waitTurn(t, keyIssue, id, body, waitShort, "the pass after the lock never delivered the comment")
}

// opened reports whether process pid has path open (Linux /proc).
func opened(pid int, path string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// TestRestartSaysHowManyAgentsItAdopted: a restart finds its agents still
// running and says so, once, with their sessions; a start with none says
// nothing.
func TestRestartSaysHowManyAgentsItAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "before the restart "+uuid.NewString())
	assert.Empty(t, e.eventsNamed(t, journal.ServeAdopted, desired.Key{}), "a first start adopts nothing")
	e.stop(t)
	require.True(t, e.hasSession(t, keyIssue), "the agent outlives its daemon")
	e.start(t)
	adopted := e.waitEvent(t, journal.ServeAdopted, desired.Key{}, 1, waitShort)
	require.Len(t, adopted, 1)
	assert.Equal(t, "1", adopted[0].Attrs[journal.KeyAdopted])
	assert.Equal(t, r.Status.Session, adopted[0].Attrs[journal.KeySession])
}
