package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/runner"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

const runLog = "/state/runs/loop-octo-org-api-42/r1.log"

// processPolicy is testPolicy with a route that runs octo-org/api's
// agents as processes, with dispatchTimeout.
func processPolicy(dispatchTimeout int) Policy {
	p := testPolicy()
	p.RunPoll = 5 * time.Second
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/api": {Harness: "claude-code", Workdir: cwd,
		Runner: schema.RunnerProcess, DispatchTimeoutSeconds: dispatchTimeout}}}
	caps := p.Harnesses["claude-code"]
	caps.Headless = true
	p.Harnesses = map[string]Capabilities{"claude-code": caps}
	return p
}

// withRun gives st the run r1 (desired.Status.RunID).
func withRun(st desired.Status) desired.Status {
	st.RunID, st.PaneID = "r1", ""
	return st
}

// runSnap is a snapshot that holds the run r1: running, or ended with
// status (-1: unknown, its group killed), naming sessionID in its output.
func runSnap(running bool, status int, sessionID string) observed.Snapshot {
	f := runner.Fact{ID: "r1", Started: true, Running: running, PID: 4242, Group: 4241, StartedAt: spawnAt, ExitStatus: -1, Log: runLog}
	if !running {
		f.EndedAt = t0.Add(-time.Second)
		if status >= 0 {
			f.StatusKnown, f.ExitStatus = true, status
		}
	}
	return observed.Snapshot{Panes: map[string]observed.Pane{}, Runs: map[string]observed.Run{sess: {Fact: f, SessionID: sessionID}}}
}

// saying gives the ended run r1 of snap what it said last (observed.Exit).
func saying(snap observed.Snapshot, x observed.Exit) observed.Snapshot {
	r := snap.Runs[sess]
	r.Exit = x
	snap.Runs[sess] = r
	return snap
}

// runSpawn is spawnOf for a run: the event whole, runner=process.
func runSpawn(delivery desired.Delivery, reason actions.Reason) actions.Spawn {
	s := spawnOf(delivery, reason)
	s.Runner = schema.RunnerProcess
	return s
}

func TestPlanRun(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	p := processPolicy(600)
	// A run's event that the conversation shows while the run is Running
	// is confirmed there, as any event the conversation holds.
	confirm := actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript}
	frames := func(o observed.Observation) observed.Observation { return seen(o, "d-1", harness.Found{Whole: true}) }
	// unseen reads the frames, and d-1 is not in the conversation.
	unseen := func(o observed.Observation) observed.Observation { return seen(o, "d-1", harness.Found{}) }
	runningRun := func() desired.Status {
		return withRun(with(running(), func(s *desired.Status) { s.SpawnMode, s.SpawnDeliveryID = desired.SpawnResume, "d-1" }))
	}
	mark := func(confirmed bool, delivery string, reason actions.Reason) actions.MarkRunning {
		return actions.MarkRunning{Key: key, Session: sess, SessionID: oldID, Mode: desired.SpawnResume, Confirmed: confirmed,
			DeliveryID: delivery, Respawn: true, PID: 4242, Log: runLog, Reason: reason}
	}
	bigEv := desired.Delivery{ID: "d-big", Prompt: "[loopd] header line\n" + string(make([]byte, schema.DefaultMaxBootPrompt))}

	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"first_event_starts_a_fresh_run", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(gone()), p,
			[]actions.Action{prepareFirst(), actions.FreshSpawn{Spawn: func() actions.Spawn { s := runSpawn(ev1, actions.ReasonNewEvent); s.Respawn = false; return s }()}}},
		{"next_event_resumes_when_a_transcript_exists", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(gone(), transcript), p,
			[]actions.Action{actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"next_event_without_a_transcript_is_fresh", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(gone(), noScript), p,
			[]actions.Action{replaying(actions.FreshSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeFailed: actions.ResumeTranscriptMissing, AttemptedID: oldID})}},
		{"a_large_event_runs_whole", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), bigEv), obs(gone(), transcript), p,
			[]actions.Action{actions.ResumeSpawn{Spawn: runSpawn(bigEv, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"nothing_pending_at_rest_does_nothing", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited })), obs(gone()), p, nil},
		{"nothing_pending_in_backoff_rests", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseBackingOff })), obs(gone()), p,
			[]actions.Action{actions.Rest{Key: key, Session: sess, Reason: actions.ReasonNothingToRun}}},
		{"a_harness_without_headless_form_blocks", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(gone()),
			func() Policy {
				q := processPolicy(60)
				q.Harnesses = testPolicy().Harnesses
				return q
			}(),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonNotHeadless, Detail: "claude-code"}}},
		{"a_tmux_pane_of_the_name_is_not_the_run", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited })), obs(alive()), p, nil},

		// A run in flight.
		{"run_in_its_probe_window_waits", rec(withRun(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.ProbeDeadline = t0.Add(time.Second) })), ev1),
			obs(runSnap(true, 0, ""), transcript), p,
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonProbing}}},
		{"run_past_its_probe_with_its_event_landed_is_running", rec(withRun(spawning(desired.SpawnResume)), ev1), frames(obs(runSnap(true, 0, ""), grown)), p,
			[]actions.Action{mark(true, "d-1", actions.ReasonConfirmed), actions.Wait{Key: key, Until: t0.Add(5 * time.Second), Reason: actions.ReasonRunInFlight}}},
		{"run_past_its_probe_unconfirmed_waits_for_its_transcript", rec(withRun(spawning(desired.SpawnResume)), ev1), obs(runSnap(true, 0, ""), transcript), p,
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"run_in_flight_is_looked_at_every_run_poll", rec(runningRun(), ev1), obs(runSnap(true, 0, ""), grown), p,
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(5 * time.Second), Reason: actions.ReasonRunInFlight}}},
		{"run_near_its_timeout_is_looked_at_then", rec(runningRun(), ev1), obs(runSnap(true, 0, ""), grown), processPolicy(62),
			[]actions.Action{actions.Wait{Key: key, Until: spawnAt.Add(62 * time.Second), Reason: actions.ReasonRunInFlight}}},
		{"run_past_its_dispatch_timeout_is_stopped", rec(runningRun(), ev1), obs(runSnap(true, 0, ""), grown), processPolicy(60),
			[]actions.Action{actions.StopRun{Key: key, Session: sess, Run: "r1", DeliveryID: "d-1", Timeout: time.Minute, Reason: actions.ReasonDispatchTimeout}}},
		{"a_new_event_waits_for_the_run_in_flight", rec(runningRun(), ev1, ev2), obs(runSnap(true, 0, ""), grown), p,
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(5 * time.Second), Reason: actions.ReasonRunInFlight}}},

		// A run that ended is judged by the transcript.
		{"run_ended_with_its_event_in_the_conversation_is_done_whatever_its_exit", rec(runningRun(), ev1, ev2), frames(obs(runSnap(false, 1, oldID), grown)), p,
			[]actions.Action{confirm,
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 1, Phase: desired.PhaseExited, Reason: actions.ReasonRunDone},
				actions.ResumeSpawn{Spawn: runSpawn(ev2, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"run_that_ended_in_its_probe_window_is_spawned_then_done", rec(withRun(spawning(desired.SpawnResume)), ev1), frames(obs(runSnap(false, 0, ""), grown)), p,
			[]actions.Action{mark(true, "d-1", actions.ReasonConfirmed),
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 0, Clean: true, Phase: desired.PhaseExited, Reason: actions.ReasonRunDone}}},
		{"run_killed_at_its_timeout_after_its_event_landed_is_done", rec(runningRun(), ev1), frames(obs(runSnap(false, -1, ""), grown)), p,
			[]actions.Action{confirm, actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseExited, Reason: actions.ReasonRunDone}}},
		{"run_stopped_at_its_timeout_after_its_event_landed_says_so", rec(with(runningRun(), func(s *desired.Status) { s.Reason = string(actions.ReasonDispatchTimeout) }), ev1),
			frames(obs(runSnap(false, -1, ""), grown)), p,
			[]actions.Action{confirm, actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseExited, Reason: actions.ReasonDispatchTimeout}}},
		{"resume_run_its_harness_refused_falls_back_to_fresh_with_the_event", rec(withRun(spawning(desired.SpawnResume)), ev1),
			obs(saying(runSnap(false, 1, ""), observed.Exit{Refusal: harness.RefusalNotResumable, Words: noConversation}), transcript), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 1, Phase: desired.PhaseExited, Reason: actions.ReasonResumeFailed},
				replaying(actions.FreshSpawn{Spawn: runSpawn(ev1, actions.ReasonResumeFailed), ResumeFailed: actions.ResumeNotResumable, AttemptedID: oldID})}},
		// Issue 21, case 4: a run stopped at its timeout is a crash of the
		// same conversation, never a failed resume: it is resumed again,
		// in the conversation its turn went into when it named one.
		{"resume_run_stopped_at_its_timeout_keeps_its_conversation", rec(with(withRun(spawning(desired.SpawnResume)), func(s *desired.Status) {
			s.Reason = string(actions.ReasonDispatchTimeout)
		}), ev1), unseen(obs(runSnap(false, -1, ""), transcript)), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, DeliveryID: "d-1",
					Reason: actions.ReasonDispatchTimeout},
				actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"resume_run_stopped_at_its_timeout_follows_the_conversation_it_went_into", rec(with(withRun(spawning(desired.SpawnResume)), func(s *desired.Status) {
			s.Reason = string(actions.ReasonDispatchTimeout)
		}), ev1), unseen(obs(runSnap(false, -1, clearedID), transcript)), p,
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: clearedID, Source: SourceHeadless},
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, DeliveryID: "d-1",
					Reason: actions.ReasonDispatchTimeout},
				actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeID: clearedID}}},
		{"run_that_failed_keeps_its_event_and_counts_a_failure", rec(with(runningRun(), func(s *desired.Status) { s.Failures = 1 }), ev1), unseen(obs(runSnap(false, 1, ""), grown)), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 1, Phase: desired.PhaseBackingOff, Failures: 2, ChurnFailures: 1, Implicated: true,
					Delay: 2 * time.Second, NextAttempt: t0.Add(2 * time.Second), DeliveryID: "d-1", Reason: actions.ReasonRunFailed},
				actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},
		{"run_failed_past_the_budget_needs_attention", rec(with(runningRun(), func(s *desired.Status) { s.Failures = 10 }), ev1), unseen(obs(runSnap(false, 1, ""), grown)), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 1, Phase: desired.PhaseNeedsAttention, Failures: 11, ChurnFailures: 1, Implicated: true,
					DeliveryID: "d-1", Attention: actions.ReasonBudgetExhausted, Reason: actions.ReasonRunFailed},
				actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonBudgetExhausted}}},
		{"run_failed_under_policy_never_needs_attention_not_a_rerun", rec(runningRun(), ev1), unseen(obs(runSnap(false, 41, ""), grown)),
			func() Policy { q := processPolicy(600); q.Restart = schema.RestartNever; return q }(),
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 41, Phase: desired.PhaseNeedsAttention, Failures: 1, ChurnFailures: 1, Implicated: true,
					DeliveryID: "d-1", Attention: actions.ReasonPolicyNever, Reason: actions.ReasonRunFailed},
				actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonPolicyNever}}},
		{"run_output_naming_another_conversation_is_followed", rec(runningRun(), ev1),
			frames(obs(runSnap(false, 0, "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f"), grown)), p,
			[]actions.Action{confirm,
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f", Source: SourceHeadless},
				actions.RecordExit{Key: key, Session: sess, ExitStatus: 0, Clean: true, Phase: desired.PhaseExited, Reason: actions.ReasonRunDone}}},
		{"run_whose_files_are_gone_ended_unseen", rec(runningRun(), ev1), unseen(obs(gone(), grown)), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1,
					NextAttempt: t0, DeliveryID: "d-1", Reason: actions.ReasonRunFailed},
				actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},

		// A start the daemon did not see through.
		{"run_recorded_without_a_pid_file_waits_a_poll", rec(withRun(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnedAt = t0.Add(-500 * time.Millisecond) })), ev1),
			obs(gone(), transcript), p,
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(500 * time.Millisecond), Reason: actions.ReasonProbing}}},
		{"run_recorded_without_a_pid_file_is_started_again", rec(withRun(spawning(desired.SpawnResume)), ev1), obs(gone(), transcript), p,
			[]actions.Action{actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonSpawnInterrupted), ResumeID: oldID}}},
		{"run_refused_at_start_keeps_its_conversation", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnRefused = "start run r1: chdir: no such file" }), ev1),
			obs(gone(), transcript), p,
			[]actions.Action{
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, Reason: actions.ReasonSpawnRefused},
				actions.ResumeSpawn{Spawn: runSpawn(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},

		// Stops.
		{"close_stops_the_run_in_flight", func() desired.Record { r := rec(runningRun(), ev1); r.Spec.Closed = true; return r }(),
			frames(obs(runSnap(true, 0, ""), grown)), p,
			[]actions.Action{confirm, actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},
		{"hold_stops_the_run_keeping_its_event_pending", func() desired.Record { r := rec(runningRun(), ev1); r.Spec.Held = true; return r }(),
			unseen(obs(runSnap(true, 0, ""), grown)), p,
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonHeld}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0))
		})
	}
}

// TestReleaseOfARun: a release brings a process-runner item back to rest,
// never to a run without an event, and leaves a run in flight running.
func TestReleaseOfARun(t *testing.T) {
	p := processPolicy(60)
	for _, tc := range []struct {
		name  string
		st    desired.Status
		snap  observed.Snapshot
		fresh bool
		phase desired.Phase
	}{
		{"no_run", func() desired.Status { st := running(); st.Phase = desired.PhaseNeedsAttention; return st }(), gone(), false, desired.PhaseIdle},
		{"fresh_no_run", func() desired.Status { st := running(); st.Phase = desired.PhaseNeedsAttention; return st }(), gone(), true, desired.PhaseIdle},
		{"run_in_flight", withRun(running()), runSnap(true, 0, ""), false, desired.PhaseRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rec(tc.st)
			r.Spec.ReleaseGeneration, r.Spec.ReleaseFresh = 1, tc.fresh
			o := obs(tc.snap)
			acts, _, _ := release(&r, &o, &p)
			require.Len(t, acts, 1)
			a := acts[0].(actions.Release)
			require.Equal(t, tc.phase, a.Phase)
			require.Equal(t, tc.fresh, a.RetireID == oldID)
		})
	}
}

// TestLossIgnoresRuns: runs are no tmux agents, so a fleet of them never
// passes for an outage or a lost server.
func TestLossIgnoresRuns(t *testing.T) {
	p := processPolicy(60)
	var records []*desired.Record
	for n := 1; n <= 6; n++ {
		r := rec(running())
		r.Key.Number = n
		records = append(records, &r)
	}
	o := obs(gone())
	o.Snapshot.ServerGone = true
	require.Equal(t, Loss{}, lossOf(records, o, p))
}

// TestNeedsAttentionIsWrittenWithItsReason: the exit that takes an item
// to NeedsAttention writes the give-up's reason with the phase, so that a
// reader between that write and the GiveUp's (loopd get) never sees
// NeedsAttention with the exit's own reason, which stays the last exit's
// (issue 27: restart_policy_never read as run_failed).
func TestNeedsAttentionIsWrittenWithItsReason(t *testing.T) {
	never := func(p Policy) Policy { p.Restart = schema.RestartNever; return p }
	failed := func(n int) func(*desired.Status) { return func(s *desired.Status) { s.Failures = n } }
	run := func(f func(*desired.Status)) desired.Status {
		st := withRun(running())
		st.SpawnMode, st.SpawnDeliveryID = desired.SpawnResume, "d-1"
		f(&st)
		return st
	}
	pane := func(f func(*desired.Status)) desired.Status { st := spawning(desired.SpawnFresh); f(&st); return st }
	unseen := func(o observed.Observation) observed.Observation { return seen(o, "d-1", harness.Found{}) }
	for _, tc := range []struct {
		name      string
		st        desired.Status
		obs       observed.Observation
		p         Policy
		attention actions.Reason
		exit      actions.Reason
	}{
		{"run_under_policy_never", run(failed(0)), unseen(obs(runSnap(false, 41, ""), grown)), never(processPolicy(600)),
			actions.ReasonPolicyNever, actions.ReasonRunFailed},
		{"run_past_the_budget", run(failed(10)), unseen(obs(runSnap(false, 1, ""), grown)), processPolicy(600),
			actions.ReasonBudgetExhausted, actions.ReasonRunFailed},
		{"spawn_under_policy_never", pane(failed(0)), obs(dead(1), transcript), never(testPolicy()),
			actions.ReasonPolicyNever, actions.ReasonSpawnDied},
		{"spawn_past_the_budget", pane(failed(10)), obs(dead(1), transcript), testPolicy(),
			actions.ReasonBudgetExhausted, actions.ReasonSpawnDied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rec(tc.st, ev1)
			plan := Plan([]desired.Record{r}, tc.obs, tc.p, t0)
			require.Len(t, plan, 2, "%v", plan)
			exit, ok := plan[0].(actions.RecordExit)
			require.True(t, ok, "%v", plan[0])
			giveUp, ok := plan[1].(actions.GiveUp)
			require.True(t, ok, "%v", plan[1])
			assert.Equal(t, tc.attention, giveUp.Reason)
			st := exit.Apply(r.Status, t0)
			assert.Equal(t, desired.PhaseNeedsAttention, st.Phase)
			assert.Equal(t, string(tc.attention), st.Reason, "the status's reason after the exit's write alone")
			assert.Equal(t, string(tc.exit), st.LastExitReason)
		})
	}
}
