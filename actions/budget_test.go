package actions_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// TestBudgetExhaustInterruptsHoldsAndNotifiesOnce: the turn in flight
// gets the CLI's interrupt key, the item is held BudgetExhausted with the
// figures, no count changes, the event that reached the conversation is
// delivered and the rest stay pending, and the outbox gets one notice
// with the figures, not a second when the hold is written again.
func TestBudgetExhaustInterruptsHoldsAndNotifiesOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.exec.Talk = func(desired.Record) desired.Talk { return desired.Talk{Notify: true} }
	r.ingest(t, "d-1", "hello")
	r.ingest(t, "d-2", "later")
	session, pane := r.livePane(t)
	st := r.get(t).Status
	st.Phase, st.SendingDeliveryID, st.Failures = desired.PhaseRunning, "d-1", 1
	st.UsageTotal, st.UsageWeighted = desired.Tokens{Input: 10, Output: 200, CacheRead: 9000}, 1910
	require.NoError(t, r.store.PutStatus(ctx, r.key, st))
	exhaust := actions.BudgetExhaust{Key: r.key, Session: session, PaneID: pane, Used: 1910, Limit: 1500, Which: desired.BudgetWindow, Delivered: "d-1"}

	res := r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{exhaust})
	require.Zero(t, res.Failed, r.log.String())
	assert.Equal(t, []string{"Escape"}, r.tmux.Keys(session))
	got := r.get(t)
	assert.Equal(t, desired.PhaseBudgetExhausted, got.Status.Phase)
	assert.Equal(t, 1, got.Status.Failures, "a hold is no failure")
	assert.Equal(t, []int64{1910, 1500}, []int64{got.Status.BudgetUsed, got.Status.BudgetLimit})
	assert.Empty(t, got.Status.SendingDeliveryID)
	require.Len(t, got.Pending, 1)
	assert.Equal(t, "d-2", got.Pending[0].ID)

	res = r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{exhaust})
	require.Zero(t, res.Failed, r.log.String())
	calls, err := r.store.Calls(ctx, store.CallFilter{WorkItem: r.key.String()})
	require.NoError(t, err)
	calls = slices.DeleteFunc(calls, func(c desired.Call) bool { return c.Kind != desired.CallNotify })
	require.Len(t, calls, 1, "one notice per hold")
	assert.Contains(t, calls[0].Body, "it used 1.9k of its rolling-window token budget of 1.5k (weighted)")
	assert.Contains(t, calls[0].Body, "10 input, 200 output, 0 cache writes, 9.0k cache reads")
	assert.Contains(t, calls[0].Body, "`/loopd budget +200k`")

	evs, err := r.store.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	i := slices.IndexFunc(evs, func(ev journal.Event) bool { return ev.Name == journal.SessionBudgetExhausted })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "1910", evs[i].Attrs[journal.KeyBudgetUsed])
	assert.Equal(t, "window", evs[i].Attrs[journal.KeyBudgetWhich])
}
