package webhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// CIStore is the part of store.Store the CIFlusher uses.
type CIStore interface {
	CICommits(ctx context.Context) ([]desired.CICommit, error)
	SendCI(ctx context.Context, k desired.Key, commit string, d desired.Delivery) (store.CISent, error)
}

// The reasons a commit's failed checks become its prompt (delivery.accepted
// reason=), and the event and action its prompt names.
const (
	reasonCIComplete = "ci_complete" // every suite and run seen of the commit completed
	reasonCIQuiet    = "ci_quiet"    // no event of the commit came for the route's ciQuietSeconds

	ciEvent  = "ci"
	ciAction = "failed"
)

// CIFlusher turns the failed checks of each pull request item's head
// commit into one prompt (docs/design.md, "Never talk to itself, triggers
// and CI failures"): once every check suite and check run seen of the
// commit has completed, or once no event of it came for its route's
// reactions.ciQuietSeconds, the failures are rendered as one delivery
// (Render with PromptInput.Checks) and queued by store.Store.SendCI, one
// per (item, head commit). A commit that stopped being the head first
// queues nothing (delivery.ignored reason=stale_commit). Each outcome is
// journaled. Safe for concurrent use; Kick and Run may be called from
// different goroutines.
type CIFlusher struct {
	Store    CIStore
	Config   func() schema.GHWebhook
	Recorder *journal.Recorder
	// Trigger wakes the reconciler after a prompt was queued; nil wakes
	// nothing.
	Trigger func()
	// Now is the clock quiet periods are measured by; nil means time.Now.
	Now  func() time.Time
	kick chan struct{}
}

// Kick asks Run for a flush now, without blocking (Options.CIReady).
func (f *CIFlusher) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// NewCIFlusher returns a flusher of store under the receiver config cfg.
func NewCIFlusher(store CIStore, cfg func() schema.GHWebhook, rec *journal.Recorder, trigger func()) *CIFlusher {
	if trigger == nil {
		trigger = func() {}
	}
	return &CIFlusher{Store: store, Config: cfg, Recorder: rec, Trigger: trigger, Now: time.Now, kick: make(chan struct{}, 1)}
}

// Run flushes at once, then whenever Kick asks or the next quiet period
// ends (at most schema.CIFlushMaxWait apart), until ctx ends. A flush the store
// failed is journaled (delivery.rejected reason=store_failed) and tried
// again at the next.
func (f *CIFlusher) Run(ctx context.Context) {
	for {
		wait := schema.CIFlushMaxWait
		next, err := f.Flush(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			f.Recorder.Record(ctx, slog.LevelError, journal.DeliveryRejected, "", "reason", reasonStoreFailed, "err", err)
		case !next.IsZero():
			wait = min(wait, max(next.Sub(f.Now()), 0))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-f.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// Flush sends every commit's failures that are ready and returns when the
// first of the others' quiet periods ends (zero when none waits). An
// error is the store's; the commits not sent yet stay for the next flush.
func (f *CIFlusher) Flush(ctx context.Context) (next time.Time, err error) {
	commits, err := f.Store.CICommits(ctx)
	if err != nil {
		return time.Time{}, err
	}
	cfg, now := f.Config(), f.Now()
	for _, c := range commits {
		route, _ := cfg.Routing.Route(c.Key.Owner, c.Key.Repo)
		reason := reasonCIComplete
		if !c.Complete {
			at := c.LastAt.Add(route.Reactions.CIQuiet())
			if now.Before(at) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			reason = reasonCIQuiet
		}
		if err := f.send(ctx, c, reason, now); err != nil {
			return time.Time{}, err
		}
	}
	return next, nil
}

// send renders c's failures as its one prompt and queues it, journaling
// what the store did.
func (f *CIFlusher) send(ctx context.Context, c desired.CICommit, reason string, now time.Time) error {
	failures := c.CIFailures()
	left := max(len(failures)-MaxCIChecks, 0)
	failures = failures[:len(failures)-left]
	sender := failures[0].Sender
	key, id := c.Key.String(), desired.CIDeliveryID(c.Key, c.Commit)
	d := desired.Delivery{ID: id, Event: ciEvent, Action: ciAction, Sender: sender, ReceivedAt: now, Commit: c.Commit,
		Prompt: Render(PromptInput{Event: ciEvent, Action: ciAction, WorkItem: key, Sender: sender, DeliveryID: id,
			Commit: c.Commit, Checks: failures, ChecksLeftOut: left})}
	sent, err := f.Store.SendCI(ctx, c.Key, c.Commit, d)
	if err != nil {
		return err
	}
	attrs := []any{"delivery", id, "event", ciEvent, "commit", c.Commit}
	switch sent {
	case store.CIQueued:
		f.Recorder.Record(ctx, slog.LevelInfo, journal.DeliveryAccepted, key,
			append(attrs, "queued", true, "reason", reason, "failed_checks", len(failures)+left)...)
		f.Trigger()
	case store.CINotHead:
		f.Recorder.Record(ctx, slog.LevelInfo, journal.DeliveryIgnored, key, append(attrs, "reason", reasonStaleCommit)...)
	}
	return nil
}
