package e2e

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// tmux runs a tmux command on the env's server and returns its stdout.
func (e *env) tmux(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", e.socket}, args...)...).Output()
	return string(out), err
}

// paneTarget is the exact tmux target of k's pane.
func paneTarget(k desired.Key) string { return "=" + desired.SessionName(k) + ":" }

// sessions returns the names of the tmux sessions now on the env's server;
// none when no server runs.
func (e *env) sessions(t *testing.T) []string {
	t.Helper()
	out, err := e.tmux(t, "list-sessions", "-F", "#{session_name}")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

// hasSession reports whether k's tmux session exists.
func (e *env) hasSession(t *testing.T, k desired.Key) bool {
	t.Helper()
	return slices.Contains(e.sessions(t), desired.SessionName(k))
}

// itemPanes returns how many sessions the server has for k and how many
// live panes they hold.
func (e *env) itemPanes(t *testing.T, k desired.Key) (sessions, live int) {
	t.Helper()
	name := desired.SessionName(k)
	for _, s := range e.sessions(t) {
		if s == name {
			sessions++
		}
	}
	out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_dead}")
	require.NoError(t, err)
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == name+" 0" {
			live++
		}
	}
	return sessions, live
}

// paneField returns the tmux format expanded for k's pane; "" when there is
// no such pane.
func (e *env) paneField(t *testing.T, k desired.Key, format string) string {
	t.Helper()
	out, err := e.tmux(t, "list-panes", "-t", paneTarget(k), "-F", format)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// livePaneField is paneField for a live pane; "" when the pane is dead.
func (e *env) livePaneField(t *testing.T, k desired.Key, format string) string {
	t.Helper()
	dead, v, _ := strings.Cut(e.paneField(t, k, "#{pane_dead} "+format), " ")
	if dead != "0" {
		return ""
	}
	return v
}

// panePID returns the pid of the process in k's live pane (the harness
// itself: tmux starts it without a shell); 0 when there is none.
func (e *env) panePID(t *testing.T, k desired.Key) int {
	t.Helper()
	v := e.livePaneField(t, k, "#{pane_pid}")
	if v == "" {
		return 0
	}
	pid, err := strconv.Atoi(v)
	require.NoError(t, err)
	return pid
}

// paneCommand is k's pane_current_command; "" without a live pane.
func (e *env) paneCommand(t *testing.T, k desired.Key) string {
	t.Helper()
	return e.livePaneField(t, k, "#{pane_current_command}")
}

// paneStartCommand returns #{pane_start_command} of k's pane; "" when there
// is no such pane.
func (e *env) paneStartCommand(t *testing.T, k desired.Key) string {
	t.Helper()
	return e.paneField(t, k, "#{pane_start_command}")
}

// paneState returns "#{pane_dead}:#{pane_dead_status}" of k's pane; "" when
// there is none.
func (e *env) paneState(t *testing.T, k desired.Key) string {
	t.Helper()
	return e.paneField(t, k, "#{pane_dead}:#{pane_dead_status}")
}

// sendKeys sends tmux key names to k's pane, as an operator typing in it.
func (e *env) sendKeys(t *testing.T, k desired.Key, keys ...string) {
	t.Helper()
	_, err := e.tmux(t, append([]string{"send-keys", "-t", paneTarget(k)}, keys...)...)
	require.NoError(t, err)
}

// exitCleanly presses Ctrl-C twice in k's pane: the CLI exits 0.
func (e *env) exitCleanly(t *testing.T, k desired.Key) {
	t.Helper()
	e.sendKeys(t, k, "C-c", "C-c")
}

// killPane sends SIGKILL to the harness in k's pane, which must be running.
func (e *env) killPane(t *testing.T, k desired.Key) {
	t.Helper()
	pid := e.panePID(t, k)
	require.NotZero(t, pid, "no live pane for %s", k)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// killServer kills the env's tmux server, waits until the processes that
// ran in its panes are gone, so that none still writes into the test's
// temp dir when it is removed (the real CLI saves files as it exits on
// SIGHUP), and removes its socket and serve's lock (tmuxtest.KillServer).
func (e *env) killServer(testing.TB) {
	tmuxtest.KillServer(e.socket)
}
