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
	HarnessMissing   Name = "harness.missing"

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

// Recorder logs each event with its logger and appends it to the journal.
// A journal write error is logged, never returned: losing a journal row must
// not stop a reconcile pass.
type Recorder struct {
	log   *slog.Logger
	store Appender
	now   func() time.Time
}

// NewRecorder returns a Recorder. store may be nil (dry run: log only).
func NewRecorder(log *slog.Logger, store Appender, now func() time.Time) *Recorder {
	return &Recorder{log: log, store: store, now: now}
}

// Record logs and journals one event. kv are alternating snake_case keys and
// values; values are formatted with slog's text rules.
func (r *Recorder) Record(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
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
	if r.store == nil {
		return
	}
	e := Event{Time: r.now(), Name: name, Level: level, WorkItem: workItem, Attrs: attrs}
	if err := r.store.AppendEvent(ctx, e); err != nil {
		r.log.Error("journal.append_failed", "event", string(name), "err", err)
	}
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
