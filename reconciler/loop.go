package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/harness"
	"github.com/loopd/loopd/journal"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/tmux"
)

// Reconciler runs reconcile passes: lock, read desired records, observe tmux
// once, plan, execute, and requeue. Run loops them on a timer, on triggers
// (webhook, pane-died hook) and at the earliest requeue-after time.
type Reconciler struct {
	Store     desired.Store
	Tmux      tmux.Client
	Harnesses map[string]harness.Adapter
	Executor  *actions.Executor
	Journal   *journal.Recorder
	Log       *slog.Logger
	// Policy returns the current soft policy; it is read once per pass, so
	// a hot reload takes effect on the next pass.
	Policy func() Policy
	Now    func() time.Time
	// Interval is the resync period, the safety net behind the triggers.
	Interval time.Duration
	// LockWait bounds the wait for the reconcile lock (held by another
	// pass, e.g. a cron reconcile --once), and only that wait: the pass
	// that then runs is not cut short. Zero waits until ctx ends.
	LockWait time.Duration
	// Server are the options the tmux server is started with.
	Server tmux.ServerOptions
	// KickEvery, when not zero and the server options name a pane-died
	// channel, is how often Run kicks the tmux server (Kick) between
	// passes. tmux up to 3.4 sometimes fails to reap a pane's exited child
	// and then fires no pane-died hook until another child of the server
	// exits (see observed.Observe); the kick is such a child, so such a
	// death wakes the loop within KickEvery instead of after Interval.
	KickEvery time.Duration
	// Metrics, when not nil, counts passes and actions.
	Metrics *Metrics

	triggerOnce sync.Once
	trigger     chan struct{}
}

// PassResult is what one pass planned and did.
type PassResult struct {
	Plan   []actions.Action
	Result actions.Result
	// RequeueAfter is how soon the next pass is due, when Requeue is set:
	// the earliest Wait deadline, or the poll period after a retryable
	// failure.
	RequeueAfter time.Duration
	Requeue      bool
}

// Changed reports whether the pass planned (dry run) or applied a change.
func (p PassResult) Changed() bool {
	for _, a := range p.Plan {
		if a.Mutates() {
			return true
		}
	}
	return false
}

// Trigger asks Run for a pass as soon as possible. It never blocks; several
// triggers before the pass starts fold into one.
func (r *Reconciler) Trigger() {
	select {
	case r.triggerChan() <- struct{}{}:
	default:
	}
}

func (r *Reconciler) triggerChan() chan struct{} {
	r.triggerOnce.Do(func() { r.trigger = make(chan struct{}, 1) })
	return r.trigger
}

// Pass runs one reconcile pass under the cross-process lock, waiting for the
// lock up to LockWait or until ctx ends (the error then wraps
// desired.ErrLocked). A dry run plans and returns without touching tmux
// sessions or the store.
func (r *Reconciler) Pass(ctx context.Context, dryRun bool) (PassResult, error) {
	start := time.Now()
	lockCtx, cancel := ctx, context.CancelFunc(func() {})
	if r.LockWait > 0 {
		lockCtx, cancel = context.WithTimeout(ctx, r.LockWait)
	}
	unlock, err := r.Store.Lock(lockCtx)
	cancel()
	if err != nil {
		return PassResult{}, fmt.Errorf("reconcile: %w", err)
	}
	defer unlock()
	records, err := r.Store.Records(ctx)
	if err != nil {
		return PassResult{}, fmt.Errorf("reconcile: %w", err)
	}
	now := r.Now()
	snap, err := observed.Observe(ctx, r.Tmux, now)
	if err != nil {
		// An unreadable tmux means nothing is known to be dead: plan
		// nothing rather than respawn live agents.
		return PassResult{}, fmt.Errorf("reconcile: observe: %w", err)
	}
	policy := r.Policy()
	plan := Plan(records, r.gather(records, snap, policy, now), policy, now)
	res := PassResult{Plan: plan}
	if !dryRun && res.Changed() {
		if spawns(plan) {
			if err := r.Tmux.EnsureServer(ctx, r.Server); err != nil {
				return res, fmt.Errorf("reconcile: start tmux server: %w", err)
			}
		}
		res.Result = r.Executor.Execute(ctx, records, plan)
	}
	res.RequeueAfter, res.Requeue = requeueAfter(plan, res.Result, policy, now)
	if r.Metrics != nil {
		r.Metrics.observe(res, time.Since(start))
	}
	return res, nil
}

func spawns(plan []actions.Action) bool {
	for _, a := range plan {
		switch a.(type) {
		case actions.FreshSpawn, actions.ResumeSpawn:
			return true
		}
	}
	return false
}

// requeueAfter is the earliest Wait deadline, or the poll period when an
// action asked to be retried or a spawn was just started (its probe is due).
func requeueAfter(plan []actions.Action, res actions.Result, p Policy, now time.Time) (time.Duration, bool) {
	var best time.Duration
	found := false
	consider := func(d time.Duration) {
		if d < 0 {
			d = 0
		}
		if !found || d < best {
			best, found = d, true
		}
	}
	if res.Replan {
		consider(0)
	} else if res.Retry {
		consider(p.Poll)
	}
	for _, a := range plan {
		switch a := a.(type) {
		case actions.Wait:
			if !a.Until.IsZero() {
				consider(a.Until.Sub(now))
			}
		case actions.FreshSpawn:
			consider(a.Probe)
		case actions.ResumeSpawn:
			consider(a.Probe)
		case actions.DeliverPrompt, actions.ConfirmDelivery:
			// A paste shows in the transcript within a second, and the
			// next pending event waits for its confirmation.
			consider(p.Poll)
		}
	}
	return best, found
}

// gather reads the disk facts Plan needs for items that may spawn, are
// being probed or have an event in flight: the transcript of the recorded
// session id, whether the workdir exists, and what the conversation holds
// of the deliveries the pass may act on. It runs every pass, so items that
// cannot need them are skipped (needsFacts, framesToCheck), and each
// transcript is read at most once.
func (r *Reconciler) gather(records []desired.Record, snap observed.Snapshot, p Policy, now time.Time) Observation {
	obs := Observation{Snapshot: snap, Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{},
		Frames: map[desired.Key]map[string]harness.Found{}}
	for _, rec := range records {
		if !needsFacts(rec, snap, p) {
			continue
		}
		if rec.Spec.Cwd != "" {
			if _, err := os.Stat(rec.Spec.Cwd); errors.Is(err, os.ErrNotExist) {
				obs.MissingWorkdirs[rec.Key] = true
			}
		}
		// The conversation the item is in, as the planner takes it (a
		// reported /clear the pass has not followed yet included).
		id := rec.ConversationID(p.Harnesses[rec.Spec.Harness].AcceptsSessionID)
		ad, ok := r.Harnesses[rec.Spec.Harness]
		if !ok || id == "" || !ad.ValidSessionID(id) {
			continue
		}
		tr, err := ad.Transcript(rec.Spec.Cwd, id)
		if err != nil {
			r.Log.Warn("transcript.unreadable", "work_item", rec.Key.String(), "harness_session_id", id, "err", err)
			continue
		}
		obs.Transcripts[rec.Key] = tr
		if frames := framesToCheck(rec, now); len(frames) > 0 && tr.Known {
			if found, ok := r.readFrames(rec, ad, tr, frames); ok {
				obs.Frames[rec.Key] = found
			}
		}
	}
	return obs
}

// framesToCheck returns the frames of rec's deliveries that the pass may
// act on, nil when it can act on none: a closed or held item only keeps
// what its paste or boot prompt in flight delivered, and an item waiting in
// NeedsAttention or in backoff sends nothing this pass. The frame carries
// the digest the stored prompt names (desired.FrameOf).
func framesToCheck(rec desired.Record, now time.Time) []desired.Frame {
	st := rec.Status
	inFlight := st.SendingDeliveryID != "" || st.SpawnDeliveryID != ""
	switch {
	case (rec.Spec.Closed || rec.Spec.Held) && !inFlight:
		return nil
	case st.Phase == desired.PhaseNeedsAttention && rec.Spec.Generation <= st.AttentionGeneration:
		return nil
	case st.Phase == desired.PhaseBackingOff && now.Before(st.NextAttempt) && !inFlight:
		return nil
	}
	var frames []desired.Frame
	for _, d := range rec.Pending {
		frames = append(frames, desired.FrameOf(d))
	}
	return frames
}

// readFrames reads what rec's conversation holds of frames: the transcript
// tr of the conversation the item is in (desired.Record.ConversationID)
// and those of the other ids it went by since its spawn: the recorded one
// (before a /clear) and the one the harness reported. It reports false
// when a transcript could not be read; the planner then falls back to
// what it knew without the frames.
func (r *Reconciler) readFrames(rec desired.Record, ad harness.Adapter, tr harness.Transcript, frames []desired.Frame) (map[string]harness.Found, bool) {
	transcripts := []harness.Transcript{tr}
	seen := map[string]bool{tr.Path: true}
	others := []string{rec.Status.HarnessSessionID}
	if rep := rec.Report; rep != nil && !rep.At.Before(rec.Status.SpawnedAt) {
		others = append(others, rep.SessionID)
	}
	for _, id := range others {
		if id == "" || !ad.ValidSessionID(id) {
			continue
		}
		if other, err := ad.Transcript(rec.Spec.Cwd, id); err == nil && other.Known && !seen[other.Path] {
			seen[other.Path] = true
			transcripts = append(transcripts, other)
		}
	}
	all := map[string]harness.Found{}
	for _, t := range transcripts {
		if !t.Exists {
			// No file, or no turn in it: nothing was delivered there.
			continue
		}
		found, err := harness.TranscriptFrames(t, frames)
		if err != nil {
			r.Log.Warn("transcript.unreadable", "work_item", rec.Key.String(), "path", t.Path, "err", err)
			return nil, false
		}
		for id, f := range found {
			got := all[id]
			got.Whole = got.Whole || f.Whole
			got.Mangled += f.Mangled
			all[id] = got
		}
	}
	return all, true
}

// needsFacts reports whether Plan may read rec's disk facts this pass. An
// event in flight (a boot prompt or a paste) always needs them. Otherwise a
// closed or held item is only stopped, a running item with a live pane only
// gets pastes (which look for their event in the conversation first), and
// an item at rest (idle, exited, stopped, needing attention) with nothing
// pending is left alone. A live pane counts as the item's running harness
// by Plan's own rule (runsHarness), since a pane left with another
// foreground process is a death that may respawn.
func needsFacts(rec desired.Record, snap observed.Snapshot, pol Policy) bool {
	st := rec.Status
	if st.SendingDeliveryID != "" || st.SpawnDeliveryID != "" {
		return true
	}
	if rec.Spec.Closed || rec.Spec.Held {
		return false
	}
	if rec.ReleasePending() || st.FreshRequested {
		return true // a release brings the item back
	}
	if p, ok := snap.Pane(desired.SessionName(rec.Key)); ok && !p.Dead && st.Phase == desired.PhaseRunning && runsHarness(pol, rec, p) {
		// A paste first looks for its event in the conversation.
		return len(rec.Pending) > 0
	}
	switch st.Phase {
	case "", desired.PhaseIdle, desired.PhaseExited, desired.PhaseStopped, desired.PhaseNeedsAttention:
		return len(rec.Pending) > 0
	}
	return true
}

// Run reconciles until ctx ends: a pass at start, then after every trigger,
// every Interval, and at each pass's requeue-after time. Pass errors are
// logged and retried at the next wake; they never stop the loop. When the
// server options name a pane-died channel, a waiter turns each pane death
// into a trigger.
func (r *Reconciler) Run(ctx context.Context) error {
	if err := r.Tmux.EnsureServer(ctx, r.Server); err != nil {
		r.Log.Error("tmux.unavailable", "err", err)
	}
	if r.Server.PaneDiedChannel != "" {
		go r.waitPaneDied(ctx)
		if r.KickEvery > 0 {
			go r.kickLostExits(ctx)
		}
	}
	for {
		res, err := r.Pass(ctx, false)
		wait := r.Interval
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			r.Journal.Record(ctx, slog.LevelError, journal.ReconcileFailed, "", "err", err)
		case res.Requeue && res.RequeueAfter < wait:
			wait = res.RequeueAfter
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.triggerChan():
			t.Stop()
		case <-t.C:
		}
	}
}

// kickLostExits kicks the server every KickEvery until ctx ends, so that a
// death tmux failed to reap fires its pane-died hook, which wakes
// waitPaneDied. A failed kick is retried at the next tick.
func (r *Reconciler) kickLostExits(ctx context.Context) {
	t := time.NewTicker(r.KickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.Tmux.Kick(ctx); err != nil && ctx.Err() == nil {
				r.Log.Debug("tmux.kick_failed", "err", err)
			}
		}
	}
}

// waitPaneDied blocks on tmux wait-for and triggers a pass on each wake. A
// failed wait (server gone) is retried after a second; the interval resync
// covers the gap.
func (r *Reconciler) waitPaneDied(ctx context.Context) {
	for ctx.Err() == nil {
		if err := r.Tmux.WaitFor(ctx, r.Server.PaneDiedChannel); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.Log.Debug("pane_died.wait_failed", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		r.Trigger()
	}
}
