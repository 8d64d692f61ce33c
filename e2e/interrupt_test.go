package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/teardown"
	"github.com/loopd/loopd/internal/tmux"
)

// daemons are the loopd serve processes started by start that have not
// exited yet, each with the channel closed when it has.
var (
	daemonsMu sync.Mutex
	daemons   = map[*exec.Cmd]chan struct{}{}
)

// startDaemon starts cmd in a process group of its own, so that an
// interrupt of the test binary ends it and its children (stopDaemons) and a
// terminal's ^C does not reach it first, and with Pdeathsig SIGKILL, so
// that it dies with the test binary when that is killed outright. It
// returns a channel closed once cmd exited and exited ran.
func startDaemon(cmd *exec.Cmd, exited func()) (chan struct{}, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	started, done := make(chan error, 1), make(chan struct{})
	// Pdeathsig is sent when the thread that started the child ends, so
	// the child is started from a thread kept for it until it exits.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		daemonsMu.Lock()
		daemons[cmd] = done
		daemonsMu.Unlock()
		started <- nil
		_ = cmd.Wait()
		daemonsMu.Lock()
		delete(daemons, cmd)
		daemonsMu.Unlock()
		exited()
		close(done)
	}()
	return done, <-started
}

// stopDaemons ends every running daemon's process group, as the test
// binary is interrupted: SIGTERM, then SIGKILL for a group whose daemon
// has not exited within waitShort.
func stopDaemons() {
	daemonsMu.Lock()
	running := make(map[*exec.Cmd]chan struct{}, len(daemons))
	for cmd, done := range daemons {
		running[cmd] = done
	}
	daemonsMu.Unlock()
	for cmd := range running {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.After(waitShort)
	for cmd, done := range running {
		select {
		case <-done:
		case <-deadline:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}

// interruptChildEnv makes this binary the child of
// TestInterruptStopsEverything; it names the file the child reports to.
const interruptChildEnv = "LOOPD_E2E_INTERRUPT_REPORT"

// TestInterruptChild starts a daemon whose agent runs, reports "<daemon
// pid> <agent pid> <socket> <env dir>" and waits to be interrupted.
func TestInterruptChild(t *testing.T) {
	report := os.Getenv(interruptChildEnv)
	if report == "" {
		t.Skip("only as the child of TestInterruptStopsEverything")
	}
	e := newEnv(t, envOpts{})
	e.start(t)
	e.replay(t, commentFixture, "", withComment("interrupt me"))
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	agent := e.panePID(t, keyIssue)
	require.NotZero(t, agent)
	line := strings.Join([]string{strconv.Itoa(e.daemon.Process.Pid), strconv.Itoa(agent), e.socket, e.dir}, " ")
	require.NoError(t, os.WriteFile(report, []byte(line), 0o600))
	time.Sleep(time.Minute)
}

// An interrupted e2e run (^C, or make's SIGTERM) leaves nothing behind:
// the daemon, the tmux server with its agent, the socket and serve's lock,
// and the test's temp dir are all gone when the test binary has ended.
// Before, the daemon and the server with its agents lived on.
func TestInterruptStopsEverything(t *testing.T) {
	if os.Getenv(interruptChildEnv) != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report")
			cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), interruptChildEnv+"="+report, binDirEnv+"="+filepath.Dir(loopdBin))
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			var f []string
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(report)
				f = strings.Fields(string(b))
				return err == nil && len(f) == 4
			}, waitLong, tick, "the child started its daemon and agent")
			daemon, agent, socket, dir := atoi(t, f[0]), atoi(t, f[1]), f[2], f[3]
			path, err := tmux.SocketPath(socket)
			require.NoError(t, err)
			t.Cleanup(func() { _ = syscall.Kill(daemon, syscall.SIGKILL) })
			require.FileExists(t, path)
			require.True(t, proc.Alive(agent))

			require.NoError(t, cmd.Process.Signal(sig))
			err = cmd.Wait()
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr, "%s", out.String())
			status := exitErr.Sys().(syscall.WaitStatus)
			assert.True(t, status.Signaled() && status.Signal() == sig, "the child ended by %s (%v)", sig, status)
			assert.False(t, proc.Alive(daemon), "the daemon %d is gone", daemon)
			assert.False(t, proc.Alive(agent), "the agent %d is gone", agent)
			assert.Error(t, exec.Command("tmux", "-L", socket, "has-session").Run(), "the tmux server is gone")
			assert.NoFileExists(t, path)
			assert.NoFileExists(t, path+".loopd-lock")
			assert.NoDirExists(t, dir)
			owner, ok := teardown.Owner(socket)
			assert.True(t, ok && owner == cmd.Process.Pid, "the socket %s is named after the child", socket)
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
