package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// tmuxRun runs one tmux command on socket and returns its output.
func tmuxRun(t *testing.T, socket string, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}

// spawn starts harness (its argv[0] a program on PATH) in f's sandbox in a
// new session name of a private tmux server, under the pane commands of
// prefix, and returns the server's socket.
func (f fixture) spawn(t *testing.T, name string, prefix []string, harness ...string) string {
	t.Helper()
	socket := tmuxtest.Socket(t, "sandbox")
	program, err := f.host.Resolve(harness[0], os.Getenv("PATH"))
	require.NoError(t, err)
	f.spec.Program = program.Path
	argv, err := f.argv(harness)
	require.NoError(t, err)
	tmuxRun(t, socket, slices.Concat([]string{"new-session", "-d", "-s", name, "-x", "80", "-y", "24", "--"}, prefix, argv)...)
	return socket
}

// TestForeground: in a tmux pane, the harness is the terminal's foreground
// process, so tmux names the pane after it (pane_current_command), not
// after bwrap; a shell it leaves behind shows as the shell. Killing the
// session ends every process of the sandbox.
func TestForeground(t *testing.T) {
	socket := newFixture(t).spawn(t, "fg", nil, "sleep", "600")
	var current string
	require.Eventually(t, func() bool {
		current = tmuxRun(t, socket, "display-message", "-p", "-t", "=fg:", "#{pane_current_command}")
		return current == "sleep"
	}, 10*time.Second, 20*time.Millisecond, "pane_current_command %q", current)
	pane, err := strconv.Atoi(tmuxRun(t, socket, "display-message", "-p", "-t", "=fg:", "#{pane_pid}"))
	require.NoError(t, err)
	tree := proc.Descendants([]int{pane})
	require.Len(t, tree, 3, "bwrap, its init in the sandbox, the harness")
	init, ok := Init(pane)
	require.True(t, ok)
	assert.Equal(t, tree[1], init)
	var procs []proc.Process
	for _, pid := range tree {
		p, err := proc.Lookup(pid)
		require.NoError(t, err)
		procs = append(procs, p)
	}

	tmuxRun(t, socket, "kill-session", "-t", "=fg")
	assert.Eventually(t, func() bool {
		for _, p := range procs {
			if p.Running() {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "a process of the sandbox outlived its session")
	_, ok = Init(pane)
	assert.False(t, ok)
}

// TestForegroundShellLeftBehind: a wrapper that runs the CLI as a job of
// its own and then an interactive shell shows the CLI while it runs and
// the shell after, as without a sandbox (the zombie-shell guard).
func TestForegroundShellLeftBehind(t *testing.T) {
	// Under env, as under loopd's launcher: while no process leads the
	// terminal's foreground group (between a job's end and its shell
	// taking the terminal back), tmux names the pane after its command,
	// env here; bwrap shows only when bwrap leads the foreground group.
	socket := newFixture(t).spawn(t, "z", []string{"env"}, "sh", "-c", "set -m; sleep 2; exec sh -i")
	var seen []string
	require.Eventually(t, func() bool {
		name := tmuxRun(t, socket, "display-message", "-p", "-t", "=z:", "#{pane_current_command}")
		if len(seen) == 0 || seen[len(seen)-1] != name {
			seen = append(seen, name)
		}
		return name == "sh" && slices.Contains(seen, "sleep")
	}, 15*time.Second, 20*time.Millisecond, "seen %v", seen)
	// Until Exec takes the foreground, bwrap leads it, as the launcher
	// did before; from then on, never.
	i := slices.Index(seen, "sleep")
	assert.NotContains(t, seen[i:], "bwrap", "never bwrap once the harness ran: %v", seen)
	assert.Equal(t, "sh", seen[len(seen)-1], "the shell the CLI left: %v", seen)
}
