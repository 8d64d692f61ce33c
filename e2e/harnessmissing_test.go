package e2e

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestMissingHarnessIsNamedAndHeals: a route's harness command that is not
// there (a typo, a PATH systemd does not give) blocks its items at once
// with harness_missing and the path: no pane, no start, no failure counted
// and no conversation retired, the event waiting; serve runs on, since
// another route's harness is there. Once the command appears, the next
// pass starts the agent with the event.
func TestMissingHarnessIsNamedAndHeals(t *testing.T) {
	t.Parallel()
	cmd := filepath.Join(t.TempDir(), "bin", "claude")
	e := newEnv(t, envOpts{Harness: cmd, IntervalSeconds: 1})
	e.config["harnesses"].(map[string]any)["spare"] = map[string]any{"adapter": "claude-code", "command": fakeClaudeBin, "env": e.harnessEnv}
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["octo-org/spare"] = map[string]any{
		"harness": "spare", "workdir": filepath.Join(e.workRoot, "spare", "{{.Number}}")}
	e.writeConfig(t)
	e.start(t)

	body := "a comment while the harness is missing " + uuid.NewString()
	d := sendComment(t, e, body)
	e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Reason == "harness_missing" }, waitLong, "never blocked with harness_missing")
	missing := e.waitEvent(t, journal.HarnessMissing, keyIssue, 1, waitShort)
	assert.Contains(t, missing[0].Attrs["detail"], cmd, "the journal names the command")
	assert.Contains(t, e.mustRun(t, "get", keyIssue.String()), "harness_missing err=", "get names it")
	assert.Contains(t, e.mustRun(t, "describe", keyIssue.String()), cmd, "describe gives the command whole")
	e.settle(t)
	r := e.mustRecord(t, keyIssue)
	assert.False(t, e.hasSession(t, keyIssue), "no pane")
	assert.Empty(t, e.argvLog(t), "nothing started")
	assert.Zero(t, r.Status.Failures, "a missing harness is no crash")
	assert.Empty(t, r.Status.RetiredSessionIDs, "no conversation retired")
	assert.Len(t, r.Pending, 1, "the event waits")
	assert.Len(t, e.eventsNamed(t, journal.HarnessMissing, keyIssue), 1, "journaled once, not each pass")

	// The command appears: the next pass starts the agent with the event.
	require.NoError(t, os.MkdirAll(filepath.Dir(cmd), 0o755))
	copyExecutable(t, fakeClaudeBin, cmd)
	waitDelivered(t, e, d, waitLong)
	running := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	e.waitTurn(t, keyIssue, running.Status.HarnessSessionID, body, waitShort, "the waiting comment never reached the transcript")
	assert.Len(t, e.argvLog(t), 1)
}

// TestServeRefusesWhenNoRouteCanRun: with no route's harness command
// there, serve could run no agent: it refuses to start, naming the
// command.
func TestServeRefusesWhenNoRouteCanRun(t *testing.T) {
	t.Parallel()
	cmd := filepath.Join(t.TempDir(), "claude")
	e := newEnv(t, envOpts{Harness: cmd})
	_, errOut, code := e.run(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no route can run an agent")
	assert.Contains(t, errOut, cmd)
}

// copyExecutable copies the file src to dst, mode 0755, written whole
// before it is put in place (a half-written binary is never found).
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	tmp := dst + ".part"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	require.NoError(t, os.Rename(tmp, dst))
}

// TestHarnessExitingAtOnceIsNamed: a harness command that is there but
// exits at once (/bin/false; a binary the sandbox does not show) needs
// attention after maxFastFailures tries, with harness_exited_at_once, its
// exit status and its command in get and describe; every try pins the
// same conversation id, which is never retired, and the event waits.
func TestHarnessExitingAtOnceIsNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Harness: "/bin/false", Policy: map[string]any{"backoffInitialSeconds": 1, "backoffMaxSeconds": 1}})
	e.start(t)
	sendComment(t, e, "a comment for a harness that exits at once "+uuid.NewString())
	first := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.HarnessSessionID != "" }, waitLong, "never spawned").Status.HarnessSessionID
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "harness_exited_at_once", r.Status.Reason)
	assert.Equal(t, 3, r.Status.Failures, "maxFastFailures tries, not the restart budget")
	assert.Empty(t, r.Status.RetiredSessionIDs, "no conversation retired")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue), "no conversation replaced")
	assert.Len(t, r.Pending, 1, "the event waits")
	assert.Equal(t, first, r.Status.HarnessSessionID, "every try pins the one id")
	assert.Contains(t, e.mustRun(t, "get", keyIssue.String()), "harness_exited_at_once exit_status=1 command=/bin/false")
	assert.Contains(t, e.mustRun(t, "describe", keyIssue.String()), "command=/bin/false")
}
