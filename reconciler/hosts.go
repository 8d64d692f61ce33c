package reconciler

import (
	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// owns reports whether this host runs r (docs/design.md, "Many hosts"):
// always without leases (Policy.Host ""), else when r's lease is this
// host's and this host's lease clock is valid. Nothing of an item it
// does not own is planned but the stop of its local agent (relinquish).
func owns(r desired.Record, p Policy) bool {
	return p.Host == "" || (p.LeaseValid && r.Lease.Owner == p.Host)
}

// relinquish plans the stop of the local agent of an item this host does
// not own (owns), with no store write and no paste: another host runs it,
// or may, since this host's lease clock lapsed. nil when no agent of this
// loopd runs it here.
func relinquish(r *desired.Record, obs *observed.Observation, p *Policy) []actions.Action {
	it := itemPlan{r: r, st: r.Status, session: desired.SessionName(r.Key), obs: obs, p: p}
	it.observe()
	if !it.pane.exists {
		return nil
	}
	reason, owner := actions.ReasonLeaseLost, r.Lease.Owner
	if !p.LeaseValid {
		reason = actions.ReasonLeaseLapsed
	}
	if owner == p.Host {
		owner = "" // its own lease, lapsed: no other host holds it yet
	}
	return []actions.Action{actions.Relinquish{Key: r.Key, Session: it.session, Owner: owner, Reason: reason}}
}

// handover plans a draining host's hand-over of an item it owns: its
// local agent stopped, its transcript shipped, its lease released
// (actions.Handover).
func handover(r *desired.Record, obs *observed.Observation, p *Policy) []actions.Action {
	it := itemPlan{r: r, st: r.Status, session: desired.SessionName(r.Key), obs: obs, p: p}
	it.observe()
	return []actions.Action{actions.Handover{Key: r.Key, Session: it.session, Live: it.pane.exists, Reason: actions.ReasonDrained}}
}

// movedFrom returns the host r's conversation moved from: the host that
// wrote its status, when that is another host than this one and the item
// is open and not held (a closed or held item is stopped as usual). ""
// when it did not move.
func movedFrom(r *desired.Record, p *Policy) string {
	st := &r.Status
	if p.Host == "" || st.Host == "" || st.Host == p.Host || r.Spec.Closed || r.Spec.Held {
		return ""
	}
	return st.Host
}

// restoreFirst is the one home of the rule that a conversation whose local
// transcript is missing (transcript_missing in "Choosing resume or fresh")
// is first written back from the store (actions.RestoreTranscript) and
// then resumed: with leases (Policy.Host), whose owner ships every item's
// transcript to the store, once per conversation id until a spawn in it is
// confirmed (Status.RestoredID). A store without a copy, or a restored
// transcript that is missing again before its resume held, leads to the
// fresh spawn, never to a loop. A machine replaced under the same host
// name, or an item back on a host that lost its copy, resumes this way.
func restoreFirst(st desired.Status, p Policy) bool {
	return p.Host != "" && st.HarnessSessionID != "" && st.RestoredID != st.HarnessSessionID
}

// movedSinceSpawn reports whether st's conversation moved to this host
// (actions.RestoreTranscript.Apply) since its last spawn: its next resume
// is the move's, with its nudge, even after it waited Queued for a slot.
func movedSinceSpawn(st desired.Status) bool {
	return actions.Reason(st.LastExitReason) == actions.ReasonHostMoved && st.LastExitAt.After(st.SpawnedAt)
}

// hadAgent reports whether an item in phase had an agent to bring back
// on the host that takes it over.
func hadAgent(phase desired.Phase) bool {
	switch phase {
	case desired.PhaseSpawning, desired.PhaseRunning, desired.PhaseBackingOff, desired.PhaseQueued, desired.PhasePreparing:
		return true
	}
	return false
}

// moved plans an item whose conversation moved from host from (movedFrom):
// its stored transcript is restored (RestoreTranscript), and an item that
// had an agent is resumed on the recorded conversation id through the
// usual verified spawn, with reason host_moved, which counts no failure
// and boots with the move's nudge (desired.MovedPrompt) instead of an
// event: the restored conversation shows which events landed before the
// move, and the others are pasted once, as usual. The workdir is made
// again where it is missing. An item that had no agent waits a poll
// period with its conversation restored, for the next pass to plan it
// as usual. nil for an item with neither an agent nor a conversation:
// nothing moved with it, and it is planned as usual.
func (it *itemPlan) moved(from string) []actions.Action {
	st, key := it.st, it.r.Key
	agent := hadAgent(st.Phase)
	if !agent && !st.HadConversation() {
		return nil
	}
	a := actions.RestoreTranscript{Key: key, Session: it.session, ResumeID: st.HarnessSessionID, Cwd: it.r.Workdir(), From: from, To: it.p.Host,
		Resume: agent, WorkdirMissing: it.obs.MissingWorkdirs[key]}
	if !agent {
		return []actions.Action{a, actions.Wait{Key: key, Until: it.now.Add(it.p.Poll), Reason: actions.ReasonHostMoved}}
	}
	own := *it // the caller's plan of the item stays as it was
	it = &own
	it.st = a.Apply(st, it.now)
	it.restoring = true
	out := []actions.Action{a}
	for _, next := range it.spawn(&it.st, actions.ReasonHostMoved, "") {
		if pw, ok := next.(actions.PrepareWorkspace); ok {
			pw.Resume = true
			next = pw
		}
		out = append(out, next)
	}
	return out
}
