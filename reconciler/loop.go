package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/doubling"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// Store is what a pass reads of the store (store.Store has it): every
// record, under the cross-process reconcile lock. Lock's error wraps
// store.ErrLocked when ctx ends first.
type Store interface {
	Records(ctx context.Context) ([]desired.Record, error)
	Lock(ctx context.Context) (unlock func(), err error)
}

// Reconciler runs reconcile passes: lock, read desired records, observe
// (tmux once, the disk for the items that can use it), plan, execute, and
// requeue. Run loops them on a timer, on triggers (webhook, pane deaths) and
// at the earliest requeue-after time.
type Reconciler struct {
	Store    Store
	Observer Observer
	Watcher  Watcher
	Executor *actions.Executor
	Journal  *journal.Recorder
	Log      *slog.Logger
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
	// Metrics, when not nil, counts passes and actions.
	Metrics *Metrics
	// Hosting, when not nil, is this host among several sharing the
	// store: a pass plans only the items it owns (owns), calls Assign
	// when an item needs a host, and stops the local agents of the others.
	Hosting *Hosting

	// last are the records the latest pass read: a pass whose lease clock
	// lapsed and that cannot read the store stops their local agents.
	last []desired.Record

	triggerOnce sync.Once
	trigger     chan struct{}
	// died are the sessions whose agents died since the last pass began
	// (TriggerDied), for it to handle first.
	diedMu sync.Mutex
	died   map[string]bool
}

// Observer reads the facts one pass plans on (observed.Observer): the tmux
// snapshot at now, and the disk facts of the records that needs asks for.
type Observer interface {
	Observe(ctx context.Context, records []desired.Record, needs observed.Needs, now time.Time) (observed.Observation, error)
	// ObserveFirst is Observe of the few records a pass handles before
	// the others, keeping what the last Observe kept of the others.
	ObserveFirst(ctx context.Context, records []desired.Record, needs observed.Needs, now time.Time) (observed.Observation, error)
}

// Watcher supervises the tmux server the agents run on (observed.Watcher).
type Watcher interface {
	// EnsureServer starts the server and claims it for this loopd; it
	// fails with tmux.ErrServerOwned when another loopd holds it.
	EnsureServer(ctx context.Context) error
	// Watch calls wake after each pane death until ctx ends, with the
	// sessions whose agents died when it knows them.
	Watch(ctx context.Context, wake func(died ...string))
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

// TriggerDied is Trigger after the agents of sessions died: the pass
// handles their items before the others (healFirst).
func (r *Reconciler) TriggerDied(sessions ...string) {
	r.diedMu.Lock()
	for _, s := range sessions {
		if r.died == nil {
			r.died = map[string]bool{}
		}
		r.died[s] = true
	}
	r.diedMu.Unlock()
	r.Trigger()
}

// takeDied returns the sessions TriggerDied named since it was last
// called, and forgets them.
func (r *Reconciler) takeDied() map[string]bool {
	r.diedMu.Lock()
	defer r.diedMu.Unlock()
	died := r.died
	r.died = nil
	return died
}

func (r *Reconciler) triggerChan() chan struct{} {
	r.triggerOnce.Do(func() { r.trigger = make(chan struct{}, 1) })
	return r.trigger
}

// Pass runs one reconcile pass under the cross-process lock, waiting for the
// lock up to LockWait or until ctx ends (the error then wraps
// store.ErrLocked). A dry run plans and returns without touching tmux
// sessions or the store. Every log line and journal row the pass writes
// carries its reconcile id: the one ctx carries (journal.WithReconcileID),
// or a new one. The items whose agents died since the last pass
// (TriggerDied) are handled first (healFirst).
func (r *Reconciler) Pass(ctx context.Context, dryRun bool) (PassResult, error) {
	start := time.Now()
	if journal.ReconcileID(ctx) == "" {
		ctx = journal.WithReconcileID(ctx, journal.NewReconcileID())
	}
	if h := r.Hosting; h != nil && !dryRun && h.Taken() != nil {
		// Another live instance holds this host's name: it runs the
		// items under it. Nothing is planned; the local agents are
		// stopped once the lease clock lapsed, with no write.
		r.fence(ctx, dryRun)
		return PassResult{}, fmt.Errorf("reconcile: %w", h.Taken())
	}
	if h := r.Hosting; h != nil && !dryRun && !h.Clock.Renewed() {
		// The first pass of a daemon: its leases are its own once a
		// heartbeat says so, and its agents are adopted, never stopped.
		if err := h.Heartbeat(ctx); err != nil {
			return PassResult{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	// The lease epoch is read before the records: a pass whose host was
	// paused past its lease after it read them acts on none of them, even
	// once a heartbeat made its clock valid again (actions.WithLeaseEpoch).
	var epoch uint64
	if h := r.Hosting; h != nil {
		epoch = h.Clock.Epoch()
		ctx = actions.WithLeaseEpoch(ctx, epoch)
	}
	lockCtx, cancel := ctx, context.CancelFunc(func() {})
	if r.LockWait > 0 {
		lockCtx, cancel = context.WithTimeout(ctx, r.LockWait)
	}
	unlock, err := r.Store.Lock(lockCtx)
	cancel()
	if err != nil {
		r.fence(ctx, dryRun)
		return PassResult{}, fmt.Errorf("reconcile: %w", err)
	}
	defer unlock()
	records, err := r.Store.Records(ctx)
	if err != nil {
		r.fence(ctx, dryRun)
		return PassResult{}, fmt.Errorf("reconcile: %w", err)
	}
	now := r.Now()
	if h := r.Hosting; h != nil && !dryRun && !h.Passive && h.Clock.Valid() && needsAssign(records, now) {
		if _, err := h.Assign(ctx); err != nil {
			return PassResult{}, fmt.Errorf("reconcile: %w", err)
		}
		if records, err = r.Store.Records(ctx); err != nil {
			return PassResult{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	if h := r.Hosting; h != nil && dryRun && !h.Passive {
		records = dryRunLeases(records, h.Host.Name, now)
	}
	if h := r.Hosting; h != nil && !dryRun {
		if err := h.confirmDraining(ctx); err != nil {
			return PassResult{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	r.last = records
	policy := r.hosted(r.Policy(), epoch, dryRun).withRoutes(records)
	if h := r.Hosting; h != nil && !dryRun {
		policy.Fenced = h.Lapsed()
	}
	if records, err = r.boundClock(ctx, records, policy, now, dryRun); err != nil {
		return PassResult{}, fmt.Errorf("reconcile: %w", err)
	}
	var first PassResult
	if !dryRun {
		if died := r.takeDied(); len(died) > 0 {
			if first, err = r.healFirst(ctx, records, died, policy, now); err != nil {
				return first, fmt.Errorf("reconcile: %w", err)
			}
			now = r.Now() // the rest of the pass plans after what it did
		}
	}
	obs, err := r.Observer.Observe(ctx, records, needs(policy, now), now)
	if err != nil {
		// An unreadable tmux means nothing is known to be dead: plan
		// nothing rather than respawn live agents.
		return first, fmt.Errorf("reconcile: %w", err)
	}
	x := acrossOf(records, obs, policy, now) // before Execute changes records
	plan := planAcross(records, obs, policy, now, x)
	if h := r.Hosting; h != nil && !dryRun && handsOverForRoom(plan) {
		// The room is the last heartbeat's reading: before an item leaves
		// on it, the store's word (a drain, another host's new items since).
		if room := h.confirmRoom(ctx); room != policy.RoomElsewhere {
			policy.RoomElsewhere = room
			plan = planAcross(records, obs, policy, now, x)
		}
	}
	res := PassResult{Plan: plan}
	if !dryRun && res.Changed() {
		if spawns(plan) {
			if err := r.Watcher.EnsureServer(ctx); err != nil {
				return res, fmt.Errorf("reconcile: %w", err) // ensure server <socket>: …
			}
		}
		res.Result = r.Executor.Execute(ctx, records, plan)
		r.journalLoss(ctx, x.loss, plan)
	}
	res = first.then(res)
	res.RequeueAfter, res.Requeue = requeueAfter(res.Plan, res.Result, policy, now)
	if r.Metrics != nil {
		r.Metrics.observe(res, time.Since(start))
		r.Metrics.limits(x.holds, policy)
		// The executor kept records in step with what it wrote.
		r.Metrics.fleet(records, policy)
	}
	return res, nil
}

// healFirst plans and carries out, before the rest of the pass, the items
// of records whose agents died (their sessions, died), so that a respawn
// waits for the observation of those items only, not of the whole fleet.
// The plan is the pass's own (planAcross, with every lease check of the
// executor) over those items alone; admission counts the other items
// toward the host's capacity as their records stand (what their plans
// would do this pass only frees a slot or ends a start). A limit that
// another item's screen shows since the last pass, and a loss of the
// agents together (lossOf), are left to the rest of the pass: with a
// loss, nothing is done here. Execute keeps records in step with what it
// wrote, for the rest of the pass.
func (r *Reconciler) healFirst(ctx context.Context, records []desired.Record, died map[string]bool, p Policy, now time.Time) (PassResult, error) {
	only := map[desired.Key]bool{}
	var hot []desired.Record
	for _, rec := range records {
		if died[desired.SessionName(rec.Key)] {
			only[rec.Key] = true
			hot = append(hot, rec)
		}
	}
	if len(hot) == 0 {
		return PassResult{}, nil
	}
	obs, err := r.Observer.ObserveFirst(ctx, hot, needs(p, now), now)
	if err != nil {
		return PassResult{}, err
	}
	x := acrossOf(records, obs, p, now)
	if x.loss.Reason != "" {
		return PassResult{}, nil
	}
	x.only = only
	res := PassResult{Plan: planAcross(records, obs, p, now, x)}
	if !res.Changed() {
		return res, nil
	}
	if spawns(res.Plan) {
		if err := r.Watcher.EnsureServer(ctx); err != nil {
			return res, err // ensure server <socket>: …
		}
	}
	res.Result = r.Executor.Execute(ctx, records, res.Plan)
	return res, nil
}

// then is p followed by the rest of its pass, q: both plans, and what
// both did.
func (p PassResult) then(q PassResult) PassResult {
	if len(p.Plan) == 0 {
		return q
	}
	q.Plan = append(p.Plan, q.Plan...)
	q.Result.Applied += p.Result.Applied
	q.Result.Failed += p.Result.Failed
	q.Result.Retry = q.Result.Retry || p.Result.Retry
	q.Result.Replan = q.Result.Replan || p.Result.Replan
	return q
}

// hosted returns p with this host's part of it: its name, whether it may
// act now on the items it read under lease epoch (Hosting.ValidAt), its
// drain flag, the room the other hosts have, and the items whose agents
// it stopped itself. A dry run,
// which heartbeats nothing, plans the items whose lease names this host
// as if its clock were valid.
func (r *Reconciler) hosted(p Policy, epoch uint64, dryRun bool) Policy {
	if h := r.Hosting; h != nil {
		p.Host, p.LeaseValid, p.Draining = h.Host.Name, h.ValidAt(epoch) || dryRun, h.Draining()
		p.RoomElsewhere = h.RoomElsewhere()
		if r.Executor != nil {
			p.Relinquished = r.Executor.Relinquished()
		}
	}
	return p
}

// fence stops the local agents of the items the latest pass read when
// this host's lease clock lapsed and the store cannot be read (a
// partition): none of them is this host's to run any more, and nothing
// is written (Relinquish). A clock never renewed stops nothing.
func (r *Reconciler) fence(ctx context.Context, dryRun bool) {
	h := r.Hosting
	if h == nil || dryRun || !h.Clock.Renewed() || h.Valid() || len(r.last) == 0 {
		return
	}
	now := r.Now()
	p := r.hosted(r.Policy(), h.Clock.Epoch(), false).withRoutes(r.last)
	obs, err := r.Observer.Observe(ctx, r.last, needs(p, now), now)
	if err != nil {
		return // tmux unreadable: the next pass tries again
	}
	plan := planAcross(r.last, obs, p, now, across{})
	r.Executor.Execute(ctx, r.last, plan)
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

// requeueAfter is the earliest Wait or Queue deadline, or the poll period when an
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
		case actions.Queue:
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

// passRetry is the backoff of failed passes: schema.PassRetryInitial doubling up
// to max (cenkalti/backoff, no jitter), never giving up.
func passRetry(max time.Duration) *backoff.ExponentialBackOff {
	return doubling.New(min(schema.PassRetryInitial, max), max)
}

// needs is the rule of which item can use which disk fact this pass
// (observed.Needs). A pass runs every second or so, so only items that may
// spawn, are being probed or have an event in flight get their workdir and
// transcript read (needsFacts), only live agents get their screen and the
// latest turn of their transcript read (needsScreen), captured anew only when a decision needs
// the screen (screenDecides) or it had output since, and only the frames of the deliveries the
// pass may act on are looked for (framesToCheck), in the transcript of the
// conversation the item is in (Status.HarnessSessionID) and in that of an
// id the running harness reported since its spawn (a /clear the pass has
// not followed yet: desired.Record.ReportedConversation), whose transcript
// is read in any case, for follow. The reports in the channel of an item
// whose current spawn was given one are read (Need.Reports). An item whose
// harness cannot pin its conversation id, and whose id is unconfirmed,
// gets the conversations its harness started since the spawn read
// (Need.Learn), in any phase.
func needs(p Policy, now time.Time) observed.Needs {
	return func(rec desired.Record, snap observed.Snapshot) observed.Need {
		if !owns(rec, p) || p.Draining {
			return observed.Need{} // only its local agent is looked at
		}
		facts, screen, exit := needsFacts(rec, snap, p), needsScreen(rec, snap, p), needsExit(rec, snap, p)
		var learn time.Time
		if rec.Status.IDUnconfirmed && p.Harnesses[rec.Spec.Harness].LearnsSessionID {
			// Whatever the phase: a conversation the harness started
			// before it died is still the one to resume.
			learn = rec.Status.SpawnedAt
		}
		// The item's channel, where its current spawn's harness reports;
		// and a conversation it reported and the planner has not followed
		// yet, whose transcript says whether it may (follow).
		reports := rec.Status.ChannelToken != ""
		reported := rec.ReportedConversation(p.Harnesses[rec.Spec.Harness].AcceptsSessionID)
		if !facts && !screen {
			return observed.Need{Learn: learn, Exit: exit, Reports: reports, Reported: reported}
		}
		n := observed.Need{Disk: true, Screen: screen, ScreenIfChanged: screen && !screenDecides(rec), Exit: exit, Learn: learn, Reports: reports, Reported: reported,
			Usage: budgetOf(&rec, &p).Set()}
		if facts {
			n.Frames = framesToCheck(rec, now)
		}
		// The workdir the planner will use, and the repository it should
		// be a worktree of.
		workspaceOf(&rec, &p).need(&n)
		n.Commits = pushCommits(rec)
		if id := runReported(rec, snap); id != "" && n.Reported == "" {
			n.Reported = id
		}
		return n
	}
}

// framesToCheck returns the frames of rec's deliveries that the pass may
// act on, nil when it can act on none: a closed or held item only keeps
// what its paste or boot prompt in flight delivered, and an item waiting in
// NeedsAttention or in backoff sends nothing this pass. The frame carries
// the digest the stored prompt names (desired.FrameOf). A spawn whose boot
// prompt is still to be seen (awaitingBoot) has its boot line looked for
// too (desired.BootFrame).
func framesToCheck(rec desired.Record, now time.Time) []desired.Frame {
	st := rec.Status
	var frames []desired.Frame
	if awaitingBoot(st) {
		frames = append(frames, desired.BootFrame(st.BootID))
	}
	inFlight := st.SendingDeliveryID != "" || st.SpawnDeliveryID != ""
	switch {
	case (rec.Spec.Closed || rec.Spec.Held) && !inFlight:
		return nil
	case st.Phase == desired.PhaseNeedsAttention && rec.Spec.Generation <= st.AttentionGeneration && !awaitingBoot(st):
		return nil
	case st.Phase == desired.PhaseBackingOff && now.Before(st.NextAttempt) && !inFlight:
		return nil
	}
	for _, d := range rec.Pending {
		frames = append(frames, desired.FrameOf(d))
	}
	return frames
}

// awaitingBoot reports whether st's spawn waits for its boot prompt to be
// seen in the conversation: it is being spawned, or needs attention
// because that prompt was never seen (a dialog held it; the human who
// answers it lets it through), and it has a boot id to look for.
func awaitingBoot(st desired.Status) bool {
	if st.BootID == "" {
		return false
	}
	switch st.Phase {
	case desired.PhaseSpawning:
		return true
	case desired.PhaseNeedsAttention:
		return st.Reason == string(actions.ReasonSpawnUnconfirmed) || st.Reason == string(actions.ReasonUnconfirmed)
	}
	return false
}

// needsExit reports whether a pass reads what rec's dead agent said last
// (observed.Need.Exit): an open item whose pane, this loopd's, is dead
// while it was being spawned or ran, whose death the planner judges by
// it (a harness's refusal to resume, the last words the churn rule
// compares).
func needsExit(rec desired.Record, snap observed.Snapshot, p Policy) bool {
	if rec.Spec.Closed || rec.Spec.Held {
		return false
	}
	switch rec.Status.Phase {
	case desired.PhaseSpawning, desired.PhaseRunning:
	default:
		return false
	}
	pn, ok := snap.Pane(desired.SessionName(rec.Key))
	return ok && pn.Dead && pn.Owner == p.Owner && p.Owner != ""
}

// needsFacts reports whether Plan may read rec's disk facts this pass. An
// event in flight (a boot prompt or a paste) always needs them. Otherwise a
// closed or held item is only stopped, a running item with a live pane only
// gets pastes (which look for their event in the conversation first) and,
// with idle parking on, is parked once its transcript stays unchanged, and
// an item at rest (idle, exited, stopped, needing attention, parked) with
// nothing pending is left alone. A live pane counts as the item's running harness
// by Plan's own rule (runsHarness), since a pane left with another
// foreground process is a death that may respawn.
func needsFacts(rec desired.Record, snap observed.Snapshot, pol Policy) bool {
	st := rec.Status
	if st.SendingDeliveryID != "" || st.SpawnDeliveryID != "" || awaitingBoot(st) {
		return true
	}
	if rec.Spec.Closed || rec.Spec.Held {
		return false
	}
	if rec.ReleasePending() || st.FreshRequested {
		return true // a release brings the item back
	}
	if p, ok := snap.Pane(desired.SessionName(rec.Key)); ok && !p.Dead && st.Phase == desired.PhaseRunning && runsHarness(&pol, &rec, p) {
		// A paste first looks for its event in the conversation; idle
		// parking looks at the transcript's last write (a stat).
		return len(rec.Pending) > 0 || pol.IdlePark > 0
	}
	switch st.Phase {
	case "", desired.PhaseIdle, desired.PhaseExited, desired.PhaseStopped, desired.PhaseNeedsAttention, desired.PhaseParked:
		return len(rec.Pending) > 0
	}
	return true
}

// Run reconciles until ctx ends: a pass at start, then after every trigger,
// every Interval, and at each pass's requeue-after time. A failed pass is
// journaled (reconcile.failed with retry_after) and retried after
// schema.PassRetryInitial, doubling up to Interval (passRetry), or at an earlier
// trigger. Failures never stop the loop. The
// Watcher starts the tmux server first and turns each pane death into a
// trigger until Run returns; Run also waits for the Executor's workspace
// preparations, which ctx cancels.
func (r *Reconciler) Run(ctx context.Context) error {
	if r.Executor != nil {
		// The preparations in flight record their outcome (interrupted,
		// once ctx has ended) before Run returns, while the store is open.
		defer r.Executor.WaitWorkspaces()
	}
	if err := r.Watcher.EnsureServer(ctx); err != nil {
		r.Log.Error(string(journal.TmuxUnavailable), "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.Watcher.Watch(ctx, r.TriggerDied) })
	defer wg.Wait()
	retry := passRetry(r.Interval)
	for {
		// The pass's id is taken here, so that its failure carries it too.
		pass := journal.WithReconcileID(ctx, journal.NewReconcileID())
		res, err := r.Pass(pass, false)
		wait := r.Interval
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			// A failed pass (tmux still exiting, the store busy) is
			// retried soon, backing off up to the interval. serve's
			// journal.Limiter folds a run of identical failures into
			// the first and one summary a minute.
			wait = retry.NextBackOff()
			r.Journal.Record(pass, slog.LevelError, journal.ReconcileFailed, "", "err", err, "retry_after", wait)
			if r.Metrics != nil {
				r.Metrics.passFailed()
			}
		case res.Requeue && res.RequeueAfter < wait:
			wait = res.RequeueAfter
		}
		if err == nil {
			retry.Reset()
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

// handsOverForRoom reports whether plan hands an item over for want of a
// slot here (admit, Policy.RoomElsewhere).
func handsOverForRoom(plan []actions.Action) bool {
	return slices.ContainsFunc(plan, func(a actions.Action) bool {
		h, ok := a.(actions.Handover)
		return ok && h.Reason == actions.ReasonNoSlot
	})
}
