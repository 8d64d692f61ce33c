// Package fakeclitest is the test support of the fake harness CLIs in
// testdata: it builds a fake (Main) and runs it in panes of a private tmux
// server (Tmux), the way loopd runs a harness.
package fakeclitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// Main is the whole TestMain of a fake's tests: it builds the fake in pkg
// (a package path go build takes) as name in a new temporary directory,
// sets *bin to it, runs the tests, removes the directory and exits with
// their status. It runs all of that in tmuxtest.Main, which removes the
// directory on an interrupt too and fails the run when a tmux server or
// socket is left.
func Main(m *testing.M, name, pkg string, bin *string) {
	os.Exit(tmuxtest.Main(func() int {
		dir, err := os.MkdirTemp("", name+"-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		*bin = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", *bin, pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
		return m.Run()
	}))
}

// Tmux is a private tmux server (-L, no config file) for one test, with
// HOME a temporary directory, a UTF-8 locale and an xterm TERM.
type Tmux struct {
	Socket string
	// Env is the server's environment, which its panes inherit.
	Env []string
}

// NewTmux starts a Tmux on a socket of tmuxtest.Socket labelled name, with
// an idle session that keeps it up and remain-on-exit on (a pane that
// exits stays, dead, with its status). The server is killed and its socket
// removed at cleanup. It skips the test when tmux is not installed.
func NewTmux(t *testing.T, name string) *Tmux {
	t.Helper()
	x := &Tmux{Socket: tmuxtest.Socket(t, name),
		Env: []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"}}
	x.Must(t, "new-session", "-d", "-s", "_idle", "--", "sleep", "600", ";", "set", "-g", "remain-on-exit", "on")
	return x
}

// Run runs one tmux command on the server and returns its combined output.
func (x *Tmux) Run(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", x.Socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = x.Env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Must is Run that fails the test on an error.
func (x *Tmux) Must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := x.Run(args...)
	require.NoError(t, err, out)
	return out
}

// Spawn starts argv in a new 100x30 session name in dir, with env added
// to the pane's environment.
func (x *Tmux) Spawn(t *testing.T, name, dir string, env map[string]string, argv []string) {
	t.Helper()
	args := []string{"new-session", "-d", "-s", name, "-x", "100", "-y", "30", "-c", dir}
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	x.Must(t, append(append(args, "--"), argv...)...)
}

// Capture returns the visible screen of session name's pane.
func (x *Tmux) Capture(name string) string {
	out, _ := x.Run("capture-pane", "-p", "-t", "="+name+":")
	return out
}

// History returns the pane's whole history, its screen included.
func (x *Tmux) History(name string) string {
	out, _ := x.Run("capture-pane", "-p", "-S", "-", "-t", "="+name+":")
	return out
}

// WaitDead waits up to wait, looking every tick, until the pane of
// session name has exited, and returns its exit status.
func (x *Tmux) WaitDead(t *testing.T, name string, wait, tick time.Duration) string {
	t.Helper()
	var status string
	require.Eventually(t, func() bool {
		_, _ = x.Run("run-shell", "true")
		out, _ := x.Run("display-message", "-p", "-t", "="+name+":", "#{pane_dead}:#{pane_dead_status}")
		dead, s, _ := strings.Cut(strings.TrimSpace(out), ":")
		status = s
		return dead == "1" && s != ""
	}, wait, tick, x.History(name))
	return status
}

// Paste delivers text to the pane as a bracketed paste, the way loopd
// does (tmux load-buffer, paste-buffer -p -r), without pressing Enter.
func (x *Tmux) Paste(t *testing.T, name, text string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "paste")
	require.NoError(t, os.WriteFile(file, []byte(text), 0o600))
	x.Must(t, "load-buffer", "-b", name, file, ";", "paste-buffer", "-p", "-d", "-r", "-b", name, "-t", "="+name+":")
}
