package e2e

import (
	"fmt"
	"net/http"
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

// zombieWrapper is gascity's "zombie" harness: it runs the CLI as a job of
// its own (set -m, so that the CLI is the pane's foreground process while
// it runs) and, when the CLI exits, leaves an interactive shell in the
// pane. The dead CLI's input box stays drawn above the shell's prompt.
const zombieWrapper = `#!/bin/sh
set -m
%q "$@"
exec sh -i
`

// newZombieEnv is an env whose harness is cli under zombieWrapper;
// processName, when not empty, is the harness's processName.
func newZombieEnv(t *testing.T, cli, processName string) *env {
	t.Helper()
	e := newEnv(t, envOpts{Policy: map[string]any{"resumeProbeSeconds": 2}})
	wrapper := filepath.Join(e.dir, "zombie-wrapper")
	require.NoError(t, os.WriteFile(wrapper, fmt.Appendf(nil, zombieWrapper, cli), 0o755))
	// The wrapper runs the CLI by its path, which the sandbox shows as
	// it shows any bind (an npm install's whole node_modules tree).
	cliDir := cli
	if i := strings.Index(cli, "/node_modules/"); i >= 0 {
		cliDir = cli[:i+len("/node_modules")]
	}
	sb := e.config["sandbox"].(map[string]any)
	sb["binds"] = append(sb["binds"].([]map[string]any), map[string]any{"path": cliDir})
	h := e.harness()
	h["command"] = wrapper
	if processName != "" {
		h["processName"] = processName
	}
	e.harnessCmd = wrapper
	e.writeConfig(t)
	return e
}

// runZombie boots the item, makes the CLI exit so that the wrapper's shell
// takes the pane, then posts a comment whose body would create a file if
// it ever reached the shell. The file must never appear: the item is
// recorded as a crash naming the shell, is healed by a respawn that kills
// the shell, and the comment reaches the conversation instead.
func runZombie(t *testing.T, e *env, cliName string, wait time.Duration) {
	id := e.bootRunning(t)
	require.Equal(t, cliName, e.paneCommand(t, keyIssue), "the CLI is the pane's foreground process while it runs")
	shellPID := e.panePID(t, keyIssue)

	// Ctrl-C twice exits the CLI (0); the wrapper execs an interactive shell.
	for range 2 {
		e.sendKeys(t, keyIssue, "C-c")
		time.Sleep(300 * time.Millisecond)
	}
	e.waitFor(t, func() bool { return e.paneCommand(t, keyIssue) == "sh" }, wait, "the wrapper's shell never took the pane")

	pwned := filepath.Join(e.dir, "pwned")
	body := "touch " + pwned + "\ntouch " + pwned + " # " + uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", withComment(body)))

	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, wait)
	assert.Equal(t, "foreground_not_harness", exits[0].Attrs["reason"])
	assert.Equal(t, "sh", exits[0].Attrs["foreground"], "the journal names the foreground process")
	assert.Equal(t, "false", exits[0].Attrs["clean"])
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnedAt.After(exits[0].Time)
	}, waitShort, "never healed by a respawn")
	assert.Equal(t, id, r.Status.HarnessSessionID, "the respawn resumed the conversation")
	assert.Equal(t, 1, r.Status.Failures, "the dead agent counts as a failure")
	assert.NotEqual(t, shellPID, e.panePID(t, keyIssue), "the shell's pane was replaced")
	e.waitTurn(t, keyIssue, id, body, wait, "the comment never reached the resumed conversation")
	e.settle(t)
	assert.NoFileExists(t, pwned, "the comment ran in the shell")
	for _, ev := range e.eventsNamed(t, journal.DispatchSent, keyIssue) {
		assert.NotEqual(t, "paste", ev.Attrs["via"], "nothing was pasted: the comment went with the respawn")
	}
}

// gascity's zombie test, with the fake CLI (issue 6, item 13).
func TestPasteNeverReachesAShellLeftByTheHarness(t *testing.T) {
	t.Parallel()
	runZombie(t, newZombieEnv(t, fakeClaudeBin, "fakeclaude"), "fakeclaude", waitShort)
}

// The same with the real Claude Code CLI under the wrapper: it shows as
// "claude", a name the claude-code adapter knows, so no processName.
func TestPasteNeverReachesAShellLeftByRealClaude(t *testing.T) {
	t.Parallel()
	runZombie(t, newZombieEnv(t, realClaude(t), ""), "claude", waitLong)
}
