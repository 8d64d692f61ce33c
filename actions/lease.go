package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// Leases (docs/design.md, "Many hosts"): why an item's local agent is
// stopped, or its conversation moves.
const (
	// ReasonLeaseLost: another host holds the item's lease (or none does);
	// this host stops its local agent and writes nothing.
	ReasonLeaseLost Reason = "lease_lost"
	// ReasonLeaseLapsed: this host's lease clock lapsed (it was paused
	// past its lease, or cut off from the store): it may no longer act on
	// any item, so it stops its local agents and writes nothing.
	ReasonLeaseLapsed Reason = "lease_lapsed"
	// ReasonFenced: the store refused a write under the item's lease
	// generation (store.ErrFenced): the lease moved since the pass read
	// it. The write is never retried.
	ReasonFenced Reason = "fenced"
	// ReasonHostMoved: the item's conversation moved from another host:
	// its transcript is restored and the conversation resumed, counting
	// no failure.
	ReasonHostMoved Reason = "host_moved"
	// ReasonDrained: a draining host stopped the item's agent and gave
	// its lease up; another host resumes it.
	ReasonDrained Reason = "drained"
	// ReasonNoSlot: the item's host had no slot for it
	// (capacity.maxLiveSessions) while another live host had one: it
	// handed the item over (Handover) rather than queue it.
	ReasonNoSlot Reason = "no_slot"
)

// ErrLeaseLost means the executor may not act on the item: its write was
// fenced (the error then also wraps store.ErrFenced), or this host's
// lease clock lapsed before a paste, a key or a spawn. Execute stops the
// item's local agent, with no store write, and skips its later actions.
var ErrLeaseLost = errors.New("lease lost")

// errNoTranscript is what a RestoreTranscript followed by a resume
// returns when the store holds no transcript of the conversation: the
// attempt (and a move) is recorded, the resume skipped, and the next pass
// plans the fresh spawn that carries the event (transcript_missing).
// It wraps store.ErrNoTranscript, which names the cause, so its own
// text says only what follows from it.
var errNoTranscript = errors.New("resume skipped")

// TranscriptMover copies an item's transcript to the store and back, so
// that its conversation survives the loss of its host (internal/transcript
// implements it). A nil mover copies nothing.
type TranscriptMover interface {
	// Ship appends to the store what it lacks of r's current transcript
	// (r.Status.HarnessSessionID), under r.Lease.Generation.
	Ship(ctx context.Context, r desired.Record) error
	// Restore writes the stored transcript of session id back where r's
	// harness expects it for cwd; the error wraps store.ErrNoTranscript
	// when the store has none.
	Restore(ctx context.Context, r desired.Record, id, cwd string) error
}

// Relinquish stops the local agent of an item this host does not run (its
// lease is another host's, or this host's lease clock lapsed): the session
// is killed (or the run ended) with no store write and no paste, and
// lease.lost is journaled once per item.
type Relinquish struct {
	Key     desired.Key
	Session string
	// Owner is the lease's owner as the pass read it when that is another
	// host; "" for none, and for this host's own lease, lapsed.
	Owner  string
	Reason Reason // ReasonLeaseLost or ReasonLeaseLapsed
}

// Item implements Action.
func (a Relinquish) Item() desired.Key { return a.Key }

// Name implements Action.
func (Relinquish) Name() string { return "relinquish" }

// Mutates implements Action: it changes tmux, never the store.
func (Relinquish) Mutates() bool { return true }

// Fields implements Action.
func (a Relinquish) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyToHost, a.Owner},
		{journal.KeyReason, string(a.Reason)}}
}

func (a Relinquish) String() string { return Format(a) }

// RestoreTranscript writes the stored transcript of ResumeID back where
// the harness reads it for Cwd (TranscriptMover.Restore): for an item
// whose status another host wrote (From, a move, recorded by Apply), or
// for one of this host's whose local transcript is missing (From "":
// reconciler's restoreFirst, reason transcript_missing). A ResumeID of ""
// restores nothing (no conversation id known).
type RestoreTranscript struct {
	Key      desired.Key
	Session  string
	ResumeID string
	Cwd      string
	From, To string // host names; From "" for this host's own item
	// Resume is true when a resume of ResumeID follows in the plan: when
	// the store holds no transcript it is skipped, and the next pass
	// spawns fresh. A moved item (From set) is resumed from BackingOff,
	// as a move (ReasonHostMoved); without Resume it keeps its phase and
	// waits for its next event.
	Resume bool
	// WorkdirMissing is true when the item's workdir does not exist on
	// this host: it is made again as a reopened item's removed worktree
	// is (desired.WorkspaceRemoved), from git for a checkout.
	WorkdirMissing bool
}

// Item implements Action.
func (a RestoreTranscript) Item() desired.Key { return a.Key }

// Name implements Action.
func (RestoreTranscript) Name() string { return "restore_transcript" }

// Mutates implements Action.
func (RestoreTranscript) Mutates() bool { return true }

// Fields implements Action.
func (a RestoreTranscript) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyResumeID, a.ResumeID},
		{journal.KeyCwd, a.Cwd}, {journal.KeyFromHost, a.From}, {journal.KeyToHost, a.To},
		{journal.KeyResumed, a.Resume}, {journal.KeyReason, string(a.reason())}}
}

// reason is why the transcript is restored: the item moved hosts, or
// its local transcript is missing.
func (a RestoreTranscript) reason() Reason {
	if a.From == "" {
		return ResumeTranscriptMissing
	}
	return ReasonHostMoved
}

func (a RestoreTranscript) String() string { return Format(a) }

// Apply returns st with the restore of ResumeID recorded
// (Status.RestoredID), and, for a move, as the host that took the item
// over records it: no pane, process or paste of the old host's is the
// item's here (what was in flight stays pending, and the restored
// conversation says whether it landed), MovedFrom names the old host, and
// an item that had an agent is BackingOff, due now, with host_moved as
// its last exit's reason and the move as its last exit (LastExitAt), so
// that its resume counts no failure and, queued for a slot, still tells
// the agent it moved (reconciler, movedSinceSpawn).
func (a RestoreTranscript) Apply(st desired.Status, now time.Time) desired.Status {
	if a.ResumeID != "" {
		st.RestoredID = a.ResumeID
	}
	if a.From == "" {
		return st // this host's own item: its spawn follows as planned
	}
	st = st.DropInFlight()
	st.PaneID, st.RunID = "", ""
	st.HarnessPID, st.HarnessStart = 0, 0
	st.MovedFrom = a.From
	st.Host = a.To
	if a.WorkdirMissing {
		st.Workspace = desired.WorkspaceRemoved
	}
	if a.Resume {
		st.Phase, st.NextAttempt = desired.PhaseBackingOff, now
		st.LastExitReason, st.Reason = string(ReasonHostMoved), string(ReasonHostMoved)
		st.LastExitAt = now
	}
	return st
}

// Handover is a host's hand-over of one item it holds, when it drains
// (ReasonDrained) or has no slot for it while another host has one
// (ReasonNoSlot): its local agent, if any, is stopped as an idle one is
// parked, and confirmed gone; its transcript is shipped whole; an item
// that had an agent is left BackingOff for its next host to resume; and
// only then is its lease released (store.Fleet.ReleaseLease). Never two
// live agents on one conversation.
type Handover struct {
	Key     desired.Key
	Session string
	// Live is true when the item has a local agent (a session or a run)
	// to stop first.
	Live bool
	// Reason is why: ReasonDrained or ReasonNoSlot.
	Reason Reason
}

// Item implements Action.
func (a Handover) Item() desired.Key { return a.Key }

// Name implements Action.
func (Handover) Name() string { return "handover" }

// Mutates implements Action.
func (Handover) Mutates() bool { return true }

// Fields implements Action.
func (a Handover) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyLive, a.Live},
		{journal.KeyReason, string(a.Reason)}}
}

func (a Handover) String() string { return Format(a) }

// Apply returns st as the drain leaves it: no agent on this host, what was
// in flight still pending, and an item that had an agent BackingOff, due
// now, so that the next host resumes it (as a moved item) and this one,
// taken back into service before the release, resumes it too.
func (a Handover) Apply(st desired.Status, now time.Time) desired.Status {
	had := a.Live || st.Phase == desired.PhaseRunning || st.Phase == desired.PhaseSpawning
	st = st.DropInFlight()
	st.PaneID, st.RunID = "", ""
	if had {
		st.Phase, st.NextAttempt = desired.PhaseBackingOff, now
		st.LastExitReason, st.Reason = string(a.Reason), string(a.Reason)
	}
	return st
}

// leaseEpochKey is the context key of WithLeaseEpoch.
type leaseEpochKey struct{}

// WithLeaseEpoch returns ctx carrying epoch, the lease epoch
// (reconciler.LeaseClock.Epoch) as it was before the pass that executes
// with ctx read its records: the executor acts on the pass's items only
// while this host's lease clock is valid at that epoch (LeaseValid), and
// each pane it spawns starts its harness only while the fence stamp holds
// for it (launch.Launcher.Prepare).
func WithLeaseEpoch(ctx context.Context, epoch uint64) context.Context {
	return context.WithValue(ctx, leaseEpochKey{}, epoch)
}

// leaseEpoch returns the epoch ctx carries (WithLeaseEpoch), 0 for none.
func leaseEpoch(ctx context.Context) uint64 {
	epoch, _ := ctx.Value(leaseEpochKey{}).(uint64)
	return epoch
}

// checkLease returns ErrLeaseLost when this host's lease clock is not
// valid at the epoch the pass was drawn under (leaseEpoch): called right
// before a paste, a key or a spawn, so that a host paused between its plan
// and the act never acts on an item another host may run by now, even
// once a heartbeat after the pause made its clock valid again. A host
// without leases (no LeaseValid) always may.
func (e *Executor) checkLease(ctx context.Context, op string, k desired.Key) error {
	if e.LeaseValid == nil || e.LeaseValid(leaseEpoch(ctx)) {
		return nil
	}
	return fmt.Errorf("%s %s: %w (%s)", op, k, ErrLeaseLost, ReasonLeaseLapsed)
}

// write is the one home of status writes (putDelivered calls it): w is
// stamped with this host (Status.Host) and, with a Fleet, written under
// r's lease generation (store.Fleet.FencedWrite); a fenced write wraps
// store.ErrFenced and ErrLeaseLost, and is never retried.
func (e *Executor) write(ctx context.Context, r *desired.Record, w store.StatusWrite) error {
	if e.Fleet == nil {
		return e.Store.WriteStatus(ctx, r.Key, w)
	}
	err := e.Fleet.FencedWrite(ctx, r.Key, r.Lease.Generation, w)
	if errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	return err // the store names the operation and the item
}

// PutStatus writes st as r's status through the executor's one home of
// status writes (fenced by r's lease, stamped with this host), and keeps r
// in step: for a status change made outside an action (the reconciler's
// clock bounds).
func (e *Executor) PutStatus(ctx context.Context, r *desired.Record, st desired.Status) error {
	return e.put(ctx, r, st)
}

// relinquish carries out a Relinquish, and the stop that follows a lost
// lease met by another action (Execute): the item's local agent is stopped
// (stopAgent: its process group, its session, its launcher file, its run)
// with no store write, and lease.lost is journaled once per item until
// this host writes its status again.
func (e *Executor) relinquish(ctx context.Context, r *desired.Record, session, owner string, reason Reason) error {
	if err := e.stopAgent(ctx, r, session); err != nil {
		return fmt.Errorf("relinquish %s: %w", r.Key, err)
	}
	e.mu.Lock()
	first := !e.lost[r.Key]
	if e.lost == nil {
		e.lost = map[desired.Key]bool{}
	}
	e.lost[r.Key] = true
	e.mu.Unlock()
	if first {
		e.record(ctx, slog.LevelWarn, journal.LeaseLost, r.Key, journal.KeySession, session, journal.KeyHost, e.Host,
			journal.KeyToHost, owner, journal.KeyLeaseGen, r.Lease.Generation, journal.KeyReason, string(reason))
	}
	return nil
}

// Relinquished returns the items whose local agent this executor stopped
// with no store write (relinquish) and whose status it has not written
// since (held): a copy, for the planner (reconciler.Policy.Relinquished).
func (e *Executor) Relinquished() map[desired.Key]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.lost) == 0 {
		return nil
	}
	return maps.Clone(e.lost)
}

// held records that this host wrote r's status: a later loss of its
// lease is news again.
func (e *Executor) held(k desired.Key) {
	e.mu.Lock()
	delete(e.lost, k)
	e.mu.Unlock()
}

// stopAgent stops r's local agent as an idle one is parked: the process
// group of a harness that outlives its terminal (endGroup), the session
// (guarded by this loopd's owner mark; a missing one is already stopped),
// the env file a launcher never read, and a run of the process runner. It
// writes nothing to the store.
func (e *Executor) stopAgent(ctx context.Context, r *desired.Record, session string) error {
	if ad, err := e.adapter(r.Spec.Harness); err == nil {
		if err := e.endGroup(ctx, r, session, ad); err != nil {
			return err
		}
	}
	if err := e.Tmux.KillSession(ctx, session, e.Owner); err != nil && !errors.Is(err, tmux.ErrNoSession) && !errors.Is(err, tmux.ErrForeign) {
		return err // kill session <name>: …
	}
	if err := e.Launcher.Discard(session); err != nil {
		return err
	}
	return e.endRun(ctx, r, session)
}

// restoreTranscript carries out a RestoreTranscript: the stored transcript
// is written back (Mover.Restore, which journals transcript.restored; none
// without a Mover), then the attempt, and a move, are recorded (Apply) and
// a move is journaled (session.moved). When the store has
// no transcript the move is recorded all the same, and errNoTranscript
// skips the item's resume: the next pass, which finds no transcript to
// resume, spawns fresh with the event (transcript_missing).
func (e *Executor) restoreTranscript(ctx context.Context, r *desired.Record, a RestoreTranscript) error {
	var missing error
	switch {
	case a.ResumeID != "" && e.Mover != nil:
		if err := e.Mover.Restore(ctx, *r, a.ResumeID, a.Cwd); errors.Is(err, store.ErrNoTranscript) {
			missing = err
		} else if err != nil {
			return fmt.Errorf("restore transcript %s: %w", r.Key, err)
		}
	case a.From == "":
		missing = store.ErrNoTranscript // nothing to restore it from
	}
	if err := e.put(ctx, r, a.Apply(r.Status, e.Now())); err != nil {
		return err
	}
	// A move is journaled here; what Mover.Restore wrote back it journaled
	// itself, and a store without a copy leads to the fresh spawn,
	// journaled resume_failed reason=transcript_missing.
	if a.From != "" {
		e.record(ctx, slog.LevelInfo, journal.SessionMoved, r.Key, journal.KeySession, a.Session, journal.KeyHarnessSessionID, a.ResumeID,
			journal.KeyFromHost, a.From, journal.KeyToHost, a.To, journal.KeyFound, missing == nil, journal.KeyReason, string(ReasonHostMoved))
	}
	if missing != nil && a.Resume {
		return fmt.Errorf("restore transcript %s: %w: %w", r.Key, errNoTranscript, missing)
	}
	return nil
}

// ship copies r's transcript to the store (Mover.Ship). A failure is not
// returned: the Mover journals it (transcript.ship_failed), and the next
// ship appends what is missing.
func (e *Executor) ship(ctx context.Context, r *desired.Record) {
	if e.Mover == nil || r.Status.HarnessSessionID == "" {
		return
	}
	_ = e.Mover.Ship(ctx, *r)
}

// handover carries out a Handover (see there). A process that outlives
// the stop leaves the lease held: the next pass tries again.
func (e *Executor) handover(ctx context.Context, r *desired.Record, a Handover) error {
	if e.Fleet == nil {
		return fmt.Errorf("handover %s: no fleet", r.Key)
	}
	if err := e.stopAgent(ctx, r, a.Session); err != nil {
		return fmt.Errorf("handover %s: %w", r.Key, err)
	}
	// The harness the item last ran, by pid and start time: gone before
	// the lease goes, or the lease stays.
	old := proc.Process{PID: r.Status.HarnessPID, Start: r.Status.HarnessStart}
	if old.PID != 0 {
		if _, err := old.End(ctx, schema.PredecessorGrace, schema.PredecessorPoll); err != nil {
			e.record(ctx, slog.LevelError, journal.SessionStopUnconfirmed, r.Key, journal.KeySession, a.Session, journal.KeyPID, old.PID,
				journal.KeyReason, string(a.Reason), journal.KeyErr, err)
			return fmt.Errorf("handover %s: %w", r.Key, err)
		}
	}
	st := a.Apply(r.Status, e.Now())
	st.HarnessPID, st.HarnessStart = 0, 0
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if a.Live {
		e.record(ctx, slog.LevelInfo, journal.SessionStopped, r.Key, journal.KeySession, a.Session, journal.KeyReason, string(a.Reason))
	}
	e.ship(ctx, r)
	if err := e.Fleet.ReleaseLease(ctx, r.Key, e.Host, r.Lease.Generation); err != nil {
		if errors.Is(err, store.ErrFenced) {
			return fmt.Errorf("handover %s: %w: %w", r.Key, ErrLeaseLost, err)
		}
		return fmt.Errorf("handover %s: %w", r.Key, err)
	}
	e.record(ctx, slog.LevelInfo, journal.LeaseReleased, r.Key, journal.KeyHost, e.Host, journal.KeyLeaseGen, r.Lease.Generation,
		journal.KeyReason, string(a.Reason))
	return nil
}
