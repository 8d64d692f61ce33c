package tmuxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/teardown"
	"github.com/loopd/loopd/internal/tmux"
)

func TestMain(m *testing.M) { os.Exit(Main(m.Run)) }

// helperEnv makes this binary a child of the tests below: it names the
// file the child reports "<socket> <pane pid> <server pid>" to, and
// helperMode says what the child does then: "wait" to be killed, "leave"
// to end without cleaning up, "unlinked" to delete its server's socket
// file and lock first (the server runs on, out of kill-server's reach,
// and no file is left to find it by), "foreign"
// to leave a server on a socket of none of teardown's names.
const (
	helperEnv  = "TMUXTEST_HELPER_REPORT"
	helperMode = "TMUXTEST_HELPER_MODE"
)

// TestHelperServer is the child: a test that starts a tmux server with a
// fake agent and a lock file beside its socket, as loopd serve keeps one.
func TestHelperServer(t *testing.T) {
	report := os.Getenv(helperEnv)
	if report == "" {
		t.Skip("only as the child of the sweep tests")
	}
	mode := os.Getenv(helperMode)
	socket := SocketName("helper")
	if mode == "foreign" {
		socket = "tmuxtest-foreign-" + strconv.Itoa(os.Getpid())
	}
	if mode == "wait" {
		t.Cleanup(func() { KillServer(socket) }) // a SIGKILL skips it
	}
	out, err := exec.Command("tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "agent", "-P", "-F", "#{pane_pid} #{pid}", "sleep", "600").Output()
	require.NoError(t, err)
	path, err := tmux.SocketPath(socket)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".loopd-lock", []byte("lock"), 0o600))
	if mode == "unlinked" {
		require.NoError(t, os.Remove(path))
		require.NoError(t, os.Remove(path+".loopd-lock"))
	}
	require.NoError(t, os.WriteFile(report, []byte(socket+" "+strings.TrimSpace(string(out))), 0o600))
	if mode == "wait" {
		time.Sleep(time.Minute)
	}
}

// helper is what TestHelperServer reported: its server's socket, the pid
// of its fake agent and that of the server.
type helper struct {
	socket        string
	agent, server int
}

// runHelper starts TestHelperServer in a child test binary in mode and
// returns the command and what the child reported, once it did.
func runHelper(t *testing.T, mode string) (*exec.Cmd, helper) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+report, helperMode+"="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var h helper
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(report)
		f := strings.Fields(string(b))
		if err != nil || len(f) != 3 {
			return false
		}
		h.socket = f[0]
		h.agent, err = strconv.Atoi(f[1])
		if err != nil {
			return false
		}
		h.server, err = strconv.Atoi(f[2])
		return err == nil
	}, waitLimit, tick, "the child reported its server")
	t.Cleanup(func() { KillServer(h.socket) }) // in case the test fails
	return cmd, h
}

// A test binary killed outright (SIGKILL: no cleanup runs) leaves its tmux
// server, its agent and its socket files; the next sweep kills the server
// and the agent and removes the files, and names the socket.
func TestSweepRemovesWhatAKilledTestLeft(t *testing.T) {
	cmd, h := runHelper(t, "wait")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	owner, ok := teardown.Owner(h.socket)
	require.True(t, ok, "the socket %s is named after its test process", h.socket)
	assert.Equal(t, cmd.Process.Pid, owner)
	path, err := tmux.SocketPath(h.socket)
	require.NoError(t, err)
	require.FileExists(t, path, "the killed test left its socket")
	require.FileExists(t, path+".loopd-lock")
	require.NoError(t, exec.Command("tmux", "-L", h.socket, "has-session").Run(), "the killed test left its server")
	require.True(t, proc.Alive(h.agent), "and its agent")

	swept, err := Sweep()
	require.NoError(t, err)
	assert.Contains(t, swept, h.socket)
	assert.NoFileExists(t, path)
	assert.NoFileExists(t, path+".loopd-lock")
	assert.Error(t, exec.Command("tmux", "-L", h.socket, "has-session").Run(), "the server is gone")
	assert.Eventually(t, func() bool { return !proc.Alive(h.agent) }, waitLimit, tick, "the agent %d is gone", h.agent)
}

// A sweep finds the server of a killed test by process when its socket
// file is gone, which no kill-server reaches, and no file is left to find
// it by, and kills it.
func TestSweepKillsAServerWhoseSocketFileIsGone(t *testing.T) {
	cmd, h := runHelper(t, "wait")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	path, err := tmux.SocketPath(h.socket)
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Remove(path+".loopd-lock"))
	require.True(t, proc.Alive(h.server), "the server runs on without its socket file")

	swept, err := Sweep()
	require.NoError(t, err)
	assert.Contains(t, swept, h.socket)
	assert.Eventually(t, func() bool { return !proc.Alive(h.server) }, waitLimit, tick, "the server %d is gone", h.server)
	assert.Eventually(t, func() bool { return !proc.Alive(h.agent) }, waitLimit, tick, "the agent %d is gone", h.agent)
}

// A sweep leaves the sockets of a test process that still runs alone.
func TestSweepSparesALiveTest(t *testing.T) {
	_, h := runHelper(t, "wait")
	swept, err := Sweep()
	require.NoError(t, err)
	assert.NotContains(t, swept, h.socket)
	assert.NoError(t, exec.Command("tmux", "-L", h.socket, "has-session").Run(), "the live test's server runs on")
	assert.True(t, proc.Alive(h.agent))
}

// A test binary whose tests leave a server behind fails (Main), though
// each test passed, and what it left is removed: a server on its socket
// with the socket file, one whose socket file was deleted (found by
// process, not by file), and one on a socket of another name, found by
// the TMPDIR it inherited from the test process.
func TestMainFailsARunThatLeavesAServer(t *testing.T) {
	for _, tc := range []struct{ mode, shown string }{
		{"leave", ""},
		{"unlinked", ", socket file deleted"},
		{"foreign", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd, h := runHelper(t, tc.mode)
			err := cmd.Wait()
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr, "the run must fail")
			assert.Equal(t, 1, exitErr.ExitCode())
			assert.Contains(t, cmd.Stderr.(*strings.Builder).String(),
				fmt.Sprintf("left 1 tmux servers or socket files behind (now removed): %s (server %d%s)", h.socket, h.server, tc.shown))
			path, err := tmux.SocketPath(h.socket)
			require.NoError(t, err)
			assert.NoFileExists(t, path)
			assert.NoFileExists(t, path+".loopd-lock")
			assert.Eventually(t, func() bool { return !proc.Alive(h.server) }, waitLimit, tick, "the server %d is gone", h.server)
			assert.Eventually(t, func() bool { return !proc.Alive(h.agent) }, waitLimit, tick, "the agent %d is gone", h.agent)
		})
	}
}

// Socket's cleanup kills the server and removes its socket file, which
// kill-server alone leaves behind (tmux 3.3a).
func TestSocketCleanupRemovesTheFile(t *testing.T) {
	var path string
	t.Run("server", func(t *testing.T) {
		socket := Socket(t, "cleanup")
		assert.True(t, teardown.Own(socket))
		require.NoError(t, exec.Command("tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "sleep", "600").Run())
		var err error
		path, err = tmux.SocketPath(socket)
		require.NoError(t, err)
		require.FileExists(t, path)
	})
	assert.NoFileExists(t, path)
}
