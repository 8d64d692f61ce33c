package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// newRealEnv is newEnv with the real CLI as the harness. The real CLI
// starts in about a second and answers "Not logged in" offline, so the
// waits are the long ones.
func newRealEnv(t *testing.T, restartPolicy string) *env {
	t.Helper()
	return newEnv(t, envOpts{
		Harness: realClaude(t),
		Policy:  map[string]any{"restartPolicy": restartPolicy, "resumeProbeSeconds": 2},
	})
}

// startReal starts the daemon, sends a first comment and waits until the
// real CLI runs a fresh conversation whose transcript holds the comment.
func startReal(t *testing.T, e *env) desired.Record {
	t.Helper()
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID
	require.Equal(t, desired.SpawnFresh, r.Status.SpawnMode)
	assert.Contains(t, e.paneStartCommand(t, keyIssue), "--session-id "+id)
	assert.NotContains(t, e.paneStartCommand(t, keyIssue), "--resume")
	return r
}

// waitRespawn waits until k runs again after a respawn and returns the
// record and the journal's newest session.respawned row.
func waitRespawn(t *testing.T, e *env, k desired.Key, n int) (desired.Record, journal.Event) {
	t.Helper()
	evs := e.waitEvent(t, journal.SessionRespawned, k, n, waitLong)
	return e.waitPhase(t, k, desired.PhaseRunning, waitLong), evs[len(evs)-1]
}

func TestRealClaudePasteAndResumeAfterKill(t *testing.T) {
	t.Parallel()
	e := newRealEnv(t, "Never")
	r := startReal(t, e)
	id := r.Status.HarnessSessionID
	path := e.transcriptPath(t, keyIssue, id)

	body := "line one " + uuid.NewString() + "\nline\ttwo  \n\nline four 漢字 😀"
	delivery := sendComment(t, e, body)
	// The CLI stores a pasted tab as four spaces, and everything else as sent.
	e.waitFor(t, func() bool {
		return countContaining(e.userTurns(t, keyIssue, id), strings.ReplaceAll(body, "\t", "    ")) == 1
	},
		waitLong, "the pasted comment never reached the transcript with its newlines")
	e.waitEvent(t, journal.DispatchDelivered, keyIssue, 2, waitLong)
	assert.Equal(t, "true", waitDelivered(t, e, delivery, waitLong).Attrs["verified"], "the digest matches what the real CLI stored")
	assert.Len(t, e.userTurns(t, keyIssue, id), 2, "one more user turn")

	e.killPane(t, keyIssue)
	exited := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitLong)
	assert.Equal(t, "false", exited[0].Attrs["clean"])
	e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong)

	after := "after the kill " + uuid.NewString()
	sendComment(t, e, after)
	rr, ev := waitRespawn(t, e, keyIssue, 1)
	assert.Equal(t, "true", ev.Attrs["resumed"], "%v", ev.Attrs)
	assert.Equal(t, id, rr.Status.HarnessSessionID)
	assert.Equal(t, desired.SpawnResume, rr.Status.SpawnMode)
	assert.Contains(t, e.paneStartCommand(t, keyIssue), "--resume "+id)
	assert.NotContains(t, e.paneStartCommand(t, keyIssue), "--session-id")
	e.waitTurn(t, keyIssue, id, after, waitLong, "the comment never reached the same transcript")
	assert.Equal(t, path, e.transcriptPath(t, keyIssue, rr.Status.HarnessSessionID))
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}

func TestRealClaudeSelfHealsWithNudge(t *testing.T) {
	t.Parallel()
	e := newRealEnv(t, "OnFailure")
	r := startReal(t, e)
	id := r.Status.HarnessSessionID

	e.killPane(t, keyIssue)
	rr, ev := waitRespawn(t, e, keyIssue, 1)
	assert.Equal(t, "true", ev.Attrs["resumed"], "%v", ev.Attrs)
	assert.Equal(t, id, rr.Status.HarnessSessionID)
	assert.Contains(t, e.paneStartCommand(t, keyIssue), "--resume "+id)
	nudge := desired.NudgePrompt(keyIssue, desired.NudgeExited)
	e.waitTurn(t, keyIssue, id, nudge, waitLong, "the re-orientation nudge never reached the same transcript")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}

func TestRealClaudeDeletedTranscriptStartsFresh(t *testing.T) {
	t.Parallel()
	e := newRealEnv(t, "Never")
	r := startReal(t, e)
	oldID := r.Status.HarnessSessionID

	e.killPane(t, keyIssue)
	e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong)
	require.NoError(t, os.Remove(e.transcriptPath(t, keyIssue, oldID)))
	e.dropStoredTranscript(t, keyIssue, oldID) // else it is restored from there

	body := "after the transcript was lost " + uuid.NewString()
	sendComment(t, e, body)
	failed := e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitLong)
	assert.Equal(t, "transcript_missing", failed[0].Attrs["reason"], "%v", failed[0].Attrs)
	assert.Equal(t, oldID, failed[0].Attrs["attempted_session_id"])

	rr := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID != oldID
	}, waitLong, "no fresh session with a new id")
	newID := rr.Status.HarnessSessionID
	assert.Regexp(t, uuidPattern, newID)
	assert.Equal(t, desired.SpawnFresh, rr.Status.SpawnMode)
	psc := e.paneStartCommand(t, keyIssue)
	assert.Contains(t, psc, "--session-id "+newID)
	assert.False(t, strings.Contains(psc, "--resume"), "fresh spawn: %s", psc)
	e.waitTurn(t, keyIssue, newID, body, waitLong, "the comment never reached the new transcript")
	assert.NoFileExists(t, e.transcriptPath(t, keyIssue, oldID), "the lost transcript is not recreated")
}

func TestRealClaudeUntrustedWorkdirReleaseDoesNotResend(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{
		Harness: realClaude(t),
		Policy:  map[string]any{"restartPolicy": "Never", "resumeProbeSeconds": 2, "confirmTimeoutSeconds": 5},
	})
	// Onboarded by hand, and loopd told not to provision: the workdir is
	// not trusted, so the TUI stops at its workspace trust dialog.
	e.harness()["provision"] = false
	e.writeConfig(t)
	claudeJSON, err := json.Marshal(map[string]any{"hasCompletedOnboarding": true})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.claudeDir, ".claude.json"), claudeJSON, 0o600))

	body := "behind the trust dialog " + uuid.NewString()
	delivery, id := stuckAtTrustDialog(t, e, body)
	pressEnter(t, e)
	e.waitTurn(t, keyIssue, id, body, waitLong, "the boot prompt never reached the real transcript after Enter")

	e.mustRun(t, "release", keyIssue.String())
	ev := waitDelivered(t, e, delivery, waitLong)
	assert.Equal(t, "transcript", ev.Attrs["via"], "%v", ev.Attrs)
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	e.settle(t)
	e.settle(t)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), body), "one turn for one delivery")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, delivery), "never pasted")
}

// TestRealClaudeClearThenKillResumesTheNewConversation: the scenario the
// issue tried by hand. /clear in the real CLI reports the new id B through
// the SessionStart hook (source=clear); the agent is killed before any pass
// followed it; the next pass resumes B, not the conversation A it cleared.
func TestRealClaudeClearThenKillResumesTheNewConversation(t *testing.T) {
	t.Parallel()
	e := newRealEnv(t, "OnFailure")
	a := startReal(t, e).Status.HarnessSessionID
	e.stop(t) // no pass may follow the report before the death

	typeLine := func(text string) {
		e.sendKeys(t, keyIssue, "-l", text)
		time.Sleep(300 * time.Millisecond) // the TUI's menu settles before Enter
		e.sendKeys(t, keyIssue, "Enter")
	}
	typeLine("/clear")
	b := e.waitClearReport(t, keyIssue, waitLong)
	require.NotEqual(t, a, b)
	note := "a note after the clear " + uuid.NewString()
	typeLine(note)
	e.waitFor(t, func() bool { return countContaining(e.userTurns(t, keyIssue, b), note) == 1 }, waitLong, "the new conversation has no turn")
	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool { return e.panePID(t, keyIssue) == 0 }, waitShort, "the agent did not die")

	plan := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, plan, "resume_id="+b, "the dry run resumes the conversation the agent was in:\n%s", plan)
	e.mustRun(t, "reconcile", "--once")
	e.waitFor(t, func() bool { return strings.Contains(e.paneStartCommand(t, keyIssue), "--resume "+b) }, waitLong,
		"the resume does not take the conversation after /clear: %q", e.paneStartCommand(t, keyIssue))
	assert.NotContains(t, e.paneStartCommand(t, keyIssue), a)
}
