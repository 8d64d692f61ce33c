package reconciler

import (
	"fmt"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// Forgettable returns why r cannot be forgotten now (loopd forget), nil
// when it can: it is open; it is closed but its status says its agent may
// still run, on this host or another of a shared store
// (desired.Record.NeedsHost); or its tmux session is still on this host's
// server, in the snapshot panes returns (asked only once the first two
// pass). The error of panes comes back wrapped.
func Forgettable(r desired.Record, panes func() (observed.Snapshot, error)) error {
	k := r.Key
	if !r.Spec.Closed {
		return fmt.Errorf("work item %s is open: only a closed item can be forgotten", k)
	}
	if r.NeedsHost() {
		return fmt.Errorf("work item %s is %s: its agent may still run; the next pass stops a closed item, then forget it", k, r.Status.Phase)
	}
	snap, err := panes()
	if err != nil {
		return fmt.Errorf("forget %s: %w", k, err)
	}
	session := desired.SessionName(k)
	if p, ok := snap.Pane(session); ok {
		if !p.Dead {
			return fmt.Errorf("work item %s: its agent still runs in tmux session %s; the next pass stops it, then forget it", k, session)
		}
		return fmt.Errorf("work item %s: its tmux session %s still exists; the next pass removes it, then forget it", k, session)
	}
	return nil
}
