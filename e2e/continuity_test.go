package e2e

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
)

// The continuity tests (issue 21) drive the daemon, real tmux and the fake
// Claude CLI through the edges where one fault used to lose a comment or
// throw a good conversation away, and check that every event ends in
// exactly one turn of the right conversation.

// exitedAfterBoot boots issue 1 on its opening event, lets its agent exit
// cleanly (under OnFailure nothing respawns it), and returns its
// conversation: the next event resumes it.
func exitedAfterBoot(t *testing.T, e *env) string {
	t.Helper()
	old := e.bootRunning(t)
	e.exitCleanly(t, keyIssue)
	e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	return old
}

// commentAfterAnExit starts a daemon with opts (the fake's knobs), boots
// issue 1, lets its agent exit and comments on it: the comment's spawn
// resumes old.
func commentAfterAnExit(t *testing.T, opts envOpts) (e *env, old, marker, delivery string) {
	t.Helper()
	e = newEnv(t, opts)
	old = exitedAfterBoot(t, e)
	marker, delivery = e.comment(t)
	return e, old, marker, delivery
}

// modes is the session flag and id of every start of the fake CLI, in
// order ("--session-id <id>", "--resume <id>").
func modes(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	for _, s := range e.starts(t) {
		flag, id := s.mode()
		out = append(out, flag+" "+id)
	}
	return out
}

// TestResumeBootPromptDeliveredOnlyOnceInTheConversation (case 1): a
// comment that becomes the boot prompt of a resume is delivered only when
// the conversation shows it, never on the SessionStart report. The CLI
// writes it 4 s after its start (FAKECLAUDE_BOOT_DELAY; the real one took
// 1.2–7.8 s), and is killed by SIGKILL at 2 s, after its report and its
// probe: the comment stays pending, and the next resume of the same
// conversation delivers it, once.
func TestResumeBootPromptDeliveredOnlyOnceInTheConversation(t *testing.T) {
	t.Parallel()
	once := t.TempDir() // the sandbox shows it (Binds)
	e, old, marker, delivery := commentAfterAnExit(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_BOOT_DELAY": "4s", "FAKECLAUDE_RESUME_KILL_AFTER": "2s", "FAKECLAUDE_ONCE_DIR": once},
		Policy:     map[string]any{"resumeProbeSeconds": 1},
		Binds:      []string{once},
	})
	waitDelivered(t, e, delivery, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	e.settle(t)

	assert.Equal(t, []string{"--session-id " + old, "--resume " + old, "--resume " + old}, modes(t, e), "the same conversation, resumed again")
	assert.Equal(t, old, r.Status.HarnessSessionID)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, old), marker), "the comment once in the conversation")
	assert.Len(t, deliveriesOf(t, e, journal.DispatchDelivered, delivery), 1)
	failed := deliveriesOf(t, e, journal.DispatchFailed, delivery)
	if assert.Len(t, failed, 1, "the killed resume's boot prompt failed, and stayed pending") {
		// The CLI's SIGKILL inside its sandbox reaches the pane as
		// bwrap's exit status 128+9 ("Sandbox"), which is read as the
		// signal it is (sandbox.ExitOf).
		assert.Equal(t, "9", failed[0].Attrs["signal"])
		assert.NotContains(t, failed[0].Attrs, "exit_status")
	}
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "no conversation abandoned")
}

// TestResumeKilledInItsProbeIsResumedAgain (case 2): a resumed CLI killed
// by a signal 0.5 s after its start, inside the probe window, with its
// transcript intact, is a crash of the same conversation: it is resumed
// again, never replaced by a fresh one.
func TestResumeKilledInItsProbeIsResumedAgain(t *testing.T) {
	t.Parallel()
	once := t.TempDir() // the sandbox shows it (Binds)
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_RESUME_KILL_AFTER": "500ms", "FAKECLAUDE_ONCE_DIR": once},
		Policy:     map[string]any{"resumeProbeSeconds": 2},
		Binds:      []string{once},
	})
	old := e.bootRunning(t)
	e.killPane(t, keyIssue)
	e.waitStarts(t, 3, waitLong)
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnMode == desired.SpawnResume
	}, waitLong, "the conversation was never resumed again")
	e.settle(t)
	assert.Equal(t, old, r.Status.HarnessSessionID)
	assert.Equal(t, []string{"--session-id " + old, "--resume " + old, "--resume " + old}, modes(t, e))
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "a signal is no word of the harness")
	assert.Empty(t, r.Status.RetiredSessionIDs)
}

// TestLiveCLIRefusingTheResumeIsReplacedAtOnce (case 5): a CLI that stays
// up printing that it cannot resume the conversation (gemini-cli#14941
// did) is read on its screen as a refusal: the item goes fresh with the
// event at once, not after confirmTimeoutSeconds, and the event is
// delivered once in the new conversation.
func TestLiveCLIRefusingTheResumeIsReplacedAtOnce(t *testing.T) {
	t.Parallel()
	once := t.TempDir() // the sandbox shows it (Binds)
	e, old, marker, delivery := commentAfterAnExit(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_REFUSE_ALIVE": "1", "FAKECLAUDE_ONCE_DIR": once},
		Policy:     map[string]any{"resumeProbeSeconds": 1, "confirmTimeoutSeconds": 600},
		Binds:      []string{once},
	})
	waitDelivered(t, e, delivery, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	require.NotEqual(t, old, r.Status.HarnessSessionID)
	failed := e.eventsNamed(t, journal.SessionResumeFailed, keyIssue)
	if assert.Len(t, failed, 1) {
		assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
		assert.Equal(t, old, failed[0].Attrs["attempted_session_id"])
	}
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, r.Status.HarnessSessionID), marker))
	assert.Zero(t, countContaining(e.userTurns(t, keyIssue, old), marker))
}

// TestBackgroundAgentHoldsTheItem (case 8): Claude Code's refusal to
// resume a conversation that runs as a background agent holds the item
// for a person (conversation_in_use) and never starts a second
// conversation; once released, the same conversation is resumed.
func TestBackgroundAgentHoldsTheItem(t *testing.T) {
	t.Parallel()
	once := t.TempDir() // the sandbox shows it (Binds)
	e, old, marker, delivery := commentAfterAnExit(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_BACKGROUND_AGENT": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "100ms", "FAKECLAUDE_ONCE_DIR": once},
		Policy:     map[string]any{"resumeProbeSeconds": 1},
		Binds:      []string{once},
	})
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "conversation_in_use", r.Status.Reason)
	assert.Len(t, r.Pending, 1, "the comment waits")
	e.settle(t)
	assert.Equal(t, []string{"--session-id " + old, "--resume " + old}, modes(t, e), "no fresh conversation beside the one in use")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))

	e.mustRun(t, "release", keyIssue.String())
	waitDelivered(t, e, delivery, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, old, r.Status.HarnessSessionID)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, old), marker))
}

// TestResumeSummaryChooserIsAvoidedByProvisioning (case 8): the
// resume-return chooser, which Claude Code shows on a resume of an old and
// long conversation, never shows under loopd's provisioning
// (resumeReturnDismissed); without provisioning, the item is shown
// blocked by it (resume_summary_chooser), with its event waiting.
func TestResumeSummaryChooserIsAvoidedByProvisioning(t *testing.T) {
	t.Parallel()
	for _, provision := range []bool{true, false} {
		t.Run(map[bool]string{true: "provisioned", false: "not_provisioned"}[provision], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_SCREEN": "resume_summary"}, Policy: map[string]any{"resumeProbeSeconds": 1}})
			if !provision {
				e.harness()["provision"] = false
				e.writeConfig(t)
				// What provisioning would have written, but for the key.
				require.NoError(t, os.MkdirAll(e.claudeDir, 0o700))
				require.NoError(t, os.WriteFile(e.claudeDir+"/.claude.json", []byte(`{"hasCompletedOnboarding": true}`), 0o600))
			}
			old := exitedAfterBoot(t, e)
			then := time.Now().Add(-3 * time.Hour)
			require.NoError(t, os.Chtimes(e.transcriptPath(t, keyIssue, old), then, then), "an old conversation")

			marker, delivery := e.comment(t)
			if provision {
				waitDelivered(t, e, delivery, waitLong)
				assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, old), marker))
				assert.Empty(t, e.mustRecord(t, keyIssue).Status.Blocked)
				return
			}
			r := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Blocked == harness.BlockResumeSummary }, waitLong,
				"the chooser is never shown as blocking the item")
			assert.Len(t, r.Pending, 1)
			assert.Zero(t, countContaining(e.userTurns(t, keyIssue, old), marker))
		})
	}
}

// TestBlockedSpawnFreesItsStartAndComesBackOnceAnswered (case 12): a
// spawn held by a trust dialog holds no start (maxStartsInFlight 1): a
// second item spawns meanwhile. Once past its confirm timeout it needs
// attention; the person who answers the dialog brings it back to Running
// by that alone, its comment delivered once.
func TestBlockedSpawnFreesItsStartAndComesBackOnceAnswered(t *testing.T) {
	t.Parallel()
	e := trustPromptEnv(t)
	e.config["capacity"] = map[string]any{"maxStartsInFlight": 1}
	e.writeConfig(t)
	body := "behind the dialog " + uuid.NewString()
	delivery, id := stuckAtTrustDialog(t, e, body)

	// The first item's dialog holds no start: a second item spawns.
	other := issueKey(2)
	e.deliver(t, "issues.opened.1.json", withNumber(2))
	e.waitRecord(t, other, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseSpawning || r.Status.Phase == desired.PhaseNeedsAttention
	},
		waitLong, "the second item waited behind the first one's dialog")

	pressEnter(t, e)
	ev := waitDelivered(t, e, delivery, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	assert.Equal(t, "true", ev.Attrs["verified"], "%v", ev.Attrs)
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), body), "one turn for one delivery")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, delivery), "never pasted: the CLI submitted its own")
	assert.Empty(t, e.mustRecord(t, keyIssue).Pending)
}

// TestOnlyHostKeepsItsAgentWhileTheStoreIsLocked (case 11): the store held
// locked (a backup, a sqlite3 shell) past the lease of the only host it
// can have (SQLite) stops none of its agents: the agent keeps running in
// the same process, no lease is journaled lost, and a comment sent after
// the lock is delivered to it.
func TestOnlyHostKeepsItsAgentWhileTheStoreIsLocked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.config["host"] = map[string]any{"leaseSeconds": 3}
	e.writeConfig(t)
	old := e.bootRunning(t)
	pid := e.panePID(t, keyIssue)

	release := holdStoreLock(t, e)
	time.Sleep(6 * time.Second) // twice the lease: the lease clock lapses
	assert.Equal(t, pid, e.panePID(t, keyIssue), "the agent runs on through the lock")
	release()

	marker, delivery := e.comment(t)
	waitDelivered(t, e, delivery, waitLong)
	e.settle(t)
	assert.Equal(t, pid, e.panePID(t, keyIssue), "never stopped, never respawned")
	assert.Len(t, e.starts(t), 1)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, old), marker))
	assert.Empty(t, e.eventsNamed(t, journal.LeaseLost, keyIssue))
}

// TestReplacedConversationIsNoticedOnce (case 10): a conversation the
// harness cannot resume is replaced, and the item's thread gets one
// notice that says why and what the new conversation was given.
func TestReplacedConversationIsNoticedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_RESUME_FAIL": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "100ms"},
		Policy: map[string]any{"resumeProbeSeconds": 1}})
	srv, _ := e.withGitHub(t)
	old := exitedAfterBoot(t, e)
	_, delivery := e.comment(t)
	waitDelivered(t, e, delivery, waitLong)
	e.waitFor(t, func() bool { return len(notices(srv)) > 0 }, waitLong, "no notice of the new conversation")
	e.settle(t)
	got := notices(srv)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Body, "is in a new conversation: the harness said it cannot resume the last one (`not_resumable`, conversation `"+old+"`)")
	assert.Contains(t, got[0].Body, "The new conversation was given event "+delivery)
	assert.Contains(t, got[0].Body, "earlier event(s) again")
}

// TestProcessRunnerKeepsItsConversationAcrossATimeout (case 4): a headless
// resume that runs past dispatchTimeoutSeconds, by a CLI that writes a
// resumed turn under a new id (anthropics/claude-code#4926), is stopped
// with its output still empty; its turn is found in the conversation its
// boot line went into, which the item follows: no resume_failed, no fresh
// conversation, the event delivered once.
func TestProcessRunnerKeepsItsConversationAcrossATimeout(t *testing.T) {
	t.Parallel()
	e := processEnv(t, 3, map[string]string{"FAKECLAUDE_HEADLESS_NEW_ID": "1", "FAKECLAUDE_REPLY_DELAY": "1h"})
	e.start(t)
	waitDelivered(t, e, sendComment(t, e, "the first event"), waitLong)
	first := e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong).Status.HarnessSessionID

	body := "past the timeout " + uuid.NewString()
	d := sendComment(t, e, body)
	waitDelivered(t, e, d, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong)
	moved := r.Status.HarnessSessionID
	require.NotEqual(t, first, moved, "the turn went into a new id")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "the conversation is kept")
	assert.Equal(t, []string{"--session-id " + first, "--resume " + first}, modes(t, e))
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, moved), body))
	followed := e.eventsNamed(t, journal.SessionFollowed, keyIssue)
	if assert.Len(t, followed, 1) {
		assert.Equal(t, moved, followed[0].Attrs["harness_session_id"])
	}
	timeouts := e.eventsNamed(t, journal.DispatchTimeout, keyIssue)
	assert.Len(t, timeouts, 2, "both runs ended at their timeout")

	// The next event resumes the conversation the item followed.
	waitDelivered(t, e, sendComment(t, e, "the third event"), waitLong)
	starts := e.starts(t)
	flag, id := starts[len(starts)-1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, moved, id)
}

// stormItems and stormKillsEach are the storm of
// TestStormOfKillsKeepsEveryConversation: 20 kill -9s in all.
const stormItems, stormKillsEach = 4, 5

// TestStormOfKillsKeepsEveryConversation (case 7): a storm of kill -9s
// under the default policy (maxChurnFailures 5, churnSeconds 300,
// maxFastFailures 3) resumes every agent on its own conversation each
// time: external kills implicate no conversation, so none is retired.
// Measured before: 4, 5 and 2 conversations retired in storms of 20, 30
// and 15 kills. The test logs the figure: same-id resumes out of kills.
func TestStormOfKillsKeepsEveryConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	ids := e.bootFleet(t, stormItems)
	resumed := 0
	for round := range stormKillsEach {
		// Each round kills every agent at once, then waits for them all.
		// The harness each item had, as recorded (in a sandbox, its
		// init, not the pane's bwrap): a new one is the respawn.
		killed := map[desired.Key]int{}
		for i := 1; i <= stormItems; i++ {
			k := issueKey(i)
			// A pid of 0 would be a kill of this test's own process group:
			// the pane must be live first.
			var pane int
			e.waitFor(t, func() bool { pane = e.panePID(t, k); return pane > 0 }, waitLong, "no live pane to kill for %s", k)
			killed[k] = e.mustRecord(t, k).Status.HarnessPID
			require.NoError(t, syscall.Kill(pane, syscall.SIGKILL), "kill %d of %s", round+1, k)
		}
		for k, pid := range killed {
			r := e.waitRecord(t, k, func(r desired.Record) bool {
				return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessPID != 0 && r.Status.HarnessPID != pid
			}, 2*waitLong, "never running again after the kill")
			if r.Status.HarnessSessionID == ids[k] && r.Status.SpawnMode == desired.SpawnResume {
				resumed++
			}
		}
	}
	t.Logf("storm: %d of %d kill -9s resumed on the same conversation", resumed, stormItems*stormKillsEach)
	assert.Equal(t, stormItems*stormKillsEach, resumed)
	assert.Empty(t, e.eventsNamed(t, journal.SessionCrashLoop, desired.Key{}), "no conversation retired")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, desired.Key{}))
}
