package reconciler

import (
	"slices"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
)

// attend applies takeover and handback to the item before anything else is
// decided on it, from the clients tmux shows attached to its own session
// (observed.Pane.Clients) and their last input (observed.Pane.Input):
//
//   - A client attached to a session no one attended: the item is attended
//     (MarkAttended, with who loopd attach said) and waits.
//   - Attended, with a client still attached and input within
//     Policy.AttendedTimeout: the item waits. Nothing is pasted, nudged or
//     parked, and a dead agent is not respawned.
//   - Attended, and the last client detached, or no input for
//     AttendedTimeout: the item is handed back (HandBack) and planned in
//     the same pass as it is left. An agent that died meanwhile is resumed
//     on its own conversation as one lost with the fleet is (lost,
//     notACrash): the person's doing, no crash counted. The events that
//     queued go out one by one, each confirmed as any other.
//   - A handback that left the client attached (idle; released) is not
//     taken back until the session is seen with no client (MarkAttended
//     Gone): tmux counts loopd's own keys as that client's input.
//
// done is true when out is the item's whole plan. A loopd release hands an
// attended item back too (releaseAttended).
func (it *itemPlan) attend() (out []actions.Action, done bool) {
	if it.process || !it.pane.exists {
		return it.handBackIfAttended(actions.HandBackDetached, false)
	}
	pn, st := &it.pane, it.st // the item's own pane, a tmux one
	switch {
	case !st.Attended() && pn.clients > 0 && !st.HandedBackLeft:
		take := actions.MarkAttended{Key: it.r.Key, Session: it.session, By: pn.attachedBy}
		return []actions.Action{take, it.waitAttended(pn.input)}, true
	case !st.Attended() && pn.clients == 0 && st.HandedBackLeft:
		gone := actions.MarkAttended{Key: it.r.Key, Session: it.session, Gone: true}
		r := *it.r
		r.Status = gone.Apply(st, it.now)
		return append([]actions.Action{gone}, planItem(&r, it.obs, it.p, it.now, it.loss, it.holds, it.seen)...), true
	case !st.Attended():
		return nil, false
	case pn.clients == 0:
		return it.handBackIfAttended(actions.HandBackDetached, false)
	case it.idle(pn.input):
		return it.handBackIfAttended(actions.HandBackIdle, true)
	}
	return []actions.Action{it.waitAttended(pn.input)}, true
}

// idle reports whether the person attending the item gave no input for
// Policy.AttendedTimeout: input is the session's last (an attach counts).
func (it *itemPlan) idle(input time.Time) bool {
	last := maxTime(input, it.st.AttendedSince.Truncate(time.Second))
	return it.p.AttendedTimeout > 0 && !it.now.Before(last.Add(it.p.AttendedTimeout))
}

// waitAttended is the wait of an attended item, until its idle timeout.
func (it *itemPlan) waitAttended(input time.Time) actions.Wait {
	w := actions.Wait{Key: it.r.Key, Reason: actions.ReasonAttended}
	if it.p.AttendedTimeout > 0 {
		w.Until = maxTime(input, it.st.AttendedSince.Truncate(time.Second)).Add(it.p.AttendedTimeout)
	}
	return w
}

// handBackIfAttended hands an attended item back (how, left: see
// HandBack) and plans the rest of the pass for it as the handback leaves
// it; an agent found dead is taken as lost while attended (lost). done is
// false, and out nil, for an item no one attends.
func (it *itemPlan) handBackIfAttended(how string, left bool) (out []actions.Action, done bool) {
	if !it.st.Attended() {
		return nil, false
	}
	hb := it.handBack(how, left)
	r := *it.r
	r.Status = hb.Apply(it.st, it.now)
	loss := it.loss
	if !it.pane.alive {
		loss = actions.ReasonAttended
	}
	return append([]actions.Action{hb}, planItem(&r, it.obs, it.p, it.now, loss, it.holds, it.seen)...), true
}

// handBack is the HandBack of the attended item, with the events pending
// for it, oldest first.
func (it *itemPlan) handBack(how string, left bool) actions.HandBack {
	ids := make([]string, 0, len(it.pending))
	for _, d := range it.pending {
		ids = append(ids, d.ID)
	}
	return actions.HandBack{Key: it.r.Key, Session: it.session, By: it.st.AttendedBy, Since: it.st.AttendedSince, How: how, Left: left,
		Deliveries: slices.Clip(ids)}
}

// releaseAttended is the handback of an attended item that loopd release
// brings back (release), with st the status the handback leaves; none for
// an item no one attends. The client may stay attached (Left).
func releaseAttended(it *itemPlan, now time.Time) ([]actions.Action, desired.Status) {
	r := it.r
	if !r.Status.Attended() {
		return nil, r.Status
	}
	pn, _ := it.obs.Snapshot.Pane(it.session)
	hb := it.handBack(actions.HandBackReleased, it.pane.exists && pn.Clients > 0)
	return []actions.Action{hb}, hb.Apply(r.Status, now)
}
