package actions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// limitMenu is Claude Code's usage-limit menu with the cursor on choice
// cursor (1-based).
func limitMenu(cursor int) string {
	lines := []string{strings.Repeat("─", 40), " What do you want to do?"}
	for i, c := range []string{"Stop and wait for limit to reset", "Switch to extra usage", "Upgrade your plan"} {
		mark := "  "
		if i+1 == cursor {
			mark = "❯ "
		}
		lines = append(lines, " "+mark+string(rune('1'+i))+". "+c)
	}
	return strings.Join(append(lines, " Enter to confirm · Esc to cancel"), "\n")
}

// TestAnswerLimitMenuPressesOnlyTheWaitChoice: wherever the cursor is,
// the keys sent choose "Stop and wait for limit to reset": its number
// when the cursor is elsewhere, Enter only once it is on it, nothing when
// the menu is gone.
func TestAnswerLimitMenuPressesOnlyTheWaitChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		screen string
		keys   []string
	}{
		{"cursor_on_upgrade", limitMenu(3), []string{"1"}},
		{"cursor_on_extra_usage", limitMenu(2), []string{"1"}},
		{"cursor_on_wait", limitMenu(1), []string{"Enter"}},
		{"menu_gone", "────\n❯\u00a0\n────", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.ingest(t, "d-1", "hello")
			session, pane := r.livePane(t)
			r.tmux.SetScreen(session, tc.screen)
			res := r.exec.Execute(context.Background(), []desired.Record{r.get(t)},
				[]actions.Action{actions.AnswerLimitMenu{Key: r.key, Session: session, PaneID: pane}})
			require.Zero(t, res.Failed, r.log.String())
			assert.Equal(t, tc.keys, r.tmux.Keys(session))
		})
	}
}

// TestRateLimitCountsNothingAndDeliversWhatLanded: the item goes to
// RateLimited with its reset, no count changes, the event that reached the
// conversation is delivered and the rest stay pending.
func TestRateLimitCountsNothingAndDeliversWhatLanded(t *testing.T) {
	r := newRig(t)
	r.ingest(t, "d-1", "hello")
	rec := r.ingest(t, "d-2", "later")
	st := rec.Status
	st.Phase, st.SpawnDeliveryID, st.Failures, st.FastFailures = desired.PhaseSpawning, "d-1", 2, 1
	require.NoError(t, r.store.PutStatus(context.Background(), r.key, st))
	reset := r.now.Add(20 * time.Second)
	res := r.exec.Execute(context.Background(), []desired.Record{r.get(t)}, []actions.Action{actions.RateLimit{Key: r.key, Session: "s",
		Harness: "claude-code", Account: "a", Kind: "usage_limit", Reset: reset, Until: reset.Add(time.Minute), Text: "You've hit your session limit", Delivered: "d-1"}})
	require.Zero(t, res.Failed, r.log.String())
	got := r.get(t)
	assert.Equal(t, desired.PhaseRateLimited, got.Status.Phase)
	assert.True(t, reset.Equal(got.Status.LimitReset))
	assert.True(t, reset.Add(time.Minute).Equal(got.Status.LimitUntil))
	assert.Equal(t, 2, got.Status.Failures)
	assert.Equal(t, 1, got.Status.FastFailures)
	assert.Empty(t, got.Status.SpawnDeliveryID)
	require.Len(t, got.Pending, 1)
	assert.Equal(t, "d-2", got.Pending[0].ID)
	evs, err := r.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	var limited bool
	for _, ev := range evs {
		if ev.Name == journal.SessionRateLimited {
			limited = true
			assert.Equal(t, reset.UTC().Format(time.RFC3339), ev.Attrs["reset"])
		}
	}
	assert.True(t, limited)
}

// TestMarkBlockedJournalsOncePerChange: a block is journaled when it
// appears and when it goes, not on every pass that sees it.
func TestMarkBlockedJournalsOncePerChange(t *testing.T) {
	r := newRig(t)
	r.ingest(t, "d-1", "hello")
	ctx := context.Background()
	for _, b := range []string{"login_required", "login_required", ""} {
		res := r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{actions.MarkBlocked{Key: r.key, Session: "s", Block: b}})
		require.Zero(t, res.Failed)
		assert.Equal(t, b, r.get(t).Status.Blocked)
	}
	evs, err := r.store.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	var names []journal.Name
	for _, ev := range evs {
		if ev.Name == journal.SessionBlocked || ev.Name == journal.SessionUnblocked {
			names = append(names, ev.Name)
		}
	}
	assert.Equal(t, []journal.Name{journal.SessionBlocked, journal.SessionUnblocked}, names)
}
