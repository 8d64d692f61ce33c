package e2e

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// sharedSocket makes b use a's tmux socket (the default "loopd" makes
// this easy to do by accident; issue 6, item 5). The server is a's: b's
// cleanup, which runs first (the later one), leaves it alone, since a's
// daemon, still running then, would start it again and b's removal of the
// socket file would leave that one running, out of everyone's reach.
func sharedSocket(t *testing.T, a, b *env) {
	t.Helper()
	b.socket, b.sharesServer = a.socket, true
	b.config["tmux"] = map[string]any{"socket": a.socket}
	b.writeConfig(t)
}

// Two daemons with different state dirs on one tmux server: the second
// refuses to start and names the first, before it makes its state dir;
// so does reconcile --once of the second, while the first runs and after
// it stopped (its mark stays on the server for as long as the server
// lives).
func TestSecondLoopdOnOneTmuxServerIsRefused(t *testing.T) {
	t.Parallel()
	a := newEnv(t, envOpts{})
	b := newEnv(t, envOpts{})
	sharedSocket(t, a, b)
	a.start(t)
	require.Equal(t, http.StatusAccepted, a.replay(t, commentFixture, "", withComment("hello from A")))
	r := a.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	pid := a.panePID(t, keyIssue)
	require.NotZero(t, pid)

	_, errOut, code := b.run(t, "serve")
	assert.Equal(t, 1, code, "the second serve must not run")
	assert.Contains(t, errOut, a.stateDir, "the refusal names the other instance's state dir")
	assert.NoDirExists(t, b.stateDir, "a refused serve makes nothing, not even its state dir")
	_, errOut, code = b.run(t, "reconcile", "--once")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, a.stateDir)
	assert.NoDirExists(t, b.stateDir, "nor does a refused reconcile --once")

	// With a state dir of its own, B's refusals are journaled there.
	require.NoError(t, os.MkdirAll(b.stateDir, 0o700))
	a.stop(t)
	_, errOut, code = b.run(t, "serve")
	assert.Equal(t, 1, code, "the server still carries A's mark")
	assert.Contains(t, errOut, a.stateDir)
	_, errOut, code = b.run(t, "reconcile", "--once")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, a.stateDir)
	assert.Len(t, b.eventsNamed(t, journal.ServeRefused, desired.Key{}), 2, "each refusal once B has a state dir is in its journal")

	assert.Equal(t, pid, a.panePID(t, keyIssue), "A's agent was never touched")
	after := a.mustRecord(t, keyIssue)
	assert.Equal(t, r.Status.HarnessSessionID, after.Status.HarnessSessionID)
	assert.Empty(t, b.records(t), "B ingested and planned nothing")

	// A comes back and finds its server and its agent.
	a.start(t)
	a.settle(t)
	assert.Equal(t, pid, a.panePID(t, keyIssue))
	assert.Equal(t, desired.PhaseRunning, a.mustRecord(t, keyIssue).Status.Phase)
}

// A serve that fails to start because its port is taken leaves nothing of
// its start behind: no tmux server of its socket runs (looked for by
// process, not by socket file) and no lock file is left beside the
// socket (issue 27, item 5).
func TestServeOnATakenPortLeavesNoServerOrLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	e.listen = taken.Addr().String()
	e.ghWebhook()["listen"] = e.listen
	e.writeConfig(t)

	_, errOut, code := e.run(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "address already in use: another process (another loopd serve?) listens there; stop it, or set webhooks.ghWebhook.listen")
	assert.Empty(t, tmuxtest.ServerPIDs(e.socket), "the server serve started is stopped")
	path, err := tmux.SocketPath(e.socket)
	require.NoError(t, err)
	assert.NoFileExists(t, path+".loopd-lock", "and its lock file removed")

	// A server with an agent on it is never stopped so: its agent and its
	// lock stay.
	e.listen = freeAddr(t)
	e.ghWebhook()["listen"] = e.listen
	e.writeConfig(t)
	e.start(t)
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", withComment("hello")))
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	pid := e.panePID(t, keyIssue)
	e.stop(t)
	require.FileExists(t, path+".loopd-lock", "the server runs on: its lock stays")
	e.listen = taken.Addr().String()
	e.ghWebhook()["listen"] = e.listen
	e.writeConfig(t)
	_, errOut, code = e.run(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "address already in use")
	assert.NotEmpty(t, tmuxtest.ServerPIDs(e.socket), "the server with an agent runs on")
	assert.Equal(t, pid, e.panePID(t, keyIssue), "and its agent")
	assert.FileExists(t, path+".loopd-lock")
}

// A session that carries no mark of this loopd (made by hand, or by
// another loopd) under the name of one of its items is never adopted,
// pasted into or killed, by serve or by reconcile --once; the item blocks
// with session_foreign, journaled once, until that session goes.
func TestForeignSessionIsNeverPastedIntoOrKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	session := desired.SessionName(keyIssue)
	work := e.workdir(keyIssue)
	require.NoError(t, os.MkdirAll(work, 0o755))
	other := uuid.NewString()
	// Made by a careful hand: a server started with the test's whole
	// environment would be refused outright (ErrServerEnvironment).
	hand := exec.Command("env", "-i", "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"),
		"tmux", "-L", e.socket, "-f", "/dev/null", "new-session", "-d", "-s", session, "-c", work, "-x", "200", "-y", "50",
		"-e", "CLAUDE_CONFIG_DIR="+e.claudeDir, "--", fakeClaudeBin, "--session-id", other, "by hand")
	made, err := hand.CombinedOutput()
	require.NoError(t, err, string(made))
	e.waitFor(t, func() bool { return len(e.userTurns(t, keyIssue, other)) == 1 }, waitShort, "the hand-made agent never started")
	pid := e.panePID(t, keyIssue)
	require.NotZero(t, pid)

	e.start(t)
	body := "for the agent of loopd " + uuid.NewString()
	sendComment(t, e, body)
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Reason == "session_foreign" }, waitShort,
		"never blocked on the foreign session")
	e.settle(t)
	assert.NotEqual(t, desired.PhaseRunning, r.Status.Phase, "the foreign session was not adopted")
	assert.Len(t, r.Pending, 1, "the comment waits")
	assert.Len(t, e.eventsNamed(t, journal.SessionForeign, keyIssue), 1, "journaled once")
	assert.Contains(t, e.mustRun(t, "get"), "session_foreign", "loopd get shows why")

	// A hold would kill the item's session: not this one.
	e.mustRun(t, "hold", keyIssue.String())
	e.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	e.stop(t)
	e.mustRun(t, "release", keyIssue.String())
	out, errOut, code := e.run(t, "reconcile", "--once")
	assert.Zero(t, code, "%s%s", out, errOut)
	assert.Contains(t, out, "session_foreign")

	assert.Equal(t, pid, e.panePID(t, keyIssue), "the foreign agent lives on")
	turns := e.userTurns(t, keyIssue, other)
	assert.Equal(t, 1, len(turns), "nothing was pasted into the foreign agent: %q", turns)
	assert.Zero(t, countContaining(turns, body))
	for _, argv := range e.argvLog(t) {
		assert.NotContains(t, strings.Join(argv, " "), body, "no spawn of loopd's own ran")
	}

	// Once the foreign session is gone, the item gets its own agent, which
	// carries this loopd's mark, and the comment.
	_, err = e.tmux(t, "kill-session", "-t", "="+session)
	require.NoError(t, err)
	e.start(t)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, body, waitShort, "the comment never reached loopd's own agent")
	mark, err := e.tmux(t, "show-options", "-v", "-t", paneTarget(keyIssue), "@loopd-owner")
	require.NoError(t, err)
	assert.Equal(t, tmux.NewOwner(e.stateDir).ID, strings.TrimSpace(mark))
	owner, err := e.tmux(t, "show-options", "-sv", "@loopd-server-dir")
	require.NoError(t, err)
	assert.Equal(t, e.stateDir, strings.TrimSpace(owner))
}
