package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// budgetPolicy is testPolicy with a route whose items may use 1,000
// weighted tokens a day and 5,000 in all, every kind weighing 1.
func budgetPolicy() Policy {
	p := testPolicy()
	one := 1.0
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/api": {Harness: "claude-code", Workdir: cwd,
		Budget: &schema.Budget{Tokens: 1000, Window: "24h", Total: 5000,
			Weights: schema.BudgetWeights{Input: &one, Output: &one, CacheWrite: &one, CacheRead: &one}}}}}
	return p
}

// used returns a status st that counted n weighted tokens in the hour
// before t0, from a transcript read to offset 100.
func used(st desired.Status, n int64) desired.Status {
	st.BudgetState = desired.BudgetState{UsagePath: "/t.jsonl", UsageOffset: 100, UsageMark: t0.Add(-time.Minute),
		CountedIDs: []desired.CountedMessage{{ID: "m0", Tokens: desired.Tokens{Output: n}}}, UsageTotal: desired.Tokens{Output: n},
		UsageWeighted: n, Hours: []desired.UsageHour{{Hour: t0.Add(-time.Minute).Truncate(time.Hour), Tokens: n}}}
	return st
}

// usage adds to o a read of the item's transcript from offset 100 to 200
// that found message id with out output tokens.
func usage(o observed.Observation, id string, out int64) observed.Observation {
	o.Usage = map[desired.Key]desired.UsageRead{key: {Path: "/t.jsonl", From: 100, To: 200,
		Messages: []desired.UsageMessage{{ID: id, At: t0, Tokens: desired.Tokens{Output: out}}}}}
	return o
}

func TestPlanBudgets(t *testing.T) {
	counted := func(st desired.Status, id string, out int64) desired.BudgetState {
		s, _ := st.BudgetState.Count(usage(obs(alive()), id, out).Usage[key], desired.Weights{Input: 1, Output: 1, CacheWrite: 1, CacheRead: 1}, 24*time.Hour, t0)
		return s
	}
	exhausted := func(st desired.Status) desired.Status {
		st.Phase, st.Reason, st.BudgetUsed, st.BudgetLimit, st.BudgetWhich = desired.PhaseBudgetExhausted, "budget_exhausted", 1100, 1000, desired.BudgetWindow
		return st
	}
	raised := func(r desired.Record) desired.Record { r.Spec.BudgetRaise = 200; return r }
	tests := []struct {
		name string
		r    desired.Record
		o    observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"usage_under_the_budget_is_counted_and_the_item_goes_on", rec(used(running(), 100)), usage(obs(alive(), transcript), "m1", 50), budgetPolicy(),
			[]actions.Action{actions.RecordUsage{Key: key, State: counted(used(running(), 100), "m1", 50), Added: 50}}},
		{"usage_past_the_budget_mid_turn_interrupts_and_holds", rec(sending(t0.Add(-time.Second), 1), ev1), usage(obs(alive(), transcript), "m1", 1100), budgetPolicy(),
			[]actions.Action{actions.RecordUsage{Key: key, State: counted(running(), "m1", 1100), Added: 1100},
				actions.BudgetExhaust{Key: key, Session: sess, PaneID: "%1", Used: 1100, Limit: 1000, Which: desired.BudgetWindow}}},
		{"the_paste_that_landed_is_delivered_with_the_hold", rec(used(sending(t0.Add(-time.Second), 1), 1000), ev1), landed(obs(alive(), transcript)), budgetPolicy(),
			[]actions.Action{actions.BudgetExhaust{Key: key, Session: sess, PaneID: "%1", Used: 1000, Limit: 1000, Which: desired.BudgetWindow, Delivered: "d-1"}}},
		{"a_message_counted_before_adds_nothing", rec(used(running(), 100)), usage(obs(alive(), transcript), "m0", 100), budgetPolicy(),
			[]actions.Action{actions.RecordUsage{Key: key, State: counted(used(running(), 100), "m0", 100), Added: 0}}},
		{"an_idle_item_past_its_total_with_an_event_is_held_without_a_pane", rec(used(desired.Status{Phase: desired.PhaseIdle}, 5000), ev1), obs(gone()), budgetPolicy(),
			[]actions.Action{actions.BudgetExhaust{Key: key, Session: sess, Used: 5000, Limit: 1000, Which: desired.BudgetWindow}}},
		{"an_idle_item_past_its_budget_with_nothing_to_do_is_left", rec(used(desired.Status{Phase: desired.PhaseIdle}, 5000)), obs(gone()), budgetPolicy(), nil},
		{"held_it_waits_with_its_events_pending_and_its_pane_dead", rec(exhausted(used(running(), 1100)), ev1), obs(dead(1)), budgetPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(24 * time.Hour), Reason: actions.ReasonTokenBudget}}},
		{"raised_it_resumes_the_same_conversation", raised(rec(exhausted(used(running(), 1100)), ev1)), obs(alive(), transcript), budgetPolicy(),
			[]actions.Action{actions.ResumeSpawn{Spawn: actions.Spawn{Key: key, Session: sess, Harness: "claude-code", Cwd: cwd, Prompt: desired.BudgetRaisedPrompt(key),
				Probe: 5 * time.Second, Respawn: true, Reason: actions.ReasonBudgetRaised}, ResumeID: oldID}}},
		{"without_a_budget_nothing_is_counted", rec(running()), usage(obs(alive(), transcript), "m1", 1e6), testPolicy(), nil},
		{"needs_attention_past_the_budget_is_left_to_the_person", rec(used(desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{AttentionGeneration: 3}}, 5000), ev1),
			obs(gone()), budgetPolicy(), []actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.r}, tt.o, tt.p, t0))
		})
	}
}

func TestWindowFrees(t *testing.T) {
	b := desired.Budget{Tokens: 1000, Window: 24 * time.Hour}
	s := desired.BudgetState{UsageWeighted: 1500, Hours: []desired.UsageHour{{Hour: t0.Add(-20 * time.Hour), Tokens: 600}, {Hour: t0.Add(-time.Hour), Tokens: 900}}}
	require.Equal(t, t0.Add(5*time.Hour), windowFrees(s, b, 0, t0), "the oldest hour leaves the window")
	require.Equal(t, time.Time{}, windowFrees(s, desired.Budget{Tokens: 1000, Window: 24 * time.Hour, Total: 1000}, 0, t0), "a spent total frees nothing")
}

// processBudgetPolicy is processPolicy with budgetPolicy's budget.
func processBudgetPolicy() Policy {
	p := processPolicy(600)
	r := p.Routing.Repos["octo-org/api"]
	r.Budget = budgetPolicy().Routing.Repos["octo-org/api"].Budget
	p.Routing.Repos["octo-org/api"] = r
	return p
}

// TestPlanBudgetsOfRuns: an item of the process runner past its budget
// is held as a pane's is: its run in flight ended with its group (a
// headless turn has no interrupt that keeps it going), its event
// delivered once it landed (confirmed before the hold), a run that ended judged by the hold (the
// conversation it named followed), the others pending; raised, it
// resumes the same conversation in a run of its own.
func TestPlanBudgetsOfRuns(t *testing.T) {
	p := processBudgetPolicy()
	run := func() desired.Status {
		st := withRun(running())
		st.SpawnMode, st.SpawnDeliveryID = desired.SpawnResume, "d-1"
		return st
	}
	counted := func(st desired.Status, id string, out int64) desired.BudgetState {
		s, _ := st.BudgetState.Count(usage(obs(alive()), id, out).Usage[key], desired.Weights{Input: 1, Output: 1, CacheWrite: 1, CacheRead: 1}, 24*time.Hour, t0)
		return s
	}
	exhausted := used(running(), 1100)
	exhausted.Phase, exhausted.Reason = desired.PhaseBudgetExhausted, "budget_exhausted"
	exhausted.BudgetUsed, exhausted.BudgetLimit, exhausted.BudgetWhich = 1100, 1000, desired.BudgetWindow
	raised := rec(exhausted, ev1)
	raised.Spec.BudgetRaise = 200
	// The event the conversation shows is confirmed before the hold.
	confirm := actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript}
	resume := runSpawn(ev1, actions.ReasonBudgetRaised)
	resume.DeliveryID, resume.Prompt = "", desired.BudgetRaisedPrompt(key)
	tests := []struct {
		name string
		r    desired.Record
		o    observed.Observation
		want []actions.Action
	}{
		{"a_run_in_flight_past_the_budget_is_ended_and_held_its_landed_event_delivered", rec(run(), ev1, ev2),
			usage(seen(obs(runSnap(true, 0, ""), grown), "d-1", harness.Found{Whole: true}), "m1", 1100),
			[]actions.Action{confirm, actions.RecordUsage{Key: key, State: counted(run(), "m1", 1100), Added: 1100},
				actions.BudgetExhaust{Key: key, Session: sess, Run: "r1", Used: 1100, Limit: 1000, Which: desired.BudgetWindow}}},
		{"a_run_in_flight_whose_event_did_not_land_keeps_it_pending", rec(used(run(), 1100), ev1), seen(obs(runSnap(true, 0, ""), transcript), "d-1", harness.Found{}),
			[]actions.Action{actions.BudgetExhaust{Key: key, Session: sess, Run: "r1", Used: 1100, Limit: 1000, Which: desired.BudgetWindow}}},
		{"a_run_that_ended_is_judged_by_the_hold_and_its_conversation_followed", rec(used(run(), 1100), ev1, ev2),
			seen(obs(runSnap(false, 0, otherID), grown), "d-1", harness.Found{Whole: true}),
			[]actions.Action{confirm, actions.FollowSession{Key: key, Session: sess, From: oldID, To: otherID, Source: SourceHeadless},
				actions.BudgetExhaust{Key: key, Session: sess, Run: "r1", Used: 1100, Limit: 1000, Which: desired.BudgetWindow}}},
		{"an_event_past_the_budget_starts_no_run", rec(used(func() desired.Status { st := running(); st.Phase = desired.PhaseExited; return st }(), 1100), ev1), obs(gone(), transcript),
			[]actions.Action{actions.BudgetExhaust{Key: key, Session: sess, Used: 1100, Limit: 1000, Which: desired.BudgetWindow}}},
		{"held_it_waits", rec(exhausted, ev1), obs(gone(), transcript),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(24 * time.Hour), Reason: actions.ReasonTokenBudget}}},
		{"raised_it_resumes_the_same_conversation_in_a_run", raised, obs(gone(), transcript),
			[]actions.Action{actions.ResumeSpawn{Spawn: resume, ResumeID: oldID}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.r}, tt.o, p, t0))
		})
	}
}
