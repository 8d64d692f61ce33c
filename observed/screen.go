package observed

import (
	"context"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
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
	// Refusal is the CLI's refusal to resume the item's recorded
	// conversation that the live screen shows (harness.ResumeRefusal): a
	// CLI may print it and stay up.
	Refusal harness.Refusal
	// Ready is true when the screen shows the harness's input box, empty
	// and waiting (harness.ScreenReady).
	Ready bool
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
	class, _ := ad.Screen(c.text)
	sc := Screen{Blocked: ad.Blocked(c.text), Refusal: harness.ResumeRefusal(ad, c.text, -1, rec.Status.HarnessSessionID), Ready: class == harness.ScreenReady}
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

// keep keeps what this pass read of screens (by pane id) and of the
// transcripts' latest turns (by path) for the next pass; what it did not
// read is forgotten.
func (o *Observer) keep(screens map[string]capture, limits map[string]turnLimit) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.screens, o.limits = screens, limits
}

// readTranscriptLimit adds the usage limit the latest turn of rec's
// transcript tr ended on to its Screen, unless the screen shows one. A
// transcript of the same size and mtime as in the last pass is not read
// again: its latest turn is the same.
func (o *Observer) readTranscriptLimit(ctx context.Context, rec desired.Record, ad harness.Adapter, tr harness.Transcript, obs *Observation, kept map[string]turnLimit) {
	sc, read := obs.Screens[rec.Key]
	if read && sc.Limit != nil {
		return
	}
	o.mu.Lock()
	last, ok := o.limits[tr.Path]
	o.mu.Unlock()
	if !ok || last.size != tr.Size || !last.mod.Equal(tr.ModTime) {
		l, found, err := ad.TranscriptLimit(tr)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "path", tr.Path, "err", err)
			return
		}
		last = turnLimit{size: tr.Size, mod: tr.ModTime, found: found, limit: l}
	}
	kept[tr.Path] = last
	if !last.found {
		return
	}
	l := last.limit
	sc.Limit = &l
	obs.Screens[rec.Key] = sc
}

// turnLimit is what a transcript of a size and mtime showed of a usage
// limit in its latest turn (harness.Adapter.TranscriptLimit).
type turnLimit struct {
	size  int64
	mod   time.Time
	found bool
	limit harness.Limit
}

// readExit reads rec's dead pane, as it still shows (remain-on-exit), for
// what its harness said last (tmux.Tail): its last line (tmux.LastWords)
// and its refusal to resume the recorded conversation, with the exit
// status when it has one. It reports false when there is no dead pane to
// read or the capture failed, which is logged.
func (o *Observer) readExit(ctx context.Context, rec desired.Record, snap Snapshot) (Exit, bool) {
	ad, ok := o.Harnesses[rec.Spec.Harness]
	if !ok {
		return Exit{}, false
	}
	pn, ok := snap.Pane(desired.SessionName(rec.Key))
	if !ok || !pn.Dead {
		return Exit{}, false
	}
	tail, err := tmux.Tail(ctx, o.Tmux, pn.PaneID)
	if err != nil {
		o.Log.DebugContext(ctx, string(journal.ScreenUnreadable), "work_item", rec.Key.String(), "pane_id", pn.PaneID, "err", err)
		return Exit{}, false
	}
	status := pn.DeadStatus
	if pn.DeadSignal != 0 || !pn.StatusKnown {
		status = -1
	}
	return Exit{Words: lastWords(tail), Refusal: harness.ResumeRefusal(ad, tail, status, rec.Status.HarnessSessionID)}, true
}

// maxLastWords bounds, in bytes, what an Exit keeps of a dead agent's last
// line: the churn rule compares them, and the status keeps the last ones.
const maxLastWords = 256

// lastWords is the last line text shows its agent printed
// (tmux.LastWords), cut to maxLastWords.
func lastWords(text string) string { return journal.Clip(tmux.LastWords(text), maxLastWords) }
