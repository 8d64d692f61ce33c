package observed_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
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
		w.Watch(ctx, func() { wakes.Add(1) })
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

// A death tmux failed to reap fires no hook; the kick makes it fire within
// one period.
func TestWatcherKicksLostExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := tmuxtest.NewFake()
		w := newWatcher(f, time.Second)
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
