package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// withIssueState sets the payload's issue.state and issue.updated_at: the
// snapshot of the item every comment payload carries.
func withIssueState(state, updated string) func(map[string]any) {
	return func(m map[string]any) {
		is := m["issue"].(map[string]any)
		is["state"], is["updated_at"] = state, updated
	}
}

// closeIssue delivers issues.closed for issue 1, stamped updated.
func closeIssue(t *testing.T, e *env, updated string) {
	t.Helper()
	e.deliver(t, "issues.opened.1.json", all(func(m map[string]any) { m["action"] = "closed" }, withIssueState("closed", updated)))
}

// TestLostReopenHealsFromNextComment: the issue is closed, comments made
// while it is closed wait, its reopen never reaches loopd (GitHub does not
// retry), and `loopd get` flags the item; the next comment, which shows the
// issue open, reopens it, and the agent resumes its conversation with
// every waiting comment.
func TestLostReopenHealsFromNextComment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	closeIssue(t, e, "2024-01-01T00:00:00Z")
	e.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitShort, "the closed issue's session was not stopped")

	waiting := "while closed " + uuid.NewString()
	e.deliver(t, commentFixture, all(withComment(waiting), withIssueState("closed", "2024-01-02T00:00:00Z")))
	e.settle(t)
	r := e.mustRecord(t, keyIssue)
	require.Equal(t, desired.PhaseStopped, r.Status.Phase)
	require.Len(t, r.Pending, 1)
	var line string
	for l := range strings.Lines(e.mustRun(t, "get", "--stale-pending", "0s")) {
		if strings.HasPrefix(l, keyIssue.String()+" ") {
			line = l
		}
	}
	assert.Contains(t, line, "stale_pending=1 since=", "loopd get flags the waiting event")

	// The reopen at 2024-01-03 is lost.
	healing := "after the lost reopen " + uuid.NewString()
	e.deliver(t, commentFixture, all(withComment(healing), withIssueState("open", "2024-01-04T00:00:00Z")))

	e.waitFor(t, func() bool {
		turns := e.userTurns(t, keyIssue, id)
		return countContaining(turns, waiting) == 1 && countContaining(turns, healing) == 1
	}, waitLong, "the waiting comments never reached the resumed conversation")
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.False(t, r.Spec.Closed)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	starts := e.starts(t)
	flag, resumed := starts[len(starts)-1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, id, resumed)
	accepted := e.eventsNamed(t, journal.DeliveryAccepted, keyIssue)
	assert.Equal(t, "true", accepted[len(accepted)-1].Attrs["state_changed"])
	assert.Equal(t, "false", accepted[len(accepted)-1].Attrs["closed"])
}

// TestLostCloseHealsFromNextComment: the issue's close never reaches loopd;
// the next comment shows it closed, so the agent is stopped and the comment
// is not pasted into it.
func TestLostCloseHealsFromNextComment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	starts := len(e.starts(t))
	sent := len(e.eventsNamed(t, journal.DispatchSent, keyIssue))

	// The close at 2024-01-01 is lost.
	body := "on the closed issue " + uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "",
		all(withComment(body), withIssueState("closed", "2024-01-02T00:00:00Z"))))

	r := e.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	assert.True(t, r.Spec.Closed)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitShort, "the agent of the closed issue was not stopped")
	e.settle(t)
	assert.Zero(t, countContaining(e.userTurns(t, keyIssue, id), body), "the comment was pasted into a closed issue's agent")
	assert.Len(t, e.eventsNamed(t, journal.DispatchSent, keyIssue), sent, "nothing pasted")
	assert.Len(t, e.starts(t), starts, "no respawn")
	r, _ = e.record(t, keyIssue)
	require.Len(t, r.Pending, 1, "the comment waits for a reopen")
}
