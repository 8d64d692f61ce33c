package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestCrashOutputOfEveryCrashIsKept: an agent that prints a line and dies,
// twice in a row, leaves what it printed in each session.exited row, so
// that loopd events shows both crashes although the second spawn replaced
// the first one's pane.
func TestCrashOutputOfEveryCrashIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_CRASH_AFTER": "300ms"},
		Policy:     map[string]any{"backoffInitialSeconds": 1, "backoffMaxSeconds": 1, "maxFastFailures": 10, "restartBudget": 10},
	})
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 2, waitLong)
	for i, ex := range exits[:2] {
		assert.Contains(t, ex.Attrs["output"], "fakeclaude: simulated crash after 300ms", "crash %d", i+1)
		assert.Equal(t, "1", ex.Attrs["exit_status"], "crash %d", i+1)
	}
	out := e.mustRun(t, "events", keyIssue.String())
	var shown []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " "+string(journal.SessionExited)+" ") && strings.Contains(line, "output=") && strings.Contains(line, "fakeclaude: simulated crash after 300ms") {
			shown = append(shown, line)
		}
	}
	assert.GreaterOrEqual(t, len(shown), 2, "loopd events shows each crash's output:\n%s", out)
}

// TestKilledAgentIsReportedBySignal: kill -9 of the agent is reported as
// signal=9 with no exit status (tmux 3.3a shows pane_dead_status empty
// and pane_dead_signal 9), in session.exited, in the status and in loopd
// get's reason, and counts as a failure, not a clean exit.
func TestKilledAgentIsReportedBySignal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Policy: map[string]any{"restartPolicy": "Never"}})
	e.bootRunning(t)
	e.killPane(t, keyIssue)

	r := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	assert.Nil(t, r.Status.LastExitStatus)
	assert.Equal(t, 9, r.Status.LastExitSignal)
	exits := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	require.Len(t, exits, 1)
	assert.Equal(t, "9", exits[0].Attrs["signal"])
	assert.NotContains(t, exits[0].Attrs, "exit_status")
	assert.Equal(t, "false", exits[0].Attrs["clean"])
	assert.Equal(t, "1", exits[0].Attrs["failures"], "a killed agent counts as a failure")

	get := e.mustRun(t, "get")
	assert.Contains(t, get, "signal=9", get)
	assert.NotContains(t, get, "exit_status", get)
}
