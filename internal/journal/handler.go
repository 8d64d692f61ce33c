package journal

import (
	"context"
	"log/slog"
	"slices"
)

// Handler is a slog.Handler that passes every record on and also appends
// the records whose message is one of its names to the journal. It lets a
// component that only has a logger (the config watcher) reach the journal.
// A journal write error is dropped: the record still reaches the log.
type Handler struct {
	next  slog.Handler
	store Appender
	names []Name
	attrs []slog.Attr
}

// NewHandler returns a Handler writing to next and, for names, to store.
func NewHandler(next slog.Handler, store Appender, names ...Name) *Handler {
	return &Handler{next: next, store: store, names: names}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if i := slices.IndexFunc(h.names, func(n Name) bool { return string(n) == r.Message }); i >= 0 {
		e := Event{Time: r.Time, Name: h.names[i], Level: r.Level, Attrs: map[string]string{}}
		add := func(a slog.Attr) bool {
			if a.Key == "work_item" {
				e.WorkItem = a.Value.String()
			} else {
				e.Attrs[a.Key] = a.Value.Resolve().String()
			}
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		_ = h.store.AppendEvent(ctx, e)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	cp := *h
	cp.next = h.next.WithAttrs(attrs)
	cp.attrs = append(slices.Clone(h.attrs), attrs...)
	return &cp
}

// WithGroup implements slog.Handler. Grouped attributes keep their plain
// keys in the journal.
func (h *Handler) WithGroup(name string) slog.Handler {
	cp := *h
	cp.next = h.next.WithGroup(name)
	return &cp
}
