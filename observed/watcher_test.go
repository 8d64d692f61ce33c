package observed_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/observed"
)

const diedChannel = "loopd-pane-died"

func newWatcher(f *tmuxtest.Fake, kickEvery time.Duration) *observed.Watcher {
	return &observed.Watcher{Tmux: f, KickEvery: kickEvery, Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
		Server: tmux.ServerOptions{PaneDiedChannel: diedChannel, Owner: tmux.NewOwner("/srv/loopd/state")}}
}

// watch runs w.Watch until the test ends and returns the number of wakes.
func watch(t *testing.T, w *observed.Watcher) *atomic.Int32 {
	var wakes atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		w.Watch(ctx, func(...string) { wakes.Add(1) })
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &wakes
}

func TestWatcherEnsureServerClaimsIt(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	require.NoError(t, w.EnsureServer(t.Context()))
	opts, ok := f.Options()
	require.True(t, ok)
	assert.Equal(t, w.Server, opts)
	theirs := newWatcher(f, 0)
	theirs.Server.Owner = tmux.NewOwner("/srv/other/state")
	assert.ErrorIs(t, theirs.EnsureServer(t.Context()), tmux.ErrServerOwned)
}

func TestWatcherWakesOnPaneDeath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, 0)
		require.NoError(t, w.EnsureServer(t.Context()))
		spawn(t, f, "loop-a", "claude", "hi")
		spawn(t, f, "loop-b", "claude", "hi")
		wakes := watch(t, w)
		synctest.Wait()
		assert.Zero(t, wakes.Load())
		f.Exit("loop-a", 1)
		synctest.Wait()
		assert.EqualValues(t, 1, wakes.Load())
		f.ExitSignal("loop-b", 9)
		synctest.Wait()
		assert.EqualValues(t, 2, wakes.Load())
	})
}

// noPidfd acts out a kernel without pidfd_open(2).
func noPidfd(int) (int, error) { return -1, syscall.ENOSYS }

// Without pidfds (the fallback), a death tmux failed to reap fires no hook;
// the periodic kick makes it fire within one period.
func TestWatcherWithoutPidfdKicksLostExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, time.Second)
		w.PidfdOpen = noPidfd
		require.NoError(t, w.EnsureServer(t.Context()))
		spawn(t, f, "loop-a", "claude", "hi")
		wakes := watch(t, w)
		time.Sleep(time.Second / 2)
		f.ExitUnknown("loop-a", 1)
		synctest.Wait()
		assert.Zero(t, wakes.Load(), "no hook for a lost exit")
		time.Sleep(time.Second / 2)
		synctest.Wait()
		assert.EqualValues(t, 1, wakes.Load(), "the next kick reaped it and the hook fired")
	})
}

// With pidfds, nothing kicks the server while nothing dies.
func TestWatcherDoesNotKickWhileNothingDies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, time.Second)
		require.NoError(t, w.EnsureServer(t.Context()))
		spawn(t, f, "loop-a", "claude", "hi")
		watch(t, w)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.NotContains(t, f.Calls(), "Kick")
	})
}

// sleeper starts a process that lives until it is killed, and is reaped
// only at the end of the test: killed, it stays a zombie, as a pane's
// process does that tmux 3.3a failed to reap.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// snapshotOf is a snapshot of live loopd panes running the processes pids.
func snapshotOf(pids ...int) observed.Snapshot {
	s := observed.Snapshot{Panes: map[string]tmux.Pane{}}
	for i, pid := range pids {
		name := fmt.Sprintf("loop-%d", i)
		s.Panes[name] = tmux.Pane{Session: name, PaneID: fmt.Sprintf("%%%d", i), PID: pid}
	}
	return s
}

func kicks(f *tmuxtest.Fake) int {
	return len(slices.DeleteFunc(f.Calls(), func(c string) bool { return c != "Kick" }))
}

// TestWatcherWakesOnProcessDeath: the death of a watched pane's process,
// still unreaped, kicks the server (so tmux reaps it and fires its hook)
// and wakes a pass, with no hook and no periodic kick.
func TestWatcherWakesOnProcessDeath(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	w.Server.PaneDiedChannel = ""
	a, b := sleeper(t), sleeper(t)
	wakes := watch(t, w)
	w.Track(snapshotOf(a.Process.Pid, b.Process.Pid))
	require.Zero(t, kicks(f))
	require.NoError(t, a.Process.Kill())
	require.Eventually(t, func() bool { return wakes.Load() == 1 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 1, kicks(f), "one kick, before the wake")
	require.NoError(t, b.Process.Kill())
	require.Eventually(t, func() bool { return wakes.Load() == 2 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, 2, kicks(f))
}

// A process the snapshots stop listing (its pane died, or was killed) is no
// longer watched; one gone before it could be watched counts as a death.
func TestWatcherTracksWhatTheSnapshotLists(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	w.Server.PaneDiedChannel = ""
	a := sleeper(t)
	wakes := watch(t, w)
	w.Track(snapshotOf(a.Process.Pid))
	w.Track(snapshotOf())
	require.NoError(t, a.Process.Kill())
	_, _ = a.Process.Wait()
	assert.Never(t, func() bool { return wakes.Load() > 0 }, 200*time.Millisecond, time.Millisecond, "untracked")

	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	w.Track(snapshotOf(gone.Process.Pid))
	require.Eventually(t, func() bool { return wakes.Load() == 1 }, 10*time.Second, time.Millisecond, "gone since the listing")
}

// With no server yet the wait fails; it is retried a second later, and a
// death in between is not lost (tmux keeps an unawaited signal).
func TestWatcherRetriesUntilTheServerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, 0)
		wakes := watch(t, w)
		synctest.Wait()
		require.NoError(t, w.EnsureServer(t.Context()))
		spawn(t, f, "loop-a", "claude", "hi")
		f.Exit("loop-a", 1)
		synctest.Wait()
		assert.Zero(t, wakes.Load())
		time.Sleep(time.Second)
		synctest.Wait()
		assert.EqualValues(t, 1, wakes.Load())
	})
}

// Without a pane-died channel Watch only waits for its context, and never
// calls tmux.
func TestWatcherWithoutChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, time.Second)
		w.Server.PaneDiedChannel = ""
		watch(t, w)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Empty(t, f.Calls())
	})
}

// TestWatcherWakesOnTranscriptWrites: a write to a transcript being
// tracked wakes a pass (a delivery's confirmation need not wait for the
// poll); writes to others in the same directory, and to one no longer
// tracked, do not.
func TestWatcherWakesOnTranscriptWrites(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	w.Server.PaneDiedChannel = ""
	dir := filepath.Join(t.TempDir(), "projects", "-w")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	mine, other := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	wakes := watch(t, w)
	write := func(path string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		require.NoError(t, err)
		_, err = f.WriteString("{}\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	w.TrackTranscripts([]string{mine})
	write(other)
	assert.Never(t, func() bool { return wakes.Load() > 0 }, 100*time.Millisecond, time.Millisecond, "another transcript")
	write(mine)
	require.Eventually(t, func() bool { return wakes.Load() >= 1 }, 10*time.Second, time.Millisecond)
	w.TrackTranscripts(nil)
	n := wakes.Load()
	write(mine)
	assert.Never(t, func() bool { return wakes.Load() > n }, 200*time.Millisecond, time.Millisecond, "no longer tracked")
}

// watchNames runs w.Watch until the test ends and returns the sessions
// each wake named, a wake at a time.
func watchNames(t *testing.T, w *observed.Watcher) <-chan []string {
	woken := make(chan []string, 2)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		w.Watch(ctx, func(died ...string) { woken <- died })
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return woken
}

// TestWatcherNamesADeathOnce: whether the pane-died hook's wake or the
// pidfd's comes first, the dead session is named once over both.
func TestWatcherNamesADeathOnce(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	require.NoError(t, w.EnsureServer(t.Context()))
	spawn(t, f, "loop-0", "claude", "hi")
	a := sleeper(t)
	woken := watchNames(t, w)
	w.Track(snapshotOf(a.Process.Pid))
	require.NoError(t, a.Process.Kill())
	_, _ = a.Process.Wait()
	f.Exit("loop-0", 1) // tmux reaped it: the hook fires
	got := append(<-woken, <-woken...)
	assert.Equal(t, []string{"loop-0"}, got)
}
