package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
)

// TestPlanImplicatesAConversationByItsOwnDeaths: the fast-failure and churn
// rules (issue 21, case 7) count a death against the conversation only
// when the harness exited itself, and the same way as the death they last
// took; a kill from outside is a crash of the same conversation, resumed
// again. A conversation that kills its CLI every time, the same way, is
// still retired.
func TestPlanImplicatesAConversationByItsOwnDeaths(t *testing.T) {
	const boom = "Error: Maximum call stack size exceeded"
	loop := func(words string) desired.Status {
		st := running()
		st.SpawnedAt, st.Failures, st.FastFailures, st.ChurnFailures, st.LastWords = t0.Add(-5*time.Second), 2, 2, 2, words
		return st
	}
	said := func(o observed.Observation, words string) observed.Observation {
		o.Exits = map[desired.Key]observed.Exit{key: {Words: words}}
		return o
	}
	retired := func() actions.RecordExit {
		e := exit(1, desired.PhaseBackingOff, 3, 0, actions.ReasonCrash)
		e.ChurnFailures, e.Retire, e.Words, e.NextAttempt, e.Delay = 0, RetiredFastFailures, boom, t0.Add(4*time.Second), 4*time.Second
		return e
	}
	tests := []struct {
		name string
		st   desired.Status
		obs  observed.Observation
		want []actions.Action
	}{
		{"third_death_the_same_way_retires_the_conversation", loop(boom), said(obs(dead(1), transcript), boom),
			[]actions.Action{retired(), actions.Wait{Key: key, Until: t0.Add(4 * time.Second), Reason: actions.ReasonBackoff}}},
		{"a_death_with_other_last_words_starts_a_new_streak", loop(boom), said(obs(dead(1), transcript), "Error: ENOSPC"),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 3, 1, actions.ReasonCrash)
				e.Words, e.NextAttempt, e.Delay = "Error: ENOSPC", t0.Add(4*time.Second), 4*time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(4 * time.Second), Reason: actions.ReasonBackoff}}},
		{"a_kill_from_outside_is_held_against_nothing", loop(boom), obs(killedBy(9), transcript),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, Signal: 9, Phase: desired.PhaseBackingOff, Failures: 3, FastFailures: 2, ChurnFailures: 2,
				NextAttempt: t0.Add(4 * time.Second), Delay: 4 * time.Second, PaneID: "%1", Reason: actions.ReasonCrash},
				actions.Wait{Key: key, Until: t0.Add(4 * time.Second), Reason: actions.ReasonBackoff}}},
		{"a_cli_that_exits_on_sigterm_was_killed_too", loop(boom), said(obs(dead(143), transcript), ""),
			[]actions.Action{func() actions.RecordExit {
				e := exit(143, desired.PhaseBackingOff, 3, 2, actions.ReasonCrash)
				e.ChurnFailures, e.NextAttempt, e.Delay = 2, t0.Add(4*time.Second), 4*time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(4 * time.Second), Reason: actions.ReasonBackoff}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{rec(tt.st)}, tt.obs, testPolicy(), t0))
		})
	}
	// What the exit recorded is what the next death is compared with.
	st := retired().Apply(loop(boom), t0)
	assert.Empty(t, st.LastWords, "a retirement clears the counts and their words")
	e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonCrash)
	e.Words = boom
	assert.Equal(t, boom, e.Apply(running(), t0).LastWords)
}

// killedBy is the item's pane %1, dead of signal sig.
func killedBy(sig int) observed.Snapshot {
	s := dead(0)
	p := s.Panes[sess]
	p.DeadSignal = sig
	s.Panes[sess] = p
	return s
}

// TestPlanBringsBackASpawnAPersonUnblocked: an item that needs attention
// because its spawn's boot prompt was never seen (a dialog held it past
// the confirm timeout) goes back to Running once a person answered the
// dialog (issue 21, case 12): its boot prompt is in the conversation, or
// its screen shows the input box ready; the boot event is delivered
// exactly once, by its frame or by the paste that follows.
func TestPlanBringsBackASpawnAPersonUnblocked(t *testing.T) {
	stuck := func(reason actions.Reason) desired.Status {
		st := spawning(desired.SpawnFresh)
		st.SpawnedAt, st.Phase, st.Reason, st.AttentionGeneration = t0.Add(-5*time.Minute), desired.PhaseNeedsAttention, string(reason), 3
		return st
	}
	screen := func(o observed.Observation, sc observed.Screen) observed.Observation {
		o.Screens = map[desired.Key]observed.Screen{key: sc}
		return o
	}
	bootSeen := func(o observed.Observation) observed.Observation {
		return seen(seen(o, "d-1", harness.Found{Whole: true}), bootID, harness.Found{Whole: true})
	}
	confirmed := actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript}
	mark := func(confirmed bool, delivery string) actions.MarkRunning {
		return actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, Confirmed: confirmed,
			DeliveryID: delivery, PID: 10, Reason: actions.ReasonUnblocked}
	}
	tests := []struct {
		name string
		st   desired.Status
		obs  observed.Observation
		want []actions.Action
	}{
		// The boot prompt's message holds its event's frame and its boot
		// line: the event is confirmed from the conversation, the spawn by
		// its line.
		{"its_boot_prompt_in_the_conversation", stuck(actions.ReasonSpawnUnconfirmed), screen(bootSeen(obs(alive(), transcript)), observed.Screen{}),
			[]actions.Action{confirmed, mark(true, ""), actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-2"}}},
		{"its_input_box_ready_without_the_prompt", stuck(actions.ReasonSpawnUnconfirmed),
			screen(seen(obs(alive(), noScript), "d-1", harness.Found{}), observed.Screen{Ready: true}),
			[]actions.Action{mark(false, ""), actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_resume_too", func() desired.Status {
			st := stuck(actions.ReasonUnconfirmed)
			st.SpawnMode = desired.SpawnResume
			return st
		}(),
			screen(bootSeen(obs(alive(), transcript)), observed.Screen{}),
			[]actions.Action{confirmed, func() actions.MarkRunning { m := mark(true, ""); m.Mode = desired.SpawnResume; return m }(),
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-2"}}},
		{"a_nudge_too", func() desired.Status { st := stuck(actions.ReasonUnconfirmed); st.SpawnDeliveryID = ""; return st }(),
			screen(seen(obs(alive(), transcript), bootID, harness.Found{Whole: true}), observed.Screen{}),
			[]actions.Action{mark(true, ""), actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"still_behind_the_dialog", stuck(actions.ReasonSpawnUnconfirmed),
			screen(seen(obs(alive(), noScript), "d-1", harness.Found{}), observed.Screen{Blocked: harness.BlockWorkspaceTrust}),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
		{"busy_is_not_ready", stuck(actions.ReasonSpawnUnconfirmed), screen(seen(obs(alive(), noScript), "d-1", harness.Found{}), observed.Screen{}),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
		{"another_reason_waits_for_its_release", stuck(actions.ReasonUnconfirmedSend),
			screen(seen(obs(alive(), transcript), "d-1", harness.Found{}), observed.Screen{Ready: true}),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{rec(tt.st, ev1, ev2)}, tt.obs, testPolicy(), t0))
		})
	}
	n := needs(testPolicy(), t0)(rec(stuck(actions.ReasonSpawnUnconfirmed), ev1), alive())
	assert.True(t, n.Screen, "its screen is read")
	assert.Contains(t, n.Frames, desired.BootFrame(bootID), "its boot line is looked for")
}
