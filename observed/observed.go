// Package observed reads every fact a reconcile pass plans on, and watches
// for the events that should wake a pass. Nothing else in the reconcile loop
// reads tmux or the disk.
//
// The tmux part is a Snapshot: one value that says, for each loopd session,
// whether its pane lives, how and when it died. One observation is exactly
// one list-panes call, whatever the number of sessions, because per-session
// tmux calls grow quadratically with the server's size (measured on tmux
// 3.3a with 1,000 sessions: 5 s for one has-session per session, 10 ms for
// one list-panes -a). The disk part (workdirs, transcripts, which delivery
// frames the conversation holds) is read only for the items the planner says
// can use it (Needs). Observer puts both into an Observation; Watcher starts
// the tmux server and turns pane deaths into wake-ups.
package observed

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
)

// Pane is one pane as tmux lists it (tmux.Pane): its session, liveness,
// exit status, death time, foreground process and owner mark.
type Pane = tmux.Pane

// Snapshot is the observed state of loopd's sessions at one instant. It is a
// value: nothing in it changes after TakeSnapshot returns.
type Snapshot struct {
	// Panes holds each loopd session's pane, by session name. loopd creates
	// one pane per session; for a session with several, it holds the first.
	Panes map[string]Pane
	// At is when the observation was made.
	At time.Time
	// ServerGone is true when the tmux server this loopd claimed no longer
	// runs: none answers (killed, OOM-killed, its socket deleted), or the
	// one that answers is not marked as this loopd's (started since by
	// someone else). Every session of the lost server went with it.
	// Observer sets it; TakeSnapshot leaves it false.
	ServerGone bool
	// Runs holds the run of the process runner that each item's status
	// names (desired.Status.RunID), by session name, as the disk and
	// /proc show it: a run is observed as a pane is. Observer fills it.
	Runs map[string]Run

	// serverOwner is the server's owner mark as the listing showed it
	// (tmux.Pane.ServerOwner); ownerListed is false when the listing had
	// no row to show it on.
	serverOwner string
	ownerListed bool
}

// Run returns the run of session's item and reports whether one was read.
func (s Snapshot) Run(session string) (Run, bool) {
	r, ok := s.Runs[session]
	return r, ok
}

// Pane returns session's pane and reports whether the session exists.
func (s Snapshot) Pane(session string) (Pane, bool) {
	p, ok := s.Panes[session]
	return p, ok
}

// TakeSnapshot returns the Snapshot of c's server at now. It calls
// c.ListPanes once, and never calls tmux per session. With no server or no
// sessions the snapshot is empty, not an error.
//
// tmux up to 3.4 can fail to reap a pane's exited child: the pane then shows
// pane_dead=1 with no exit status, and the pane-died hook does not fire,
// until some other child of the server exits (fixed in tmux 3.5). So when
// the listing shows such a loopd pane, TakeSnapshot kicks the server
// (c.Kick: run-shell is such a child) and lists once more, which carries
// the status in nearly every case; a pass with no such pane costs one exec.
// A dead pane whose status is still unknown has StatusKnown false: the
// status is pending, never a clean exit. A pane whose child the kick reaped
// carries the kick's time as its DeadTime, not its death's
// (tmux.Pane.DeadTime).
func TakeSnapshot(ctx context.Context, c tmux.Client, now time.Time) (Snapshot, error) {
	panes, err := c.ListPanes(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("observe tmux: %w", err)
	}
	s := build(panes, now)
	if !s.unreaped() {
		return s, nil
	}
	if err := c.Kick(ctx); err != nil {
		return Snapshot{}, fmt.Errorf("observe tmux: %w", err)
	}
	if panes, err = c.ListPanes(ctx); err != nil {
		return Snapshot{}, fmt.Errorf("observe tmux: %w", err)
	}
	return build(panes, now), nil
}

// unreaped reports whether a pane of s is dead with its status not known
// (tmux.Pane.StatusKnown).
func (s Snapshot) unreaped() bool {
	for _, p := range s.Panes {
		if p.Dead && !p.StatusKnown {
			return true
		}
	}
	return false
}

// build keeps the first pane of each loopd session (desired.SessionPrefix;
// other sessions on the server are not observed). ListPanes lists a
// session's panes in index order, so the first is pane 0 of its first
// window.
func build(panes []Pane, now time.Time) Snapshot {
	s := Snapshot{Panes: make(map[string]Pane, len(panes)), At: now}
	if len(panes) > 0 {
		s.serverOwner, s.ownerListed = panes[0].ServerOwner, true
	}
	for _, p := range panes {
		if !strings.HasPrefix(p.Session, desired.SessionPrefix) {
			continue
		}
		if _, ok := s.Panes[p.Session]; !ok {
			s.Panes[p.Session] = p
		}
	}
	return s
}
