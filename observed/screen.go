package observed

import (
	"context"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
)

// Screen is what an item's live pane and the latest turn of its
// transcript show, as its adapter reads them.
type Screen struct {
	// Blocked is what keeps the agent from working until a human acts
	// (harness.Adapter.Blocked); "" for nothing.
	Blocked harness.Block
	// Limit is the usage limit the screen or the transcript shows; nil for
	// none. The screen's wins: it is what the CLI shows now, menu
	// included.
	Limit *harness.Limit
}

// readScreen reads rec's pane with its adapter: the text it captured in an
// earlier pass when the pane has had no output since (tmux.Pane.Activity),
// else a new capture. It reports false when there is no pane to read (the
// session is gone, the pane dead) or the capture failed, which is logged:
// the planner then knows nothing of the screen, as before.
func (o *Observer) readScreen(ctx context.Context, rec desired.Record, snap Snapshot, now time.Time, kept map[string]capture) (Screen, bool) {
	ad, ok := o.Harnesses[rec.Spec.Harness]
	if !ok {
		return Screen{}, false
	}
	pn, ok := snap.Pane(desired.SessionName(rec.Key))
	if !ok || pn.Dead {
		return Screen{}, false
	}
	c, ok := o.captured(pn)
	if !ok {
		text, err := o.Tmux.CapturePane(ctx, pn.PaneID, false)
		if err != nil {
			o.Log.DebugContext(ctx, string(journal.ScreenUnreadable), "work_item", rec.Key.String(), "pane_id", pn.PaneID, "err", err)
			return Screen{}, false
		}
		c = capture{text: text, at: now}
	}
	kept[pn.PaneID] = c
	sc := Screen{Blocked: ad.Blocked(c.text)}
	if l, ok := ad.Limit(c.text, now); ok {
		sc.Limit = &l
	}
	return sc, true
}

// capture is a pane's screen as one pass captured it.
type capture struct {
	text string
	// at is the time of the pass that captured it, before the capture.
	at time.Time
}

// captured returns what an earlier pass captured of pane p, when it still
// shows the same: its window's last output (whole seconds, rounded down)
// came in an earlier second than that pass, so the capture came after it.
// Output in the same second may have come after the capture, which is then
// taken again.
func (o *Observer) captured(p Pane) (capture, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.screens[p.PaneID]
	if !ok || p.Activity.IsZero() || !p.Activity.Before(c.at.Truncate(time.Second)) {
		return capture{}, false
	}
	return c, true
}

// keepScreens keeps kept, the captures this pass used, for the next pass;
// the panes not read this pass are forgotten.
func (o *Observer) keepScreens(kept map[string]capture) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.screens = kept
}

// readTranscriptLimit adds the usage limit the latest turn of rec's
// transcript tr ended on to its Screen, unless the screen shows one.
func (o *Observer) readTranscriptLimit(ctx context.Context, rec desired.Record, ad harness.Adapter, tr harness.Transcript, obs *Observation) {
	sc, read := obs.Screens[rec.Key]
	if read && sc.Limit != nil {
		return
	}
	l, ok, err := ad.TranscriptLimit(tr)
	if err != nil {
		o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "path", tr.Path, "err", err)
		return
	}
	if !ok {
		return
	}
	sc.Limit = &l
	obs.Screens[rec.Key] = sc
}
