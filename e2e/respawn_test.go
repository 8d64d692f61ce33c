package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// The respawn tests kill, crash and exit agents under a running daemon and
// check where the item ends up: its record, the journal, the argv and time
// of every harness start, and the transcripts.

// TestRespawnResumeFailure: a resume that dies before it is confirmed falls
// back to a fresh conversation carrying the same event, which is delivered
// exactly once. The fake fails every resume like a missing conversation
// (FAKECLAUDE_RESUME_FAIL), although the transcript is there.
func TestRespawnResumeFailure(t *testing.T) {
	tests := []struct {
		name       string
		harnessEnv map[string]string
		// slow: the resume outlives the probe window, so the item must sit
		// in Spawning, unconfirmed, past its probe deadline.
		slow bool
	}{
		{
			name:       "resume_dies_in_probe_falls_back_to_fresh",
			harnessEnv: map[string]string{"FAKECLAUDE_RESUME_FAIL": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "100ms"},
		},
		{
			name:       "slow_resume_failure_is_caught",
			harnessEnv: map[string]string{"FAKECLAUDE_RESUME_FAIL": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "2s"},
			slow:       true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// restartPolicy Never: the crash below waits for the comment,
			// so the resume carries it.
			e := newEnv(t, envOpts{HarnessEnv: tt.harnessEnv, Policy: map[string]any{"resumeProbeSeconds": 1, "restartPolicy": "Never"}})
			old := e.bootRunning(t)
			e.killPane(t, keyIssue)
			e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)

			marker, delivery := e.comment(t)
			starts := e.waitStarts(t, 2, waitShort)
			flag, id := starts[1].mode()
			require.Equal(t, "--resume", flag, "argv %q", starts[1].Argv)
			require.Equal(t, old, id)
			if tt.slow {
				e.waitRecord(t, keyIssue, func(r desired.Record) bool {
					st := r.Status
					return st.Phase == desired.PhaseSpawning && st.SpawnMode == desired.SpawnResume &&
						time.Now().After(st.ProbeDeadline.Add(300*time.Millisecond)) && e.paneState(t, keyIssue) == "0:"
				}, waitShort, "the unconfirmed resume should stay Spawning past its probe deadline")
			}

			r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
				return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID != old
			}, waitShort, "no fresh conversation after the failed resume")
			fresh := r.Status.HarnessSessionID
			assert.Regexp(t, uuidPattern, fresh)
			assert.Equal(t, desired.SpawnFresh, r.Status.SpawnMode)
			assert.Empty(t, r.Pending, "the comment is delivered")

			failed := e.eventsNamed(t, journal.SessionResumeFailed, keyIssue)
			if assert.Len(t, failed, 1) {
				assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
				assert.Equal(t, old, failed[0].Attrs["attempted_session_id"])
				assert.Equal(t, "claude-code", failed[0].Attrs["harness"])
			}
			assert.Empty(t, e.eventsNamed(t, journal.SessionCrashLoop, keyIssue), "a failed resume is not a crash")

			starts = e.starts(t)
			if assert.Len(t, starts, 3, "fresh, resume, fresh fallback") {
				flag, id := starts[2].mode()
				assert.Equal(t, "--session-id", flag)
				assert.Equal(t, fresh, id)
				assert.Contains(t, starts[2].Argv[len(starts[2].Argv)-1], marker, "the fallback boots with the same event")
			}

			e.waitFor(t, func() bool { return countContaining(e.userTurns(t, keyIssue, fresh), marker) > 0 }, waitShort,
				"the comment never reached the new conversation")
			e.settle(t)
			assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, fresh), marker), "delivered once in the new conversation")
			assert.Zero(t, countContaining(e.userTurns(t, keyIssue, old), marker), "the failed resume wrote nothing")
			assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, delivery, 1), 1)
		})
	}
}

// TestRespawnThreeFastFailuresDegrade: an agent that dies 300 ms after every
// start is resumed until its third fast failure; then its conversation id
// is retired and never resumed again, and the next spawn is fresh.
func TestRespawnThreeFastFailuresDegrade(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_CRASH_AFTER": "300ms"},
		Policy:     map[string]any{"maxFastFailures": 3, "backoffInitialSeconds": 1, "backoffMaxSeconds": 1},
	})
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	// fresh A, resume A, resume A (third fast failure: A retired), fresh B,
	// resume B.
	starts := e.waitStarts(t, 5, waitLong)
	flag, retired := starts[0].mode()
	require.Equal(t, "--session-id", flag)
	for i, want := range []string{"--resume", "--resume", "--session-id", "--resume"} {
		flag, id := starts[i+1].mode()
		assert.Equal(t, want, flag, "start %d: %q", i+1, starts[i+1].Argv)
		if i < 2 {
			assert.Equal(t, retired, id, "start %d resumes the first conversation", i+1)
		} else {
			assert.NotEqual(t, retired, id, "start %d", i+1)
		}
	}
	next := starts[3]
	_, fresh := next.mode()
	assert.Regexp(t, uuidPattern, fresh)
	for i, s := range starts[3:] {
		flag, id := s.mode()
		assert.False(t, flag == "--resume" && id == retired, "start %d resumes the retired id: %q", i+3, s.Argv)
	}

	loops := e.eventsNamed(t, journal.SessionCrashLoop, keyIssue)
	if assert.NotEmpty(t, loops) {
		assert.Equal(t, retired, loops[0].Attrs["retired_session_id"])
		assert.Equal(t, "fast_failures", loops[0].Attrs["reason"])
		assert.True(t, loops[0].Time.Before(next.Time), "the id is retired before the fresh spawn")
	}
	failed := e.eventsNamed(t, journal.SessionResumeFailed, keyIssue)
	if assert.Len(t, failed, 1) {
		assert.Equal(t, "crash_loop", failed[0].Attrs["reason"])
		assert.Equal(t, retired, failed[0].Attrs["attempted_session_id"])
	}
	r := e.mustRecord(t, keyIssue)
	assert.Contains(t, r.Status.RetiredSessionIDs, retired)
}

// TestRespawnBackoffGrows: consecutive failures wait longer and longer
// before the respawn, and past the restart budget the item needs attention
// until a new event earns it one more attempt.
func TestRespawnBackoffGrows(t *testing.T) {
	// Not parallel: the waits are compared with each other.
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_CRASH_AFTER": "300ms"},
		// maxFastFailures out of reach: only backoff and budget act.
		Policy: map[string]any{"restartBudget": 3, "backoffInitialSeconds": 1, "backoffMaxSeconds": 4, "maxFastFailures": 10},
	})
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, 4, r.Status.Failures)
	// The phase is written with the exit, the event with the give-up that
	// follows it in the same pass.
	loops := e.waitEvent(t, journal.SessionCrashLoop, keyIssue, 1, waitShort)
	if assert.Len(t, loops, 1) {
		assert.Equal(t, "restart_budget_exhausted", loops[0].Attrs["reason"])
	}

	// Four runs. Each restart waits the backoff its exit chose (delay:
	// 0, 1 s, 2 s), from the death, which comes 300 ms after the run's
	// start at the earliest: no start comes sooner than that after the
	// one before. How much later it comes is the machine's load (a
	// process start, tmux's whole-second death time), which no bound
	// here assumes.
	starts := e.starts(t)
	exits := e.eventsNamed(t, journal.SessionExited, keyIssue)
	require.Len(t, starts, 4)
	require.Len(t, exits, 4)
	for i, delay := range []time.Duration{0, time.Second, 2 * time.Second} {
		assert.Equal(t, delay.String(), exits[i].Attrs["delay"], "exit %d: %v", i, exits[i].Attrs)
		assert.GreaterOrEqual(t, starts[i+1].Time.Sub(starts[i].Time), 300*time.Millisecond+delay, "start %d waited its backoff", i+1)
	}
	assert.NotContains(t, exits[3].Attrs, "delay", "past the budget no restart is planned")

	// NeedsAttention holds: no start without a new event.
	e.settle(t)
	assert.Len(t, e.starts(t), 4)
	r, _ = e.record(t, keyIssue)
	assert.Equal(t, desired.PhaseNeedsAttention, r.Status.Phase)

	e.comment(t)
	e.waitStarts(t, 5, waitShort)
	// The extra attempt fails too, and the budget stops it again.
	e.waitEvent(t, journal.SessionCrashLoop, keyIssue, 2, waitShort)
	e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitShort)
	assert.Len(t, e.starts(t), 5)
}

// TestRespawnCleanExitNotSelfHealed: under restartPolicy OnFailure an agent
// that exits 0 stays down until the next event, which resumes it.
func TestRespawnCleanExitNotSelfHealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	e.exitCleanly(t, keyIssue)

	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	if assert.NotNil(t, r.Status.LastExitStatus) {
		assert.Zero(t, *r.Status.LastExitStatus)
	}
	// The status is written before its journal row: wait for the row.
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	if assert.Len(t, exits, 1) {
		assert.Equal(t, "true", exits[0].Attrs["clean"])
		assert.Equal(t, "0", exits[0].Attrs["exit_status"])
	}
	e.settle(t)
	assert.Len(t, e.starts(t), 1, "a clean exit is not respawned")
	r, _ = e.record(t, keyIssue)
	assert.Equal(t, desired.PhaseExited, r.Status.Phase)

	marker, _ := e.comment(t)
	starts := e.waitStarts(t, 2, waitShort)
	flag, resumed := starts[1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, id, resumed)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	e.waitTurn(t, keyIssue, id, marker, waitShort, "the comment never reached the resumed conversation")
}

// TestRespawnSIGHUPTurnsOptOutOn: turning resumeOnRespawn off in the config
// and sending SIGHUP makes the next respawn start a fresh conversation,
// silently.
func TestRespawnSIGHUPTurnsOptOutOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	old := e.bootRunning(t)

	e.policy()["resumeOnRespawn"] = false
	e.writeConfig(t)
	e.reload(t)
	// SIGHUP reloads an unchanged file too, so this reload is the signal's,
	// not the file watch's.
	e.reload(t)

	e.killPane(t, keyIssue)
	starts := e.waitStarts(t, 2, waitShort)
	flag, fresh := starts[1].mode()
	assert.Equal(t, "--session-id", flag, "argv %q", starts[1].Argv)
	assert.NotEqual(t, old, fresh)
	e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID == fresh
	}, waitShort, "the fresh respawn never ran")
	// The status is written before its journal row: wait for the row.
	respawned := e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "opting out is silent")
	if assert.Len(t, respawned, 1) {
		assert.Equal(t, "false", respawned[0].Attrs["resumed"])
		assert.Equal(t, fresh, respawned[0].Attrs["harness_session_id"])
	}
}

// TestRespawnDaemonKilledMidRespawnRecovers: the daemon is killed -9 while
// a resume carrying a comment is still in its probe window, and its agent
// lives on or is killed too; a new daemon converges on one running agent in
// the same conversation.
func TestRespawnDaemonKilledMidRespawnRecovers(t *testing.T) {
	tests := []struct {
		name string
		// killHarness kills the resumed agent while no daemon runs.
		killHarness bool
		wantStarts  int
	}{
		{name: "harness_lives", wantStarts: 2},
		{name: "harness_killed_too", killHarness: true, wantStarts: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{})
			id := e.bootRunning(t)
			e.exitCleanly(t, keyIssue)
			e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)

			// A long probe window keeps the resume in Spawning while the
			// daemon dies.
			e.policy()["resumeProbeSeconds"] = 3
			e.writeConfig(t)
			e.reload(t)

			marker, delivery := e.comment(t)
			e.waitRecord(t, keyIssue, func(r desired.Record) bool {
				st := r.Status
				return st.Phase == desired.PhaseSpawning && st.SpawnMode == desired.SpawnResume && st.PaneID != "" && len(e.starts(t)) == 2
			}, waitShort, "the resume never started")
			e.kill9(t)
			r, _ := e.record(t, keyIssue)
			require.Equal(t, desired.PhaseSpawning, r.Status.Phase, "the daemon died after the probe window")
			if tt.killHarness {
				e.waitTurn(t, keyIssue, id, marker, waitShort, "the resume never took the comment")
				e.killPane(t, keyIssue)
			}

			e.start(t)
			e.waitStarts(t, tt.wantStarts, waitShort)
			r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
			assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
			assert.Equal(t, desired.SpawnResume, r.Status.SpawnMode)
			e.settle(t)
			r, _ = e.record(t, keyIssue)
			assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
			assert.Empty(t, r.Pending)
			assert.Len(t, e.starts(t), tt.wantStarts)
			sessions, live := e.itemPanes(t, keyIssue)
			assert.Equal(t, 1, sessions, "one tmux session for the item")
			assert.Equal(t, 1, live, "one live pane for the item")
			// The killed agent had taken the comment before its spawn was
			// marked Running: the respawn must not send it again.
			assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), marker), "the comment is in the conversation once")
			assert.Len(t, waitDeliveries(t, e, journal.DispatchDelivered, delivery, 1), 1)
		})
	}
}

// TestRespawnCrashDetectedFast: with a 30 s resync interval, only the
// pane-died hook can explain a respawn within seconds of a kill -9.
func TestRespawnCrashDetectedFast(t *testing.T) {
	// Not parallel: the latency is reported.
	e := newEnv(t, envOpts{IntervalSeconds: 30})
	id := e.bootRunning(t)

	killed := time.Now()
	e.killPane(t, keyIssue)
	starts := e.waitStarts(t, 2, 10*time.Second)
	t.Logf("kill -9 to respawned harness start: %v", starts[1].Time.Sub(killed))
	flag, resumed := starts[1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, id, resumed)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
}

// detachScript stands in for an agent that, on its first run, lets go of
// its terminal and keeps running: tmux then shows its pane dead with no exit
// status (and fires no pane-died hook) until the process ends with status
// 3. Later runs just wait, and end with the tmux server. While it runs, the
// pane's foreground process is the shell that runs it: sleep runs as its
// child. A shell can never be a harness's processName, so the test runs it
// under a copy of /bin/sh named agent-sh (the interpreter on the first line).
const detachScript = `#!INTERPRETER
# Started as "agent --session-id|--resume <id> … -- <prompt>": write the
# transcript line Claude Code writes for its prompt, so each spawn is
# confirmed (its boot prompt is in the conversation).
dir="$CLAUDE_CONFIG_DIR/projects/$(pwd -P | sed 's/[^A-Za-z0-9]/-/g')"
mkdir -p "$dir"
for prompt; do :; done
text=$(printf '%s' "$prompt" | sed 's/\\/\\\\/g; s/"/\\"/g; s/	/\\t/g' | awk '{printf "%s%s", (NR>1 ? "\\n" : ""), $0}')
printf '{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"%s"}}\n' "$text" >>"$dir/$2.jsonl"
[ -e "$0.ran" ] && { sleep 600; exit 0; }
: >"$0.ran"
trap '' HUP
sleep 1.5
exec </dev/null >/dev/null 2>&1
sleep 4
exit 3
`

// TestRespawnUnknownExitStatusIsNotClean: a dead pane whose exit status tmux
// cannot tell yet is neither a clean exit nor a crash; loopd waits for the
// status and then treats the exit by it.
func TestRespawnUnknownExitStatusIsNotClean(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sh, err := os.ReadFile("/bin/sh")
	require.NoError(t, err)
	interp := filepath.Join(dir, "agent-sh")
	require.NoError(t, os.WriteFile(interp, sh, 0o755))
	script := filepath.Join(dir, "agent")
	require.NoError(t, os.WriteFile(script, []byte(strings.Replace(detachScript, "INTERPRETER", interp, 1)), 0o755))
	e := newEnv(t, envOpts{Harness: script, ProcessName: "agent-sh"})
	// Without a sandbox: in one, the pane's process is bwrap, which holds
	// the terminal until the sandbox ends, so a harness inside cannot let
	// go of it; the state under test is tmux's.
	e.config["sandbox"].(map[string]any)["mode"] = "none"
	e.writeConfig(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)

	e.waitFor(t, func() bool { return e.paneState(t, keyIssue) == "1:" }, waitShort, "the pane never showed dead without a status")
	e.settle(t)
	r, _ := e.record(t, keyIssue)
	exits := e.eventsNamed(t, journal.SessionExited, keyIssue)
	require.Equal(t, "1:", e.paneState(t, keyIssue), "the status became known too soon to tell")
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase, "an unknown status is not an exit yet")
	assert.Empty(t, exits)

	exits = e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	assert.Equal(t, "3", exits[0].Attrs["exit_status"])
	assert.Equal(t, "false", exits[0].Attrs["clean"])
	// A failure, so restartPolicy OnFailure respawns it.
	e.waitEvent(t, journal.SessionRespawned, keyIssue, 1, waitShort)
}

// TestRespawnWorkspaceDeleted: an item whose workdir was deleted is not
// respawned (not elsewhere, and the dir is not recreated); its comment stays
// pending until the dir is back, and then the conversation resumes with it.
func TestRespawnWorkspaceDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	dir := e.workdir(keyIssue)
	require.NoError(t, os.RemoveAll(dir))
	e.killPane(t, keyIssue)
	missing := e.waitEvent(t, journal.WorkspaceMissing, keyIssue, 1, waitShort)
	assert.Equal(t, dir, missing[0].Attrs["detail"])

	marker, delivery := e.comment(t)
	e.settle(t)
	r, _ := e.record(t, keyIssue)
	if assert.Len(t, r.Pending, 1) {
		assert.Equal(t, delivery, r.Pending[0].ID)
	}
	assert.Len(t, e.starts(t), 1, "no spawn without the workdir")
	assert.NoDirExists(t, dir, "a respawn never recreates the workdir")
	assert.Len(t, e.eventsNamed(t, journal.WorkspaceMissing, keyIssue), 1, "reported once")
	assert.Zero(t, countContaining(e.userTurns(t, keyIssue, id), marker))

	require.NoError(t, os.MkdirAll(dir, 0o755))
	e.waitTurn(t, keyIssue, id, marker, waitShort, "the comment never reached the resumed conversation")
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	assert.Empty(t, r.Pending)
	starts := e.starts(t)
	flag, resumed := starts[len(starts)-1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, id, resumed)
	assert.True(t, slices.ContainsFunc(starts[len(starts)-1].Argv, func(a string) bool { return strings.Contains(a, marker) }),
		"the resume boots with the comment")
}
