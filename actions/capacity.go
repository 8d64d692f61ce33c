package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
)

// Admission and idle parking (capacity): why an item that needs an agent
// does not get one now, or was stopped.
const (
	// ReasonCapacity: every slot of capacity.maxLiveSessions is held.
	ReasonCapacity Reason = "capacity"
	// ReasonStartsInFlight: capacity.maxStartsInFlight starts are in
	// flight (their harness has not shown it started); the next waits for
	// one of them.
	ReasonStartsInFlight Reason = "starts_in_flight"
	// ReasonQueued: the spawn of an item admitted from the queue.
	ReasonQueued Reason = "queued"
	// ReasonParked: a parked item waits for its next event.
	ReasonParked Reason = "parked"
	// ReasonIdle: the agent was idle for capacity.idleParkSeconds.
	ReasonIdle Reason = "idle"
)

// Queue records that an item needs an agent but is not admitted now: the
// host is full (ReasonCapacity) or enough starts are in flight
// (ReasonStartsInFlight). The item goes to desired.PhaseQueued at
// Position (1 first) and keeps its events pending. Enter is true when the
// record changes (the item enters the queue, or waits for another
// reason); only then does executing it write anything, and only entering
// journals session.queued.
type Queue struct {
	Key      desired.Key
	Session  string
	Position int
	// Live is how many items hold a slot once the pass is done, MaxLive
	// the cap (0: none); Starts the starts then in flight, MaxStarts
	// their cap.
	Live, MaxLive, Starts, MaxStarts int
	Reason                           Reason
	Enter                            bool
	// Until is when the queue is looked at again, for an item held by
	// the starts in flight (a start may have been reported by then); zero
	// for one held by the slots, which a stop or an exit frees.
	Until time.Time
}

// Item implements Action.
func (a Queue) Item() desired.Key { return a.Key }

// Name implements Action.
func (Queue) Name() string { return "queue" }

// Mutates implements Action: only a change of the record does.
func (a Queue) Mutates() bool { return a.Enter }

// Fields implements Action.
func (a Queue) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyPosition, a.Position},
		{journal.KeyLive, a.Live}, {journal.KeyMaxLive, a.MaxLive},
		{journal.KeyStarts, a.Starts}, {journal.KeyMaxStarts, a.MaxStarts},
		{journal.KeyReason, string(a.Reason)}}
}

func (a Queue) String() string { return Format(a) }

// Park stops an agent that stayed idle for IdleFor (no event pending or in
// flight, its transcript unchanged) once its screen shows an empty input
// box, and moves the item to desired.PhaseParked: not a crash, nothing
// counted; the next event resumes the same conversation.
type Park struct {
	Key     desired.Key
	Session string
	PaneID  string
	IdleFor time.Duration
}

// Item implements Action.
func (a Park) Item() desired.Key { return a.Key }

// Name implements Action.
func (Park) Name() string { return "park" }

// Mutates implements Action.
func (Park) Mutates() bool { return true }

// Fields implements Action.
func (a Park) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyPaneID, a.PaneID},
		{journal.KeyIdleFor, a.IdleFor}, {journal.KeyReason, string(ReasonIdle)}}
}

func (a Park) String() string { return Format(a) }

// queue carries out a Queue: the item is Queued, QueuedAt set when it
// enters; session.queued is journaled when it enters, not while it stays.
func (e *Executor) queue(ctx context.Context, r *desired.Record, a Queue) error {
	st := r.Status
	entering := st.Phase != desired.PhaseQueued
	if entering {
		st.QueuedAt = e.Now()
	}
	st.Phase = desired.PhaseQueued
	st.Reason = string(a.Reason)
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if entering {
		e.record(ctx, slog.LevelInfo, journal.SessionQueued, r.Key, journal.KeySession, a.Session, journal.KeyPosition, a.Position,
			journal.KeyLive, a.Live, journal.KeyMaxLive, a.MaxLive, journal.KeyStarts, a.Starts, journal.KeyMaxStarts, a.MaxStarts,
			journal.KeyPending, len(r.Pending), journal.KeyReason, string(a.Reason))
	}
	return nil
}

// errNotIdle is what park returns when the screen shows the agent at
// work: not a failure, the item is looked at again after a full idle
// period.
var errNotIdle = errors.New("agent not idle")

// park carries out a Park: the screen is read first (only for an agent the
// planner found idle), and an agent that is not at an empty input box (a
// turn running, a draft, a dialog) is left alone, its idle time counted
// from now (Status.ActiveSeenAt). Otherwise its session is killed (tmux
// sends the harness SIGHUP; the next spawn waits for the process to be
// gone, endPredecessor) and the item is Parked.
func (e *Executor) park(ctx context.Context, r *desired.Record, a Park) error {
	ad, _, screen, err := e.readPane(ctx, r, a.PaneID, a.Session)
	if err != nil {
		return fmt.Errorf("park %s: %w", r.Key, err)
	}
	if class, _ := ad.Screen(screen); class != harness.ScreenReady {
		st := r.Status
		st.ActiveSeenAt = e.Now()
		if err := e.put(ctx, r, st); err != nil {
			return err
		}
		return fmt.Errorf("park %s: %w (screen %s)", r.Key, errNotIdle, class)
	}
	if err := e.stopAgent(ctx, r, a.Session); err != nil {
		return fmt.Errorf("park %s: %w", r.Key, err) // a foreign session is never killed
	}
	st := r.Status
	st.Phase = desired.PhaseParked
	st.PaneID = ""
	st.Reason = string(ReasonIdle)
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.SessionParked, r.Key, journal.KeySession, a.Session, journal.KeyHarnessSessionID, st.HarnessSessionID,
		journal.KeyIdleFor, a.IdleFor, journal.KeyReason, string(ReasonIdle))
	return nil
}
