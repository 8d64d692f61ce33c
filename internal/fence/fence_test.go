package fence

import (
	"context"
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
)

func TestStampLapsed(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	assert.True(t, s.Lapsed(), "no stamp: lapsed")
	require.NoError(t, s.Write(time.Hour))
	assert.False(t, s.Lapsed())
	until, err := s.Until()
	require.NoError(t, err)
	assert.InDelta(t, float64(Now()+time.Hour), float64(until), float64(time.Minute))
	require.NoError(t, s.Write(-time.Millisecond))
	assert.True(t, s.Lapsed())
	require.NoError(t, os.WriteFile(s.Path, []byte("soon\n"), 0o600))
	assert.True(t, s.Lapsed(), "unreadable: lapsed")

	bad := Stamp{Path: filepath.Join(t.TempDir(), "missing", "stamp")}
	assert.ErrorIs(t, bad.Write(time.Hour), ErrStamp)
}

// tree starts a shell leading its own process group with a child of its
// own (a tool the agent ran), and returns the shell, its child's pid, and
// a channel closed once the shell was reaped.
func tree(t *testing.T) (*exec.Cmd, int, <-chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	cmd := exec.Command("sh", "-c", `sleep 1000 & echo $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`, "sh", pidFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	var child int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	return cmd, child, done
}

// TestWatchFencesOnceTheStampLapsed: while the stamp holds the harness
// runs; once it lapsed the watchdog kills the harness and what it ran.
func TestWatchFencesOnceTheStampLapsed(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	require.NoError(t, s.Write(time.Hour))
	cmd, child, done := tree(t)
	childProc, err := proc.Lookup(child)
	require.NoError(t, err)

	fenced := make(chan bool, 1)
	go func() {
		f, err := Watch(context.Background(), s, cmd.Process.Pid, 5*time.Millisecond)
		assert.NoError(t, err)
		fenced <- f
	}()
	require.NoError(t, s.Write(-time.Millisecond))
	assert.True(t, <-fenced)
	<-done
	require.Eventually(t, func() bool { return !childProc.Running() }, 10*time.Second, 10*time.Millisecond,
		"the harness's child is killed too")
}

// TestWatchEndsWithTheHarness: a harness that exits by itself ends its
// watchdog, which fences nothing.
func TestWatchEndsWithTheHarness(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	require.NoError(t, s.Write(time.Hour))
	cmd, _, _ := tree(t)
	fenced := make(chan bool, 1)
	go func() {
		f, err := Watch(context.Background(), s, cmd.Process.Pid, 5*time.Millisecond)
		assert.NoError(t, err)
		fenced <- f
	}()
	require.NoError(t, syscall.Kill(cmd.Process.Pid, syscall.SIGTERM))
	assert.False(t, <-fenced)
}

// TestWatchOfAGoneHarness: a harness that exited (and was reaped) before
// its watchdog opened it is one that ended: no error, nothing fenced.
func TestWatchOfAGoneHarness(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	require.NoError(t, s.Write(time.Hour))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	fenced, err := Watch(context.Background(), s, cmd.Process.Pid, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, fenced)
}
