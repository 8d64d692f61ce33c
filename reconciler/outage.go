package reconciler

import (
	"context"
	"log/slog"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/observed"
)

// OutageMinLive is the fewest agents expected live for their deaths in one
// pass to count as an outage (issue 10: "more than half of at least 5"):
// below it, a few deaths at once are a few crashes.
const OutageMinLive = 5

// Loss is what one pass found of the agents expected live, before any item
// is planned: whether they were lost together (a lost server, an outage)
// rather than each by its own crash.
type Loss struct {
	// Reason is actions.ReasonServerLost (the tmux server this loopd
	// claimed is gone, and agents with it), actions.ReasonOutage (more than
	// half of at least OutageMinLive agents died in the pass), or "".
	Reason actions.Reason
	// Live is how many agents were expected live: an open, unheld item
	// Running, or Spawning with a pane started. Down is how many of them
	// the pass found dead, missing or without their harness.
	Live, Down int
}

// lossOf applies the rule of a loss that is no item's crash to the pass's
// records. A gone server (observed.Snapshot.ServerGone) with an agent
// expected on it is a server loss, whatever the count: each of its agents
// is resumed on a new server. Otherwise more than half of at least
// OutageMinLive agents down at once is an outage: an OOM kill of the
// server's children, a host suspend, a kill of the whole process tree,
// not N crash loops.
func lossOf(records []*desired.Record, obs observed.Observation, p Policy) Loss {
	return lossWith(records, nil, obs, p)
}

// lossWith is lossOf with each record's pane as the pass sorted it
// (seen, in the records' order), nil to look each up.
func lossWith(records []*desired.Record, seen []*seenPane, obs observed.Observation, p Policy) Loss {
	var l Loss
	for i, r := range records {
		if !expectedLive(*r) {
			continue
		}
		if processRunner(r, &p) {
			continue // a run is no tmux agent
		}
		var pane observedPane
		var foreign bool
		if seen != nil {
			pane, foreign = seen[i].pane, seen[i].foreign
		} else {
			pane, foreign = paneOf(r, desired.SessionName(r.Key), &obs, &p)
		}
		if foreign {
			continue // not this loopd's agent
		}
		l.Live++
		if !pane.alive {
			l.Down++
		}
	}
	switch {
	case l.Down > 0 && obs.Snapshot.ServerGone:
		l.Reason = actions.ReasonServerLost
	case l.Live >= OutageMinLive && 2*l.Down > l.Live:
		l.Reason = actions.ReasonOutage
	}
	return l
}

// expectedLive reports whether r's agent should be running in its pane:
// an open, unheld item Running, or Spawning with its pane started.
func expectedLive(r desired.Record) bool {
	st := r.Status
	if r.Spec.Closed || r.Spec.Held {
		return false
	}
	return st.Phase == desired.PhaseRunning || (st.Phase == desired.PhaseSpawning && st.PaneID != "")
}

// notACrash is the decision of whether the death of an agent that the
// pass's Loss took is a crash: a lost server never is (the agent did not
// die of itself), nor is a death while a person attended the item
// (ReasonAttended, handBackIfAttended: the person's doing); an outage is not either, unless the item's last exit was
// an outage or a lost server too and its run since was shorter than the
// churn window. That bounds a fleet that dies together on every resume (a
// harness broken for everyone, a host that keeps killing its agents): the
// second outage in a row counts, so backoff and the restart budget apply.
func notACrash(loss actions.Reason, st desired.Status, died, now time.Time, p Policy) bool {
	switch loss {
	case actions.ReasonServerLost, actions.ReasonAttended:
		return true
	case actions.ReasonOutage:
		last := actions.Reason(st.LastExitReason)
		if last != actions.ReasonServerLost && last != actions.ReasonOutage {
			return true
		}
		h := History{SpawnedAt: st.SpawnedAt, DiedAt: died}
		return h.diedAt(now).Sub(st.SpawnedAt) >= p.ChurnWindow
	}
	return false
}

// journalLoss journals the loss l the pass acted on, once: tmux.server_lost
// or tmux.outage, with the number of items the plan resumed as not
// crashed. A pass that failed before it executed journals nothing, so the
// pass that carries the loss out journals it.
func (r *Reconciler) journalLoss(ctx context.Context, l Loss, plan []actions.Action) {
	if l.Reason == "" {
		return
	}
	items := 0
	for _, a := range plan {
		if e, ok := a.(actions.RecordExit); ok && e.Reason == l.Reason {
			items++
		}
	}
	if items == 0 {
		return
	}
	name := journal.TmuxOutage
	if l.Reason == actions.ReasonServerLost {
		name = journal.TmuxServerLost
	}
	r.Journal.Record(ctx, slog.LevelWarn, name, "", "items", items, "live", l.Live, "down", l.Down)
}
