package reconciler

import (
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// freshNudge is the prompt of a respawn in a new conversation
// (desired.FreshNudgePrompt), for why, the resume_failed reason that made it
// fresh: ResumeCrashLoop says the agent kept exiting; any other says its
// conversation could not be resumed; actions.ReasonReleased says an
// operator asked for it (loopd release --fresh); "" (resume opted out)
// says neither.
func freshNudge(k desired.Key, kind desired.Kind, why actions.Reason) string {
	cause := desired.FreshNotResumed
	switch why {
	case "":
		cause = desired.FreshOptedOut
	case actions.ReasonReleased:
		cause = desired.FreshReleased
	case actions.ResumeCrashLoop:
		cause = desired.FreshCrashLoop
	}
	return desired.FreshNudgePrompt(k, kind, cause)
}

// handBackTold is what the first prompt after a handback names: the
// pending deliveries, oldest first, by id and by header line.
func (it *itemPlan) handBackTold() (ids, headers []string) {
	for _, p := range it.pending {
		ids, headers = append(ids, p.ID), append(headers, p.Header)
	}
	return ids, headers
}

// nudgeCause is the desired.NudgeCause NudgePrompt names for a resume
// planned for reason.
func nudgeCause(reason actions.Reason) desired.NudgeCause {
	switch reason {
	case actions.ReasonReleased:
		return desired.NudgeReleased
	case actions.ReasonServerLost, actions.ReasonOutage:
		return desired.NudgeServerLost
	case actions.ReasonQueued:
		return desired.NudgeQueued
	}
	return desired.NudgeExited
}

// Plan compares desired records with what one pass observed and returns the
// actions that move each item toward its desired state, in key order, the
// stops of the items this host does not own (and a draining host's
// hand-overs) first and the items that spawn last (each item's actions
// stay in their order). It is
// pure: no I/O, no clock, no randomness; the same input gives the same
// output. New session ids are minted by the executor, not here.
func Plan(items []desired.Record, obs observed.Observation, p Policy, now time.Time) []actions.Action {
	p = p.withRoutes(items)
	return planAcross(items, obs, p, now, acrossOf(items, obs, p, now))
}

// across is what a pass settles across the items before it plans any one
// of them: whether their agents were lost together (lossOf), and which
// accounts a usage limit holds (limitHolds). The loop keeps it for what
// it journals and measures after the plan, so neither is worked out twice.
type across struct {
	loss  Loss
	holds map[string]LimitHold
	// claimed are the conversation ids the records name, with the items
	// that name each (claimedIDs): a conversation learned or followed for
	// one item is never another's.
	claimed map[string][]desired.Key
	// only, when not nil, are the items planned (a pane death's, handled
	// first: Reconciler.healFirst); the others get no action, and count
	// toward the host's capacity as their records stand.
	only map[desired.Key]bool
	// seen are the items' sessions and panes (seenPane), one for each of
	// the items acrossOf was given, in their order; nil when not sorted
	// out ahead (each plan then looks its item's pane up itself).
	seen []seenPane
}

// seenPane is an item's session name and its pane as the pass sorted it
// (paneOf), worked out once per item and pass: the loss (lossOf) and the
// item's own plan (itemPlan.observe) both need it, and neither the
// session's name nor the pane's sorting depends on anything the plan
// changes before it observes (the record's key and harness, the snapshot,
// the owner mark).
type seenPane struct {
	session string
	pane    observedPane
	foreign bool
}

// acrossOf settles across for items. Only the agents of the items this
// host owns count toward a loss: another host's are not expected here.
func acrossOf(items []desired.Record, obs observed.Observation, p Policy, now time.Time) across {
	seen := make([]seenPane, len(items))
	ptrs := make([]*desired.Record, 0, len(items))
	owned := make([]*seenPane, 0, len(items))
	for i := range items {
		r, s := &items[i], &seen[i]
		s.session = desired.SessionName(r.Key)
		s.pane, s.foreign = paneOf(r, s.session, &obs, &p)
		if owns(*r, p) {
			ptrs, owned = append(ptrs, r), append(owned, s)
		}
	}
	return across{loss: lossWith(ptrs, owned, obs, p), holds: limitHolds(items, obs, p, now), claimed: claimedIDs(items), seen: seen}
}

// planAcross is Plan with what is settled across the items (x) given.
func planAcross(items []desired.Record, obsv observed.Observation, pol Policy, now time.Time, x across) []actions.Action {
	// The items' plans read the observation and the policy by pointer, as
	// both are large.
	obs, p := &obsv, &pol
	// Sort indexes, not the large records; the store already returns key
	// order, so this is usually a check.
	sorted := make([]int, len(items))
	for i := range items {
		sorted[i] = i
	}
	byKey := func(a, b int) int { return compareKeys(items[a].Key, items[b].Key) }
	if !slices.IsSortedFunc(sorted, byKey) {
		slices.SortFunc(sorted, byKey)
	}
	seen := func(i int) *seenPane {
		if len(x.seen) != len(items) {
			return nil
		}
		return &x.seen[i]
	}
	// An item this host does not own only has its local agent stopped,
	// and a draining host hands over the items it owns; both go first.
	var out, spawning []actions.Action
	mine := make([]*desired.Record, 0, len(sorted))
	mineSeen := make([]*seenPane, 0, len(sorted))
	for _, i := range sorted {
		r := &items[i]
		switch {
		case x.only != nil && !x.only[r.Key]:
			if owns(*r, *p) && !p.Draining {
				mine, mineSeen = append(mine, r), append(mineSeen, nil) // admission counts it
			}
		case !owns(*r, *p):
			out = append(out, relinquish(r, obs, p)...)
		case p.Draining:
			out = append(out, handover(r, obs, p)...)
		default:
			mine, mineSeen = append(mine, r), append(mineSeen, seen(i))
		}
	}
	plans := make([][]actions.Action, len(mine))
	for i, r := range mine {
		if x.only != nil && !x.only[r.Key] {
			continue
		}
		// The reports in the item's channel count from here on, for its
		// own plan and for admission (a start its report ended), in a
		// copy: Plan never writes its input. A record with none is not
		// copied.
		var taken []actions.Action
		if len(obs.Reports[r.Key]) > 0 {
			var rec desired.Record
			taken, rec = takeReports(*r, *obs, *p, now)
			mine[i] = &rec
		}
		plans[i] = append(taken, planRecord(mine[i], obs, p, now, x, mineSeen[i])...)
	}
	// The host's capacity is shared by the items, so it is applied to
	// their plans together.
	admit(mine, plans, *p, now)
	// The spawns go last, so that the stops, exits and parks that freed
	// their slots are carried out before them: the host never runs more
	// agents than its capacity, even for a moment.
	for _, plan := range plans {
		if spawnIndex(plan) >= 0 {
			spawning = append(spawning, plan...)
			continue
		}
		out = append(out, plan...)
	}
	return append(out, spawning...)
}

// planRecord plans one item. Before any decision it settles which
// conversation the item is in (follow), carries out a pending release
// (release), drops the agent's own pushes (dropOwnPushes), confirms
// what the conversation already holds (checkConversation) and plans the
// questions and answers of its approvals (approve); each returns
// the record as the executor will leave it, so the decisions that follow
// start from there. loss is the pass's Loss.Reason (lossOf), holds the
// usage-limit holds (limitHolds). An item whose conversation id is
// still to be learned learns it first (learn). r, obs and p are read, never
// written: a step that changes the record returns a changed copy. seen is
// the item's session and pane as the pass sorted them, nil to look them up.
func planRecord(r *desired.Record, obs *observed.Observation, p *Policy, now time.Time, x across, seen *seenPane) []actions.Action {
	loss, holds := x.loss.Reason, x.holds
	if learned := learn(r, obs, p, now, x.claimed); learned != nil {
		return learned
	}
	out, r, obs := follow(r, obs, p, x.claimed)
	for _, step := range [...]func(*desired.Record, *observed.Observation, *Policy) ([]actions.Action, *desired.Record, bool){release, dropOwnPushes, checkConversation} {
		pre, rec, done := step(r, obs, p)
		out, r = append(out, pre...), rec
		if done {
			return out
		}
	}
	asked, r := approve(r, obs, p, now)
	out = append(out, asked...)
	if from := movedFrom(r, p); from != "" {
		it := itemPlan{r: r, st: r.Status, session: desired.SessionName(r.Key), obs: obs, p: p, now: now, pending: r.Pending, loss: loss, holds: holds}
		it.observe()
		if m := it.moved(from); m != nil {
			return append(out, m...)
		}
	}
	return append(out, planBudgeted(r, obs, p, now, loss, holds, seen)...)
}

// follow makes the conversation the harness reported
// (desired.Record.ReportedConversation) the item's, before anything is
// decided on it, when it may be the item's (followable): a FollowSession,
// and the new conversation's transcript stands for the item's in the rest
// of the plan (observed.Observation.WithTranscript), so that a resume, a
// release or a fresh fallback takes the conversation the agent is actually
// in, even when the agent died before a pass saw the report. One that may
// not be (yet) leaves the item in its recorded conversation.
func follow(rp *desired.Record, obs *observed.Observation, p *Policy, claimed map[string][]desired.Key) ([]actions.Action, *desired.Record, *observed.Observation) {
	to := rp.ReportedConversation(p.Harnesses[rp.Spec.Harness].AcceptsSessionID)
	tr, read := obs.Reported[rp.Key][to]
	if to == "" || !followable(rp, to, tr, read, claimed) {
		return nil, rp, obs
	}
	r := *rp
	a := actions.FollowSession{Key: r.Key, Session: desired.SessionName(r.Key), From: r.Status.HarnessSessionID, To: to, Source: r.Report.Source}
	r.Status = r.Status.Follow(to)
	o := obs.WithTranscript(r.Key, tr)
	return []actions.Action{a}, &r, &o
}

// followable reports whether item r may move to the conversation id its
// harness reported, whose transcript where the item's own harness keeps
// them for its workdir is tr (read false: not read this pass). A report is
// the agent's word, and the agent is untrusted: it could name a
// conversation it never had, another item's (two items may share a
// workdir), one retired for good, or one planted by hand. The transcript
// is the harness's own trace, so the item moves only to a conversation
// whose transcript appeared in the item's own harness state since its
// spawn (known, with a turn, last written no earlier than the spawn's
// second: some file systems keep whole seconds), that the item never
// retired, and that no other record names (claimed). Until the
// transcript appears (Claude Code writes it at the first prompt after a
// /clear) the report waits in the store, and each pass looks again.
func followable(r *desired.Record, id string, tr harness.Transcript, read bool, claimed map[string][]desired.Key) bool {
	switch {
	case !read || !tr.Known || !tr.Exists || tr.ModTime.Before(r.Status.SpawnedAt.Truncate(time.Second)):
		return false
	case slices.Contains(r.Status.RetiredSessionIDs, id):
		return false
	}
	for _, k := range claimed[id] {
		if k != r.Key {
			return false
		}
	}
	return true
}

// learn makes the conversation the harness started for r's current spawn
// r's conversation, when the harness cannot pin its id (Codex) and the id
// is unconfirmed: among the conversations the harness started in the
// item's workdir since the spawn (observed.Observation.Started), the one
// that fits it (startedBy): its first user message holds the spawn's boot
// line, and its id no record names (claimed). Exactly one must fit: it
// plans a FollowSession from no id to that one and a Wait of a poll
// period (the pass read no transcript for an id it did not know, so the
// next one plans on it). Two or more are never settled by a guess: an
// Ambiguous journals them once, and the id stays unknown. nil when there
// is nothing to learn.
func learn(r *desired.Record, obs *observed.Observation, p *Policy, now time.Time, claimed map[string][]desired.Key) []actions.Action {
	st, caps := &r.Status, p.Harnesses[r.Spec.Harness]
	if !st.IDUnconfirmed || !caps.LearnsSessionID {
		return nil
	}
	var fits []string
	for _, s := range obs.Started[r.Key] {
		if len(claimed[s.ID]) == 0 && caps.AcceptsSessionID(s.ID) && startedBy(s, r) {
			fits = append(fits, s.ID)
		}
	}
	session := desired.SessionName(r.Key)
	switch {
	case len(fits) == 1:
		return []actions.Action{
			actions.FollowSession{Key: r.Key, Session: session, To: fits[0], Source: actions.SourceRollout},
			actions.Wait{Key: r.Key, Until: now.Add(p.Poll), Reason: actions.ReasonSessionLearned},
		}
	case len(fits) > 1 && !slices.Equal(fits, st.AmbiguousIDs):
		return []actions.Action{actions.Ambiguous{Key: r.Key, Session: session, Candidates: fits}}
	}
	return nil
}

// startedBy reports whether the conversation s was started by r's current
// spawn: its first user message ends with r's desired.AgentBrief, which
// the executor appends to every fresh spawn's boot prompt and no payload
// text can follow, and holds the spawn's boot line
// (desired.BootLine(Status.BootID)), which names this spawn and no other;
// a spawn recorded before boot ids is told by the time instead (started
// at or after it).
func startedBy(s harness.Started, r *desired.Record) bool {
	st := r.Status
	first := strings.TrimSpace(s.First)
	if !strings.HasSuffix(first, desired.AgentBrief(r.Key)) {
		return false
	}
	if st.BootID == "" {
		return !s.At.Before(st.SpawnedAt.Truncate(time.Millisecond))
	}
	return strings.Contains(first, desired.BootLine(st.BootID))
}

// claimedIDs returns every conversation id records name (recorded,
// confirmed, reported or retired), with the items that name it, each
// once: a record's own key is the last one added while its names are.
func claimedIDs(records []desired.Record) map[string][]desired.Key {
	ids := map[string][]desired.Key{}
	for i := range records {
		r := &records[i]
		st := &r.Status
		claim := func(id string) {
			if keys := ids[id]; id != "" && (len(keys) == 0 || keys[len(keys)-1] != r.Key) {
				ids[id] = append(keys, r.Key)
			}
		}
		claim(st.HarnessSessionID)
		claim(st.ConfirmedSessionID)
		for _, id := range st.RetiredSessionIDs {
			claim(id)
		}
		if r.Report != nil {
			claim(r.Report.SessionID)
		}
	}
	return ids
}

// release carries out an operator's release that the item has not seen
// yet (desired.Record.ReleasePending): the restart budget's counts and
// NeedsAttention are cleared. An item whose harness is alive in the pane
// the record names stays Running (there is nothing to bring back, and
// nothing to adopt); one that had a session is brought back at once,
// resuming its conversation; release --fresh retires the conversation and
// starts a new one. A closed item keeps its release for when it is
// reopened.
func release(rp *desired.Record, obs *observed.Observation, p *Policy) ([]actions.Action, *desired.Record, bool) {
	if !rp.ReleasePending() || rp.Spec.Closed {
		return nil, rp, false
	}
	r := *rp
	it := itemPlan{r: rp, st: r.Status, session: desired.SessionName(r.Key), obs: obs, p: p, pending: r.Pending}
	it.observe()
	handback, st := releaseAttended(&it, obs.Snapshot.At)
	a := actions.Release{Key: r.Key, Session: it.session, Generation: r.Spec.ReleaseGeneration, Fresh: r.Spec.ReleaseFresh, Phase: desired.PhaseIdle}
	switch {
	case a.Fresh:
		a.RetireID = st.HarnessSessionID
		if st.HarnessSessionID != "" {
			a.Phase = desired.PhaseBackingOff
		}
	case st.Phase == desired.PhaseSpawning:
		a.Phase = st.Phase // its probe decides
	case it.pane.alive && st.PaneID == it.pane.id && st.SpawnDeliveryID == "":
		a.Phase = desired.PhaseRunning
	case st.HadConversation():
		a.Phase = desired.PhaseBackingOff
	}
	if it.process {
		// A run is started for an event only: one in flight goes on, and
		// the item's pending events start the next from Idle.
		a.Phase = desired.PhaseIdle
		if it.pane.alive {
			a.Phase = st.Phase
		}
	}
	if sc, ok := obs.Screens[r.Key]; ok && sc.Limit != nil {
		a.Shown = seenOf(*sc.Limit, it.pane.id)
	}
	r.Status = a.Apply(st)
	return append(handback, a), &r, false
}

// checkConversation applies the rule that nothing is sent twice, before the
// item is planned: a pending event that its conversation already holds
// whole is delivered (ConfirmDelivery via=transcript), and rec comes back
// as the executor will leave it, so that no spawn, paste or release sends
// the event again. An operator may have let a boot prompt stuck behind a
// dialog through by hand, or the daemon may have died between a send and
// its record. The paste in flight and the boot prompt of a spawn being
// probed are left to their own confirmation (landed). An open item whose
// conversation holds a pending event mangled, in more messages than
// already reported, needs attention (done is true): see newlyMangled.
func checkConversation(rp *desired.Record, obs *observed.Observation, _ *Policy) (pre []actions.Action, rec *desired.Record, done bool) {
	frames, read := obs.Frames[rp.Key]
	if !read {
		return nil, rp, false
	}
	r := *rp
	st, session := r.Status, desired.SessionName(r.Key)
	if !r.Spec.Closed && !r.Spec.Held {
		if id, copies := newlyMangled(&r, frames); id != "" {
			return []actions.Action{actions.GiveUp{Key: r.Key, Session: session, Reason: actions.ReasonDeliveryMangled, Mangled: id, Copies: copies}}, rp, true
		}
	}
	var pending []desired.Delivery
	for _, d := range r.Pending {
		inFlight := d.ID == st.SendingDeliveryID || (d.ID == st.SpawnDeliveryID && st.Phase == desired.PhaseSpawning)
		if inFlight || !reached(obs, r.Key, d.ID) {
			pending = append(pending, d)
			continue
		}
		pre = append(pre, actions.ConfirmDelivery{Key: r.Key, Session: session, DeliveryID: d.ID, Verified: true, Via: actions.ViaTranscript})
		r.Status = r.Status.Deliver(d.ID)
	}
	r.Pending = pending
	return pre, &r, false
}

// newlyMangled returns the first pending event whose frame r's
// conversation holds mangled in more messages than the item last reported
// (Status.MangledCopies), and that count. Such an event reached the agent
// damaged. It is not delivered, and not sent again by itself either: a CLI
// that mangled it once would mangle the copy too, and the agent would see
// two turns for one event. An operator's release, or a new event, sends
// it once more.
func newlyMangled(r *desired.Record, frames map[string]harness.Found) (string, int) {
	for _, d := range r.Pending {
		found := frames[d.ID]
		known := 0
		if d.ID == r.Status.MangledDeliveryID {
			known = r.Status.MangledCopies
		}
		if !found.Whole && found.Mangled > known {
			return d.ID, found.Mangled
		}
	}
	return "", 0
}

func compareKeys(a, b desired.Key) int {
	if c := strings.Compare(a.Owner, b.Owner); c != 0 {
		return c
	}
	if c := strings.Compare(a.Repo, b.Repo); c != 0 {
		return c
	}
	return a.Number - b.Number
}

// itemPlan carries one item through planItem.
type itemPlan struct {
	// r, obs and p are the item's record, the pass's observation and the
	// policy, by pointer as they are large; nothing of the plan writes
	// through them.
	r       *desired.Record
	st      desired.Status
	session string
	pane    observedPane
	// foreign is true when a session of the item's name exists without
	// this loopd's owner mark; pane is then left empty, as nothing of it is
	// the item's.
	foreign bool
	pending []desired.Delivery
	obs     *observed.Observation
	p       *Policy
	now     time.Time
	// loss is why the pass found agents lost together (Loss.Reason): a
	// death it takes is resumed, and not counted as a crash (notACrash).
	loss actions.Reason
	// holds are the usage-limit holds in force, by account (limitHolds).
	holds map[string]LimitHold
	// process is true for an item of the process runner (processRunner);
	// run is then its run as the pass read it, which pane stands for
	// (observeRun).
	process bool
	run     observed.Run
	// restoring is true when the plan restores the item's transcript
	// before its spawn (a moved item): the transcript the pass found
	// missing will be there.
	restoring bool
	// seen, when not nil, is the item's session and pane as the pass
	// sorted them (acrossOf), which observePane takes.
	seen *seenPane
}

// planOf returns the itemPlan of r, observed (itemPlan.observe), with its
// session and pane from seen when the pass sorted them already (nil: they
// are looked up).
func planOf(r *desired.Record, obs *observed.Observation, p *Policy, now time.Time, loss actions.Reason, holds map[string]LimitHold, seen *seenPane) itemPlan {
	it := itemPlan{r: r, st: r.Status, obs: obs, p: p, now: now, pending: r.Pending, loss: loss, holds: holds, seen: seen}
	if seen != nil {
		it.session = seen.session
	} else {
		it.session = desired.SessionName(r.Key)
	}
	it.observe()
	return it
}

// observedPane is the item's own pane as the pass saw it.
type observedPane struct {
	exists bool
	// alive is true while the harness itself runs in the pane: pane_dead
	// is 0 and the foreground process is one of the harness's names.
	alive bool
	// stray is the foreground process of a pane that lives but does not
	// run the harness (a shell the CLI left behind): a dead agent.
	stray  string
	id     string
	pid    int // the pane's process (tmux.Pane.PID)
	status int
	signal int
	known  bool
	// died is when tmux saw the pane die (tmux.Pane.DeadTime); zero while
	// it lives, and for a live pane without the harness, whose harness
	// died at a time tmux does not know.
	died time.Time
	// clients, attachedBy and input are the session's attached clients,
	// who attached last and when input last came (tmux.Pane.Clients,
	// AttachedBy, Input): whether a person attends the item (attend).
	clients    int
	attachedBy string
	input      time.Time
}

// observePane sorts the session's pane: foreign when it lacks this loopd's
// owner mark (an unset Owner makes every session foreign), else the item's
// own pane, alive only while the harness is its foreground process.
func (it *itemPlan) observePane() {
	if it.seen != nil {
		it.pane, it.foreign = it.seen.pane, it.seen.foreign
		return
	}
	it.pane, it.foreign = paneOf(it.r, it.session, it.obs, it.p)
}

// paneOf is observePane's sorting of the pane of r's session as obs saw
// it: the item's own pane, or foreign when the session exists without
// p's owner mark (the pane is then the zero observedPane).
func paneOf(r *desired.Record, session string, obs *observed.Observation, p *Policy) (pane observedPane, foreign bool) {
	pn, ok := obs.Snapshot.Panes[session]
	if !ok {
		return pane, false
	}
	if p.Owner == "" || pn.Owner != p.Owner {
		return pane, true
	}
	pane = observedPane{exists: true, id: pn.PaneID, pid: pn.PID, status: pn.DeadStatus, signal: pn.DeadSignal, known: pn.StatusKnown || !pn.Dead, died: pn.DeadTime,
		clients: pn.Clients, attachedBy: pn.AttachedBy, input: pn.Input}
	if pn.Dead {
		return pane, false
	}
	if runsHarness(p, r, pn) {
		pane.alive = true
	} else {
		pane.stray = pn.CurrentCommand
		if pane.stray == "" {
			pane.stray = "?"
		}
	}
	return pane, false
}

// ownPaneID returns the id of the item's own tmux pane as this pass saw it
// (observePane: in the item's session, with this loopd's owner mark), ""
// when there is none or the item's agent is a run of the process runner,
// whose id names no pane.
func (it *itemPlan) ownPaneID() string {
	if !it.pane.exists || it.process {
		return ""
	}
	return it.pane.id
}

// runsHarness reports whether pane's foreground process is r's harness, by
// the names its adapter gives (Capabilities.ProcessNames).
func runsHarness(p *Policy, r *desired.Record, pane observed.Pane) bool {
	return slices.Contains(p.Harnesses[r.Spec.Harness].ProcessNames, pane.CurrentCommand)
}

func planItem(r *desired.Record, obs *observed.Observation, p *Policy, now time.Time, loss actions.Reason, holds map[string]LimitHold, seen *seenPane) []actions.Action {
	it := planOf(r, obs, p, now, loss, holds, seen)

	if r.Spec.Closed || r.Spec.Held {
		reason := actions.ReasonClosed
		if r.Spec.Held {
			reason = actions.ReasonHeld
		}
		var out []actions.Action
		if it.pane.exists || it.st.Phase != desired.PhaseStopped {
			// An event already in the conversation stays delivered; one
			// that had not landed stays pending for when the item runs again.
			landed, _ := it.landed()
			out = append(out, actions.StopSession{Key: r.Key, Session: it.session, Reason: reason, Delivered: landed})
		}
		return append(out, it.closeWorkspace()...)
	}
	if _, known := p.Harnesses[r.Spec.Harness]; !known && it.pane.exists {
		// The config no longer names the harness its agent runs under:
		// nothing is done to the agent, alive or dead (no paste, no
		// kill, no exit counted) until the harness is back, and the
		// other items are planned as ever.
		return []actions.Action{actions.Block{Key: r.Key, Reason: actions.ReasonHarnessUnknown, Detail: r.Spec.Harness}}
	}
	if out, done := it.attend(); done {
		return out // takeover and handback (attended.go)
	}

	phase := it.st.Phase
	switch phase {
	case "", desired.PhaseStopped:
		// Reopened or released: start over, keeping the conversation id.
		phase = desired.PhaseIdle
	case desired.PhaseParked:
		if len(it.pending) == 0 && !it.pane.alive {
			// Only an event brings a parked agent back.
			return []actions.Action{actions.Wait{Key: r.Key, Reason: actions.ReasonParked}}
		}
		// Its next event resumes it, through admission.
		phase = desired.PhaseIdle
	case desired.PhaseNeedsAttention:
		if resumed := it.unblocked(); resumed != nil {
			return resumed
		}
		if r.Spec.Generation <= it.st.AttentionGeneration || len(it.pending) == 0 || it.st.Reason == string(actions.ReasonDeliveryStorm) {
			// A delivery storm ends only with loopd release: a new event
			// is more of the storm.
			return []actions.Action{actions.Wait{Key: r.Key, Reason: actions.ReasonNeedsAttention}}
		}
		// A new event clears NeedsAttention and earns one more attempt.
		phase = desired.PhaseIdle
	}

	if it.process {
		return it.planRun(phase)
	}
	if it.foreign {
		if (phase == desired.PhaseIdle || phase == desired.PhaseExited) && len(it.pending) == 0 && !it.st.FreshRequested {
			return nil // nothing to do that would need the session
		}
		return []actions.Action{actions.Block{Key: r.Key, Reason: actions.ReasonSessionForeign, Detail: it.session}}
	}
	if phase == desired.PhaseRateLimited {
		return it.planLimited()
	}
	if it.st.FreshRequested && phase != desired.PhaseSpawning {
		// release --fresh: a new conversation now, replacing a live agent
		// too (the spawn kills its session first).
		return it.spawn(&it.st, actions.ReasonReleased, "")
	}
	if len(it.pending) > 0 && phase != desired.PhaseSpawning && it.st.SendingDeliveryID == "" && stormed(r, p, now) {
		// The loop breaker, before another event goes out; what is in
		// flight is let land first.
		return []actions.Action{actions.GiveUp{Key: r.Key, Session: it.session, Reason: actions.ReasonDeliveryStorm}}
	}
	if it.pane.alive {
		// A usage limit or a screen that needs a human is seen before
		// anything else is decided on the live agent.
		if limited, ok := it.limitSeen(); ok {
			return limited
		}
		return append(it.markBlocked(), it.planAlive(phase)...)
	}
	if it.pane.stray != "" && phase == desired.PhaseSpawning {
		// Right after new-session the pane briefly runs a launcher (or the
		// shell tmux starts the command with) before the harness: judged
		// from the probe deadline on, and never before a poll period.
		// loopd's own launcher and a sandbox still being made are the
		// harness's start, however long a loaded machine makes it, up to
		// the confirm timeout (Policy.starting).
		judge := maxTime(it.st.ProbeDeadline, it.st.SpawnedAt.Add(it.p.Poll))
		look := judge
		if it.p.starting(it.pane.stray) {
			judge = maxTime(judge, it.st.SpawnedAt.Add(it.p.ConfirmTimeout))
			look = minTime(judge, it.now.Add(it.p.Poll))
		}
		if it.now.Before(judge) {
			return []actions.Action{actions.Wait{Key: r.Key, Until: look, Reason: actions.ReasonProbing}}
		}
	}
	return it.planDown(phase)
}

// planAlive handles a session whose pane is alive.
func (it *itemPlan) planAlive(phase desired.Phase) []actions.Action {
	st := &it.st
	switch {
	case phase == desired.PhaseSpawning:
		booted, _ := it.booted()
		if st.SpawnMode == desired.SpawnResume && !booted {
			if it.choosing() {
				return it.resumeChooser()
			}
			if sc, ok := it.obs.Screens[it.r.Key]; ok && sc.Refusal != "" {
				// A CLI that stays up printing its refusal refused as
				// one that exits on it does.
				exit := actions.RecordExit{Key: it.r.Key, Session: it.session, ExitStatus: -1, PaneID: it.ownPaneID()}
				return it.refusedResume(sc.Refusal, exit, false)
			}
		}
		if it.now.Before(st.ProbeDeadline) {
			return []actions.Action{actions.Wait{Key: it.r.Key, Until: st.ProbeDeadline, Reason: actions.ReasonProbing}}
		}
		// A spawn, fresh or resumed, holds once its boot prompt is in the
		// conversation (a trust dialog holds it alive with nothing done;
		// the harness's report says only that its CLI runs).
		if !booted {
			unconfirmed := actions.ReasonSpawnUnconfirmed
			if st.SpawnMode == desired.SpawnResume {
				unconfirmed = actions.ReasonUnconfirmed
			}
			giveUpAt := st.SpawnedAt.Add(it.p.ConfirmTimeout)
			if !it.now.Before(giveUpAt) {
				return []actions.Action{actions.GiveUp{Key: it.r.Key, Session: it.session, Reason: unconfirmed}}
			}
			waiting := actions.ReasonAwaitingConfirm
			if st.IDUnconfirmed {
				waiting = actions.ReasonAwaitingSessionID
			}
			return []actions.Action{actions.Wait{Key: it.r.Key, Until: minTime(it.now.Add(it.p.Poll), giveUpAt), Reason: waiting}}
		}
		landed, _ := it.landed()
		return append([]actions.Action{it.markRunning(true, landed, actions.ReasonConfirmed)}, it.deliver(landed)...)
	case phase == desired.PhaseRunning && (st.PaneID == "" || st.PaneID == it.pane.id):
		if st.Reason == string(actions.ReasonHarnessUnknown) {
			// Its harness is back in the config: the agent that ran on
			// meanwhile is taken over again.
			return append([]actions.Action{it.markRunning(false, "", actions.ReasonAdopted)}, it.deliver("")...)
		}
		if st.SendingDeliveryID != "" {
			return it.confirmSend()
		}
		if park := it.park(); park != nil {
			return park
		}
		return it.deliver("")
	default:
		if it.orphan() {
			// Its spawn kills the session first.
			return it.spawn(st, actions.ReasonOrphanAgent, "")
		}
		// A live pane the record does not account for (the daemon died
		// between starting it and recording it, or the record was reset):
		// adopt it rather than start a second agent on the same session.
		return append([]actions.Action{it.markRunning(false, "", actions.ReasonAdopted)}, it.deliver("")...)
	}
}

// orphan reports whether the live agent of a pane the record does not
// account for runs a conversation the record knows nothing of: no id, and
// none being learned, under a harness that keeps its conversations
// (SupportsResume). A spawn records its id before the harness starts (or
// that it learns one), so only a store removed or reset under running
// agents leaves such a pane: a paste to it would count as delivered
// unchecked (unverifiable), and it cannot be resumed (ReasonOrphanAgent).
func (it *itemPlan) orphan() bool {
	st := it.st
	return st.HarnessSessionID == "" && !st.IDUnconfirmed && it.p.Harnesses[it.r.Spec.Harness].SupportsResume
}

// unblocked plans the return to Running of an item that needs attention
// because its spawn's boot prompt was never seen (awaitingBoot: a dialog
// held it past the confirm timeout), once a person answered the dialog:
// its harness runs in its pane, and the boot prompt is in the
// conversation or the screen shows the input box, ready, with nothing
// blocking it. The boot prompt's event is delivered when it landed
// (landed), else it is pending again and pasted as any other, after the
// conversation is looked in (checkConversation): exactly once. nil when
// the item stays.
func (it *itemPlan) unblocked() []actions.Action {
	if !awaitingBoot(it.st) || !it.pane.alive || it.foreign || it.process {
		return nil
	}
	booted, _ := it.booted()
	sc, read := it.obs.Screens[it.r.Key]
	if !booted && (!read || !sc.Ready || sc.Blocked != "") {
		return nil
	}
	landed, _ := it.landed()
	return append([]actions.Action{it.markRunning(booted, landed, actions.ReasonUnblocked)}, it.deliver(landed)...)
}

// choosing reports whether the agent's screen shows a chooser instead of
// the conversation a resume asked for: Codex's "Working directory ·
// resume" chooser (the rollout's cwd is not this one), or a resume picker.
// loopd never answers either.
func (it *itemPlan) choosing() bool {
	sc, ok := it.obs.Screens[it.r.Key]
	return ok && (sc.Blocked == harness.BlockResumeChooser || sc.Blocked == harness.BlockResumePicker)
}

// resumeChooser plans a resume that opened a chooser as a resume that did
// not hold: the exit is recorded with the counts as they were, and a fresh
// spawn with the same event replaces the session (its spawn kills it
// first), as for a resume that died in its probe window.
func (it *itemPlan) resumeChooser() []actions.Action {
	st := it.st
	exit := actions.RecordExit{Key: it.r.Key, Session: it.session, ExitStatus: -1, Reason: actions.ReasonResumeFailed, Phase: desired.PhaseExited,
		Failures: st.Failures, FastFailures: st.FastFailures, ChurnFailures: st.ChurnFailures, PaneID: it.ownPaneID()}
	return append([]actions.Action{exit}, it.spawn(&st, actions.ReasonResumeFailed, actions.ResumeChooser)...)
}

func (it *itemPlan) markRunning(confirmed bool, deliveryID string, reason actions.Reason) actions.Action {
	return actions.MarkRunning{
		Key: it.r.Key, Session: it.session, PaneID: it.pane.id, SessionID: it.st.HarnessSessionID,
		Mode: it.st.SpawnMode, Confirmed: confirmed, DeliveryID: deliveryID,
		Respawn: it.st.Phase == desired.PhaseSpawning && respawned(it.st), PID: it.pane.pid, Reason: reason,
	}
}

// respawned reports whether the current spawn replaced an earlier session:
// any resume does, and so does a fresh spawn once the item has run before.
func respawned(st desired.Status) bool {
	return st.SpawnMode == desired.SpawnResume || st.Respawn || !st.LastExitAt.IsZero()
}

// deliver plans the paste of the oldest pending delivery except skip. One
// at a time: each is confirmed in the transcript before the next is sent.
// A harness that reports its session id gets nothing pasted before that
// report (its TUI may draw the input box before it reads input), for at
// most ConfirmTimeout after the spawn.
func (it *itemPlan) deliver(skip string) []actions.Action {
	for _, d := range it.pending {
		if d.ID == skip {
			continue
		}
		if until, held := it.held(); held {
			return it.waitHeld(until)
		}
		st := &it.st
		reported := it.r.ReportSinceSpawn() != nil
		if deadline := st.SpawnedAt.Add(it.p.ConfirmTimeout); it.p.Harnesses[it.r.Spec.Harness].ReportsSession && !reported && it.now.Before(deadline) {
			return []actions.Action{actions.Wait{Key: it.r.Key, Until: minTime(it.now.Add(it.p.Poll), deadline), Reason: actions.ReasonAwaitingStart}}
		}
		if fetch := it.headFetch(d); fetch != nil {
			return fetch
		}
		a := actions.DeliverPrompt{Key: it.r.Key, Session: it.session, PaneID: it.pane.id, DeliveryID: d.ID}
		if st.HandBackUntold {
			// The first paste after a handback tells what queued.
			var headers []string
			a.Told, headers = it.handBackTold()
			a.Preamble = desired.HandBackPrompt(it.r.Key, headers)
		}
		return []actions.Action{a}
	}
	return nil
}

// headFetch returns what comes before the paste of d when it is a pull
// request event that names a new head (a synchronize's commit) and the
// item has a clone: the fetch of the commit into its mirror (FetchHead),
// run by the item's workspace worker, never by the pass; a Wait while
// that fetch runs (its mirror's lock held: the worker wakes a pass when
// done). Nil once the fetch of that commit is done or failed (the event
// goes on either way), and for any other event or item. A fetch with no
// outcome whose mirror is not locked lost its worker (the daemon stopped)
// and is planned again.
func (it *itemPlan) headFetch(d desired.Delivery) []actions.Action {
	if d.Commit == "" || d.Event != "pull_request" || it.r.Spec.Kind != desired.KindPullRequest {
		return nil
	}
	w := workspaceOf(it.r, it.p)
	if w.checkout == nil || w.err != nil {
		return nil
	}
	hf := it.st.HeadFetch
	switch {
	case hf.Commit == d.Commit && hf.Outcome != "":
		return nil
	case hf.Commit == d.Commit && it.obs.Workdirs[it.r.Key].Busy:
		return []actions.Action{actions.Wait{Key: it.r.Key, Reason: actions.ReasonHeadFetching}}
	}
	return []actions.Action{actions.FetchHead{Key: it.r.Key, DeliveryID: d.ID, URL: w.checkout.URL, PR: it.r.Key.Number, Commit: d.Commit}}
}

// confirmSend follows the pasted delivery in flight: confirmed once its body
// marker shows in the transcript (or at once when the harness has none to
// read); from a poll period after the send, text left in the input box is
// submitted; after DeliveryConfirm an empty box gets the paste again; past
// MaxSendAttempts the item needs attention, the delivery still pending.
func (it *itemPlan) confirmSend() []actions.Action {
	st, key := it.st, it.r.Key
	id := st.SendingDeliveryID
	landed, verified := it.landed()
	pending := slices.ContainsFunc(it.pending, func(d desired.Delivery) bool { return d.ID == id })
	repaste := !it.now.Before(st.SentAt.Add(it.p.DeliveryConfirm))
	switch {
	case landed == id || !pending:
		// An id still to be learned has no transcript to read yet: the
		// send is verified once it is known, never before.
		return []actions.Action{actions.ConfirmDelivery{Key: key, Session: it.session, DeliveryID: id, Verified: landed == id && verified, Via: actions.ViaPaste}}
	case it.now.Before(st.SentAt.Add(it.p.Poll)):
		return []actions.Action{actions.Wait{Key: key, Until: st.SentAt.Add(it.p.Poll), Reason: actions.ReasonAwaitingDelivery}}
	case repaste && st.SendAttempts >= it.p.MaxSendAttempts:
		return []actions.Action{actions.GiveUp{Key: key, Session: it.session, Reason: actions.ReasonUnconfirmedSend}}
	default:
		// Text left in the input box is submitted at once; an empty box
		// gets a second copy only after DeliveryConfirm.
		return []actions.Action{actions.DeliverPrompt{Key: key, Session: it.session, PaneID: it.pane.id, DeliveryID: id, Retry: true, Repaste: repaste}}
	}
}

// reached reports whether the conversation of item k, as the pass read it
// (observed.Observation.Frames), holds frame id whole: a delivery's frame
// or a spawn's boot line (desired.BootFrame). It is the one test of
// "delivered" (landed, booted and checkConversation ask it): a harness's
// report (the SessionStart hook) says that its CLI runs, never that a
// prompt reached the conversation.
func reached(obs *observed.Observation, k desired.Key, id string) bool {
	return id != "" && obs.Frames[k][id].Whole
}

// unverifiable reports whether nothing of the item's conversation can be
// seen: its harness has no transcript to read (harness.Transcript.Known
// false) and its id is not one still to be learned, whose transcript is
// only unknown yet.
func (it *itemPlan) unverifiable() bool {
	tr, ok := it.obs.Transcripts[it.r.Key]
	return (!ok || !tr.Known) && !it.st.IDUnconfirmed
}

// landed answers "did the event in flight reach the conversation?", the
// one rule by which the planner marks an event delivered, for a paste and
// for the boot prompt of a fresh spawn or of a resume alike: it returns
// the paste in flight (SendingDeliveryID) when its frame shows whole in
// the conversation (reached), else the boot prompt's event
// (SpawnDeliveryID) when the boot prompt landed (booted); "" when neither
// did. verified is false only where nothing of the conversation can be
// seen (unverifiable): the paste in flight then counts as landed once
// sent, and the boot prompt once its spawn lives past its probe. An event
// that landed is delivered, never sent again; one that did not stays
// pending and goes with the next spawn or paste.
func (it *itemPlan) landed() (id string, verified bool) {
	st := &it.st
	if id := st.SendingDeliveryID; id != "" {
		switch {
		case reached(it.obs, it.r.Key, id):
			return id, true
		case it.unverifiable():
			return id, false
		}
	}
	if id := st.SpawnDeliveryID; id != "" {
		if ok, verified := it.booted(); ok {
			return id, verified
		}
	}
	return "", false
}

// booted reports whether the current spawn's boot prompt reached the
// conversation: the frame of the event it carries (SpawnDeliveryID), or,
// booting with no event (a nudge, a usage limit's or a move's prompt, a
// long event's header line), its boot line (Status.BootID); where nothing
// can be seen (unverifiable, or a spawn recorded before boot ids), once
// the spawn lives past its probe deadline, and then verified is false.
// A spawn is confirmed by it, fresh or resumed, and nothing else.
func (it *itemPlan) booted() (ok, verified bool) {
	st := &it.st
	boot := st.SpawnDeliveryID
	if boot == "" {
		boot = st.BootID
	}
	switch {
	case reached(it.obs, it.r.Key, boot):
		return true, true
	case it.unverifiable() || boot == "":
		return it.pane.alive && !it.now.Before(st.ProbeDeadline), false
	}
	return false, false
}

// planDown handles a session that is missing or whose pane is dead.
func (it *itemPlan) planDown(phase desired.Phase) []actions.Action {
	st := &it.st
	key := it.r.Key
	if phase == desired.PhaseSpawning && st.PaneID == "" && st.SpawnRefused != "" {
		return it.refused()
	}
	if (phase == desired.PhaseRunning || phase == desired.PhaseSpawning && st.PaneID != "") &&
		notACrash(it.loss, *st, it.pane.died, it.now, *it.p) {
		return it.lost()
	}
	if (phase == desired.PhaseRunning || phase == desired.PhaseSpawning && st.PaneID != "") &&
		it.pane.stray != "" && slices.Contains(st.HarnessNames, it.pane.stray) {
		// The pane runs the harness as its command was when it spawned,
		// which the config changed since: the operator's change, not a
		// crash, made to take effect on the same conversation.
		it.loss = actions.ReasonHarnessChanged
		return it.lost()
	}
	if (phase == desired.PhaseRunning || phase == desired.PhaseSpawning && st.PaneID != "") &&
		(!it.pane.exists && it.p.Relinquished[key] || it.p.Fenced) {
		// This host stopped the agent itself when its lease clock lapsed
		// (or a write was fenced), or its watchdog did, and holds the
		// item again: no crash.
		own := *it // the caller's plan of the item stays as it was
		it = &own
		it.loss = actions.ReasonLeaseLapsed
		return it.lost()
	}
	if phase == desired.PhaseSpawning || phase == desired.PhaseRunning {
		if it.pane.exists && !it.pane.known {
			// tmux ≤ 3.4 may not have reaped the pane yet: the status is not
			// known, which is not a clean exit. The next pass kicks again.
			return []actions.Action{actions.Wait{Key: key, Until: it.now.Add(it.p.Poll), Reason: actions.ReasonStatusPending}}
		}
	}
	switch phase {
	case desired.PhaseSpawning:
		if st.PaneID == "" {
			// The spawn was recorded but never started: start it again.
			return it.spawn(st, actions.ReasonSpawnInterrupted, "")
		}
		exit := it.exit(actions.ReasonSpawnDied)
		// The boot prompt that reached the transcript before the pane
		// died was delivered and must not be sent again.
		landed, _ := it.landed()
		exit.Delivered = it.delivered(landed)
		if booted, _ := it.booted(); st.SpawnMode == desired.SpawnResume && !booted && !exit.Clean {
			if refusal := it.said().Refusal; refusal != "" {
				return it.refusedResume(refusal, exit, true)
			}
			// Not the harness's word (a signal, an OOM kill, a crash with
			// other last words): a crash of this same conversation, which
			// is counted, backed off and resumed again with its event.
			exit.Reason, exit.DeliveryID = actions.ReasonCrash, st.SpawnDeliveryID
			return it.afterExit(exit, true)
		}
		if st.SpawnMode == desired.SpawnResume || landed != "" {
			// A confirmed resume, or a fresh spawn whose prompt landed, that
			// died is a crash of a running session.
			exit.Reason = actions.ReasonCrash
			return it.afterExit(exit, false)
		}
		// A fresh spawn that died never ran: its delivery stays pending.
		exit.DeliveryID = st.SpawnDeliveryID
		if it.exitedAtOnce(exit) {
			exit.Reason = actions.ReasonHarnessExitedAtOnce
		}
		return it.afterExit(exit, true)
	case desired.PhaseRunning:
		reason := actions.ReasonCrash
		switch {
		case !it.pane.exists:
			reason = actions.ReasonSessionMissing
		case it.pane.stray != "":
			reason = actions.ReasonForegroundNotHarness
		}
		exit := it.exit(reason)
		// The paste in flight that reached the conversation before the
		// death is delivered, not to be sent again.
		landed, _ := it.landed()
		exit.Delivered = it.delivered(landed)
		return it.afterExit(exit, false)
	case desired.PhasePreparing:
		// The spawn that was planned after the preparation, once it is done.
		return it.spawn(st, actions.ReasonNewEvent, "")
	case desired.PhaseQueued:
		// Its turn may have come (admit decides): events pending or not,
		// a queued item needs its agent; one that moved here and waited
		// for a slot resumes as a move.
		if movedSinceSpawn(*st) {
			return it.spawn(st, actions.ReasonHostMoved, "")
		}
		return it.spawn(st, actions.ReasonQueued, "")
	case desired.PhaseBackingOff:
		if it.now.Before(st.NextAttempt) {
			return []actions.Action{actions.Wait{Key: key, Until: st.NextAttempt, Reason: actions.ReasonBackoff}}
		}
		why := restartReason(actions.Reason(st.LastExitReason))
		if st.Reason == string(actions.ReasonReleased) {
			// Brought back by loopd release (desired.Status.Released), not
			// by its last exit.
			why = actions.ReasonReleased
		}
		return it.spawn(st, why, "")
	default: // Idle, Exited: only an event brings it back.
		if len(it.pending) == 0 {
			return nil
		}
		return it.spawn(st, actions.ReasonNewEvent, "")
	}
}

// exitedAtOnce reports whether exit, the death of a fresh spawn whose
// prompt never landed, is its harness exiting by itself within FastFail
// before its conversation started: an own exit (ownExit) and no
// transcript of its id (where the adapter can tell). Such a command fails
// the same way under any id (actions.ReasonHarnessExitedAtOnce).
func (it *itemPlan) exitedAtOnce(exit actions.RecordExit) bool {
	if !ownExit(exit) || it.process {
		return false
	}
	if tr, ok := it.obs.Transcripts[it.r.Key]; ok && tr.Known && tr.Exists {
		return false
	}
	h := History{SpawnedAt: it.st.SpawnedAt, DiedAt: it.pane.died}
	return h.diedAt(it.now).Sub(it.st.SpawnedAt) < it.p.FastFail
}

// neverStarted reports whether st's conversation id was never used: its
// last spawn was fresh, never confirmed, and its harness exited at once
// (exitedAtOnce). The next spawn pins the same id again.
func neverStarted(st desired.Status) bool {
	return actions.Reason(st.LastExitReason) == actions.ReasonHarnessExitedAtOnce && st.SpawnMode == desired.SpawnFresh &&
		st.ConfirmedSessionID == "" && st.HarnessSessionID != ""
}

// lost plans the agent's death in a loss of the whole fleet (a lost
// server, an outage) that notACrash did not count, or the end of an
// agent that runs a harness command the config has changed since
// (harness_changed): the exit is recorded with the loss as its reason
// and the counts as they were, and the item
// is resumed at once through the usual spawn, on its own conversation. A
// boot prompt or a paste that had landed is delivered; one that had not
// goes with the spawn. The phase is BackingOff with the next attempt now,
// so a pass that does not start the spawn (one that fails, or a cap on
// spawns in flight) leaves the item to the usual BackingOff path, which
// spawns it as soon as it may (restartReason keeps the loss as reason).
func (it *itemPlan) lost() []actions.Action {
	st := &it.st
	exit := it.exit(it.loss)
	landed, _ := it.landed()
	exit.Delivered = it.delivered(landed)
	exit.Phase, exit.NextAttempt = desired.PhaseBackingOff, it.now
	exit.Failures, exit.FastFailures, exit.ChurnFailures = st.Failures, st.FastFailures, st.ChurnFailures
	return append([]actions.Action{exit}, it.spawn(st, it.loss, "")...)
}

// delivered drops delivery id, which landed, from the item's pending
// events for the rest of the plan, and returns it.
func (it *itemPlan) delivered(id string) string {
	if id != "" {
		it.pending = slices.DeleteFunc(slices.Clone(it.pending), func(d desired.Delivery) bool { return d.ID == id })
	}
	return id
}

// refused plans what follows a spawn that was refused before it started
// (Status.SpawnRefused, recorded by the executor): a failed dispatch,
// resume or fresh, which counts as a failure and backs off through the
// restart decision like any other. tmux's refusal (a lost server, a kill
// of the old session that failed) is no word of the harness's: a refused
// resume keeps its conversation and is tried again.
func (it *itemPlan) refused() []actions.Action {
	exit := actions.RecordExit{Key: it.r.Key, Session: it.session, ExitStatus: -1, Reason: actions.ReasonSpawnRefused}
	if reason := actions.Reason(it.st.Reason); reason.Environment() {
		// The harness's config dir or sandbox could not be set up:
		// nothing was tried of the conversation; the failure counts
		// and backs off until the operator fixes it.
		exit.Reason = reason
	}
	return it.afterExit(exit, true)
}

// said is what the item's dead agent said last: its dead pane's
// (observed.Observation.Exits), or its ended run's output.
func (it *itemPlan) said() observed.Exit {
	if it.process {
		return it.run.Exit
	}
	return it.obs.Exits[it.r.Key]
}

// refusedResume plans a resume whose harness refused it (harness.Refusal,
// its own word: a dead pane's last words or exit status, a live screen, a
// run's output), with exit the death or the stop recorded first, the
// counts as they were: nothing of the conversation failed. A conversation
// the harness cannot resume is replaced by a fresh spawn with the same
// event (session.resume_failed reason=not_resumable); one that runs
// elsewhere (a background agent) is not lost, so it is never replaced:
// the item needs a human (conversation_in_use). dead is false for a live
// agent that shows its refusal: the fresh spawn kills its session first,
// and one that runs elsewhere keeps its pane.
func (it *itemPlan) refusedResume(r harness.Refusal, exit actions.RecordExit, dead bool) []actions.Action {
	st := it.st
	exit.Failures, exit.FastFailures, exit.ChurnFailures = st.Failures, st.FastFailures, st.ChurnFailures
	if r == harness.RefusalInUse {
		give := actions.GiveUp{Key: it.r.Key, Session: it.session, Reason: actions.ReasonConversationInUse}
		if !dead {
			return []actions.Action{give}
		}
		exit.Phase, exit.Attention = desired.PhaseNeedsAttention, actions.ReasonConversationInUse
		return []actions.Action{exit, give}
	}
	exit.Phase, exit.Reason = desired.PhaseExited, actions.ReasonResumeFailed
	return append([]actions.Action{exit}, it.spawn(&st, actions.ReasonResumeFailed, actions.ResumeNotResumable)...)
}

// restartReason names why a scheduled restart happens, from the reason
// recorded with the exit that scheduled it.
func restartReason(exitReason actions.Reason) actions.Reason {
	switch exitReason {
	case actions.ReasonExitedAlways, actions.ReasonSessionMissing, actions.ReasonServerLost, actions.ReasonOutage, actions.ReasonHarnessChanged,
		actions.ReasonHostMoved, actions.ReasonDrained, actions.ReasonNoSlot, actions.ReasonLeaseLapsed:
		return exitReason
	case actions.ReasonSpawnDied, actions.ReasonHarnessExitedAtOnce, actions.ReasonSpawnRefused, actions.ReasonProvisionFailed, actions.ReasonSandboxFailed,
		actions.ReasonWorkspaceFailed, actions.ReasonRunFailed, actions.ReasonDispatchTimeout:
		return actions.ReasonNewEvent // the retry of a dispatch that failed
	default:
		return actions.ReasonPaneDead
	}
}

// exit builds the RecordExit for the observed death, before the decision.
// A pane that lives on without the harness has no exit status, and the
// death is never clean: the harness did not end its pane.
func (it *itemPlan) exit(reason actions.Reason) actions.RecordExit {
	e := actions.RecordExit{Key: it.r.Key, Session: it.session, ExitStatus: -1, Reason: reason, Foreground: it.pane.stray, PaneID: it.ownPaneID()}
	if it.pane.exists && it.pane.stray == "" {
		e.ExitStatus, e.Signal = it.pane.status, it.pane.signal
		if e.Signal == 0 && e.ExitStatus >= 0 && it.st.Sandbox == sandbox.ModeBubblewrap {
			// A signal inside the sandbox reaches the pane as bwrap's
			// 128+N: it is that signal.
			e.ExitStatus, e.Signal = sandbox.ExitOf(e.ExitStatus)
		}
		e.Clean = e.ExitStatus == 0 && e.Signal == 0
	}
	return e
}

// afterExit applies the restart decision to an exit. spawnFailed is true for
// a spawn that died before it ran, or was refused; such an exit always
// counts as a failure, so that a harness that exits at once cannot respawn
// in a hot loop.
func (it *itemPlan) afterExit(exit actions.RecordExit, spawnFailed bool) []actions.Action {
	st := &it.st
	words := it.said().Words
	h := History{SpawnedAt: st.SpawnedAt, DiedAt: it.pane.died, FastFailures: st.FastFailures, ChurnFailures: st.ChurnFailures, Failures: st.Failures,
		Clean: exit.Clean && !spawnFailed, Own: ownExit(exit), SameWords: st.LastWords == "" || words == st.LastWords,
		NeverRan: exit.Reason == actions.ReasonHarnessExitedAtOnce}
	d := decideRestart(h, *it.p, it.now)
	exit.Failures, exit.FastFailures, exit.ChurnFailures = d.Failures, d.FastFailures, d.ChurnFailures
	if h.Own {
		exit.Implicated, exit.Words = true, words
	}
	switch exit.Reason {
	case actions.ReasonSpawnDied, actions.ReasonHarnessExitedAtOnce, actions.ReasonSpawnRefused, actions.ReasonProvisionFailed, actions.ReasonSandboxFailed, actions.ReasonSessionMissing,
		actions.ReasonForegroundNotHarness, actions.ReasonRunFailed, actions.ReasonDispatchTimeout:
	default:
		exit.Reason = d.Reason
	}
	next := *st
	if d.Outcome == OutcomeRetire {
		exit.Retire = d.Retired
		next = st.Retire(st.HarnessSessionID)
	}
	switch {
	case d.Outcome == OutcomeGiveUp:
		// Past the budget, or a harness that exits at once.
		exit.Phase, exit.Attention = desired.PhaseNeedsAttention, d.Reason
		return []actions.Action{exit, actions.GiveUp{Key: it.r.Key, Session: it.session, Reason: exit.Attention}}
	case d.Restarts() && it.now.Before(h.diedAt(it.now).Add(d.Delay)):
		// The backoff runs from the death, not from the pass that saw it:
		// a death seen late (no daemon ran) may already have waited it out.
		exit.Phase, exit.Delay = desired.PhaseBackingOff, d.Delay
		exit.NextAttempt = h.diedAt(it.now).Add(d.Delay)
		return []actions.Action{exit, actions.Wait{Key: it.r.Key, Until: exit.NextAttempt, Reason: actions.ReasonBackoff}}
	case d.Restarts():
		exit.Phase, exit.Delay = desired.PhaseBackingOff, d.Delay
		exit.NextAttempt = it.now
		return append([]actions.Action{exit}, it.spawn(&next, restartReason(exit.Reason), "")...)
	case exit.DeliveryID != "":
		// Not self-healed, and the spawn or run died on the event it
		// carried, which stays pending: starting it again at once is the
		// self-heal the policy forbids, and a harness that dies in seconds
		// would loop. The item needs attention; a new event earns one more
		// attempt.
		exit.Phase, exit.Attention = desired.PhaseNeedsAttention, d.Reason
		if h.NeverRan {
			// The policy's word matters less than the command's failure.
			exit.Attention = actions.ReasonHarnessExitedAtOnce
		}
		return []actions.Action{exit, actions.GiveUp{Key: it.r.Key, Session: it.session, Reason: exit.Attention}}
	default:
		exit.Phase = desired.PhaseExited
		if len(it.pending) == 0 {
			return []actions.Action{exit}
		}
		// Not self-healed, but an event is waiting: it resumes the session.
		return append([]actions.Action{exit}, it.spawn(&next, actions.ReasonNewEvent, "")...)
	}
}

// ownExit reports whether exit is a failure of the harness's own
// (History.Own): an exit status other than 0 that it chose, with no signal, and not the 128+N a CLI exits
// with on signal N (Claude Code on SIGHUP and SIGTERM), nor the -1 of a
// death with no status (a session found missing, a pane left with a
// shell, a refused spawn, a run whose group was killed).
func ownExit(exit actions.RecordExit) bool {
	return !exit.Clean && !exit.Killed() && exit.ExitStatus >= 0 && (exit.ExitStatus <= 128 || exit.ExitStatus > 128+64)
}

// spawn plans the spawn for st: a resume of the recorded id when the
// decision table allows it, a fresh spawn otherwise. failed, when set, is why
// a resume just failed; it forces fresh. The workspace comes first
// (prepare): made before the item's first spawn, repaired or made again
// before a later one, or the reason the spawn cannot happen (a plain
// workdir that is gone blocks it until it is back).
func (it *itemPlan) spawn(st *desired.Status, reason, failed actions.Reason) []actions.Action {
	key := it.r.Key
	caps, ok := it.p.Harnesses[it.r.Spec.Harness]
	if !ok {
		return []actions.Action{actions.Block{Key: key, Reason: actions.ReasonHarnessUnknown, Detail: it.r.Spec.Harness}}
	}
	if caps.Missing != "" {
		return []actions.Action{actions.Block{Key: key, Reason: actions.ReasonHarnessMissing, Detail: caps.Missing}}
	}
	if until, held := it.held(); held {
		return it.waitHeld(until)
	}
	w := workspaceOf(it.r, it.p)
	pre, stop := it.prepare(w, *st)
	if stop {
		return pre
	}
	pre = append(it.reportMoved(w), pre...)
	if st.HadConversation() && st.Workspace != desired.WorkspaceRemoved && w.checkout == nil && it.obs.MissingWorkdirs[key] {
		return []actions.Action{actions.Block{Key: key, Reason: actions.ReasonWorkspaceMissing, Detail: w.dir}}
	}
	return append(pre, it.spawnIn(st, reason, failed, caps, w.dir)...)
}

// spawnIn plans the spawn itself, in the workdir dir: the spawn, after
// the restore of its transcript from the store when the local one is
// missing and may be restored (restoreFirst).
func (it *itemPlan) spawnIn(st *desired.Status, reason, failed actions.Reason, caps Capabilities, dir string) []actions.Action {
	key := it.r.Key
	why := failed
	if why == "" {
		why = it.chooseResume(st, caps)
	}
	if why == actions.ResumeTranscriptMissing && restoreFirst(*st, *it.p) {
		a := actions.RestoreTranscript{Key: key, Session: it.session, ResumeID: st.HarnessSessionID, Cwd: dir, To: it.p.Host, Resume: true}
		own := *it // the caller's plan of the item stays as it was
		it = &own
		it.restoring = true
		restored := a.Apply(*st, it.now)
		return []actions.Action{a, it.spawnAs(&restored, reason, "", caps, dir)}
	}
	return []actions.Action{it.spawnAs(st, reason, why, caps, dir)}
}

// spawnAs plans the spawn itself, in the workdir dir, as a resume when why
// (chooseResume's answer, or why a resume just failed) is "", else fresh.
func (it *itemPlan) spawnAs(st *desired.Status, reason, why actions.Reason, caps Capabilities, dir string) actions.Action {
	key := it.r.Key
	first := !st.HadConversation()
	deliveryID, prompt, size := it.bootPrompt(st, reason)
	switch reason {
	case actions.ReasonLimitReset:
		// The conversation goes on where the limit cut it; the events
		// that waited are pasted after.
		deliveryID, prompt = "", desired.LimitResetPrompt(key)
		size = len(prompt)
	case actions.ReasonBudgetRaised:
		// So it does where the budget cut it.
		deliveryID, prompt = "", desired.BudgetRaisedPrompt(key)
		size = len(prompt)
	}
	var told []string
	if st.HandBackUntold && len(it.pending) > 0 && deliveryID != "" && !it.process {
		// A resume at the handback tells what queued; the events are
		// pasted after it.
		var headers []string
		told, headers = it.handBackTold()
		deliveryID, prompt = "", desired.HandBackPrompt(key, headers)
		size = len(prompt)
	}
	s := actions.Spawn{
		Key: key, Session: it.session, Harness: it.r.Spec.Harness, Cwd: dir,
		DeliveryID: deliveryID, Prompt: prompt, Probe: it.p.Probe, Respawn: !first, Reason: reason,
		ProjectSettings: ProjectSettingsOf(*it.r, *it.p).Trusted, Told: told,
	}
	if it.process {
		s.Runner = schema.RunnerProcess
	}
	sb := it.p.SandboxOf(key)
	s.NoSandbox, s.Binds = !sb.Sandboxed(), sb.BindsOf()
	if why == "" {
		if reason == actions.ReasonHostMoved {
			// The restored conversation says which events landed on the
			// old host: the others are pasted after the resume holds.
			s.DeliveryID, s.Prompt = "", desired.MovedPrompt(key, st.MovedFrom, it.p.Host)
		}
		return actions.ResumeSpawn{Spawn: s, ResumeID: st.HarnessSessionID}
	}
	reuse := why == reuseFresh
	silent := why == silentFresh || why == actions.ReasonReleased || reuse
	if why == silentFresh || reuse {
		why = ""
	}
	if !first && !reuse {
		// A new conversation replaces one: it carries the work, not just
		// a pointer to it.
		if s.DeliveryID == "" && len(it.pending) == 0 {
			s.Prompt = freshNudge(key, it.r.Spec.Kind, why)
			size = len(s.Prompt)
		}
		if room := it.p.MaxBootPrompt - size; room > 0 {
			s.Replay = room
		}
	}
	f := actions.FreshSpawn{Spawn: s, Unpinned: caps.LearnsSessionID}
	if reuse {
		f.SessionID = st.HarnessSessionID
	}
	if route, ok := it.p.route(key); ok {
		// A new conversation is told what to do with its events; a
		// resumed one was told when it began.
		f.Instructions = route.Instructions
	}
	if !silent {
		f.ResumeFailed, f.AttemptedID = why, st.HarnessSessionID
	}
	return f
}

// silentFresh marks a fresh spawn that is not a failed resume (opted out, or
// nothing to resume); reuseFresh one that pins the item's id again, as its
// spawn exited at once and never used it (neverStarted).
const (
	silentFresh actions.Reason = "-"
	reuseFresh  actions.Reason = "="
)

// chooseResume walks the decision table of docs/design.md ("Choosing resume
// or fresh"), first match wins. It returns "" to resume, silentFresh for a
// fresh spawn that logs nothing, actions.ReasonReleased for the fresh spawn
// an operator asked for (release --fresh), which logs nothing either, or
// the resume_failed reason.
func (it *itemPlan) chooseResume(st *desired.Status, caps Capabilities) actions.Reason {
	id := st.HarnessSessionID
	switch {
	case !it.p.Resume:
		return silentFresh
	case st.IDUnconfirmed && !st.FreshRequested:
		return actions.ResumeIDUnknown // died before its id was learned
	case id == "":
		return silentFresh
	case st.FreshRequested:
		return actions.ReasonReleased // release --fresh; journaled as item.released
	case !caps.AcceptsSessionID(id):
		return actions.ResumeInvalidID
	case !caps.SupportsResume:
		return actions.ResumeUnsupported
	case st.Retired(id):
		return actions.ResumeCrashLoop
	}
	if tr, ok := it.obs.Transcripts[it.r.Key]; ok && tr.Known && !tr.Exists && !it.restoring {
		if neverStarted(*st) {
			return reuseFresh
		}
		return actions.ResumeTranscriptMissing
	}
	return ""
}

// bootPrompt picks the prompt a spawn boots with, and its size in bytes:
// the delivery the previous spawn carried if it is still pending, else the
// oldest pending delivery, else the re-orientation nudge of the spawn's
// reason (nudgeCause). A delivery is
// named by its id, with prompt "": the executor reads its body
// (store.Store.Prompt), the plan only knows its size and header line
// (desired.Delivery.Compact). An event too long for argv boots with its
// header line only and is pasted once the harness runs.
func (it *itemPlan) bootPrompt(st *desired.Status, reason actions.Reason) (deliveryID, prompt string, size int) {
	if len(it.pending) == 0 {
		prompt = desired.NudgePrompt(it.r.Key, nudgeCause(reason))
		return "", prompt, len(prompt)
	}
	d := it.pending[0]
	for _, p := range it.pending {
		if p.ID == st.SpawnDeliveryID {
			d = p
		}
	}
	if d.Size <= it.p.MaxBootPrompt || it.process {
		// A headless run takes its event whole (a large one on stdin):
		// there is no pane to paste the rest into.
		return d.ID, "", d.Size
	}
	prompt = desired.LongEventPrompt(d.Header)
	return "", prompt, len(prompt)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
