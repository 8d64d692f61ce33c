package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// clearedID is the conversation Claude Code's /clear started.
const clearedID = "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab"

// TestPlanDecides covers the rows of the decision table that issue 7 moved
// into the planner or added: a refused spawn, the churn rule, release as a
// spec change, and the conversation taken before every decision.
func TestPlanDecides(t *testing.T) {
	none := desired.Delivery{}
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	refused := func(mode desired.SpawnMode, f func(*desired.Status)) desired.Status {
		st := spawning(mode)
		st.PaneID, st.SpawnRefused, st.Reason = "", "new session: tmux: server exited unexpectedly", string(actions.ReasonSpawnRefused)
		if f != nil {
			f(&st)
		}
		return st
	}
	released := func(r desired.Record, fresh bool) desired.Record {
		r.Spec.Generation++
		r.Spec.ReleaseGeneration, r.Spec.ReleaseFresh = r.Spec.Generation, fresh
		return r
	}
	cleared := func(r desired.Record, at time.Time) desired.Record {
		r.Report = &desired.SessionReport{SessionID: clearedID, Source: "clear", At: at}
		return r
	}
	refusedExit := func(phase desired.Phase, failures, fast, churn int) actions.RecordExit {
		return actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: phase, Failures: failures, FastFailures: fast, ChurnFailures: churn, Reason: actions.ReasonSpawnRefused}
	}
	release := func(fresh bool, retire string, phase desired.Phase) actions.Release {
		return actions.Release{Key: key, Session: sess, Generation: 4, Fresh: fresh, RetireID: retire, Phase: phase}
	}

	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		want []actions.Action
	}{
		// A spawn that tmux refused: the executor recorded the fact, the
		// planner decides what follows.
		// tmux's refusal is no word of the harness's: the resume is a
		// crash of the same conversation, counted and tried again, and the
		// conversation is kept.
		{"resume_spawn_refused_keeps_the_conversation", rec(refused(desired.SpawnResume, nil), ev1), obs(gone(), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := refusedExit(desired.PhaseBackingOff, 1, 0, 0)
				e.NextAttempt = t0
				return e
			}(), resume(ev1, actions.ReasonNewEvent)}},
		// A config dir that could not be provisioned says nothing of the
		// conversation: the resume is tried again, not given up for fresh.
		{"resume_refused_for_its_provisioning_keeps_the_conversation", rec(refused(desired.SpawnResume, func(s *desired.Status) {
			s.Reason = string(actions.ReasonProvisionFailed)
		}), ev1), obs(gone(), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := refusedExit(desired.PhaseBackingOff, 1, 0, 0)
				e.NextAttempt, e.Reason = t0, actions.ReasonProvisionFailed
				return e
			}(), resume(ev1, actions.ReasonNewEvent)}},
		{"fresh_spawn_refused_is_retried_at_once_after_a_healthy_run", rec(refused(desired.SpawnFresh, nil), ev1), obs(gone(), noScript),
			[]actions.Action{func() actions.RecordExit {
				e := refusedExit(desired.PhaseBackingOff, 1, 0, 0)
				e.NextAttempt = t0
				return e
			}(),
				fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"fresh_spawn_refused_backs_off_through_the_restart_decision", rec(refused(desired.SpawnFresh, func(s *desired.Status) { s.Failures = 1 }), ev1), obs(gone(), noScript),
			[]actions.Action{func() actions.RecordExit {
				e := refusedExit(desired.PhaseBackingOff, 2, 0, 0)
				e.NextAttempt = t0.Add(2 * time.Second)
				e.Delay = 2 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},
		// The executor's own retry delay never applied the budget.
		{"spawn_refused_past_the_budget_needs_attention", rec(refused(desired.SpawnFresh, func(s *desired.Status) { s.Failures = 10 }), ev1), obs(gone(), noScript),
			[]actions.Action{func() actions.RecordExit {
				e := refusedExit(desired.PhaseNeedsAttention, 11, 0, 0)
				e.Attention = actions.ReasonBudgetExhausted
				return e
			}(), actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonBudgetExhausted}}},
		{"refused_spawn_with_its_workdir_gone_blocks", rec(refused(desired.SpawnResume, nil), ev1), func() observed.Observation {
			o := obs(gone(), transcript)
			o.MissingWorkdirs[key] = true
			return o
		}(), []actions.Action{func() actions.RecordExit {
			e := refusedExit(desired.PhaseBackingOff, 1, 0, 0)
			e.NextAttempt = t0
			return e
		}(), actions.Block{Key: key, Reason: actions.ReasonWorkspaceMissing, Detail: cwd}}},

		// The churn rule: a conversation that dies about 20 s after each
		// resume is retired on the fifth such run.
		{"fifth_slow_crash_in_a_row_retires_the_id", rec(with(running(), func(s *desired.Status) {
			s.SpawnMode, s.SpawnedAt, s.Failures, s.ChurnFailures = desired.SpawnResume, t0.Add(-20*time.Second), 4, 4
		})), obs(dead(1), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 5, 0, actions.ReasonCrash)
				e.ChurnFailures, e.Retire, e.NextAttempt = 0, RetiredChurn, t0.Add(16*time.Second)
				e.Delay = 16 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(16 * time.Second), Reason: actions.ReasonBackoff}}},
		// A /clear started a new conversation: the old one's churn and
		// fast failures are not charged to it; the budget's count stays.
		{"clear_after_four_slow_crashes_does_not_retire_the_new_conversation", cleared(rec(with(running(), func(s *desired.Status) {
			s.SpawnMode, s.SpawnedAt, s.Failures, s.ChurnFailures = desired.SpawnResume, t0.Add(-20*time.Second), 4, 4
		})), t0.Add(-time.Second)), reported(obs(dead(137), transcript), clearedID, appeared),
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: "clear"},
				func() actions.RecordExit {
					e := exit(137, desired.PhaseBackingOff, 5, 0, actions.ReasonCrash)
					e.NextAttempt = t0.Add(16 * time.Second)
					e.Delay = 16 * time.Second
					return e
				}(), actions.Wait{Key: key, Until: t0.Add(16 * time.Second), Reason: actions.ReasonBackoff}}},
		{"fourth_slow_crash_still_resumes", rec(with(running(), func(s *desired.Status) {
			s.SpawnMode, s.SpawnedAt, s.Failures, s.ChurnFailures = desired.SpawnResume, t0.Add(-20*time.Second), 1, 3
		})), obs(dead(1), transcript),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 2, 0, actions.ReasonCrash)
				e.ChurnFailures, e.NextAttempt = 4, t0.Add(2*time.Second)
				e.Delay = 2 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},

		// Which conversation the item is in is taken before every decision:
		// /clear reported B, the agent was killed a second later, before a
		// pass followed the report (tried with the real CLI).
		{"clear_then_killed_resumes_the_new_conversation", cleared(rec(running()), t0.Add(-time.Second)), reported(obs(dead(137), transcript), clearedID, appeared),
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: "clear"},
				func() actions.RecordExit {
					e := exit(137, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
					e.NextAttempt = t0
					return e
				}(),
				func() actions.ResumeSpawn {
					r := resume(none, actions.ReasonPaneDead)
					r.ResumeID = clearedID
					return r
				}()}},
		{"clear_then_exit_recorded_resumes_the_new_conversation_on_the_next_event", cleared(rec(with(running(), func(s *desired.Status) {
			s.Phase, s.LastExitAt = desired.PhaseExited, t0.Add(-time.Second)
		}), ev1), t0.Add(-2*time.Second)), reported(obs(dead(0), transcript), clearedID, appeared),
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: "clear"},
				func() actions.ResumeSpawn {
					r := resume(ev1, actions.ReasonNewEvent)
					r.ResumeID = clearedID
					return r
				}()}},

		// loopd release is a spec change the planner carries out.
		{"release_on_a_running_item_keeps_it_running_without_adopting_it", released(rec(running()), false), obs(alive()),
			[]actions.Action{release(false, "", desired.PhaseRunning)}},
		{"release_of_needs_attention_resumes_with_the_nudge", released(rec(with(running(), func(s *desired.Status) {
			s.Phase, s.Failures, s.AttentionGeneration = desired.PhaseNeedsAttention, 11, 3
		})), false), obs(dead(1), transcript),
			[]actions.Action{release(false, "", desired.PhaseBackingOff), resume(none, actions.ReasonReleased)}},
		{"release_fresh_replaces_a_live_agent_with_a_new_conversation", released(rec(running()), true), obs(alive(), transcript),
			[]actions.Action{release(true, oldID, desired.PhaseBackingOff), func() actions.FreshSpawn {
				f := fresh(none, actions.ReasonReleased, "")
				f.Prompt = freshNudge(key, desired.KindIssue, actions.ReasonReleased)
				return replaying(f)
			}()}},
		{"release_fresh_after_clear_retires_the_conversation_the_agent_is_in", cleared(released(rec(running(), ev1), true), t0.Add(-time.Second)), reported(obs(dead(1), transcript), clearedID, appeared),
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: "clear"},
				release(true, clearedID, desired.PhaseBackingOff), fresh(ev1, actions.ReasonReleased, "")}},
		{"release_of_a_closed_item_waits_for_the_reopen", func() desired.Record {
			r := released(rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseStopped })), false)
			r.Spec.Closed = true
			return r
		}(), obs(gone()), nil},
		{"release_carried_out_is_not_repeated", func() desired.Record {
			r := released(rec(running()), true)
			r.Status.ReleasedGeneration = r.Spec.ReleaseGeneration
			return r
		}(), obs(alive()), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan([]desired.Record{tt.rec}, tt.obs, testPolicy(), t0)
			require.Equal(t, tt.want, got)
		})
	}
}

// The self-heal prompt of an item that opted out of resuming says what
// happened: one exit, not "kept exiting".
func TestOptedOutFreshPromptAfterOneCrash(t *testing.T) {
	p := testPolicy()
	p.Resume = false
	got := Plan([]desired.Record{rec(running())}, obs(dead(1), transcript), p, t0)
	require.Len(t, got, 2)
	f, ok := got[1].(actions.FreshSpawn)
	require.True(t, ok, "%v", got)
	assert.Empty(t, f.ResumeFailed, "opting out is not a failed resume")
	assert.NotContains(t, f.Prompt, "kept exiting")
	assert.NotContains(t, f.Prompt, "could not be resumed")
	assert.True(t, strings.HasPrefix(f.Prompt, "[loopd] restart on "+key.String()+": your agent process exited"), f.Prompt)
	assert.Equal(t, schema.DefaultMaxBootPrompt-len(f.Prompt), f.Replay, "it carries the replay of the item's events")
}

// NextFailures is the count the next decision starts from.
func TestNextFailures(t *testing.T) {
	p := testPolicy()
	r := rec(with3(running(), 3, t0.Add(-time.Minute)))
	var alive time.Time
	assert.Equal(t, 3, NextFailures(r, p, t0, alive))
	assert.Equal(t, 0, NextFailures(r, p, t0.Add(10*time.Minute), alive), "a healthy run resets it")
	assert.Equal(t, 3, NextFailures(r, p, t0.Add(10*time.Minute), t0), "a run that died a minute in, seen after an outage, is not healthy")
	r.Spec.ReleaseGeneration = r.Spec.Generation
	assert.Equal(t, 0, NextFailures(r, p, t0, alive), "a pending release clears it")
}

func with3(st desired.Status, failures int, spawned time.Time) desired.Status {
	st.Failures, st.SpawnedAt = failures, spawned
	return st
}
