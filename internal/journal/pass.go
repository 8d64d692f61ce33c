package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// reconcileIDKey is the context key of a pass's reconcile id.
type reconcileIDKey struct{}

// WithReconcileID returns ctx carrying id, the reconcile id of the pass
// that runs with it: every journal row a Recorder writes with ctx, and
// every log line logged with ctx through a handler from WithPassID, then
// carries reconcile_id=id.
func WithReconcileID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, reconcileIDKey{}, id)
}

// ReconcileID returns the reconcile id ctx carries, "" outside a pass.
func ReconcileID(ctx context.Context) string {
	id, _ := ctx.Value(reconcileIDKey{}).(string)
	return id
}

// NewReconcileID returns a new reconcile id: 12 random hex digits, enough
// to tell the passes of a journal apart.
func NewReconcileID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// WithPassID returns a slog.Handler that adds reconcile_id to each record
// logged with a context that carries one (WithReconcileID), unless the
// record already has it, and passes it on to next. Lines logged without
// a context (Info rather than InfoContext) cannot carry it: code that runs
// in a pass logs with the pass's context.
func WithPassID(next slog.Handler) slog.Handler { return passHandler{next} }

type passHandler struct{ next slog.Handler }

// Enabled implements slog.Handler.
func (h passHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h passHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := ReconcileID(ctx); id != "" {
		has := false
		r.Attrs(func(a slog.Attr) bool {
			has = a.Key == KeyReconcileID
			return !has
		})
		if !has {
			r = r.Clone()
			r.AddAttrs(slog.String(KeyReconcileID, id))
		}
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h passHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return passHandler{h.next.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h passHandler) WithGroup(name string) slog.Handler { return passHandler{h.next.WithGroup(name)} }
