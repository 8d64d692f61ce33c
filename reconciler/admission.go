package reconciler

import (
	"slices"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
)

// holdsSlot is the one home of the rule of which items hold one of the
// host's live slots (capacity.maxLiveSessions), by the phase an item is in
// and the reason it is there: Spawning and Running, BudgetExhausted (its
// interrupted agent stays at its prompt, in its pane, until the budget is
// raised), and BackingOff of an
// agent that died (RecordExit) and is coming back, so that a crashed agent
// keeps its slot and never queues behind new items. Every other phase
// holds none: Idle, Preparing, Queued, Exited (a clean exit, or a resume
// given up), NeedsAttention, Parked, Stopped, and any phase not named here
// (RateLimited). A BackingOff that no agent's death on this host left
// behind holds none either: an operator's release
// (desired.Status.Released) brings an item back through the queue, a
// clone that could not be made never had an agent, and an item that
// moved here (host_moved) or that a drain handed over (drained) had its
// agent on another host, or stopped on purpose, as had one whose agent
// this host stopped when its lease clock lapsed (lease_lapsed): its
// resume is a new start like any other.
func holdsSlot(phase desired.Phase, reason string) bool {
	switch phase {
	case desired.PhaseSpawning, desired.PhaseRunning, desired.PhaseBudgetExhausted:
		return true
	case desired.PhaseBackingOff:
		switch actions.Reason(reason) {
		case actions.ReasonReleased, actions.ReasonWorkspaceFailed, actions.ReasonWorkspaceConflict,
			actions.ReasonHostMoved, actions.ReasonDrained, actions.ReasonNoSlot, actions.ReasonLeaseLapsed:
			return false
		}
		return true
	}
	return false
}

// queueSince is where r stands in the queue: the arrival of its oldest
// pending event (the queue is fair: the oldest pending event goes first),
// else when it entered the queue (Status.QueuedAt, for an item brought
// back with no event, such as a release), else now. Both are durable, so
// the order survives a restart.
func queueSince(r desired.Record, now time.Time) time.Time {
	if oldest, ok := r.OldestPending(); ok {
		return oldest
	}
	if r.Status.Phase == desired.PhaseQueued && !r.Status.QueuedAt.IsZero() {
		return r.Status.QueuedAt
	}
	return now
}

// compareQueue orders two items of the queue: the earlier queueSince
// first, then by key.
func compareQueue(a, b desired.Record, now time.Time) int {
	if c := queueSince(a, now).Compare(queueSince(b, now)); c != 0 {
		return c
	}
	return compareKeys(a.Key, b.Key)
}

// QueuePositions returns the place in the queue (1 first) of every Queued
// item of records, by queueSince, as the planner admits them; loopd get
// shows it. Each host admits its own items, so each host's queue (the
// items its lease names; without leases, one queue) counts from 1.
func QueuePositions(records []desired.Record, now time.Time) map[desired.Key]int {
	var queued []desired.Record
	for _, r := range records {
		if r.Status.Phase == desired.PhaseQueued && !r.Spec.Closed && !r.Spec.Held {
			queued = append(queued, r)
		}
	}
	slices.SortFunc(queued, func(a, b desired.Record) int { return compareQueue(a, b, now) })
	out := make(map[desired.Key]int, len(queued))
	next := map[string]int{}
	for _, r := range queued {
		next[r.Lease.Owner]++
		out[r.Key] = next[r.Lease.Owner]
	}
	return out
}

// startInFlight is the one home of the rule of which spawns count against
// capacity.maxStartsInFlight: an item whose phase (as the pass leaves it)
// is Spawning and whose harness has not yet shown that it started, by a
// session report made since this spawn (desired.Record.ReportSinceSpawn:
// Claude Code's SessionStart hook, "startup" or "resume", which the CLI
// runs at session start, once it is up and has read its settings). The
// cap guards the host against many harnesses starting at one instant (a
// process start, a conversation loaded), not against the length of
// loopd's own probe: a start reported is no longer in flight, while its
// resume stays unverified until the probe window has passed
// (itemPlan.planAlive). A harness that reports nothing (no SessionStart
// hook) is in flight until its spawn is confirmed and the item Running. A
// spawn whose screen waits for a person (Status.Blocked: a trust dialog,
// a login) has started too: it is out of flight, so that it holds no
// start from the others until its confirm timeout.
func startInFlight(phase desired.Phase, r desired.Record) bool {
	return phase == desired.PhaseSpawning && r.ReportSinceSpawn() == nil && r.Status.Blocked == ""
}

// Load is what the host runs once a pass is done: how many items hold a
// slot (Live, holdsSlot) and how many starts are in flight (Starts,
// startInFlight).
type Load struct {
	Live, Starts int
}

// LoadOf counts the slots and the starts in flight the records hold.
func LoadOf(records []desired.Record) Load { return LoadOn(records, "") }

// LoadOn counts the slots and the starts in flight of the records host
// runs (their lease's owner), the figures its capacity bounds (the
// metrics', the status page's); host "" counts every record.
func LoadOn(records []desired.Record, host string) Load {
	var l Load
	for _, r := range records {
		if host != "" && r.Lease.Owner != host {
			continue
		}
		if holdsSlot(r.Status.Phase, r.Status.Reason) {
			l.Live++
		}
		if startInFlight(r.Status.Phase, r) {
			l.Starts++
		}
	}
	return l
}

// phaseAfter returns the phase and reason st will have once acts are
// carried out, as far as admission needs them: the phase each action
// moves the item to (a clone made outside the pass leaves it
// Preparing), and a release's and an exit's reason.
func phaseAfter(st desired.Status, acts []actions.Action) (desired.Phase, string) {
	for _, a := range acts {
		switch a := a.(type) {
		case actions.RecordExit:
			st.Phase, st.Reason = a.Phase, string(a.Reason)
		case actions.Release:
			st = a.Apply(st)
		case actions.RestoreTranscript:
			st = a.Apply(st, time.Time{})
		case actions.MarkRunning:
			st.Phase = desired.PhaseRunning
		case actions.StopSession:
			st.Phase = desired.PhaseStopped
		case actions.GiveUp:
			st.Phase = desired.PhaseNeedsAttention
		case actions.Park:
			st.Phase = desired.PhaseParked
		case actions.Rest:
			st.Phase = desired.PhaseIdle
		case actions.Queue:
			st.Phase, st.Reason = desired.PhaseQueued, string(a.Reason)
		case actions.PrepareWorkspace:
			if a.Checkout != nil {
				st.Phase = desired.PhasePreparing
			}
		case actions.FreshSpawn, actions.ResumeSpawn:
			st.Phase = desired.PhaseSpawning
		}
	}
	return st.Phase, st.Reason
}

// spawnIndex returns the index of the spawn in an item's plan, -1 when it
// has none this pass (a clone made outside the pass comes first: the
// spawn waits for it).
func spawnIndex(plan []actions.Action) int {
	for i, a := range plan {
		switch a := a.(type) {
		case actions.PrepareWorkspace:
			if a.Checkout != nil {
				return -1
			}
		case actions.FreshSpawn, actions.ResumeSpawn:
			return i
		}
	}
	return -1
}

// admit applies the host's capacity to the pass's plans (one per record,
// in the records' order) and is the one home of admission. It counts what
// the items that do not spawn will hold once the pass is done (holdsSlot,
// startInFlight), so that a slot or a start freed in this pass (a stop, a
// clean exit, a park, a spawn confirmed or reported started) admits the
// next item in the same pass. Then it takes the spawns:
//   - first those of items that hold a slot (a crashed agent coming back,
//     a server loss's resumes) or are being spawned already (a resume's
//     fresh fallback): they never wait for a slot, and only a new start
//     waits while MaxStarts starts are in flight
//     (wait reason=starts_in_flight; the item stays as it is);
//   - then the others, oldest pending event first (queueSince): each is
//     admitted while a slot (MaxLive) and a start (MaxStarts) are free;
//     once one is not, it and every later one are Queued, at their
//     position, reason=capacity or starts_in_flight; but while another
//     live host that is not draining has room (Policy.RoomElsewhere), one
//     with no slot here is handed over (actions.Handover, reason=no_slot)
//     instead, so that no item waits on a full host beside an idle one.
//
// A spawn held by the starts in flight is looked at again after
// StartPoll while one of them is of a harness that reports its start
// (Capabilities.ReportsSession): the report, which frees the start, comes
// in through the store, not as a trigger. Otherwise after Poll, the pace
// of the confirmations that free the starts then.
//
// Nothing is dropped: a queued item keeps its events pending, and the
// spawn is planned again on every pass until it is admitted.
func admit(records []*desired.Record, plans [][]actions.Action, p Policy, now time.Time) {
	type candidate struct {
		i, at      int
		slot       bool // holds a slot already
		continuing bool // is being spawned already: no new start
	}
	var live, starts int
	reported := false // a start in flight may be reported started
	inFlight := func(r *desired.Record) {
		starts++
		reported = reported || p.Harnesses[r.Spec.Harness].ReportsSession
	}
	var cands []candidate
	for i, r := range records {
		at := spawnIndex(plans[i])
		if at < 0 {
			phase, reason := phaseAfter(r.Status, plans[i])
			if holdsSlot(phase, reason) {
				live++
			}
			if startInFlight(phase, *r) {
				inFlight(r)
			}
			continue
		}
		phase, reason := phaseAfter(r.Status, plans[i][:at])
		// Another host's spawn in flight is not this one's to go on with.
		continuing := r.Status.Phase == desired.PhaseSpawning && movedFrom(r, &p) == ""
		cands = append(cands, candidate{i: i, at: at, slot: continuing || holdsSlot(phase, reason), continuing: continuing})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if a.slot != b.slot {
			if a.slot {
				return -1
			}
			return 1
		}
		return compareQueue(*records[a.i], *records[b.i], now)
	})
	startFree := func() bool { return p.MaxStarts <= 0 || starts < p.MaxStarts }
	position, handed := 0, 0
	var held []int // the items held by the starts in flight
	for _, c := range cands {
		r, plan := records[c.i], plans[c.i]
		switch {
		case c.slot && (c.continuing || startFree()):
			live++
			inFlight(r)
		case c.slot:
			live++ // its slot waits for it
			plans[c.i] = append(plan[:c.at:c.at], actions.Wait{Key: r.Key, Reason: actions.ReasonStartsInFlight})
			held = append(held, c.i)
		case (p.MaxLive <= 0 || live < p.MaxLive) && startFree():
			live++
			inFlight(r)
		case (p.MaxLive > 0 && live >= p.MaxLive) && handed < p.RoomElsewhere:
			// No slot here, one on another host: the item goes there
			// (its lease released, Assign gives it to the host with the
			// most room) rather than wait here for one.
			handed++
			plans[c.i] = append(plan[:c.at:c.at], actions.Handover{Key: r.Key, Session: desired.SessionName(r.Key), Reason: actions.ReasonNoSlot})
		default:
			position++
			reason := actions.ReasonCapacity
			if p.MaxLive <= 0 || live < p.MaxLive {
				reason = actions.ReasonStartsInFlight
				held = append(held, c.i)
			}
			phase, was := phaseAfter(r.Status, plan[:c.at])
			q := actions.Queue{Key: r.Key, Session: desired.SessionName(r.Key), Position: position, Live: live, MaxLive: p.MaxLive,
				Starts: starts, MaxStarts: p.MaxStarts, Reason: reason, Enter: phase != desired.PhaseQueued || was != string(reason)}
			plans[c.i] = append(plan[:c.at:c.at], q)
		}
	}
	// Every start of the pass is counted now: when is a held spawn looked
	// at again.
	until := now.Add(p.Poll)
	if reported {
		until = now.Add(p.StartPoll)
	}
	for _, i := range held {
		switch a := plans[i][len(plans[i])-1].(type) {
		case actions.Wait:
			a.Until = until
			plans[i][len(plans[i])-1] = a
		case actions.Queue:
			a.Until = until
			plans[i][len(plans[i])-1] = a
		}
	}
}

// park plans the parking of the item's live agent when it has been idle
// for IdlePark (capacity.idleParkSeconds): no event pending or in flight,
// and nothing written to its transcript since idleSince. The screen is
// the executor's to read, only then (actions.Park): an agent at work or
// with text in its input box is not parked. nil when parking is off or
// the agent is not idle long enough.
func (it *itemPlan) park() []actions.Action {
	st := &it.st
	if it.p.IdlePark <= 0 || len(it.pending) > 0 || st.SendingDeliveryID != "" || st.SpawnDeliveryID != "" {
		return nil
	}
	since, known := it.idleSince()
	if !known || it.now.Sub(since) < it.p.IdlePark {
		return nil
	}
	return []actions.Action{actions.Park{Key: it.r.Key, Session: it.session, PaneID: it.pane.id, IdleFor: it.now.Sub(since)}}
}

// idleSince is the last sign of work of the item's agent: its spawn, the
// last event sent or delivered to it, the last write to its transcript
// (harness.Transcript.ModTime), and the last time a park found it at work
// (Status.ActiveSeenAt). known is false when the transcript was not read
// or the harness has none: such an agent is never parked.
func (it *itemPlan) idleSince() (since time.Time, known bool) {
	tr, ok := it.obs.Transcripts[it.r.Key]
	if !ok || !tr.Known {
		return time.Time{}, false
	}
	st := &it.st
	since = maxTime(maxTime(st.SpawnedAt, st.SentAt), maxTime(st.ActiveSeenAt, tr.ModTime))
	if n := len(st.DeliveredAt); n > 0 {
		since = maxTime(since, st.DeliveredAt[n-1])
	}
	return since, true
}
