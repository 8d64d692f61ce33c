package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestHarnessCommandChangedIsNoCrash: a restart with the harness's
// command changed (another name for the CLI, as a wrapper or an upgrade
// gives) finds the adopted agent running the old one. That is the
// operator's change, not the agent's crash: the exit says harness_changed,
// no failure is counted, and the agent is resumed on its conversation
// with the new command.
func TestHarnessCommandChangedIsNoCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	require.Equal(t, filepath.Base(fakeClaudeBin), e.paneCommand(t, keyIssue))
	e.stop(t)
	require.True(t, e.hasSession(t, keyIssue), "the agent outlives its daemon")

	next := e.fakeFile("claude-next")
	require.NoError(t, os.Symlink(fakeClaudeBin, next))
	e.harness()["command"] = next
	e.harnessCmd = next
	e.writeConfig(t)
	e.start(t)

	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	assert.Equal(t, "harness_changed", exits[0].Attrs["reason"])
	assert.Equal(t, filepath.Base(fakeClaudeBin), exits[0].Attrs["foreground"], "the journal names the old command")
	assert.Equal(t, "0", exits[0].Attrs["failures"])
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnedAt.After(exits[0].Time)
	}, waitLong, "never resumed with the new command")
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, 0, r.Status.Failures)
	assert.Equal(t, "claude-next", e.paneCommand(t, keyIssue))
}
