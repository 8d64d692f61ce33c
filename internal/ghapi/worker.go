package ghapi

import (
	"context"
	"log/slog"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/doubling"
	"github.com/loopd/loopd/internal/journal"
)

// Outbox is the part of store.Store the worker uses.
type Outbox interface {
	DueCalls(ctx context.Context, now time.Time, limit int) ([]desired.Call, error)
	UpdateCall(ctx context.Context, c desired.Call) error
	PutPause(ctx context.Context, p desired.Pause) error
	Pauses(ctx context.Context) ([]desired.Pause, error)
}

// Sender makes one call (Client.Send), and names the installation whose
// rate limits it counts against (Client.Installation; an error is the
// lookup of the installation, what Send would have met).
type Sender interface {
	Send(ctx context.Context, c desired.Call) (Sent, error)
	Installation(ctx context.Context, c desired.Call) (string, error)
}

// appLimits is the name the rate limits of the App's own calls (the
// installation lookup) are kept under.
const appLimits = "app"

// Worker drains the outbox: it sends each due call, records the outcome
// on the call, and journals it (github.posted, github.retry,
// github.failed). A call that failed in a way worth retrying (Classify)
// waits, in the store, until its next attempt: the larger of the backoff
// (Initial, doubling, at most Max; cenkalti/backoff) and the wait GitHub
// named; after Tries tries it is given up. A call that met a rate limit is
// no try: its installation pauses (Limits; journaled github.paused, the
// pause kept in the store), every call of it waits, untouched, until the
// pause ends, and then they go one at a time, Limits.Gap apart. Nothing it
// does holds a reconcile pass, and a daemon killed mid-call finds the call
// pending after a restart (an announcement or notice then looks for its
// marker before posting).
type Worker struct {
	Store   Outbox
	API     Sender
	Journal *journal.Recorder
	Now     func() time.Time
	// Limits holds the rate limits of the installations the calls go
	// through; Sleep waits between two writes (nil: a timer on ctx).
	Limits *Limits
	Sleep  func(ctx context.Context, d time.Duration) error
	// Tries bounds the tries of one call; Initial and Max bound the
	// backoff between them (schema.DefaultGitHubTries,
	// DefaultGitHubBackoffInitial, DefaultGitHubBackoffMax in the daemon).
	Tries        int
	Initial, Max time.Duration
	// Lock, when set, keeps two drains (serve's and a reconcile --once's)
	// from sending the same call: a drain that cannot take it at once
	// sends nothing.
	Lock func(ctx context.Context) (unlock func(), err error)
	// Due, when set, reads the due calls instead of Store.DueCalls: with
	// several hosts, only the calls of the items this host holds
	// (store.Fleet.DueCallsFor), so that a call is sent by its item's
	// host alone.
	Due func(ctx context.Context, now time.Time, limit int) ([]desired.Call, error)
}

// drainBatch is how many due calls one Drain reads at a time.
const drainBatch = 32

// Drain sends the calls due now, until none is due or ctx ends, and returns
// how many it tried. An error is the store's; the calls it could not
// record stay pending for the next drain.
func (w *Worker) Drain(ctx context.Context) (int, error) {
	if w.Lock != nil {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		unlock, err := w.Lock(lctx)
		cancel()
		if err != nil {
			return 0, nil // another drain runs; it sends them
		}
		defer unlock()
	}
	pauses, err := w.Store.Pauses(ctx)
	if err != nil {
		return 0, err
	}
	w.Limits.Load(pauses) // another loopd's, or this one's before a restart
	tried := 0
	seen := map[int64]bool{}
	for ctx.Err() == nil {
		due, err := w.due(ctx)
		if err != nil {
			return tried, err
		}
		progress := false
		for _, c := range due {
			if seen[c.ID] {
				continue // retried at once (no wait asked), or paused: next drain
			}
			seen[c.ID] = true
			installation, err := w.API.Installation(ctx, c)
			if err != nil {
				progress = true
				tried++
				c.Attempts++
				if err := w.failed(ctx, c, appLimits, err); err != nil {
					return tried, err
				}
				continue
			}
			wait, _, ok := w.Limits.Admit(installation, w.Now())
			if !ok {
				continue // its installation pauses: the call waits as it is
			}
			if err := w.sleep(ctx, wait); err != nil {
				return tried, err
			}
			progress = true
			tried++
			if err := w.send(ctx, c, installation); err != nil {
				return tried, err
			}
		}
		if !progress {
			return tried, nil
		}
	}
	return tried, ctx.Err()
}

// sleep waits d (Sleep), or returns ctx's error when it ends first.
func (w *Worker) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if w.Sleep != nil {
		return w.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// due reads the calls due now, at most drainBatch (Due, or the store's).
func (w *Worker) due(ctx context.Context) ([]desired.Call, error) {
	if w.Due != nil {
		return w.Due(ctx, w.Now(), drainBatch)
	}
	return w.Store.DueCalls(ctx, w.Now(), drainBatch)
}

// Run drains the outbox every poll period until ctx ends. A drain the
// store failed is journaled (github.failed reason=store_failed) and the
// next one tries again.
func (w *Worker) Run(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := w.Drain(ctx); err != nil && ctx.Err() == nil {
			w.Journal.Record(ctx, slog.LevelError, journal.GitHubFailed, "", "reason", "store_failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// send makes one try at c, a call of installation, and records its
// outcome.
func (w *Worker) send(ctx context.Context, c desired.Call, installation string) error {
	c.Attempts++
	sent, err := w.API.Send(ctx, c)
	now := w.Now()
	k := c.Key.String()
	if err == nil {
		for _, p := range w.Limits.Wrote(installation, now, !sent.Found) {
			if err := w.Store.PutPause(ctx, p); err != nil {
				return err
			}
		}
		c.State, c.DoneAt, c.NextAttempt = desired.CallPosted, now, time.Time{}
		c.HTTPStatus, c.Error, c.URL = sent.HTTPStatus, "", sent.URL
		if err := w.Store.UpdateCall(ctx, c); err != nil {
			return err
		}
		kv := []any{"call", string(c.Kind), "call_id", c.ID, "http_status", c.HTTPStatus, "attempts", c.Attempts, "found", sent.Found}
		if c.URL != "" {
			kv = append(kv, "url", c.URL)
		}
		w.Journal.Record(ctx, slog.LevelInfo, journal.GitHubPosted, k, kv...)
		return nil
	}
	return w.failed(ctx, c, installation, err)
}

// failed records that a try at c, a call of installation, ended in err.
func (w *Worker) failed(ctx context.Context, c desired.Call, installation string, err error) error {
	now, k := w.Now(), c.Key.String()
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: the call stays as it was, pending
	}
	v := Classify(err, now)
	c.HTTPStatus, c.Error = v.HTTPStatus, v.Message
	if v.Limit != "" {
		return w.limited(ctx, c, installation, v, now)
	}
	kv := []any{"call", string(c.Kind), "call_id", c.ID, "http_status", v.HTTPStatus, "attempts", c.Attempts, "err", v.Message}
	if v.Retry && c.Attempts < w.Tries {
		c.NextAttempt = now.Add(max(w.delay(c.Attempts), v.After))
		if err := w.Store.UpdateCall(ctx, c); err != nil {
			return err
		}
		w.Journal.Record(ctx, slog.LevelWarn, journal.GitHubRetry, k, append(kv, "next_attempt", c.NextAttempt.UTC().Format(time.RFC3339Nano))...)
		return nil
	}
	reason := "not_retried"
	if v.Retry {
		reason = "out_of_tries"
	}
	c.State, c.DoneAt, c.NextAttempt = desired.CallFailed, now, time.Time{}
	if err := w.Store.UpdateCall(ctx, c); err != nil {
		return err
	}
	w.Journal.Record(ctx, slog.LevelError, journal.GitHubFailed, k, append(kv, "reason", reason)...)
	return nil
}

// limited records that c, a call of installation, met the rate limit v
// names: its installation pauses (kept in the store, journaled
// github.paused), and c, which this answer does not count as a try, is
// due again when the pause ends.
func (w *Worker) limited(ctx context.Context, c desired.Call, installation string, v Verdict, now time.Time) error {
	p := w.Limits.Limited(installation, v, now)
	if err := w.Store.PutPause(ctx, p); err != nil {
		return err
	}
	c.Attempts--
	c.NextAttempt = p.Until
	if err := w.Store.UpdateCall(ctx, c); err != nil {
		return err
	}
	w.Journal.Record(ctx, slog.LevelWarn, journal.GitHubPaused, c.Key.String(), "installation", installation,
		"limit", string(p.Kind), "until", p.Until.UTC().Format(time.RFC3339Nano), "pause", p.Until.Sub(now).String(),
		"streak", p.Streak, "call", string(c.Kind), "call_id", c.ID, "http_status", v.HTTPStatus, "err", v.Message)
	return nil
}

// delay is the backoff after the n-th failed try: Initial, doubling, at
// most Max.
func (w *Worker) delay(n int) time.Duration {
	return doubling.Nth(w.Initial, w.Max, n)
}
