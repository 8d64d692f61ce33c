package reconciler

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// TestRunKicksLostExits: a pane death tmux did not reap fires no hook; with
// KickEvery set, the watcher kicks the server, the hook fires and the item
// is respawned long before the resync interval. It runs on synctest's
// clock, so the kick period passes in no real time.
func TestRunKicksLostExits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newPassRig(t)
		sess := desired.SessionName(r.key)
		r.opened(t)
		r.pass(t, false)
		r.turn(t, r.record(t).Status.HarnessSessionID, "[loopd] issues.opened\nfix it")
		r.now = r.now.Add(6 * time.Second)
		r.pass(t, false)
		require.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)

		r.rc.Interval = time.Hour
		r.watcher.KickEvery = 10 * time.Millisecond
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
