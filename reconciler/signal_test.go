package reconciler

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// TestPlanCountsAKilledAgentAsACrash: a pane a signal ended (tmux:
// pane_dead_signal 9, pane_dead_status empty, read as 0) is recorded with
// its signal and counts as a failure under OnFailure, never as the clean
// exit its zero status would say.
func TestPlanCountsAKilledAgentAsACrash(t *testing.T) {
	killed := observed.Snapshot{Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", Dead: true, DeadSignal: 9, StatusKnown: true, Owner: testOwner}}}
	got := Plan([]desired.Record{rec(running())}, obs(killed, transcript), testPolicy(), t0)
	e := exit(0, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
	e.Signal, e.Clean, e.NextAttempt = 9, false, t0
	require.Equal(t, []actions.Action{e, resume(desired.Delivery{}, actions.ReasonPaneDead)}, got)
}
