package teardown

import (
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
)

func TestMain(m *testing.M) { os.Exit(Main(m.Run)) }

func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		pid  int
		ok   bool
	}{
		{"socket", "loopd-test-4242-e2e-7", 4242, true},
		{"temp_dir", "loopd-test-17-tmp", 17, true},
		{"other_prefix", "loopd-e2e-4242-7", 0, false},
		{"random_suffix", "loopd-test-abcdefghij", 0, false},
		{"no_label", "loopd-test-4242", 0, false},
		{"zero_pid", "loopd-test-0-x", 0, false},
		{"negative_pid", "loopd-test--1-x", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, ok := Owner(tc.in)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.pid, pid)
		})
	}
	pid, ok := Owner(Name("x"))
	assert.True(t, ok)
	assert.Equal(t, os.Getpid(), pid)
	assert.True(t, Own(Name("x")))
	assert.False(t, Stale(Name("x")), "this process runs")
}

// childEnv makes this binary the child of the tests below; it names the
// directory the child reports to.
const childEnv = "TEARDOWN_CHILD_DIR"

// TestChild registers two cleanups, which write "1" and "2" to
// <dir>/order, makes a t.TempDir, reports its path to <dir>/tempdir and
// waits to be signalled.
func TestChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("only as the child of the interrupt tests")
	}
	if os.Getenv("TEARDOWN_CHILD_WAIT") == "" {
		return
	}
	for _, mark := range []string{"1", "2"} {
		OnInterrupt(func() {
			f, err := os.OpenFile(filepath.Join(dir, "order"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				_, _ = f.WriteString(mark)
				_ = f.Close()
			}
		})
	}
	tmp := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "file"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tempdir"), []byte(tmp), 0o600))
	time.Sleep(time.Minute)
}

// child starts TestChild with extra environment entries.
func child(t *testing.T, dir string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+dir), env...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// An interrupted test binary runs the cleanups, the last registered
// first, removes its temporary directories, and ends by the signal.
func TestInterruptRunsCleanupsAndRemovesTempDirs(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			cmd := child(t, dir, "TEARDOWN_CHILD_WAIT=1")
			var tmp string
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(dir, "tempdir"))
				tmp = string(b)
				return err == nil && tmp != ""
			}, 30*time.Second, 10*time.Millisecond, "the child made its temp dir")
			require.DirExists(t, tmp)
			run := filepath.Dir(filepath.Dir(tmp)) // <run dir>/<test's>/001
			owner, ok := Owner(filepath.Base(run))
			require.True(t, ok, "t.TempDir is in the run's own dir, not in %s", run)
			require.Equal(t, cmd.Process.Pid, owner)

			require.NoError(t, cmd.Process.Signal(sig))
			err := cmd.Wait()
			var exitErr *exec.ExitError
			require.ErrorAs(t, err, &exitErr)
			status := exitErr.Sys().(syscall.WaitStatus)
			assert.True(t, status.Signaled() && status.Signal() == sig, "the child ended by %s (%v)", sig, status)
			order, err := os.ReadFile(filepath.Join(dir, "order"))
			require.NoError(t, err)
			assert.Equal(t, "21", string(order), "the cleanups ran, the last registered first")
			assert.NoDirExists(t, run)
		})
	}
}

// Main removes the temporary directories that dead test processes left,
// with the processes still running in them, and spares those of live
// ones.
func TestMainSweepsStaleTempDirs(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	base := t.TempDir()
	stale := filepath.Join(base, Prefix+strconv.Itoa(gone.Process.Pid)+"-tmp")
	live := filepath.Join(base, Name("tmp"))
	for _, d := range []string{stale, live} {
		require.NoError(t, os.MkdirAll(filepath.Join(d, "x"), 0o700))
	}
	// What the dead process started runs on: a process in its temp dir.
	left := exec.Command("sleep", "600")
	left.Env = append(os.Environ(), "TMPDIR="+stale)
	require.NoError(t, left.Start())
	ended := make(chan error, 1)
	go func() { ended <- left.Wait() }()
	t.Cleanup(func() { _ = left.Process.Kill() })
	cmd := child(t, t.TempDir(), "TMPDIR="+base)
	require.NoError(t, cmd.Wait())
	select {
	case err := <-ended:
		assert.Error(t, err, "killed")
	case <-time.After(time.Minute): // a bound for a broken sweep, not a timing
		t.Fatal("the process left in the stale temp dir still runs")
	}
	assert.NoDirExists(t, stale)
	assert.DirExists(t, live)
	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{filepath.Base(live)}, names, "the child removed its own too: %s", strings.Join(names, " "))
}
