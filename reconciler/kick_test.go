package reconciler

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// TestRunWithoutPidfdKicksLostExits: where the kernel gives no pidfd, a
// pane death tmux did not reap fires no hook; with KickEvery set, the
// watcher kicks the server, the hook fires and the item is respawned long
// before the resync interval. It runs on synctest's clock, so the kick
// period passes in no real time.
func TestRunWithoutPidfdKicksLostExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newPassRig(t)
		sess := desired.SessionName(r.key)
		r.running(t)

		r.rc.Interval = time.Hour
		r.watcher.KickEvery = 10 * time.Millisecond
		r.watcher.PidfdOpen = func(int) (int, error) { return -1, syscall.ENOSYS }
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.rc.Run(ctx) }()
		calls := func(verb string) int {
			return len(slices.DeleteFunc(r.tmux.Calls(), func(c string) bool { return c != verb }))
		}
		// Run's first pass has listed the panes and the loop sleeps on
		// its interval; the death comes after, so only a kick reveals it.
		synctest.Wait()
		require.Equal(t, 3, calls("ListPanes"))
		require.Zero(t, calls("Kick"), "nothing was dead")
		before := calls("NewSession")
		r.tmux.ExitUnknown(sess, 1)
		synctest.Wait()
		assert.Equal(t, before, calls("NewSession"), "a lost exit fires no hook by itself")

		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, before+1, calls("NewSession"), "the kick revealed the exit within one period and a pass respawned the item")

		cancel()
		require.NoError(t, <-done)
	})
}

// TestRunIdlePassesAreOneExec: while nothing dies and nothing writes to
// the screen, every pass of a running item is one tmux exec (its listing):
// no kick before it, none between passes, and its agent's screen is not
// captured again.
func TestRunIdlePassesAreOneExec(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newPassRig(t)
		r.running(t)

		r.rc.Interval = time.Second
		r.watcher.KickEvery = 10 * time.Millisecond
		start, base := time.Now(), r.now
		clock := func() time.Time { return base.Add(time.Since(start)) }
		r.rc.Now, r.tmux.Now = clock, clock
		before := len(r.tmux.Calls())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.rc.Run(ctx) }()
		time.Sleep(10*time.Second + time.Second/2)
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)
		var execs []string
		for _, c := range r.tmux.Calls()[before:] {
			if c != "EnsureServer" && c != "WaitFor" {
				execs = append(execs, c)
			}
		}
		// The agent's screen was captured by the passes before, in a later
		// second than its last output.
		assert.Equal(t, slices.Repeat([]string{"ListPanes"}, 11), execs, "a pass at start and one a second, one exec each")
	})
}
