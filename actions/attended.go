package actions

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// The reasons of takeover and handback (reconciler, attendance).
const (
	// ReasonAttended: a person's tmux client is attached to the item's
	// session; the item waits for the handback. It is also the reason of
	// the exit recorded at the handback for an agent that died while
	// attended: the person's doing, no crash.
	ReasonAttended Reason = "attended"
)

// How an attended item was handed back (HandBack.How).
const (
	HandBackDetached = "detached" // the last client detached
	HandBackIdle     = "idle"     // no input for routing.tmux.attendedTimeoutSeconds
	HandBackReleased = "released" // loopd release
)

// MarkAttended records that a person attends the item's session (a tmux
// client is attached to it), with who attached (By, from loopd attach's
// mark). With Gone it records instead that the client left after a
// handback that kept it attached (desired.AttendanceState.HandedBackLeft),
// so that the next attach takes over again.
type MarkAttended struct {
	Key     desired.Key
	Session string
	By      string
	Gone    bool
}

// Apply returns st as the executor leaves it at now.
func (a MarkAttended) Apply(st desired.Status, now time.Time) desired.Status {
	st.HandedBackLeft = false
	if !a.Gone {
		st.AttendedSince, st.AttendedBy = now, a.By
	}
	return st
}

// Item implements Action.
func (a MarkAttended) Item() desired.Key { return a.Key }

// Name implements Action.
func (a MarkAttended) Name() string {
	if a.Gone {
		return "client_gone"
	}
	return "attended"
}

// Mutates implements Action.
func (MarkAttended) Mutates() bool { return true }

// Fields implements Action.
func (a MarkAttended) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}}
	if !a.Gone {
		f = append(f, Field{"by", a.By})
	}
	return f
}

func (a MarkAttended) String() string { return Format(a) }

// HandBack ends an item's attendance: deliveries, nudges, parking and
// self-heal take the item again from this pass on. How says why
// (HandBackDetached, HandBackIdle, HandBackReleased); Left is true when
// the client stays attached. Deliveries are the events that queued
// meanwhile, oldest first, which go out one by one after it, each
// confirmed in the transcript as any other.
type HandBack struct {
	Key        desired.Key
	Session    string
	By         string
	Since      time.Time
	How        string
	Left       bool
	Deliveries []string
}

// Apply returns st as the executor leaves it at now.
func (a HandBack) Apply(st desired.Status, now time.Time) desired.Status {
	st.AttendedSince, st.AttendedBy = time.Time{}, ""
	st.HandedBackAt, st.HandedBackLeft = now, a.Left
	st.HandBackUntold = len(a.Deliveries) > 0
	return st
}

// Item implements Action.
func (a HandBack) Item() desired.Key { return a.Key }

// Name implements Action.
func (HandBack) Name() string { return "hand_back" }

// Mutates implements Action.
func (HandBack) Mutates() bool { return true }

// Fields implements Action.
func (a HandBack) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"by", a.By}, {"how", a.How},
		{"deliveries", strings.Join(a.Deliveries, ",")}}
}

func (a HandBack) String() string { return Format(a) }

// markAttended writes the attendance, then journals item.attended (a
// client that left writes its status only).
func (e *Executor) markAttended(ctx context.Context, r *desired.Record, a MarkAttended) error {
	st := a.Apply(r.Status, e.Now())
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if !a.Gone {
		e.record(ctx, slog.LevelInfo, journal.ItemAttended, r.Key, "session", a.Session, "by", a.By,
			"since", st.AttendedSince.UTC().Format(time.RFC3339), "pending", len(r.Pending), "phase", string(st.Phase))
	}
	return nil
}

// handBack writes the handback, then journals item.handed_back with who
// attended, since when and for how long.
func (e *Executor) handBack(ctx context.Context, r *desired.Record, a HandBack) error {
	since := r.Status.AttendedSince
	st := a.Apply(r.Status, e.Now())
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.ItemHandedBack, r.Key, "session", a.Session, "by", a.By, "how", a.How,
		"since", since.UTC().Format(time.RFC3339), "attended_for", st.HandedBackAt.Sub(since).Round(time.Second).String(),
		"deliveries", strings.Join(a.Deliveries, ","))
	return nil
}
