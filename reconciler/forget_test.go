package reconciler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// An item may be forgotten once closed, once its agent may no longer run
// (every phase in which it needs a host refuses, not only the running
// ones), and once its tmux session is gone from this host's server.
func TestForgettable(t *testing.T) {
	k := desired.Key{Owner: "octo-org", Repo: "api", Number: 3}
	session := desired.SessionName(k)
	none := func() (observed.Snapshot, error) { return observed.Snapshot{}, nil }
	pane := func(dead bool) func() (observed.Snapshot, error) {
		return func() (observed.Snapshot, error) {
			return observed.Snapshot{Panes: map[string]observed.Pane{session: {Session: session, Dead: dead}}}, nil
		}
	}
	closed := func(phase desired.Phase) desired.Record {
		return desired.Record{Key: k, Spec: desired.Spec{Closed: true}, Status: desired.Status{Phase: phase}}
	}
	tests := []struct {
		name   string
		record desired.Record
		panes  func() (observed.Snapshot, error)
		want   string // "" for no error
	}{
		{name: "open", record: desired.Record{Key: k, Status: desired.Status{Phase: desired.PhaseStopped}}, panes: none, want: "is open"},
		{name: "closed_running", record: closed(desired.PhaseRunning), panes: none, want: "its agent may still run"},
		{name: "closed_backing_off", record: closed(desired.PhaseBackingOff), panes: none, want: "its agent may still run"},
		{name: "closed_queued", record: closed(desired.PhaseQueued), panes: none, want: "its agent may still run"},
		{name: "closed_needs_attention", record: closed(desired.PhaseNeedsAttention), panes: none, want: "its agent may still run"},
		{name: "closed_stopped", record: closed(desired.PhaseStopped), panes: none},
		{name: "closed_exited", record: closed(desired.PhaseExited), panes: none},
		{name: "live_pane", record: closed(desired.PhaseStopped), panes: pane(false), want: "its agent still runs in tmux session " + session},
		{name: "dead_pane", record: closed(desired.PhaseStopped), panes: pane(true), want: "its tmux session " + session + " still exists"},
		{name: "tmux_fails", record: closed(desired.PhaseStopped),
			panes: func() (observed.Snapshot, error) { return observed.Snapshot{}, errors.New("tmux broke") }, want: "forget octo-org/api#3: tmux broke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Forgettable(tt.record, tt.panes)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
