package actions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// rateLimit records the usage limit the planner saw: the item goes to
// RateLimited until a.Until, with no failure counted. The event in flight
// that reached the conversation is delivered; one that did not stays
// pending, for after the reset. A limit other than the one the item waits
// on (from another phase, or another limit) is a new episode: counted in
// Status.LimitEpisodes and by the Meter.
func (e *Executor) rateLimit(ctx context.Context, r *desired.Record, a RateLimit) error {
	st := r.Status
	episode := st.Phase != desired.PhaseRateLimited || !st.LimitSeen.Same(a.Seen) || st.LimitSeen.Pane != a.Seen.Pane
	if episode {
		st.LimitEpisodes++
	}
	st.Phase = desired.PhaseRateLimited
	st.LimitReset, st.LimitUntil, st.LimitDefault, st.LimitSeen, st.LimitWindow = a.Reset, a.Until, a.Default, a.Seen, a.Window
	st.NextAttempt = a.Until
	st.Reason = string(ReasonRateLimited)
	st = st.Deliver(a.Delivered).DropInFlight()
	if err := e.putDelivered(ctx, r, st, viaTranscript(a.Delivered, a.Session)); err != nil {
		return err
	}
	if episode && e.Meter != nil {
		e.Meter.LimitEpisode(a.Harness, a.Window)
	}
	kv := []any{"session", a.Session, "harness", a.Harness, "account", a.Account, "limit", a.Kind, "window", a.Window,
		"episode", st.LimitEpisodes, "reset", a.Reset.UTC().Format(time.RFC3339), "until", a.Until.UTC().Format(time.RFC3339),
		"default_reset", a.Default, "text", a.Text, "pending", len(r.Pending)}
	if a.Capped {
		kv = append(kv, "reset_capped", true)
	}
	e.record(ctx, slog.LevelWarn, journal.SessionRateLimited, r.Key, kv...)
	return nil
}

// answerLimitMenu reads the pane again and sends the keys the adapter
// gives for the menu's "wait" choice (harness.Adapter.LimitMenuKeys), behind
// the guard every key goes through. A screen that no longer shows the menu
// gets nothing; a digit that only moved the cursor is followed by Enter on
// a later pass, once the screen shows the cursor on that choice.
func (e *Executor) answerLimitMenu(ctx context.Context, r *desired.Record, a AnswerLimitMenu) error {
	ad, target, screen, err := e.readPane(ctx, r, a.PaneID, a.Session)
	if err != nil {
		return fmt.Errorf("answer limit menu %s: %w", r.Key, err)
	}
	keys := ad.LimitMenuKeys(screen)
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if err := e.Tmux.SendKeys(ctx, target, e.guard(ad), k); err != nil {
			return fmt.Errorf("answer limit menu %s: %w", r.Key, err) // send keys to <target>: …
		}
	}
	e.record(ctx, slog.LevelInfo, journal.SessionLimitMenuAnswered, r.Key, "session", a.Session, "keys", strings.Join(keys, " "))
	return nil
}

// markBlocked records what blocks the agent (or that nothing does any
// more), journaled once per change: session.blocked with its reason, or
// session.unblocked.
func (e *Executor) markBlocked(ctx context.Context, r *desired.Record, a MarkBlocked) error {
	if r.Status.Blocked == a.Block {
		return nil
	}
	was := r.Status.Blocked
	st := r.Status
	st.Blocked = a.Block
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if a.Block == "" {
		e.record(ctx, slog.LevelInfo, journal.SessionUnblocked, r.Key, "session", a.Session, "reason", was)
		return nil
	}
	e.recordBlocked(ctx, r, a.Session, a.Block)
	return nil
}

// recordBlocked journals session.blocked for r's screen that shows block,
// once its status says so.
func (e *Executor) recordBlocked(ctx context.Context, r *desired.Record, session, block string) {
	e.record(ctx, slog.LevelWarn, journal.SessionBlocked, r.Key, "session", session, "harness", r.Spec.Harness, "reason", block,
		"pending", len(r.Pending), "phase", string(r.Status.Phase))
}
