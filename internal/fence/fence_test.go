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

// TestStampCheck: a stamp holds for its own epoch until its instant; a
// later epoch, a lapsed instant, or a stamp that cannot be read (missing,
// garbled, or written by a loopd before epochs, with no epoch) holds for
// none.
func TestStampCheck(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	assert.ErrorIs(t, s.Check(1), ErrLapsed, "no stamp")
	g := Grant{Until: Now() + time.Hour, Epoch: 3}
	require.NoError(t, s.Write(g))
	got, err := s.Read()
	require.NoError(t, err)
	assert.Equal(t, g, got)
	assert.NoError(t, s.Check(3))
	assert.True(t, got.Holds(3))
	assert.ErrorIs(t, s.Check(2), ErrLapsed, "an earlier epoch")
	assert.ErrorIs(t, s.Check(4), ErrLapsed, "another epoch")
	assert.False(t, got.Holds(2))

	require.NoError(t, s.Write(Grant{Until: Now() - time.Millisecond, Epoch: 3}))
	assert.ErrorIs(t, s.Check(3), ErrLapsed, "lapsed")
	for _, garbled := range []string{"soon\n", strconv.FormatInt(int64(Now()+time.Hour), 10) + "\n", "1 x\n", ""} {
		require.NoError(t, os.WriteFile(s.Path, []byte(garbled), 0o600))
		assert.ErrorIs(t, s.Check(0), ErrLapsed, "unreadable: %q", garbled)
	}

	bad := Stamp{Path: filepath.Join(t.TempDir(), "missing", "stamp")}
	assert.ErrorIs(t, bad.Write(g), ErrStamp)
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
// runs; once it lapsed, or holds for a later epoch only (the host's clock
// lapsed and was renewed between two reads), the watchdog kills the
// harness and what it ran.
func TestWatchFencesOnceTheStampLapsed(t *testing.T) {
	for name, next := range map[string]Grant{
		"lapsed":      {Until: -time.Millisecond, Epoch: 1},
		"later_epoch": {Until: time.Hour, Epoch: 2},
	} {
		t.Run(name, func(t *testing.T) {
			s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
			require.NoError(t, s.Write(Grant{Until: Now() + time.Hour, Epoch: 1}))
			cmd, child, done := tree(t)
			childProc, err := proc.Lookup(child)
			require.NoError(t, err)

			fenced := make(chan bool, 1)
			go func() {
				f, err := Watch(context.Background(), s, 1, cmd.Process.Pid, 5*time.Millisecond)
				assert.NoError(t, err)
				fenced <- f
			}()
			next.Until += Now()
			require.NoError(t, s.Write(next))
			assert.True(t, <-fenced)
			<-done
			require.Eventually(t, func() bool { return !childProc.Running() }, 10*time.Second, 10*time.Millisecond,
				"the harness's child is killed too")
		})
	}
}

// TestWatchEndsWithTheHarness: a harness that exits by itself ends its
// watchdog, which fences nothing.
func TestWatchEndsWithTheHarness(t *testing.T) {
	s := Stamp{Path: filepath.Join(t.TempDir(), "stamp")}
	require.NoError(t, s.Write(Grant{Until: Now() + time.Hour, Epoch: 1}))
	cmd, _, _ := tree(t)
	fenced := make(chan bool, 1)
	go func() {
		f, err := Watch(context.Background(), s, 1, cmd.Process.Pid, 5*time.Millisecond)
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
	require.NoError(t, s.Write(Grant{Until: Now() + time.Hour, Epoch: 1}))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	fenced, err := Watch(context.Background(), s, 1, cmd.Process.Pid, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, fenced)
}
