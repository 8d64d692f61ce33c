package e2e

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestHarnessGoneFromTheConfigBlocksOnlyItsItem: a restart with the
// harness an item's agent runs under taken out of the config (renamed,
// its route moved to another) leaves that agent as it is, counting
// nothing, and says why in loopd get and the journal; other items, and
// the dry run, go on. Put back, the harness takes its agent over again.
func TestHarnessGoneFromTheConfigBlocksOnlyItsItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.bootRunning(t)
	pid := e.panePID(t, keyIssue)
	e.stop(t)

	hs := e.config["harnesses"].(map[string]any)
	old := hs["claude-code"]
	renamed := map[string]any{"adapter": "claude-code"}
	maps.Copy(renamed, old.(map[string]any))
	hs["renamed"] = renamed
	delete(hs, "claude-code")
	e.route()["harness"] = "renamed"
	e.writeConfig(t)
	e.start(t)

	blocked := e.waitEvent(t, journal.DispatchFailed, keyIssue, 1, waitShort)
	assert.Equal(t, "harness_unknown", blocked[0].Attrs["reason"])
	assert.Equal(t, "claude-code", blocked[0].Attrs["detail"])
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", all(withNumber(3), withComment("another item"))))
	other := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}
	e.waitPhase(t, other, desired.PhaseRunning, waitLong)
	e.settle(t)

	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase, "the agent is left as it is")
	assert.Equal(t, 0, r.Status.Failures)
	assert.Equal(t, pid, e.panePID(t, keyIssue), "not killed")
	assert.Empty(t, e.eventsNamed(t, journal.SessionExited, keyIssue), "no exit recorded")
	out, _, code := e.run(t, "get", "--no-headers")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "harness_unknown harness=claude-code (not in the config: add it back to harnesses)")
	assert.NotContains(t, out, "next_attempt")
	out, errOut, code := e.run(t, "reconcile", "--once", "--dry-run")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Equal(t, "block work_item="+keyIssue.String()+" reason=harness_unknown detail=claude-code\n", out)

	e.stop(t)
	hs["claude-code"] = old
	e.writeConfig(t)
	e.start(t)
	adopted := e.waitEvent(t, journal.SessionAdopted, keyIssue, 1, waitShort)
	require.Len(t, adopted, 1)
	e.settle(t)
	r = e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
	assert.Equal(t, "adopted", r.Status.Reason)
	assert.Equal(t, pid, e.panePID(t, keyIssue), "the same agent")
	out, _, _ = e.run(t, "get", "--no-headers")
	assert.False(t, strings.Contains(out, "harness_unknown"), "%s", out)
}
