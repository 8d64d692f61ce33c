package journal

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultRepeatWindow is how long a Limiter folds repeats of one failure
// into a count: a failure that recurs every second is written once, then
// once a minute with its count (about 1,440 lines a day instead of 86,400).
const DefaultRepeatWindow = time.Minute

// DefaultMaxFailures bounds the failure identities a Limiter tracks at once.
const DefaultMaxFailures = 256

// Limiter folds repeated identical failures into one line with a count,
// for the log (Handler) and for the journal (Appender).
//
// A failure is a record at level Warn or above that carries an err
// attribute; other records always pass. Two failures are identical when
// their message, level, work_item, reason and err are equal; other
// attributes (a delivery id, a remote address, a duration) do not count.
// The first occurrence passes and opens a window. Repeats within the
// window are suppressed and counted. When the window ends (Flush, called
// by the owner's flush loop; serve runs one), the latest suppressed occurrence is written once with
// repeated=N and a new window opens; a failure that did not recur for a
// whole window is forgotten, so its next occurrence passes at once. A
// failure that stops therefore gets its last count written within a
// window, and FlushAll writes every pending count at shutdown.
//
// Memory is bounded: at most maxFailures identities are tracked; past that, a new
// identity is folded into one per message (its err and work item no longer
// tell it apart), and messages are the code's constants.
type Limiter struct {
	window time.Duration
	max    int
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]*repeat
}

// repeat is the state of one failure identity.
type repeat struct {
	until time.Time // end of the current window
	count int       // occurrences suppressed in it
	// emit writes the latest suppressed occurrence with repeated=n.
	emit func(ctx context.Context, n int)
}

// NewLimiter returns a Limiter folding repeats for window, tracking at
// most maxFailures identities (DefaultMaxFailures when it is ≤ 0), reading time
// from now (time.Now when nil).
func NewLimiter(window time.Duration, maxFailures int, now func() time.Time) *Limiter {
	if maxFailures <= 0 {
		maxFailures = DefaultMaxFailures
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{window: window, max: maxFailures, now: now, seen: map[string]*repeat{}}
}

// failureKey returns the identity of a record (sink names the output it
// goes to), and false when the record is not a failure.
func failureKey(sink string, level slog.Level, msg, workItem, reason, err string) (string, bool) {
	if level < slog.LevelWarn || err == "" {
		return "", false
	}
	return strings.Join([]string{sink, msg, level.String(), workItem, reason, err}, "\x00"), true
}

// overflowKey is the identity key is folded into when the table is full:
// its sink and message alone.
func overflowKey(key string) string {
	parts := strings.SplitN(key, "\x00", 3)
	return parts[0] + "\x00" + parts[1]
}

// admit decides on one occurrence of the failure key. pass reports whether
// it is written now; repeated is then the count of suppressed occurrences
// it stands for. emit writes this occurrence later, as a summary, should
// it be the latest one suppressed when its window ends.
func (l *Limiter) admit(key string, emit func(context.Context, int)) (pass bool, repeated int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.seen[key]
	if !ok && len(l.seen) >= l.max {
		key = overflowKey(key)
		r, ok = l.seen[key]
	}
	switch {
	case !ok:
		l.seen[key] = &repeat{until: now.Add(l.window)}
		return true, 0
	case now.Before(r.until):
		r.count++
		r.emit = emit
		return false, 0
	default:
		// The window ended before a flush saw it: this occurrence
		// carries the count.
		n := r.count
		r.count, r.emit, r.until = 0, nil, now.Add(l.window)
		return true, n
	}
}

// forget drops the failure key, so that its next occurrence passes.
func (l *Limiter) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[key]; !ok {
		key = overflowKey(key)
	}
	delete(l.seen, key)
}

// Flush writes one summary for each failure whose window has ended with
// suppressed occurrences, and forgets the failures that did not recur for
// a whole window.
func (l *Limiter) Flush(ctx context.Context) { l.flush(ctx, false) }

// FlushAll writes every pending summary now, whatever its window, and
// forgets every failure. serve calls it at shutdown, before the store
// closes, so that no count is lost.
func (l *Limiter) FlushAll(ctx context.Context) { l.flush(ctx, true) }

func (l *Limiter) flush(ctx context.Context, all bool) {
	type due struct {
		emit func(context.Context, int)
		n    int
	}
	var out []due
	now := l.now()
	l.mu.Lock()
	// Sorted, so that summaries come out in a stable order.
	for _, k := range slices.Sorted(maps.Keys(l.seen)) {
		r := l.seen[k]
		if !all && now.Before(r.until) {
			continue
		}
		if r.count > 0 {
			out = append(out, due{r.emit, r.count})
		}
		if all || r.count == 0 {
			delete(l.seen, k)
			continue
		}
		r.count, r.emit, r.until = 0, nil, now.Add(l.window)
	}
	l.mu.Unlock()
	for _, d := range out {
		d.emit(ctx, d.n)
	}
}

// Handler returns a slog.Handler that passes records on to next, except
// the repeats l suppresses; a line that stands for suppressed repeats
// carries repeated=N.
func (l *Limiter) Handler(next slog.Handler) slog.Handler {
	return &limitHandler{l: l, next: next}
}

// limitHandler is the slog side of a Limiter.
type limitHandler struct {
	l     *Limiter
	next  slog.Handler
	attrs []slog.Attr // from WithAttrs, part of a record's identity
}

// Enabled implements slog.Handler.
func (h *limitHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h *limitHandler) Handle(ctx context.Context, r slog.Record) error {
	var workItem, reason, errText string
	pick := func(a slog.Attr) bool {
		switch a.Key {
		case "work_item":
			workItem = a.Value.Resolve().String()
		case "reason":
			reason = a.Value.Resolve().String()
		case "err":
			errText = a.Value.Resolve().String()
		}
		return true
	}
	for _, a := range h.attrs {
		pick(a)
	}
	r.Attrs(pick)
	key, ok := failureKey("log", r.Level, r.Message, workItem, reason, errText)
	if !ok {
		return h.next.Handle(ctx, r)
	}
	rec := r.Clone()
	pass, n := h.l.admit(key, func(ctx context.Context, n int) {
		_ = h.next.Handle(ctx, withRepeated(rec, n))
	})
	switch {
	case !pass:
		return nil
	case n > 0:
		return h.next.Handle(ctx, withRepeated(rec, n))
	default:
		return h.next.Handle(ctx, r)
	}
}

// withRepeated returns a copy of r that carries repeated=n.
func withRepeated(r slog.Record, n int) slog.Record {
	r = r.Clone()
	r.AddAttrs(slog.Int(KeyRepeated, n))
	return r
}

// WithAttrs implements slog.Handler.
func (h *limitHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &limitHandler{l: h.l, next: h.next.WithAttrs(attrs), attrs: append(slices.Clone(h.attrs), attrs...)}
}

// WithGroup implements slog.Handler.
func (h *limitHandler) WithGroup(name string) slog.Handler {
	return &limitHandler{l: h.l, next: h.next.WithGroup(name), attrs: h.attrs}
}

// Appender returns an Appender that appends events to next, except the
// repeats l suppresses; a row that stands for suppressed repeats carries
// repeated=N. A summary row that fails to append is dropped.
func (l *Limiter) Appender(next Appender) Appender {
	return limitAppender{l: l, next: next}
}

// limitAppender is the journal side of a Limiter.
type limitAppender struct {
	l    *Limiter
	next Appender
}

// AppendEvent implements Appender.
func (a limitAppender) AppendEvent(ctx context.Context, e Event) error {
	key, ok := failureKey("journal", e.Level, string(e.Name), e.WorkItem, e.Attrs["reason"], e.Attrs["err"])
	if !ok {
		return a.next.AppendEvent(ctx, e)
	}
	pass, n := a.l.admit(key, func(ctx context.Context, n int) {
		_ = a.next.AppendEvent(ctx, eventRepeated(e, n))
	})
	if !pass {
		return nil
	}
	if n > 0 {
		e = eventRepeated(e, n)
	}
	if err := a.next.AppendEvent(ctx, e); err != nil {
		// The row that opened the window was not written: the next
		// occurrence must pass, not be counted as a repeat of it.
		a.l.forget(key)
		return err
	}
	return nil
}

// Unwrap returns the Appender the limited rows go to, for rows that must
// never be folded (Recorder.Flush).
func (a limitAppender) Unwrap() Appender { return a.next }

// eventRepeated returns a copy of e that carries repeated=n.
func eventRepeated(e Event, n int) Event {
	e.Attrs = maps.Clone(e.Attrs)
	if e.Attrs == nil {
		e.Attrs = map[string]string{}
	}
	e.Attrs[KeyRepeated] = slog.IntValue(n).String()
	return e
}
