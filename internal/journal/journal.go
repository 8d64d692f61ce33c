// Package journal names the events loopd reports and records each one twice:
// as a log/slog line whose message is the event name, and as a row in the
// store's event journal, which `loopd events` reads.
package journal

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Name is an event name. The list below is the whole vocabulary; slog messages
// and journal rows use the same names (docs/design.md, "Events").
type Name string

// The event names.
const (
	DeliveryAccepted  Name = "delivery.accepted"
	DeliveryDuplicate Name = "delivery.duplicate"
	DeliveryIgnored   Name = "delivery.ignored"
	DeliveryRejected  Name = "delivery.rejected"

	SessionSpawned        Name = "session.spawned"
	SessionRespawned      Name = "session.respawned"
	SessionResumeFailed   Name = "session.resume_failed"
	SessionExited         Name = "session.exited"
	SessionCrashLoop      Name = "session.crash_loop"
	SessionStopped        Name = "session.stopped"
	SessionConfirmed      Name = "session.confirmed"
	SessionNeedsAttention Name = "session.needs_attention"
	SessionAdopted        Name = "session.adopted"
	SessionReported       Name = "session.reported"
	SessionReportRejected Name = "session.report_rejected"
	SessionFollowed       Name = "session.followed"
	// SessionForeign: a session of the item's name carries the owner mark
	// of another loopd (or none); it is never adopted, pasted into or killed.
	SessionForeign Name = "session.foreign"

	DispatchSent      Name = "dispatch.sent"
	DispatchDelivered Name = "dispatch.delivered"
	DispatchFailed    Name = "dispatch.failed"
	DispatchBlocked   Name = "dispatch.blocked"
	// DispatchMangled: an event's frame reached the conversation, but not
	// whole (end line missing or digest mismatch).
	DispatchMangled Name = "dispatch.mangled"

	WorkspaceMissing Name = "workspace.missing"
	// WorkspacePrepared: an item's workdir was made (or found) before a
	// spawn: a plain directory or a git worktree.
	WorkspacePrepared Name = "workspace.prepared"
	// WorkspaceFailed: a workspace operation failed (git's command, exit
	// status and stderr tail, credentials masked).
	WorkspaceFailed Name = "workspace.failed"
	// WorkspaceKept: a closed item's worktree was not removed, and why.
	WorkspaceKept Name = "workspace.kept"
	// WorkspaceRemoved: a closed item's clean worktree was removed.
	WorkspaceRemoved Name = "workspace.removed"
	// WorkspacePinned: the route renders another workdir than the one the
	// item's conversation lives in; the pinned one stays.
	WorkspacePinned Name = "workspace.pinned"
	// WorkspaceUnreadable: observation could not read an item's workdir
	// (a permission); the planner treats it as not observed.
	WorkspaceUnreadable Name = "workspace.unreadable"
	HarnessMissing      Name = "harness.missing"

	ItemHeld     Name = "item.held"
	ItemReleased Name = "item.released"

	ConfigReloaded Name = "config.reloaded"
	ConfigInvalid  Name = "config.invalid"

	// ServeRefused: serve or reconcile --once found the tmux server or its
	// socket taken by the loopd of another state dir, and did not start.
	ServeRefused Name = "serve.refused"

	ReconcileFailed Name = "reconcile.failed"
)

// Event is one journal entry. Attrs keys are snake_case, as in the log.
type Event struct {
	Time     time.Time
	Name     Name
	Level    slog.Level
	WorkItem string // owner/repo#number, or "" for daemon-wide events
	Attrs    map[string]string
}

// Appender stores events. The desired store implements it.
type Appender interface {
	AppendEvent(ctx context.Context, e Event) error
}

// MaxDeferred bounds the rows RecordLater holds until Flush writes them;
// past it the oldest row is dropped and counted.
const MaxDeferred = 256

// Recorder logs each event with its logger and appends it to the journal.
// A journal write error is logged, never returned: losing a journal row must
// not stop a reconcile pass.
type Recorder struct {
	log   *slog.Logger
	store Appender
	now   func() time.Time

	mu       sync.Mutex
	deferred []Event // rows RecordLater logged and Flush has not written yet
	dropped  int     // rows dropped past MaxDeferred since the last Flush
}

// NewRecorder returns a Recorder. store may be nil (dry run: log only).
func NewRecorder(log *slog.Logger, store Appender, now func() time.Time) *Recorder {
	return &Recorder{log: log, store: store, now: now}
}

// Record logs and journals one event. kv are alternating snake_case keys and
// values; values are formatted with slog's text rules.
func (r *Recorder) Record(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
	e := r.log1(ctx, level, name, workItem, kv)
	if r.store == nil {
		return
	}
	if err := r.store.AppendEvent(ctx, e); err != nil {
		r.log.Error("journal.append_failed", "event", string(name), "err", err)
	}
}

// RecordLater logs one event now, exactly as Record does, and keeps its
// journal row for the next Flush instead of writing it. It is for a path
// where the store has just failed and must not be waited on a second time
// (a delivery answered within GitHub's deadline); the row still reaches
// the journal once the store takes writes again. At most MaxDeferred rows
// wait; past that the oldest is dropped, and Flush logs how many were.
func (r *Recorder) RecordLater(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
	e := r.log1(ctx, level, name, workItem, kv)
	if r.store == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.deferred) == MaxDeferred {
		r.deferred = r.deferred[1:]
		r.dropped++
	}
	r.deferred = append(r.deferred, e)
}

// Flush writes the rows RecordLater kept, oldest first, and stops at the
// first write that fails, keeping that row and the later ones for the next
// Flush. It returns the write error, or nil. The rows go to the store
// beneath any Appender that folds repeats (one with an Unwrap method, such
// as Limiter.Appender's): each stands for its own delivery, which the
// operator may have to redeliver, so none is folded into a count.
func (r *Recorder) Flush(ctx context.Context) error {
	store := r.store
	for {
		u, ok := store.(interface{ Unwrap() Appender })
		if !ok {
			break
		}
		store = u.Unwrap()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dropped > 0 {
		r.log.Error("journal.append_failed", "err", "deferred rows over the bound were dropped", "dropped", r.dropped)
		r.dropped = 0
	}
	for len(r.deferred) > 0 {
		if err := store.AppendEvent(ctx, r.deferred[0]); err != nil {
			return err
		}
		r.deferred = r.deferred[1:]
	}
	return nil
}

// log1 logs one event and returns its journal row.
func (r *Recorder) log1(ctx context.Context, level slog.Level, name Name, workItem string, kv []any) Event {
	attrs := make(map[string]string, len(kv)/2)
	args := make([]any, 0, len(kv)+2)
	if workItem != "" {
		args = append(args, "work_item", workItem)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := kv[i].(string)
		v := slog.AnyValue(kv[i+1]).Resolve()
		attrs[key] = v.String()
		args = append(args, key, kv[i+1])
	}
	r.log.Log(ctx, level, string(name), args...)
	return Event{Time: r.now(), Name: name, Level: level, WorkItem: workItem, Attrs: attrs}
}

// String renders the event as one line: local time, level, name, work item
// ("-" for none) and the attributes in logfmt, keys sorted.
func (e Event) String() string {
	item := e.WorkItem
	if item == "" {
		item = "-"
	}
	var b strings.Builder
	b.WriteString(e.Time.Local().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteString(" " + e.Level.String() + " " + string(e.Name) + " " + item)
	for _, k := range slices.Sorted(maps.Keys(e.Attrs)) {
		b.WriteString(" " + k + "=" + Quote(e.Attrs[k]))
	}
	return b.String()
}

// Quote returns v as a logfmt value: quoted when it is empty or holds a
// space, a quote, '=' or a control character.
func Quote(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r == ' ' || r == '"' || r == '=' || r < 0x20 }) {
		return strconv.Quote(v)
	}
	return v
}
