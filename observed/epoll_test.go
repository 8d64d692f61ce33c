//go:build linux

package observed_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// openFds counts this process's open descriptors of kind (the target of
// its /proc/self/fd link, "anon_inode:[pidfd]" or "anon_inode:[eventpoll]").
func openFds(t *testing.T, kind string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == kind {
			n++
		}
	}
	return n
}

// TestWatcherWaitsOnManyPidfdsInOneGoroutine: the processes of many panes
// are watched by one goroutine (one epoll wait), each death is named once,
// a process no longer listed while the wait runs is not named, one listed
// while it runs is, and the end of Watch closes every pidfd and the wait.
func TestWatcherWaitsOnManyPidfdsInOneGoroutine(t *testing.T) {
	f := tmuxtest.NewFake()
	w := newWatcher(f, 0)
	w.Server.PaneDiedChannel = ""
	var pids []int
	var procs []*os.Process
	for range 40 {
		p := sleeper(t).Process
		pids, procs = append(pids, p.Pid), append(procs, p)
	}
	removed, added, late, later := sleeper(t), sleeper(t), sleeper(t), sleeper(t)
	// os/exec holds a pidfd of each child too: the count is of the
	// Watcher's beyond those.
	pidfds, polls := openFds(t, "anon_inode:[pidfd]"), openFds(t, "anon_inode:[eventpoll]")

	ctx, cancel := context.WithCancel(t.Context())
	woken := make(chan []string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Watch(ctx, func(died ...string) {
			select {
			case woken <- died:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	before := runtime.NumGoroutine()
	w.Track(snapshotOf(append(slices.Clone(pids), removed.Process.Pid)...)) // loop-0 … loop-39, loop-40
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 1, "one goroutine waits on all 41")
	assert.Equal(t, pidfds+41, openFds(t, "anon_inode:[pidfd]"))

	w.Track(snapshotOf(pids...)) // loop-40 is no longer listed
	require.NoError(t, removed.Process.Kill())
	w.Track(snapshotOf(append(slices.Clone(pids), added.Process.Pid)...)) // loop-40 is another process now
	for _, c := range append(procs, added.Process) {
		require.NoError(t, c.Kill())
	}
	named := map[string]int{}
	for len(named) < 41 {
		select {
		case died := <-woken:
			for _, s := range died {
				named[s]++
			}
		case <-time.After(10 * time.Second):
			require.FailNow(t, "deaths not named", "%v", named)
		}
	}
	for s, n := range named {
		assert.Equal(t, 1, n, "%s named once", s)
	}
	assert.Equal(t, pidfds, openFds(t, "anon_inode:[pidfd]"), "each dead process's pidfd is closed")

	w.Track(snapshotOf(late.Process.Pid))
	cancel()
	<-done
	assert.Equal(t, pidfds, openFds(t, "anon_inode:[pidfd]"), "Watch's end closes every pidfd")
	require.Eventually(t, func() bool { return openFds(t, "anon_inode:[eventpoll]") == polls }, 10*time.Second, time.Millisecond,
		"and the wait ends and closes its epoll")
	w.Track(snapshotOf(later.Process.Pid))
	assert.Equal(t, pidfds, openFds(t, "anon_inode:[pidfd]"), "a Watcher that stopped watches nothing")
}
