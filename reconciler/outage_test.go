package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// fleet is n running items, numbered 1..n, with the pane state state(i)
// returns: "alive", "dead" (exit 1), "gone" (no session), "stray" (a shell
// left behind) or "foreign" (another loopd's session).
func fleet(n int, state func(i int) string) ([]desired.Record, observed.Snapshot) {
	var recs []desired.Record
	snap := observed.Snapshot{Panes: map[string]tmux.Pane{}}
	for i := 1; i <= n; i++ {
		k := desired.Key{Owner: "octo-org", Repo: "api", Number: i}
		st := running()
		st.Session, st.PaneID = desired.SessionName(k), fmt.Sprintf("%%%d", i)
		recs = append(recs, desired.Record{Key: k, Spec: desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: cwd}, Status: st})
		p := tmux.Pane{Session: st.Session, PaneID: st.PaneID, PID: 100 + i, StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}
		switch state(i) {
		case "gone":
			continue
		case "dead":
			p.Dead, p.DeadStatus = true, 1
		case "stray":
			p.CurrentCommand = "bash"
		case "foreign":
			p.Owner = "ffffffffffffffff"
		}
		snap.Panes[st.Session] = p
	}
	return recs, snap
}

// firstDown is a state function: the first down items are in state how,
// the rest alive.
func firstDown(down int, how string) func(int) string {
	return func(i int) string {
		if i <= down {
			return how
		}
		return "alive"
	}
}

func TestLossOf(t *testing.T) {
	with := func(recs []desired.Record, i int, f func(*desired.Record)) []desired.Record { f(&recs[i]); return recs }
	tests := []struct {
		name   string
		recs   []desired.Record
		snap   observed.Snapshot
		gone   bool // Snapshot.ServerGone
		want   Loss
		reason string
	}{
		{name: "server_gone_with_one_agent_is_a_server_loss", gone: true, want: Loss{Reason: actions.ReasonServerLost, Live: 1, Down: 1}},
		{name: "server_gone_with_twenty_agents", gone: true, want: Loss{Reason: actions.ReasonServerLost, Live: 20, Down: 20}},
		{name: "server_gone_with_no_agent_expected_is_nothing", gone: true, want: Loss{}},
		{name: "three_of_five_down_is_an_outage", want: Loss{Reason: actions.ReasonOutage, Live: 5, Down: 3}},
		{name: "two_of_five_down_are_two_crashes", want: Loss{Live: 5, Down: 2}},
		{name: "half_of_six_down_is_not_more_than_half", want: Loss{Live: 6, Down: 3}},
		{name: "four_of_four_down_is_below_the_minimum", want: Loss{Live: 4, Down: 4}},
		{name: "missing_sessions_count_as_down", want: Loss{Reason: actions.ReasonOutage, Live: 5, Down: 3}},
		{name: "shells_left_behind_count_as_down", want: Loss{Reason: actions.ReasonOutage, Live: 5, Down: 3}},
		{name: "foreign_sessions_are_not_this_loopds_agents", want: Loss{Live: 2, Down: 0}},
		{name: "closed_held_and_idle_items_are_not_expected_live", want: Loss{Live: 2, Down: 2}},
		{name: "a_spawn_not_started_is_not_expected_live", want: Loss{Live: 4, Down: 3}},
	}
	for i := range tests {
		tt := &tests[i]
		switch tt.name {
		case "server_gone_with_one_agent_is_a_server_loss":
			tt.recs, tt.snap = fleet(1, firstDown(1, "gone"))
		case "server_gone_with_twenty_agents":
			tt.recs, tt.snap = fleet(20, firstDown(20, "gone"))
		case "server_gone_with_no_agent_expected_is_nothing":
			tt.recs, tt.snap = fleet(1, firstDown(1, "gone"))
			tt.recs = with(tt.recs, 0, func(r *desired.Record) { r.Status.Phase = desired.PhaseExited })
		case "three_of_five_down_is_an_outage":
			tt.recs, tt.snap = fleet(5, firstDown(3, "dead"))
		case "two_of_five_down_are_two_crashes":
			tt.recs, tt.snap = fleet(5, firstDown(2, "dead"))
		case "half_of_six_down_is_not_more_than_half":
			tt.recs, tt.snap = fleet(6, firstDown(3, "dead"))
		case "four_of_four_down_is_below_the_minimum":
			tt.recs, tt.snap = fleet(4, firstDown(4, "dead"))
		case "missing_sessions_count_as_down":
			tt.recs, tt.snap = fleet(5, firstDown(3, "gone"))
		case "shells_left_behind_count_as_down":
			tt.recs, tt.snap = fleet(5, firstDown(3, "stray"))
		case "foreign_sessions_are_not_this_loopds_agents":
			tt.recs, tt.snap = fleet(5, firstDown(3, "foreign"))
		case "closed_held_and_idle_items_are_not_expected_live":
			tt.recs, tt.snap = fleet(5, firstDown(5, "dead"))
			tt.recs = with(tt.recs, 0, func(r *desired.Record) { r.Spec.Closed = true })
			tt.recs = with(tt.recs, 1, func(r *desired.Record) { r.Spec.Held = true })
			tt.recs = with(tt.recs, 2, func(r *desired.Record) { r.Status.Phase = desired.PhaseIdle })
		case "a_spawn_not_started_is_not_expected_live":
			tt.recs, tt.snap = fleet(5, firstDown(4, "gone"))
			tt.recs = with(tt.recs, 0, func(r *desired.Record) { r.Status.Phase, r.Status.PaneID = desired.PhaseSpawning, "" })
		}
		tt.snap.ServerGone = tt.gone
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ptrs := make([]*desired.Record, len(tt.recs))
			for i := range tt.recs {
				ptrs[i] = &tt.recs[i]
			}
			require.Equal(t, tt.want, lossOf(ptrs, obs(tt.snap), testPolicy()))
		})
	}
}

func TestNotACrash(t *testing.T) {
	p := testPolicy()
	st := func(last actions.Reason, ran time.Duration) desired.Status {
		s := running()
		s.LastExitReason, s.SpawnedAt = string(last), t0.Add(-ran)
		return s
	}
	tests := []struct {
		name string
		loss actions.Reason
		st   desired.Status
		want bool
	}{
		{"no_loss_is_for_the_restart_decision", "", st("", time.Hour), false},
		{"a_server_loss_never_counts", actions.ReasonServerLost, st("", time.Second), true},
		{"a_server_loss_right_after_another_never_counts", actions.ReasonServerLost, st(actions.ReasonServerLost, time.Second), true},
		{"an_outage_after_a_crash_does_not_count", actions.ReasonOutage, st(actions.ReasonCrash, time.Second), true},
		{"an_outage_after_a_long_run_since_the_last_outage_does_not_count", actions.ReasonOutage, st(actions.ReasonOutage, p.ChurnWindow), true},
		{"a_second_outage_in_a_row_counts", actions.ReasonOutage, st(actions.ReasonOutage, time.Minute), false},
		{"an_outage_soon_after_a_server_loss_counts", actions.ReasonOutage, st(actions.ReasonServerLost, time.Minute), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, notACrash(tt.loss, tt.st, time.Time{}, t0, p))
		})
	}
}

// TestPlanLoss: what Plan does with the agents a loss took, and with those
// it did not.
func TestPlanLoss(t *testing.T) {
	counted := func(st *desired.Status) { st.Failures, st.FastFailures, st.ChurnFailures = 2, 1, 1 }
	lostExit := func(reason actions.Reason, status int) actions.RecordExit {
		return actions.RecordExit{Key: key, Session: sess, ExitStatus: status, Phase: desired.PhaseBackingOff,
			Failures: 2, FastFailures: 1, ChurnFailures: 1, NextAttempt: t0, Reason: reason}
	}
	serverGone := func() observed.Observation { o := obs(gone(), transcript); o.Snapshot.ServerGone = true; return o }

	t.Run("server_loss_resumes_the_running_agent_without_a_failure", func(t *testing.T) {
		st := running()
		counted(&st)
		require.Equal(t, []actions.Action{lostExit(actions.ReasonServerLost, -1), resume(desired.Delivery{}, actions.ReasonServerLost)},
			Plan([]desired.Record{rec(st)}, serverGone(), testPolicy(), t0))
	})
	t.Run("server_loss_resumes_a_resume_being_probed_not_a_fresh_fallback", func(t *testing.T) {
		st := spawning(desired.SpawnResume)
		counted(&st)
		require.Equal(t, []actions.Action{lostExit(actions.ReasonServerLost, -1), resume(ev1, actions.ReasonServerLost)},
			Plan([]desired.Record{rec(st, ev1)}, serverGone(), testPolicy(), t0))
	})
	t.Run("server_loss_keeps_a_landed_paste_delivered", func(t *testing.T) {
		st := sending(t0.Add(-time.Second), 1)
		counted(&st)
		e := lostExit(actions.ReasonServerLost, -1)
		e.Delivered = "d-1"
		require.Equal(t, []actions.Action{e, resume(ev2, actions.ReasonServerLost)},
			Plan([]desired.Record{rec(st, ev1, ev2)}, landed(serverGone()), testPolicy(), t0))
	})
	t.Run("without_the_server_gone_a_missing_session_is_a_crash", func(t *testing.T) {
		st := running()
		counted(&st)
		got := Plan([]desired.Record{rec(st)}, obs(gone(), transcript), testPolicy(), t0)
		require.Equal(t, actions.ReasonSessionMissing, got[0].(actions.RecordExit).Reason)
		require.Equal(t, 3, got[0].(actions.RecordExit).Failures)
	})
	t.Run("a_deferred_loss_respawns_through_backoff_with_its_reason", func(t *testing.T) {
		st := running()
		st.Phase, st.NextAttempt, st.LastExitReason = desired.PhaseBackingOff, t0, string(actions.ReasonServerLost)
		require.Equal(t, []actions.Action{resume(desired.Delivery{}, actions.ReasonServerLost)},
			Plan([]desired.Record{rec(st)}, obs(gone(), transcript), testPolicy(), t0))
	})

	// An outage: 3 of 5 agents dead in one pass. The three are resumed
	// with their counts as they were; the two alive are left alone.
	t.Run("outage_resumes_the_dead_and_leaves_the_living", func(t *testing.T) {
		recs, snap := fleet(5, firstDown(3, "dead"))
		o := obs(snap)
		o.Transcripts = map[desired.Key]harness.Transcript{}
		for i := range recs {
			counted(&recs[i].Status)
			o.Transcripts[recs[i].Key] = transcript
		}
		plan := Plan(recs, o, testPolicy(), t0)
		require.Len(t, plan, 6, "%v", plan)
		for i := range 3 {
			e, ok := plan[2*i].(actions.RecordExit)
			require.True(t, ok, "%v", plan[2*i])
			require.Equal(t, recs[i].Key, e.Key)
			require.Equal(t, actions.ReasonOutage, e.Reason)
			require.Equal(t, [3]int{2, 1, 1}, [3]int{e.Failures, e.FastFailures, e.ChurnFailures}, "no failure counted")
			s, ok := plan[2*i+1].(actions.ResumeSpawn)
			require.True(t, ok, "%v", plan[2*i+1])
			require.Equal(t, actions.ReasonOutage, s.Reason)
		}
	})
	// The same outage again, a minute after the last: now it counts, so a
	// fleet that dies together on every resume backs off and ends.
	t.Run("a_second_outage_in_a_row_is_counted", func(t *testing.T) {
		recs, snap := fleet(5, firstDown(3, "dead"))
		for i := range recs {
			counted(&recs[i].Status)
			recs[i].Status.LastExitReason, recs[i].Status.SpawnedAt = string(actions.ReasonOutage), t0.Add(-time.Minute)
		}
		plan := Plan(recs, obs(snap), testPolicy(), t0)
		e := plan[0].(actions.RecordExit)
		require.Equal(t, actions.ReasonCrash, e.Reason)
		require.Equal(t, 3, e.Failures)
	})
}
