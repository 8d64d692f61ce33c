package reconciler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/sandbox"
)

// Explanation is what explains an item's phase to an operator, as loopd
// get, describe and the status page show it.
type Explanation struct {
	// Reason is loopd get's REASON column (Explain).
	Reason string
	// QueuePosition is a Queued item's place in the queue, 1 next
	// (QueuePositions); 0 when it waits in none.
	QueuePosition int
	// LimitUntil is when the usage limit holding an open, unheld item
	// lets it go (LimitsHeld); zero when none holds it.
	LimitUntil time.Time
	// LimitWindow is that limit's window (harness.LimitWindow); "" when
	// its harness did not say.
	LimitWindow string
	// Unsandboxed is true when the item's agent runs, or will run, with
	// no sandbox (Unsandboxed): the reason says sandbox=none.
	Unsandboxed bool
	// Budget is where the item stands against its route's token budget
	// (BudgetSpent), when its route has one (Budgeted).
	Budget   desired.Spent
	Budgeted bool
}

// Explain returns, by key, the explanation of each of records at now.
// The reason is the status's reason, followed by what explains the
// phase: preparing_since=T for a Preparing item, head_fetching=C since=T
// while its worker fetches a pull request's new head C, position=N for a Queued
// one, harness=… (not in the config…) for a harness_unknown one,
// next_attempt=T for a BackingOff one whose next attempt is still to
// come (one past is due, or waits on its reason), workspace_error=… when its
// worktree failed, workdir_pinned=… when the route now renders another
// workdir (WorkdirMoved), the last exit (exit_status=N or signal=N;
// desired.Status.LastExit), err=… naming the command of a harness_missing
// item's harness while it is still missing, command=… and output=… (the
// harness's command and its last words) for a harness_exited_at_once
// item, blocked reason=… when its screen shows a
// dialog, rate_limited reset=T until=T window=W when a usage limit on its
// account holds it (window= when the harness named it), budget=USED/LIMIT
// budget_which=window|total when its route has a token budget (the one it
// is past, else the one nearest its limit), sandbox=none when its agent
// runs with no sandbox
// (Unsandboxed), and stale_pending=N since=D when it is Stopped with
// events pending longer than stale. records are every item (the queue and the
// limits are worked out over all of them, once); p is the current
// policy. An item with nothing to say has the zero Explanation.
func Explain(records []desired.Record, p Policy, now time.Time, stale time.Duration) map[desired.Key]Explanation {
	queue := QueuePositions(records, now)
	limitHeld := LimitsHeld(records, p, now)
	out := make(map[desired.Key]Explanation, len(records))
	for _, r := range records {
		st := r.Status
		reason := st.Reason
		if st.Phase == desired.PhasePreparing && !st.PrepareStarted.IsZero() {
			reason += " preparing_since=" + st.PrepareStarted.Local().Format(time.RFC3339)
		}
		if hf := st.HeadFetch; hf.Outcome == "" && !hf.Started.IsZero() && !r.Spec.Closed {
			reason += " head_fetching=" + hf.Commit + " since=" + hf.Started.Local().Format(time.RFC3339)
		}
		var e Explanation
		if pos, ok := queue[r.Key]; ok {
			e.QueuePosition = pos
			reason += " position=" + strconv.Itoa(pos)
		}
		if st.Reason == string(actions.ReasonHarnessUnknown) {
			reason += " harness=" + journal.Quote(r.Spec.Harness) + " (not in the config: add it back to harnesses)"
		}
		if st.Phase == desired.PhaseBackingOff && st.NextAttempt.After(now) {
			// One past is due, or waits for something else (its reason).
			reason += " next_attempt=" + st.NextAttempt.Local().Format(time.RFC3339)
		}
		if st.WorkspaceError != "" && (st.Phase == desired.PhaseNeedsAttention || st.Phase == desired.PhaseBackingOff) {
			reason += " workspace_error=" + journal.Quote(st.WorkspaceError)
		}
		if rendered, moved := WorkdirMoved(r, p); moved {
			// Not applied: the conversation is found by its workdir.
			reason += " workdir_pinned=" + r.Workdir() + " config_workdir=" + rendered
		}
		if last := st.LastExit(); last != "" {
			reason += " " + last
		}
		if caps := p.Harnesses[r.Spec.Harness]; caps.Missing != "" && st.Reason == string(actions.ReasonHarnessMissing) {
			reason += " err=" + journal.Quote(caps.Missing)
		}
		if st.Reason == string(actions.ReasonHarnessExitedAtOnce) {
			if cmd := p.Harnesses[r.Spec.Harness].Command; cmd != "" {
				reason += " command=" + journal.Quote(cmd)
			}
			if st.LastWords != "" {
				reason += " output=" + journal.Quote(st.LastWords)
			}
		}
		if by := st.BlockedBy(); by != "" {
			reason += " blocked reason=" + by
		}
		if q := st.AwaitingApproval(); q != "" {
			reason += " " + string(actions.ReasonAwaitingApproval) + " " + journal.KeyQuestionID + "=" + q
		}
		if h, held := limitHeld(r); held && !r.Spec.Closed && !r.Spec.Held {
			e.LimitUntil, e.LimitWindow = h.Until, h.Window
			if reason != "rate_limited" { // the item held by another's limit says why
				reason += " rate_limited"
			}
			reason = strings.TrimSpace(reason + " reset=" + h.Reset.Local().Format(time.RFC3339) + " until=" + h.Until.Local().Format(time.RFC3339))
			if h.Window != "" {
				reason += " " + journal.KeyWindow + "=" + h.Window
			}
		}
		if e.Budget, e.Budgeted = BudgetSpent(r, p, now); e.Budgeted {
			used, limit, which := e.Budget.Figures()
			reason += " budget=" + desired.FormatTokens(used) + "/" + desired.FormatTokens(limit) + " budget_which=" + which
		}
		if e.Unsandboxed = Unsandboxed(r, p); e.Unsandboxed {
			reason += " " + journal.KeySandbox + "=" + sandbox.ModeNone
		}
		if flag := StalePending(r, now, stale); flag != "" {
			reason = strings.TrimSpace(reason + " " + flag)
		}
		e.Reason = strings.TrimSpace(reason)
		out[r.Key] = e
	}
	return out
}

// maxListedReason bounds, in bytes, a reason as a list of items shows it
// (ListedReason): four lines of a wide terminal wrapped the longest.
const maxListedReason = 120

// ListedReason is reason as a list of items shows it (loopd get's table,
// the status page's groups): cut to 120 bytes on a rune boundary, "…"
// marking the cut (journal.Clip). The item's own view (describe, its
// page, -o json) shows it whole.
func ListedReason(reason string) string { return journal.Clip(reason, maxListedReason) }

// StalePending returns "stale_pending=N since=D" when r is Stopped and its
// oldest pending event was received more than stale before now, D being
// that age (2h5m; seconds under a minute); "" otherwise. loopd get always
// lists such an item.
func StalePending(r desired.Record, now time.Time, stale time.Duration) string {
	if r.Status.Phase != desired.PhaseStopped {
		return ""
	}
	oldest, ok := r.OldestPending()
	age := now.Sub(oldest)
	if !ok || age <= stale {
		return ""
	}
	since := age.Truncate(time.Second).String()
	if age >= time.Minute {
		since = strings.TrimSuffix(age.Truncate(time.Minute).String(), "0s")
	}
	return fmt.Sprintf("stale_pending=%d since=%s", len(r.Pending), since)
}
