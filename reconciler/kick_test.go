package reconciler

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// TestRunKicksLostExits: a pane death tmux did not reap fires no hook; with
// KickEvery set, Run kicks the server, the hook fires and the item is
// respawned long before the resync interval.
func TestRunKicksLostExits(t *testing.T) {
	r := newPassRig(t)
	ctx := context.Background()
	sess := desired.SessionName(r.key)
	r.opened(t)
	r.pass(t, false)
	r.turn(t, r.record(t).Status.HarnessSessionID, "[loopd] issues.opened\nfix it")
	r.now = r.now.Add(6 * time.Second)
	r.pass(t, false)
	require.Equal(t, desired.PhaseRunning, r.record(t).Status.Phase)

	r.rc.Interval = time.Hour
	r.rc.KickEvery = 10 * time.Millisecond
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.rc.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	calls := func(verb string) int {
		return len(slices.DeleteFunc(r.tmux.Calls(), func(c string) bool { return c != verb }))
	}
	// The death comes after Run's first pass has listed the panes (the
	// manual passes above listed twice), so that only a kick reveals it.
	require.Eventually(t, func() bool { return calls("ListPanes") > 2 }, 5*time.Second, time.Millisecond)
	before := calls("NewSession")
	r.tmux.ExitUnknown(sess, 1)
	require.Eventually(t, func() bool { return calls("NewSession") > before }, 5*time.Second, time.Millisecond,
		"the lost exit was never seen: no respawn")
}
