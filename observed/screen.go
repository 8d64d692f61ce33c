package observed

import (
	"context"
	"maps"
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
	// Question is the question the screen asks a person, with its
	// choices, as the adapter reads it (harness.Asker); nil for none. Its
	// ID and AskedAt are not set: the status's question has them.
	Question *desired.Question
}

// screenRead is one item whose screen a pass reads (Need.Screen), with
// Need.ScreenIfChanged.
type screenRead struct {
	rec       desired.Record
	ifChanged bool
}

// readScreens reads the screens of reads with their adapters into
// obs.Screens: for each live pane, the text an earlier pass captured when
// the pane has had no output since (tmux.Pane.Activity), else a new
// capture, all of them in one tmux invocation (tmux.Client.CapturePanes).
// A read with ifChanged captures only a pane that had output since this
// Observer last captured or first saw it; a pane it never saw is taken as
// seen, not captured. A screen not read (no pane, a dead one, a failed
// capture, which is logged) is left out: the planner then knows nothing
// of it, as before.
func (o *Observer) readScreens(ctx context.Context, reads []screenRead, snap Snapshot, now time.Time, kept map[string]capture, obs *Observation) {
	type shown struct {
		rec desired.Record
		ad  harness.Adapter
		pn  Pane
	}
	var shows []shown
	var missing []string
	for _, q := range reads {
		ad, ok := o.Harnesses[q.rec.Spec.Harness]
		if !ok {
			continue
		}
		pn, ok := snap.Pane(desired.SessionName(q.rec.Key))
		if !ok || pn.Dead {
			continue
		}
		c, found, same := o.kept(pn)
		switch {
		case same && c.captured:
			kept[pn.PaneID] = c
		case q.ifChanged && (same || !found):
			if !found {
				c = capture{at: now}
			}
			kept[pn.PaneID] = c
			continue
		default:
			missing = append(missing, pn.PaneID)
		}
		shows = append(shows, shown{rec: q.rec, ad: ad, pn: pn})
	}
	var screens map[string]string
	if len(missing) > 0 {
		var err error
		if screens, err = o.Tmux.CapturePanes(ctx, missing); err != nil {
			for _, sh := range shows {
				o.Log.DebugContext(ctx, string(journal.ScreenUnreadable), "work_item", sh.rec.Key.String(), "pane_id", sh.pn.PaneID, "err", err)
			}
			return
		}
	}
	for _, sh := range shows {
		if text, ok := screens[sh.pn.PaneID]; ok {
			kept[sh.pn.PaneID] = capture{text: text, at: now, captured: true}
		}
		c, ok := kept[sh.pn.PaneID]
		if !ok || !c.captured {
			o.Log.DebugContext(ctx, string(journal.ScreenUnreadable), "work_item", sh.rec.Key.String(), "pane_id", sh.pn.PaneID, "err", tmux.ErrNoSession)
			continue
		}
		obs.Screens[sh.rec.Key] = ScreenOf(sh.ad, sh.rec, c.text, now)
	}
}

// ScreenOf is what text, rec's captured screen, shows to its adapter ad
// at now: the one reading of a screen, for the Observer and for the
// planner's golden cases.
func ScreenOf(ad harness.Adapter, rec desired.Record, text string, now time.Time) Screen {
	class, _ := ad.Screen(text)
	sc := Screen{Blocked: ad.Blocked(text), Refusal: harness.ResumeRefusal(ad, text, -1, rec.Status.HarnessSessionID), Ready: class == harness.ScreenReady}
	if l, ok := ad.Limit(text, now); ok {
		sc.Limit = &l
	}
	if asker, ok := ad.(harness.Asker); ok {
		if q, ok := asker.Question(text); ok {
			sc.Question = &desired.Question{Context: q.Context, Title: q.Title, Choices: q.Choices, Differently: q.Differently}
		}
	}
	return sc
}

// capture is a pane's screen as one pass captured it, or, with captured
// false, the pass that first saw the pane without capturing it.
type capture struct {
	text     string
	captured bool
	// at is the time of the pass that captured or saw it, before the
	// capture.
	at time.Time
}

// kept returns what an earlier pass kept of pane p (found), and whether p
// still shows the same (same): its window's last output (whole seconds,
// rounded down) came in an earlier second than that pass, so the capture
// came after it. Output in the same second may have come after the
// capture, which is then taken again.
func (o *Observer) kept(p Pane) (c capture, found, same bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, found = o.screens[p.PaneID]
	same = found && !p.Activity.IsZero() && p.Activity.Before(c.at.Truncate(time.Second))
	return c, found, same
}

// keep keeps what this pass read of screens (by pane id) and of the
// transcripts' latest turns (by path) for the next pass; what it did not
// read is forgotten, unless it read only the items handled first (first),
// whose reads are added to what was kept.
func (o *Observer) keep(screens map[string]capture, limits map[string]turnLimit, first bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !first || o.screens == nil {
		o.screens, o.limits = screens, limits
		return
	}
	maps.Copy(o.screens, screens)
	maps.Copy(o.limits, limits)
}

// latestTurn is an item whose transcript's latest turn a pass reads for a
// usage limit (readTranscriptLimit), after the screens.
type latestTurn struct {
	rec       desired.Record
	ad        harness.Adapter
	tr        harness.Transcript
	ifChanged bool
}

// readTranscriptLimit adds the usage limit the latest turn of rec's
// transcript tr ended on to its Screen, unless the screen shows one. A
// transcript of the same size and mtime as in the last pass is not read
// again: its latest turn is the same. With ifChanged (Need.ScreenIfChanged),
// a transcript this Observer never saw is taken as seen, not read, as its
// pane is.
func (o *Observer) readTranscriptLimit(ctx context.Context, rec desired.Record, ad harness.Adapter, tr harness.Transcript, ifChanged bool, obs *Observation, kept map[string]turnLimit) {
	sc, read := obs.Screens[rec.Key]
	if read && sc.Limit != nil {
		return
	}
	o.mu.Lock()
	last, ok := o.limits[tr.Path]
	o.mu.Unlock()
	same := ok && last.size == tr.Size && last.mod.Equal(tr.ModTime)
	if !ok && ifChanged {
		kept[tr.Path] = turnLimit{size: tr.Size, mod: tr.ModTime}
		return
	}
	if !same || !last.read && !ifChanged {
		l, found, err := ad.TranscriptLimit(tr)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "path", tr.Path, "err", err)
			return
		}
		last = turnLimit{size: tr.Size, mod: tr.ModTime, read: true, found: found, limit: l}
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
// limit in its latest turn (harness.Adapter.TranscriptLimit); with read
// false, a transcript only seen, not read.
type turnLimit struct {
	size  int64
	mod   time.Time
	read  bool
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
