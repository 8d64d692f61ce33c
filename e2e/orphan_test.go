package e2e

import (
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestAgentOfARemovedStoreIsReplaced: the state dir removed under live
// agents and serve started again on an empty store. The agent still in the
// item's session runs a conversation the new record knows nothing of: the
// next event is not pasted into it (a paste there would count delivered
// unchecked), but boots a fresh conversation, which holds it.
func TestAgentOfARemovedStoreIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	old := startWithComment(t, e, "first comment "+uuid.NewString())
	e.stop(t)
	require.True(t, e.hasSession(t, keyIssue), "the agent outlives its daemon")
	require.NoError(t, os.RemoveAll(e.stateDir))
	e.start(t)

	body := "after the store was lost " + uuid.NewString()
	sendComment(t, e, body)
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID != ""
	}, waitLong, "the item never ran again")
	assert.NotEqual(t, old.Status.HarnessSessionID, r.Status.HarnessSessionID, "a new conversation")
	e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, body, waitLong, "the event never reached the new conversation")
	for _, ev := range e.eventsNamed(t, journal.DispatchDelivered, keyIssue) {
		assert.NotEqual(t, "false", ev.Attrs["verified"], "nothing counted delivered unchecked: %v", ev.Attrs)
	}
}
