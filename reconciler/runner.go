package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// The process runner (routing.repos.<key>.runner: process) runs one
// headless turn of the harness per event, a process detached from loopd,
// instead of a TUI in a tmux pane (docs/design.md, "The process runner").
// Its planning is planItem's, with a run observed as a pane is
// (observeRun): the decision table (chooseResume), the restart decision
// (afterExit, decideRestart), admission (a run holds a slot while it is
// Spawning or Running, as a live agent does) and the rule of what landed
// (landed) are the same. What differs is here: a run carries its event for
// its whole life, nothing is ever pasted, and a run that ends is judged by
// the transcript.

// ProcessRunner reports whether r is planned by the process runner: its
// route says runner: process, or the record names a run not judged yet
// (desired.Status.RunID), which is followed to its end even when the route
// changed since.
func ProcessRunner(r desired.Record, p Policy) bool {
	return processRunner(&r, &p)
}

// processRunner is ProcessRunner of the record and policy pointed to.
func processRunner(r *desired.Record, p *Policy) bool {
	if r.Status.RunID != "" {
		return true
	}
	route, ok := p.route(r.Key)
	return ok && route.Runner == schema.RunnerProcess
}

// dispatchTimeout is how long one run of r may take: its route's
// dispatchTimeoutSeconds, or the default when the route is gone.
func dispatchTimeout(r *desired.Record, p *Policy) time.Duration {
	route, _ := p.route(r.Key)
	return route.DispatchTimeout()
}

// observeRun is observePane for a process-runner item: the run the status
// names, as the pass read it (observed.Snapshot.Runs), stands for the
// pane: alive while it runs, dead with its exit status and time once it
// ended. A run whose exit the wrapper could not record (its group was
// killed with SIGKILL) ended with status -1, never clean.
func (it *itemPlan) observeRun() {
	it.process = true
	run, ok := it.obs.Snapshot.Run(it.session)
	if !ok || it.st.RunID == "" || run.ID != it.st.RunID || !run.Started {
		return
	}
	it.run = run
	it.pane = observedPane{exists: true, alive: run.Running, id: run.ID, pid: run.PID, status: run.ExitStatus, signal: run.Signal,
		known: true, died: run.EndedAt}
}

// observe sorts out what runs the item's agent: its run (observeRun) or
// its pane (observePane).
func (it *itemPlan) observe() {
	if processRunner(it.r, it.p) {
		it.observeRun()
		return
	}
	it.observePane()
}

// planRun plans a process-runner item that is open and not held, in
// phase: a run in flight is waited for (or ended past its timeout), a run
// that ended is judged, and a pending event starts the next run.
func (it *itemPlan) planRun(phase desired.Phase) []actions.Action {
	st, key := it.st, it.r.Key
	switch {
	case it.pane.alive:
		return it.runInFlight(phase)
	case it.pane.exists:
		return it.runEnded(phase)
	case phase == desired.PhaseSpawning && st.SpawnRefused != "":
		return it.refused()
	case phase == desired.PhaseSpawning && st.RunID != "":
		// The intent is recorded and no pid file was written: the daemon
		// died before its wrapper wrote it (within milliseconds of its
		// start), or the start failed unrecorded. Judged a poll period
		// after the spawn, then started again with the same event.
		if judge := st.SpawnedAt.Add(it.p.Poll); it.now.Before(judge) {
			return []actions.Action{actions.Wait{Key: key, Until: judge, Reason: actions.ReasonProbing}}
		}
		return it.spawn(&st, actions.ReasonSpawnInterrupted, "")
	case st.RunID != "":
		// A run recorded as under way whose files are gone: it ended
		// unseen, its exit unknown.
		own := *it // the caller's plan of the item stays as it was
		it = &own
		it.pane = observedPane{exists: true, id: st.RunID, status: -1, known: true}
		return it.runEnded(phase)
	}
	if caps, ok := it.p.Harnesses[it.r.Spec.Harness]; ok && !caps.Headless {
		return []actions.Action{actions.Block{Key: key, Reason: actions.ReasonNotHeadless, Detail: it.r.Spec.Harness}}
	}
	if len(it.pending) == 0 {
		switch phase {
		case desired.PhaseIdle, desired.PhaseExited:
			return nil
		}
		// A run is only ever started for an event: a release, or an event
		// the conversation already held, leaves nothing to run.
		return []actions.Action{actions.Rest{Key: key, Session: it.session, Reason: actions.ReasonNothingToRun}}
	}
	if stormed(it.r, it.p, it.now) {
		return []actions.Action{actions.GiveUp{Key: key, Session: it.session, Reason: actions.ReasonDeliveryStorm}}
	}
	switch phase {
	case desired.PhaseBackingOff:
		if it.now.Before(st.NextAttempt) {
			return []actions.Action{actions.Wait{Key: key, Until: st.NextAttempt, Reason: actions.ReasonBackoff}}
		}
		return it.spawn(&st, restartReason(actions.Reason(st.LastExitReason)), "")
	case desired.PhaseQueued:
		return it.spawn(&st, actions.ReasonQueued, "")
	default:
		return it.spawn(&st, actions.ReasonNewEvent, "")
	}
}

// runInFlight plans a run that runs: past the route's
// dispatchTimeoutSeconds it is stopped with its group (StopRun; the next
// pass judges it); a Spawning one becomes Running at its probe deadline
// once confirmed as a pane's spawn is (the resume's transcript grew, the
// fresh turn's transcript exists), or once ConfirmTimeout has passed, so
// that a start in flight ends; its event stays carried until the
// conversation shows it. It is looked at again every RunPoll.
func (it *itemPlan) runInFlight(phase desired.Phase) []actions.Action {
	st, key := it.st, it.r.Key
	timeout := dispatchTimeout(it.r, it.p)
	deadline := st.SpawnedAt.Add(timeout)
	if !it.now.Before(deadline) {
		return []actions.Action{actions.StopRun{Key: key, Session: it.session, Run: st.RunID, DeliveryID: st.SpawnDeliveryID,
			Timeout: timeout, Reason: actions.ReasonDispatchTimeout}}
	}
	look := actions.Wait{Key: key, Until: minTime(deadline, it.now.Add(it.p.RunPoll)), Reason: actions.ReasonRunInFlight}
	if phase != desired.PhaseSpawning {
		return []actions.Action{look}
	}
	if it.now.Before(st.ProbeDeadline) {
		return []actions.Action{actions.Wait{Key: key, Until: minTime(st.ProbeDeadline, look.Until), Reason: actions.ReasonProbing}}
	}
	confirmed, _ := it.booted()
	reason := actions.ReasonConfirmed
	if !confirmed {
		if giveUpAt := st.SpawnedAt.Add(it.p.ConfirmTimeout); it.now.Before(giveUpAt) {
			return []actions.Action{actions.Wait{Key: key, Until: minTime(it.now.Add(it.p.Poll), giveUpAt), Reason: actions.ReasonAwaitingConfirm}}
		}
		reason = actions.ReasonAlive
	}
	landed, _ := it.landed()
	return []actions.Action{it.runRunning(confirmed, landed, reason), look}
}

// runRunning is the MarkRunning of the item's run: session.spawned or
// session.respawned, with the run's log in place of tmux's attach, and
// the run's event delivered when it landed.
func (it *itemPlan) runRunning(confirmed bool, delivered string, reason actions.Reason) actions.MarkRunning {
	return actions.MarkRunning{Key: it.r.Key, Session: it.session, SessionID: it.st.HarnessSessionID, Mode: it.st.SpawnMode,
		Confirmed: confirmed, DeliveryID: delivered, Respawn: respawned(it.st), PID: it.pane.pid, Log: it.run.Log, Reason: reason}
}

// runEnded judges a run that ended, by the transcript, whatever its exit
// status: its event in the conversation is delivered and the turn is done
// (the counts of failed runs start again, and the next pending event
// starts the next run); otherwise the event stays pending and the exit
// goes through the decision table as a pane's death does: a resume that
// did not bring the conversation back falls back to fresh with the same
// event (session.resume_failed reason=run_failed), any other failure
// counts against the restart budget and backs off (afterExit). When the
// run's output names another conversation id than the recorded one, it is
// followed first (a CLI that writes each headless turn under a new id).
func (it *itemPlan) runEnded(phase desired.Phase) []actions.Action {
	var pre []actions.Action
	if follow, ok := it.followRun(); ok {
		pre = append(pre, follow)
		own := *it // the caller's plan of the item stays as it was
		it = &own
		it.st = it.st.Follow(follow.To)
	}
	st := it.st
	exit := it.exit(actions.ReasonRunFailed)
	if landed, _ := it.landed(); landed != "" || st.SpawnDeliveryID == "" {
		if phase == desired.PhaseSpawning {
			// The spawn held: it ran its turn.
			pre = append(pre, it.runRunning(true, it.delivered(landed), actions.ReasonConfirmed))
		} else {
			exit.Delivered = it.delivered(landed)
		}
		exit.Reason, exit.Phase = actions.ReasonRunDone, desired.PhaseExited
		if st.Reason == string(actions.ReasonDispatchTimeout) {
			// Done, but ended at its timeout (stopRun recorded it): loopd
			// get says so, not that the run ended by itself.
			exit.Reason = actions.ReasonDispatchTimeout
		}
		exit.Failures, exit.FastFailures, exit.ChurnFailures = 0, 0, 0
		out := append(pre, exit)
		if len(it.pending) == 0 {
			return out
		}
		next := st
		next.Failures, next.FastFailures, next.ChurnFailures = 0, 0, 0
		return append(out, it.spawn(&next, actions.ReasonNewEvent, "")...)
	}
	if refusal := it.run.Exit.Refusal; st.SpawnMode == desired.SpawnResume && refusal != "" && !exit.Clean {
		// The harness said it cannot resume the conversation: not a
		// failure of the dispatch (refusedResume).
		return append(pre, it.refusedResume(refusal, exit, true)...)
	}
	// Any other end (a crash, a signal, the dispatch timeout) is a crash
	// of this same conversation: counted, backed off, and resumed again
	// with its event, in the conversation the run went into.
	if st.Reason == string(actions.ReasonDispatchTimeout) {
		exit.Reason = actions.ReasonDispatchTimeout
	}
	exit.DeliveryID = st.SpawnDeliveryID
	return append(pre, it.afterExit(exit, true)...)
}

// followRun is the FollowSession of a run that ended naming another
// conversation id in its output than the recorded one (a CLI that writes
// each headless turn under a new id), and whether there is one.
func (it *itemPlan) followRun() (actions.FollowSession, bool) {
	caps := it.p.Harnesses[it.r.Spec.Harness]
	id := it.run.SessionID
	if it.pane.alive || id == "" || id == it.st.HarnessSessionID || !caps.AcceptsSessionID(id) {
		return actions.FollowSession{}, false
	}
	return actions.FollowSession{Key: it.r.Key, Session: it.session, From: it.st.HarnessSessionID, To: id, Source: SourceHeadless}, true
}

// SourceHeadless is the source of a FollowSession taken from a headless
// run's output (harness.Headless.HeadlessSessionID).
const SourceHeadless = "headless"

// runReported is the conversation id the ended run of rec named in its
// output, when it is another than the recorded one: its transcript is
// read too (observed.Need.Reported), as a reported /clear's is.
func runReported(rec desired.Record, snap observed.Snapshot) string {
	run, ok := snap.Run(desired.SessionName(rec.Key))
	if !ok || run.ID != rec.Status.RunID || run.SessionID == rec.Status.HarnessSessionID {
		return ""
	}
	return run.SessionID
}
