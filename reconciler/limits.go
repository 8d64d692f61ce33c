package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
)

// LimitHold is how long the items of one account are held back from
// spawns and deliveries: until Until, the latest reset (Reset) of a usage
// limit any of its harnesses reported, plus the margin; Window is that
// limit's (harness.LimitWindow, "" when its harness did not say).
type LimitHold struct {
	Reset, Until time.Time
	Window       string
}

// limitHolds returns the holds in force at now, by account
// (Capabilities.Account): those recorded in the items' statuses
// (Status.LimitUntil, durable across restarts), and those this pass sees
// on a screen or in a transcript that are news (newLimit). It is the one
// home of "which items a usage limit holds".
func limitHolds(items []desired.Record, obs observed.Observation, p Policy, now time.Time) map[string]LimitHold {
	holds := map[string]LimitHold{}
	add := func(account string, reset, until time.Time, window string) {
		if account == "" || !until.After(now) {
			return
		}
		if h, ok := holds[account]; !ok || until.After(h.Until) {
			holds[account] = LimitHold{Reset: reset, Until: until, Window: window}
		}
	}
	for _, r := range items {
		account := p.Harnesses[r.Spec.Harness].Account
		// An operator's release ends the limit its item reported, and the
		// one its screen shows (desired.Status.Released), in this very pass.
		released := r.ReleasePending() && !r.Spec.Closed
		if !released {
			add(account, r.Status.LimitReset, r.Status.LimitUntil, r.Status.LimitWindow)
		}
		if sc, ok := obs.Screens[r.Key]; ok && sc.Limit != nil && !r.Spec.Closed && !r.Spec.Held && !released && newLimit(*sc.Limit, r.Status, "", false) {
			l := limitOf(*sc.Limit, p, now)
			add(account, l.reset, l.until, string(sc.Limit.Window))
		}
	}
	return holds
}

// seenOf is limit l as the item's status keeps it (desired.SeenLimit),
// seen on pane (its id; "" for a transcript's).
func seenOf(l harness.Limit, pane string) desired.SeenLimit {
	if !l.At.IsZero() {
		pane = ""
	}
	return desired.SeenLimit{Kind: string(l.Kind), Window: string(l.Window), Text: l.Text, Reset: l.Reset, At: l.At, Pane: pane}
}

// newLimit reports whether limit l, which the item's screen (on pane) or
// transcript shows, is news to an item whose status is st: a new episode.
// It is one when it is a limit other than the one the item last saw
// (Status.LimitSeen: another kind or text, another transcript line when
// both are dated, another reset otherwise), or that one's menu still
// waiting for an answer, unless an operator released it. The same banner
// on a screen is the same episode on the pane that showed it, whatever
// reset it reads now; on a later pane (the resume after the reset) it is
// the old turn in the resumed history until the resume's boot prompt
// reached the conversation (booted), and a new episode after that: the
// limit came back. A limit an operator released on the item is never news
// (Status.ReleasedLimits). So the banner of a limit already taken, or of
// any a release ended, left on screen or quoted again, holds nothing
// more. limitHolds, which knows no pane, passes "" and false: the
// account is held from the next pass.
func newLimit(l harness.Limit, st desired.Status, pane string, booted bool) bool {
	shown := seenOf(l, pane)
	if st.WasReleased(shown) {
		return false
	}
	if !st.LimitSeen.Same(shown) {
		return true
	}
	if l.At.IsZero() && st.LimitSeen.Pane != pane && booted && !st.LimitSeen.Released {
		return true
	}
	return l.Menu && !st.LimitSeen.Released
}

// heldFor is how an account is held for one limit: until the reset plus
// LimitMargin; dflt is true when a default stands for a reset the harness
// did not name or that could not be read, capped when the one it named
// lay past LimitMaxHold (0 for no bound) from its report.
type heldFor struct {
	reset, until time.Time
	dflt, capped bool
}

// limitOf returns how limit l holds its account at now. A reset the
// harness did not name or that could not be read is LimitDefault for a
// usage limit, OverloadWait for a rate-limit or overload error, and a
// named one is at most LimitMaxHold, both counted from when the harness
// reported it (a transcript line's time), else from now. A limit a live
// screen shows is in force whatever reset it named (a banner rounded to
// the minute, one met again at the reset plus the margin, a menu still
// waiting for an answer): one that has passed holds the account the
// margin (at least a poll period) from now. A transcript's limit whose
// reset has passed is over: an old turn.
func limitOf(l harness.Limit, p Policy, now time.Time) heldFor {
	from := l.At
	if from.IsZero() {
		from = now
	}
	h := heldFor{reset: l.Reset}
	switch {
	case h.reset.IsZero():
		wait := p.LimitDefault
		if l.Kind == harness.LimitRate || l.Kind == harness.LimitOverload {
			wait = p.OverloadWait
		}
		h.reset, h.dflt = from.Add(wait), true
	case p.LimitMaxHold > 0 && h.reset.After(from.Add(p.LimitMaxHold)):
		h.reset, h.capped = from.Add(p.LimitMaxHold), true
	}
	h.until = h.reset.Add(p.LimitMargin)
	if l.At.IsZero() && !h.until.After(now) {
		h.reset, h.until = now, now.Add(max(p.LimitMargin, p.Poll))
	}
	return h
}

// held reports until when the item's account is held by a usage limit, and
// whether it is now.
func (it *itemPlan) held() (time.Time, bool) {
	h, ok := it.holds[it.p.Harnesses[it.r.Spec.Harness].Account]
	return h.Until, ok && it.now.Before(h.Until)
}

// waitHeld is the Wait of an item its account's usage limit holds back.
func (it *itemPlan) waitHeld(until time.Time) []actions.Action {
	return []actions.Action{actions.Wait{Key: it.r.Key, Until: until, Reason: actions.ReasonRateLimited}}
}

// limitSeen plans what follows a usage limit the item's live pane or its
// transcript shows: RateLimited until the reset plus the margin, no
// failure counted and no nudge sent, the event in flight delivered if it
// reached the conversation; and the menu, when it waits, answered "wait".
// It reports false when no limit in force is seen: none, one that is no
// news (newLimit; a menu is still answered), or a banner whose reset has
// passed.
func (it *itemPlan) limitSeen() ([]actions.Action, bool) {
	sc, ok := it.obs.Screens[it.r.Key]
	if !ok || sc.Limit == nil {
		return nil, false
	}
	var answer []actions.Action
	if sc.Limit.Menu {
		answer = []actions.Action{actions.AnswerLimitMenu{Key: it.r.Key, Session: it.session, PaneID: it.pane.id}}
	}
	booted, _ := it.booted()
	if !newLimit(*sc.Limit, it.st, it.pane.id, booted) {
		return append(answer, it.markBlocked()...), answer != nil
	}
	h := limitOf(*sc.Limit, *it.p, it.now)
	if !h.until.After(it.now) {
		return nil, false // a transcript's limit that has reset: an old turn
	}
	caps := it.p.Harnesses[it.r.Spec.Harness]
	landed, _ := it.landed()
	out := []actions.Action{actions.RateLimit{Key: it.r.Key, Session: it.session, Harness: it.r.Spec.Harness, Account: caps.Account,
		Kind: string(sc.Limit.Kind), Window: string(sc.Limit.Window), Reset: h.reset, Until: h.until, Default: h.dflt, Capped: h.capped,
		Text: sc.Limit.Text, Seen: seenOf(*sc.Limit, it.pane.id), Delivered: it.delivered(landed)}}
	return append(append(out, answer...), it.markBlocked()...), true
}

// planLimited plans a RateLimited item: it waits, alive or not (a pane
// that dies meanwhile is no crash), answering the usage-limit menu "wait"
// while it shows, until its account's hold ends; then it resumes its
// conversation with desired.LimitResetPrompt, and gets its pending events
// after that.
func (it *itemPlan) planLimited() []actions.Action {
	until := it.st.LimitUntil
	if h, ok := it.held(); ok && h.After(until) {
		until = h
	}
	if it.now.Before(until) {
		var out []actions.Action
		if sc, ok := it.obs.Screens[it.r.Key]; ok && it.pane.alive && sc.Limit != nil && sc.Limit.Menu {
			out = append(out, actions.AnswerLimitMenu{Key: it.r.Key, Session: it.session, PaneID: it.pane.id})
		}
		if it.pane.alive {
			out = append(out, it.markBlocked()...)
		}
		return append(out, it.waitHeld(until)...)
	}
	return it.spawn(&it.st, actions.ReasonLimitReset, "")
}

// markBlocked records what the item's live screen shows that keeps the
// agent from working until a human acts, or that it no longer does, when
// that changed: nil when the screen was not read or nothing changed.
func (it *itemPlan) markBlocked() []actions.Action {
	sc, ok := it.obs.Screens[it.r.Key]
	if !ok || sc.Blocked == it.st.Blocked {
		return nil
	}
	return []actions.Action{actions.MarkBlocked{Key: it.r.Key, Session: it.session, Block: sc.Blocked}}
}

// needsScreen reports whether a pass reads rec's screen (and the latest
// turn of its transcript): an open item whose harness runs in its pane
// and that is being spawned, runs, waits on a usage limit, or needs
// attention because its spawn's boot prompt was never seen (a dialog held
// it: awaitingBoot), whose screen says when a person answered it. Only a
// live agent shows a block or a limit; a dead pane keeps its last frame.
func needsScreen(rec desired.Record, snap observed.Snapshot, p Policy) bool {
	if rec.Spec.Closed || rec.Spec.Held {
		return false
	}
	switch rec.Status.Phase {
	case desired.PhaseSpawning, desired.PhaseRunning, desired.PhaseRateLimited:
	case desired.PhaseNeedsAttention:
		if !awaitingBoot(rec.Status) {
			return false
		}
	default:
		return false
	}
	pn, ok := snap.Pane(desired.SessionName(rec.Key))
	return ok && !pn.Dead && pn.Owner == p.Owner && p.Owner != "" && runsHarness(&p, &rec, pn)
}

// screenDecides reports whether a decision of this pass needs rec's
// screen (needsScreen) as it is now, not only its news: a start in flight
// (Spawning, or a boot prompt never seen), a usage limit's menu to answer
// (RateLimited), an event to paste or a paste in flight, and a blocked
// screen, to see it clear. The screen of any other running agent shows
// only news (a dialog or a limit that came since), and a pane with no
// output since it was first seen shows none (observed.Need.ScreenIfChanged).
func screenDecides(rec desired.Record) bool {
	st := rec.Status
	return st.Phase != desired.PhaseRunning || len(rec.Pending) > 0 || st.SendingDeliveryID != "" || st.SpawnDeliveryID != "" || st.Blocked != ""
}

// LimitsHeld returns, for loopd get, the test of whether a usage limit
// recorded on an item's account holds it back at now, with the hold (its
// reset, the end of the hold, the reset plus the margin, and its window);
// records are every item, whose statuses carry the limits. The holds are
// worked out once, not once per item asked about.
func LimitsHeld(records []desired.Record, p Policy, now time.Time) func(r desired.Record) (LimitHold, bool) {
	holds := limitHolds(records, observed.Observation{}, p, now)
	return func(r desired.Record) (LimitHold, bool) {
		h, ok := holds[p.Harnesses[r.Spec.Harness].Account]
		return h, ok
	}
}
