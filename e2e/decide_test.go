package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// openingBody is the body of issues.opened.1.json, the item's opening event.
const openingBody = "It looks like you accidently spelled 'commit' with two 't's."

// TestChurnRetiresAConversationThatKeepsDying is gascity's churn case: an
// agent that dies a while after each resume (here 2 s, past fastFailSeconds)
// is never a fast failure, yet maxChurnFailures such runs in a row retire
// its conversation, and the next spawn starts a new one.
func TestChurnRetiresAConversationThatKeepsDying(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_CRASH_AFTER": "2s"},
		Policy: map[string]any{"fastFailSeconds": 1, "maxFastFailures": 10, "maxChurnFailures": 3, "churnSeconds": 60,
			"resumeProbeSeconds": 1, "backoffInitialSeconds": 1, "backoffMaxSeconds": 1, "restartBudget": 20},
	})
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	// fresh A, resume A, resume A (third churn failure: A retired), fresh B.
	starts := e.waitStarts(t, 4, waitLong)
	flag, retired := starts[0].mode()
	require.Equal(t, "--session-id", flag)
	for i, want := range []string{"--resume", "--resume", "--session-id"} {
		flag, id := starts[i+1].mode()
		require.Equal(t, want, flag, "start %d: %q", i+1, starts[i+1].Argv)
		if want == "--resume" {
			assert.Equal(t, retired, id, "start %d resumes the first conversation", i+1)
		} else {
			assert.NotEqual(t, retired, id, "start %d is a new conversation", i+1)
		}
	}

	loops := e.waitEvent(t, journal.SessionCrashLoop, keyIssue, 1, waitShort)
	assert.Equal(t, retired, loops[0].Attrs["retired_session_id"])
	assert.Equal(t, "churn", loops[0].Attrs["reason"], "the journal says which rule retired it")
	assert.True(t, loops[0].Time.Before(starts[3].Time), "the id is retired before the fresh spawn")
	failed := e.eventsNamed(t, journal.SessionResumeFailed, keyIssue)
	require.NotEmpty(t, failed)
	assert.Equal(t, "crash_loop", failed[0].Attrs["reason"])
	assert.Equal(t, retired, failed[0].Attrs["attempted_session_id"])

	// The new conversation carries the work: its boot prompt replays the
	// opening event, framed as it was stored.
	boot := starts[3].Argv[len(starts[3].Argv)-1]
	assert.Contains(t, boot, "kept exiting")
	assert.Contains(t, boot, openingBody)
	assert.Contains(t, boot, "<<<github-data ")
}

// TestReleaseFreshStartsANewConversation: loopd release --fresh retires the
// conversation of a live agent and starts a new one that carries the item's
// events; a plain release of a running item changes nothing and adopts
// nothing.
func TestReleaseFreshStartsANewConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	first := e.bootRunning(t)

	// A plain release of a running item: the agent keeps running.
	e.mustRun(t, "release", keyIssue.String())
	e.waitEvent(t, journal.ItemReleased, keyIssue, 1, waitShort)
	e.settle(t)
	assert.Empty(t, e.eventsNamed(t, journal.SessionAdopted, keyIssue), "release on a running item adopts nothing")
	assert.Len(t, e.starts(t), 1, "nothing respawned")
	r, _ := e.record(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
	assert.Equal(t, first, r.Status.HarnessSessionID)

	out := e.mustRun(t, "release", "--fresh", keyIssue.String())
	assert.Contains(t, out, "new conversation")
	starts := e.waitStarts(t, 2, waitShort)
	flag, second := starts[1].mode()
	require.Equal(t, "--session-id", flag, "a new conversation: %q", starts[1].Argv)
	require.NotEqual(t, first, second)
	back := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, second, back.Status.HarnessSessionID)
	assert.Contains(t, back.Status.RetiredSessionIDs, first, "the old conversation is never resumed again")
	assert.Equal(t, []string{desired.SessionName(keyIssue)}, e.sessions(t), "the old agent was replaced, not doubled")

	released := e.eventsNamed(t, journal.ItemReleased, keyIssue)
	require.Len(t, released, 2)
	assert.Equal(t, "true", released[1].Attrs["fresh"])
	assert.Equal(t, first, released[1].Attrs["retired_session_id"])
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "a fresh start on purpose is not a failed resume")

	turns := e.userTurns(t, keyIssue, second)
	require.NotEmpty(t, turns)
	assert.Contains(t, turns[0], "loopd release --fresh")
	assert.Contains(t, turns[0], openingBody, "the new conversation is given the opening event")
}

// TestClearThenKillResumesTheNewConversation: /clear starts conversation B
// (the SessionStart hook reports it), and the agent is killed before any
// pass followed the report. The dry run and the pass both take B, never A.
func TestClearThenKillResumesTheNewConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	a := e.bootRunning(t)
	e.stop(t) // no pass may follow the report before the death

	type1 := func(text string) {
		e.sendKeys(t, keyIssue, "-l", text)
		e.sendKeys(t, keyIssue, "Enter")
	}
	type1("/clear")
	b := e.waitClearReport(t, keyIssue, waitShort)
	require.NotEqual(t, a, b)
	type1("a note after the clear")
	e.waitFor(t, func() bool { return len(e.userTurns(t, keyIssue, b)) == 1 }, waitShort, "the new conversation has no turn")
	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool { return e.panePID(t, keyIssue) == 0 }, waitShort, "the agent did not die")

	plan := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, plan, "follow_session work_item="+keyIssue.String())
	assert.Contains(t, plan, "resume_id="+b, "the dry run resumes the conversation the agent was in:\n%s", plan)
	assert.NotContains(t, plan, "resume_id="+a)

	e.mustRun(t, "reconcile", "--once")
	starts := e.waitStarts(t, 2, waitShort)
	require.Len(t, starts, 2)
	flag, id := starts[1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, b, id, "the resume takes the conversation after /clear, not the old one")
	r, _ := e.record(t, keyIssue)
	assert.Equal(t, b, r.Status.HarnessSessionID)
	followed := e.eventsNamed(t, journal.SessionFollowed, keyIssue)
	require.Len(t, followed, 1)
	assert.Equal(t, b, followed[0].Attrs["harness_session_id"])
	assert.False(t, strings.Contains(strings.Join(starts[1].Argv, " "), a), "the old id never reaches argv")
}
