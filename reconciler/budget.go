package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// budgetOf returns the token budget of r's route (schema.Route.Budget),
// weighted by its harness's adapter's defaults where the route sets no
// weight; the zero Budget when the route has none, or r has no route.
func budgetOf(r *desired.Record, p *Policy) desired.Budget {
	route, ok := p.route(r.Key)
	if !ok || route.Budget == nil {
		return desired.Budget{}
	}
	b := route.Budget
	w := b.WeightsFor(p.Adapters[r.Spec.Harness])
	return desired.Budget{Tokens: b.Tokens, Window: b.WindowDuration(), Total: b.Total,
		Weights: desired.Weights{Input: w.Input, Output: w.Output, CacheWrite: w.CacheWrite, CacheRead: w.CacheRead}}
}

// BudgetSpent returns, for loopd get, describe, the status page and
// /metrics, where r stands against its route's budget at now, and
// whether its route has one.
func BudgetSpent(r desired.Record, p Policy, now time.Time) (desired.Spent, bool) {
	b := budgetOf(&r, &p)
	return b.Spent(r.Status.BudgetState, r.Spec.BudgetRaise, now), b.Set()
}

// budgeted lists the phases in which an item past its budget is held: its
// agent works, or would be started or brought back. An item that waits
// on anything else (a person, a usage limit, its workspace) is held once
// it would run again.
var budgeted = []desired.Phase{desired.PhaseRunning, desired.PhaseSpawning, desired.PhaseIdle, desired.PhaseExited,
	desired.PhaseBackingOff, desired.PhaseParked, desired.PhaseQueued}

// planBudgeted plans r under its route's token budget (docs/design.md,
// "Budgets"), before planItem decides anything else on it:
//   - the usage its transcript recorded since the last count is counted
//     (record_usage), each message once (desired.BudgetState.Count);
//   - an item past its budget whose agent works, or would be started or
//     brought back, is held: its turn in flight interrupted, its event in
//     flight delivered when it reached the conversation, the others
//     pending (budget_exhaust);
//   - a BudgetExhausted item waits, alive or not (a pane that dies
//     meanwhile is no crash), until its usage is under its budget again
//     (a raise, a window that slid); then it resumes its conversation
//     with desired.BudgetRaisedPrompt, and its pending events are
//     pasted after, each once.
//
// A closed or held item, and one without a budget, is planItem's alone.
func planBudgeted(r *desired.Record, obs *observed.Observation, p *Policy, now time.Time, loss actions.Reason, holds map[string]LimitHold, seen *seenPane) []actions.Action {
	b := budgetOf(r, p)
	if !b.Set() || r.Spec.Closed || r.Spec.Held {
		if r.Status.Phase == desired.PhaseBudgetExhausted && !r.Spec.Closed && !r.Spec.Held {
			// The route's budget is gone (a reload): nothing holds it.
			it := planOf(r, obs, p, now, loss, holds, seen)
			return it.spawn(&it.st, actions.ReasonBudgetRaised, "")
		}
		return planItem(r, obs, p, now, loss, holds, seen)
	}
	var out []actions.Action
	if read, ok := obs.Usage[r.Key]; ok {
		st, changed := r.Status.BudgetState.Count(read, b.Weights, b.Window, now)
		if changed {
			out = append(out, actions.RecordUsage{Key: r.Key, State: st, Added: st.UsageWeighted - r.Status.UsageWeighted})
			counted := *r // the input stays as it was
			counted.Status.BudgetState = st
			r = &counted
		}
	}
	spent := b.Spent(r.Status.BudgetState, r.Spec.BudgetRaise, now)
	it := planOf(r, obs, p, now, loss, holds, seen)
	switch {
	case r.Status.Phase == desired.PhaseBudgetExhausted && spent.Past != "":
		return append(out, actions.Wait{Key: r.Key, Until: windowFrees(r.Status.BudgetState, b, r.Spec.BudgetRaise, now), Reason: actions.ReasonTokenBudget})
	case r.Status.Phase == desired.PhaseBudgetExhausted:
		return append(out, it.spawn(&it.st, actions.ReasonBudgetRaised, "")...)
	case spent.Past != "" && !it.foreign && heldForBudget(&it):
		used, limit, which := spent.Figures()
		a := actions.BudgetExhaust{Key: r.Key, Session: it.session, Used: used, Limit: limit, Which: which}
		switch {
		case it.process && it.st.RunID != "":
			// A headless run has no turn to interrupt and stay: it is
			// ended with its group, and judged here, as runEnded would:
			// the conversation its output named is followed, and its
			// event delivered if it landed.
			if follow, ok := it.followRun(); ok {
				out = append(out, follow)
				it.st = it.st.Follow(follow.To)
			}
			a.Run = it.st.RunID
			landed, _ := it.landed()
			a.Delivered = it.delivered(landed)
		case it.pane.alive && !it.process:
			a.PaneID = it.pane.id
			landed, _ := it.landed()
			a.Delivered = it.delivered(landed)
		}
		return append(out, a)
	}
	return append(out, planItem(r, obs, p, now, loss, holds, seen)...)
}

// heldForBudget reports whether an item past its budget is held now: it
// is in a budgeted phase, and its agent runs, or it has an event to
// start or bring it back with, or it is being started or brought back.
func heldForBudget(it *itemPlan) bool {
	st := &it.st
	for _, ph := range budgeted {
		if st.Phase == ph {
			return it.pane.alive || len(it.pending) > 0 || st.Phase == desired.PhaseSpawning || st.Phase == desired.PhaseBackingOff
		}
	}
	return false
}

// windowFrees returns when the window of b frees enough of s's usage to
// bring it under its budget raised by raise, the zero time when only a
// raise can (the total is spent, or no hour counted is old enough).
func windowFrees(s desired.BudgetState, b desired.Budget, raise int64, now time.Time) time.Time {
	if b.Total > 0 && s.UsageWeighted >= b.Total+raise {
		return time.Time{}
	}
	used := s.InWindow(b.Window, now)
	for _, h := range s.Hours {
		end := h.Hour.Add(time.Hour).Add(b.Window)
		if !end.After(now) {
			continue
		}
		used -= h.Tokens
		if used < b.Tokens+raise {
			return end
		}
	}
	return time.Time{}
}
