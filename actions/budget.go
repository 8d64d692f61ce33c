package actions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
)

// Why an item is held for, or comes back from, its token budget
// (docs/design.md, "Budgets").
const (
	// ReasonTokenBudget: the item's agent used its route's token
	// budget; it takes no new turn until the budget is raised or its
	// window frees some.
	ReasonTokenBudget Reason = "budget_exhausted"
	// ReasonBudgetRaised: the item's usage is under its budget again; it
	// resumes its conversation with desired.BudgetRaisedPrompt.
	ReasonBudgetRaised Reason = "budget_raised"
)

// RecordUsage records what the pass counted of the item's token usage
// (desired.BudgetState.Count): where the reading of its transcript
// stopped, and the tokens counted. It changes no phase.
type RecordUsage struct {
	Key   desired.Key
	State desired.BudgetState
	// Added is the weighted tokens this count added.
	Added int64
}

// Item implements Action.
func (a RecordUsage) Item() desired.Key { return a.Key }

// Name implements Action.
func (RecordUsage) Name() string { return "record_usage" }

// Mutates implements Action.
func (RecordUsage) Mutates() bool { return true }

// Fields implements Action.
func (a RecordUsage) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"tokens", a.Added}, {"bytes", a.State.UsageOffset}}
}

func (a RecordUsage) String() string { return Format(a) }

// BudgetExhaust holds an item whose agent used its token budget: the turn
// in flight is interrupted the way the CLI's own interrupt key does it
// (with PaneID set: harness.Interrupter's keys, through the pane's
// guard), the item goes to BudgetExhausted with the figures (no failure
// counted, its events pending), and TalkRule queues one notice.
type BudgetExhaust struct {
	Key     desired.Key
	Session string
	// PaneID is the live pane whose turn is interrupted; "" for none.
	PaneID string
	// Run is the process runner's run recorded for the item, ended with
	// its group if it still runs (a headless turn has no interrupt that
	// keeps it going); "" for none.
	Run string
	// Used and Limit are the weighted tokens used and the budget they
	// reached (raises included), of budget Which (desired.BudgetWindow or
	// BudgetTotal).
	Used, Limit int64
	Which       string
	// Delivered is the event in flight that reached the conversation
	// before the hold: it is delivered. One that did not stays pending.
	Delivered string
}

// Item implements Action.
func (a BudgetExhaust) Item() desired.Key { return a.Key }

// Name implements Action.
func (BudgetExhaust) Name() string { return "budget_exhaust" }

// Mutates implements Action.
func (BudgetExhaust) Mutates() bool { return true }

// Fields implements Action.
func (a BudgetExhaust) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}}
	if a.PaneID != "" {
		f = append(f, Field{"pane_id", a.PaneID})
	}
	if a.Run != "" {
		f = append(f, Field{"run", a.Run})
	}
	f = append(f, Field{"budget_used", a.Used}, Field{"budget_limit", a.Limit}, Field{"budget_which", a.Which})
	if a.Delivered != "" {
		f = append(f, Field{"delivered", a.Delivered})
	}
	return append(f, Field{"reason", string(ReasonTokenBudget)})
}

func (a BudgetExhaust) String() string { return Format(a) }

// recordUsage writes the usage the pass counted.
func (e *Executor) recordUsage(ctx context.Context, r *desired.Record, a RecordUsage) error {
	st := r.Status
	st.BudgetState = a.State
	return e.put(ctx, r, st)
}

// budgetExhaust interrupts the item's turn in flight, when its pane is
// given, or ends its run (endRun), and holds the item BudgetExhausted with the figures. The keys go
// through the pane's guard, as every key does; a pane gone since the plan
// holds the item all the same.
func (e *Executor) budgetExhaust(ctx context.Context, r *desired.Record, a BudgetExhaust) error {
	var keys []string
	if a.PaneID != "" {
		ad, err := e.adapter(r.Spec.Harness)
		if err != nil {
			return fmt.Errorf("budget exhaust %s: %w", r.Key, err)
		}
		keys = harness.InterruptKeys(ad)
		for _, k := range keys {
			if err := e.Tmux.SendKeys(ctx, paneTarget(a.PaneID, a.Session), e.guard(ad), k); err != nil {
				return fmt.Errorf("budget exhaust %s: %w", r.Key, err) // send keys to <target>: …
			}
		}
	}
	if a.Run != "" {
		if err := e.endRun(ctx, r, a.Session); err != nil {
			return fmt.Errorf("budget exhaust %s: run %s: %w", r.Key, a.Run, err)
		}
	}
	st := r.Status
	st.RunID = "" // judged by the hold: its event delivered if it landed
	st.Phase, st.Reason = desired.PhaseBudgetExhausted, string(ReasonTokenBudget)
	st.BudgetUsed, st.BudgetLimit, st.BudgetWhich = a.Used, a.Limit, a.Which
	st = st.Deliver(a.Delivered).DropInFlight()
	if err := e.putDelivered(ctx, r, st, viaTranscript(a.Delivered, a.Session)); err != nil {
		return err
	}
	t := st.UsageTotal
	e.record(ctx, slog.LevelWarn, journal.SessionBudgetExhausted, r.Key, "session", a.Session, "harness", r.Spec.Harness,
		journal.KeyBudgetUsed, a.Used, journal.KeyBudgetLimit, a.Limit, journal.KeyBudgetWhich, a.Which,
		journal.KeyTokens, fmt.Sprintf("input=%d output=%d cache_write=%d cache_read=%d", t.Input, t.Output, t.CacheWrite, t.CacheRead),
		"keys", strings.Join(keys, " "), journal.KeyRun, a.Run, "pending", len(r.Pending))
	return nil
}
