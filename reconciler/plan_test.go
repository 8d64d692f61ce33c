package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

func isUUID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

var (
	t0    = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	key   = desired.Key{Owner: "octo-org", Repo: "api", Number: 42}
	sess  = desired.SessionName(key)
	oldID = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	cwd   = "/srv/agents/octo-org/api/42"
	// ev1 and ev2 are pending events as the store gives them to a pass:
	// compact, without their prompts (ev1Text is ev1's).
	ev1Text = "[loopd] issue_comment.created\nhello"
	ev1     = desired.Delivery{ID: "d-1", Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: ev1Text}.Compact()
	ev2     = desired.Delivery{ID: "d-2", Event: "issue_comment", Action: "created", Sender: "octocat", Prompt: "[loopd] issue_comment.created\nsecond"}.Compact()
	// bootID is the boot id of the spawn a test status is in (spawning).
	bootID  = "boot-1"
	spawnAt = t0.Add(-time.Minute)
)

// rec builds a record with an open spec, the given status and pending events.
func rec(st desired.Status, pending ...desired.Delivery) desired.Record {
	return desired.Record{Key: key, Spec: desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: cwd, Generation: 3}, Status: st, Pending: pending}
}

func running() desired.Status {
	return desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: oldID, ConfirmedSessionID: oldID, Session: sess, PaneID: "%1", SpawnMode: desired.SpawnFresh, SpawnedAt: spawnAt},
		RestartHistory: desired.RestartHistory{LastExitAt: t0.Add(-time.Hour)}}
}

func spawning(mode desired.SpawnMode) desired.Status {
	st := running()
	st.Phase, st.SpawnMode, st.SpawnedAt, st.ProbeDeadline = desired.PhaseSpawning, mode, t0.Add(-6*time.Second), t0.Add(-time.Second)
	st.ConfirmedSessionID, st.SpawnDeliveryID, st.BootID = "", "d-1", bootID
	return st
}

// sending is a running status with d-1 pasted at sentAt, attempts times.
func sending(sentAt time.Time, attempts int) desired.Status {
	st := running()
	st.SendingDeliveryID, st.SentAt, st.SendAttempts = "d-1", sentAt, attempts
	return st
}

// landed marks the item's paste in flight (d-1) as seen whole in the
// transcript.
func landed(o observed.Observation) observed.Observation {
	return seen(o, "d-1", harness.Found{Whole: true})
}

// seen records what the item's conversation shows of delivery id's frame.
func seen(o observed.Observation, id string, f harness.Found) observed.Observation {
	frames := map[string]harness.Found{}
	for k, v := range o.Frames[key] {
		frames[k] = v
	}
	frames[id] = f
	o.Frames = map[desired.Key]map[string]harness.Found{key: frames}
	return o
}

// refusing records what the item's dead agent said last: its refusal to
// resume its conversation, in words (observed.Exit).
func refusing(o observed.Observation, r harness.Refusal, words string) observed.Observation {
	o.Exits = map[desired.Key]observed.Exit{key: {Refusal: r, Words: words}}
	return o
}

// noConversation is Claude Code's refusal of a resume of oldID.
var noConversation = "No conversation found with session ID: " + oldID

func alive() observed.Snapshot {
	return observed.Snapshot{Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", PID: 10, StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}}}
}

func dead(status int) observed.Snapshot {
	return observed.Snapshot{Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", Dead: true, DeadStatus: status, StatusKnown: true, Owner: testOwner}}}
}

// stray is a live pane of the item whose foreground process is command, not
// the harness: a shell the CLI left behind, say.
func stray(command string) observed.Snapshot {
	s := alive()
	p := s.Panes[sess]
	p.CurrentCommand = command
	s.Panes[sess] = p
	return s
}

// foreign is a live session of the item's name marked by another owner
// ("" for no mark, as a session made by hand).
func foreign(owner string) observed.Snapshot {
	s := alive()
	p := s.Panes[sess]
	p.Owner = owner
	s.Panes[sess] = p
	return s
}

func gone() observed.Snapshot { return observed.Snapshot{Panes: map[string]tmux.Pane{}} }

func obs(s observed.Snapshot, tr ...harness.Transcript) observed.Observation {
	o := observed.Observation{Snapshot: s, Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{}}
	if len(tr) > 0 {
		o.Transcripts[key] = tr[0]
	}
	return o
}

// reported adds to o the transcript tr of conversation id, which the
// item's harness reported, as the observer reads it where the item's own
// harness keeps it.
func reported(o observed.Observation, id string, tr harness.Transcript) observed.Observation {
	o.Reported = map[desired.Key]map[string]harness.Transcript{key: {id: tr}}
	return o
}

var (
	// appeared is the transcript of a conversation that appeared a second
	// ago, since every spawn of these tests.
	appeared   = harness.Transcript{Known: true, Exists: true, Size: 120, ModTime: t0.Add(-time.Second)}
	transcript = harness.Transcript{Known: true, Exists: true, Size: 100}
	grown      = harness.Transcript{Known: true, Exists: true, Size: 250}
	noScript   = harness.Transcript{Known: true, Exists: false}
)

// prepareFirst is the workspace made before an item's first spawn, its
// workdir not observed: a plain directory (no route in the policy), whose
// transient failure would be retried at once (the first failure has no
// backoff).
func prepareFirst() actions.PrepareWorkspace {
	return actions.PrepareWorkspace{Key: key, Session: sess, Dir: cwd, Reason: actions.ReasonFirstSpawn, Failures: 1, Retry: true}
}

func spawnOf(delivery desired.Delivery, reason actions.Reason) actions.Spawn {
	s := actions.Spawn{Key: key, Session: sess, Harness: "claude-code", Cwd: cwd, Probe: 5 * time.Second, Respawn: true, Reason: reason, Prompt: desired.NudgePrompt(key, nudgeCause(reason))}
	if delivery.ID != "" {
		s.DeliveryID, s.Prompt = delivery.ID, "" // the executor reads it
	}
	return s
}

func resume(delivery desired.Delivery, reason actions.Reason) actions.ResumeSpawn {
	return actions.ResumeSpawn{Spawn: spawnOf(delivery, reason), ResumeID: oldID}
}

// fresh is the fresh respawn that replaces the conversation oldID, with
// the replay of the item's history in the room its prompt leaves.
func fresh(delivery desired.Delivery, reason, failed actions.Reason) actions.FreshSpawn {
	f := actions.FreshSpawn{Spawn: spawnOf(delivery, reason), ResumeFailed: failed}
	if failed != "" {
		f.AttemptedID = oldID
	}
	if delivery.ID == "" {
		f.Prompt = freshNudge(key, desired.KindIssue, failed)
	}
	return replaying(f)
}

// replaying gives f the replay bound its boot prompt leaves in argv: the
// prompt loopd wrote, or the delivery it boots with (its Size).
func replaying(f actions.FreshSpawn) actions.FreshSpawn {
	size := len(f.Prompt)
	for _, d := range []desired.Delivery{ev1, ev2} {
		if d.ID == f.DeliveryID {
			size = d.Size
		}
	}
	f.Replay = schema.DefaultMaxBootPrompt - size
	return f
}

// exit is the RecordExit of a run shorter than the churn window (every run
// in these tests is), seen in the item's pane %1: a failure the harness
// exited with itself counts one churn failure (Implicated); a clean exit,
// a failed resume and a death by signal (status 128+N) leave the count at
// zero.
func exit(status int, phase desired.Phase, failures, fast int, reason actions.Reason) actions.RecordExit {
	e := actions.RecordExit{Key: key, Session: sess, ExitStatus: status, Clean: status == 0, Phase: phase, Failures: failures, FastFailures: fast, PaneID: "%1", Reason: reason}
	if reason != actions.ReasonCleanExit && reason != actions.ReasonResumeFailed && ownExit(e) {
		e.ChurnFailures, e.Implicated = 1, true
	}
	return e
}

func TestPlan(t *testing.T) {
	none := desired.Delivery{}
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	policy := func(f func(*Policy)) Policy { p := testPolicy(); f(&p); return p }
	longEv := desired.Delivery{ID: "d-long", Prompt: "[loopd] header line\n" + strings.Repeat("x", schema.DefaultMaxBootPrompt)}.Compact()

	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		// Spawning a new item and delivering to a live one.
		{"first_event_fresh_spawn_creates_workdir", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(gone()), testPolicy(),
			[]actions.Action{prepareFirst(), actions.FreshSpawn{Spawn: func() actions.Spawn { s := spawnOf(ev1, actions.ReasonNewEvent); s.Respawn = false; return s }()}}},
		{"idle_without_event_does_nothing", rec(desired.Status{}), obs(gone()), testPolicy(), nil},
		{"first_event_for_a_missing_harness_is_blocked_before_anything", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(gone()),
			policy(func(p *Policy) {
				c := p.Harnesses["claude-code"]
				c.Missing = `harness claude-code: command "/x/claude": not found`
				p.Harnesses = map[string]Capabilities{"claude-code": c}
			}),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonHarnessMissing, Detail: `harness claude-code: command "/x/claude": not found`}}},
		{"crash_with_the_harness_gone_records_the_exit_and_spawns_nothing", rec(running(), ev1), obs(dead(1), transcript),
			policy(func(p *Policy) {
				c := p.Harnesses["claude-code"]
				c.Missing = "gone"
				p.Harnesses = map[string]Capabilities{"claude-code": c}
			}),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), actions.Block{Key: key, Reason: actions.ReasonHarnessMissing, Detail: "gone"}}},

		// A harness taken out of the config while an item's agent runs
		// under it: nothing is done to the agent, and nothing counted.
		{"live_agent_whose_harness_left_the_config_is_blocked_untouched", rec(running(), ev1), obs(alive(), transcript),
			policy(func(p *Policy) { p.Harnesses = map[string]Capabilities{"codex": p.Harnesses["claude-code"]} }),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonHarnessUnknown, Detail: "claude-code"}}},
		{"dead_agent_whose_harness_left_the_config_counts_no_crash", rec(running(), ev1), obs(dead(1), transcript),
			policy(func(p *Policy) { p.Harnesses = map[string]Capabilities{"codex": p.Harnesses["claude-code"]} }),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonHarnessUnknown, Detail: "claude-code"}}},
		{"agent_whose_harness_is_back_is_taken_over_again",
			rec(with(running(), func(s *desired.Status) { s.Reason = string(actions.ReasonHarnessUnknown) }), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, PID: 10, Reason: actions.ReasonAdopted},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},

		{"running_alive_pastes_the_oldest_pending_event", rec(running(), ev1, ev2), obs(alive()), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"paste_waits_for_the_harness_start_report", rec(with(running(), func(s *desired.Status) { s.SpawnedAt = t0.Add(-2 * time.Second) }), ev1), obs(alive()),
			policy(func(p *Policy) {
				p.Harnesses = map[string]Capabilities{"claude-code": {SupportsResume: true, ValidSessionID: isUUID, ReportsSession: true, ProcessNames: []string{"claude"}}}
			}),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingStart}}},
		{"reported_harness_gets_the_paste", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) { s.SpawnedAt = t0.Add(-2 * time.Second) }), ev1)
			r.Report = &desired.SessionReport{SessionID: oldID, Source: "startup", At: t0.Add(-time.Second)}
			return r
		}(), obs(alive()),
			policy(func(p *Policy) {
				p.Harnesses = map[string]Capabilities{"claude-code": {SupportsResume: true, ValidSessionID: isUUID, ReportsSession: true, ProcessNames: []string{"claude"}}}
			}),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"paste_seen_in_transcript_is_confirmed", rec(sending(t0.Add(-time.Second), 1), ev1, ev2), landed(obs(alive(), transcript)), testPolicy(),
			[]actions.Action{actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaPaste}}},
		{"paste_not_yet_in_transcript_waits_a_poll", rec(sending(t0.Add(-500*time.Millisecond), 1), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(500 * time.Millisecond), Reason: actions.ReasonAwaitingDelivery}}},
		{"paste_still_unseen_is_resubmitted_if_left_in_the_box", rec(sending(t0.Add(-2*time.Second), 1), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1", Retry: true}}},
		{"paste_lost_is_sent_again", rec(sending(t0.Add(-11*time.Second), 1), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1", Retry: true, Repaste: true}}},
		{"close_after_a_landed_paste_keeps_it_delivered", func() desired.Record {
			r := rec(sending(t0.Add(-time.Second), 1), ev1)
			r.Spec.Closed = true
			return r
		}(), landed(obs(alive(), transcript)), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed, Delivered: "d-1"}}},
		{"hold_before_the_paste_landed_keeps_it_pending", func() desired.Record {
			r := rec(sending(t0.Add(-time.Second), 1), ev1)
			r.Spec.Held = true
			return r
		}(), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonHeld}}},
		{"paste_never_confirmed_needs_attention", rec(sending(t0.Add(-11*time.Second), 3), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonUnconfirmedSend}}},
		{"paste_without_a_readable_transcript_is_confirmed_unverified", rec(sending(t0.Add(-time.Second), 1), ev1), obs(alive()), testPolicy(),
			[]actions.Action{actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Via: actions.ViaPaste}}},
		{"crash_after_paste_landed_does_not_resend", rec(sending(t0.Add(-time.Second), 1), ev1), landed(obs(dead(1), transcript)), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt, e.Delivered = t0, "d-1"
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		{"a_sandboxed_agent_killed_inside_is_its_signal", rec(with(running(), func(s *desired.Status) { s.Sandbox = "bubblewrap" })), obs(dead(137), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(0, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.Clean, e.Signal, e.NextAttempt = false, 9, t0
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		{"an_unsandboxed_137_is_an_exit_status", rec(running()), obs(dead(137), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(137, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		{"crash_before_paste_landed_boots_with_it", rec(sending(t0.Add(-time.Second), 1), ev1), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		// A delivered event is not in the record's pending list at all (the
		// store's delivery row is the one truth: storetest case put_status_marks_delivered).
		{"already_delivered_is_skipped", rec(running()), obs(alive()), testPolicy(), nil},
		// A live agent whose conversation the record does not know (its
		// store was removed under it) is neither pasted to, which would
		// count unchecked, nor kept: a fresh spawn carries the event.
		{"alive_pane_unknown_to_record_is_replaced", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(alive()), testPolicy(),
			[]actions.Action{prepareFirst(), actions.FreshSpawn{Spawn: func() actions.Spawn {
				s := spawnOf(ev1, actions.ReasonOrphanAgent)
				s.Respawn = false
				return s
			}()}}},
		{"alive_pane_unknown_to_record_is_adopted_where_the_harness_keeps_no_conversation", func() desired.Record {
			r := rec(desired.Status{Phase: desired.PhaseIdle}, ev1)
			r.Spec.Harness = "cursor"
			return r
		}(), obs(alive()), func() Policy {
			p := testPolicy()
			p.Harnesses["cursor"] = Capabilities{ValidSessionID: isUUID, ProcessNames: []string{"claude"}}
			return p
		}(),
			[]actions.Action{
				actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", PID: 10, Reason: actions.ReasonAdopted},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},

		// Nothing is sent twice: an event already in the conversation is
		// confirmed, never pasted or booted with again.
		{"release_after_the_operator_let_the_boot_prompt_through_confirms_it", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) {
			s.Phase, s.Reason = desired.PhaseBackingOff, "released"
		}), ev1), seen(obs(alive(), grown), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, PID: 10, Reason: actions.ReasonAdopted}}},
		{"new_event_clearing_needs_attention_skips_the_landed_boot_prompt", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) {
			s.Phase, s.AttentionGeneration = desired.PhaseNeedsAttention, 2
		}), ev1, ev2), seen(obs(alive(), grown), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, PID: 10, Reason: actions.ReasonAdopted},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-2"}}},
		{"new_event_after_needs_attention_with_dead_pane_does_not_boot_with_a_landed_event", rec(with(running(), func(s *desired.Status) {
			s.Phase, s.AttentionGeneration = desired.PhaseNeedsAttention, 2
		}), ev1, ev2), seen(obs(dead(1), transcript), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				resume(ev2, actions.ReasonNewEvent)}},
		{"resume_fallback_skips_an_event_already_in_the_old_conversation", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnDeliveryID = "" }), ev1, ev2),
			refusing(seen(obs(dead(1), transcript), "d-1", harness.Found{Whole: true}), harness.RefusalNotResumable, noConversation), testPolicy(),
			[]actions.Action{
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				exit(1, desired.PhaseExited, 0, 0, actions.ReasonResumeFailed), fresh(ev2, actions.ReasonResumeFailed, actions.ResumeNotResumable)}},
		// Found by TestPlanModel: the release of an agent that died with its
		// paste landed but not yet confirmed booted the resume with it again.
		{"release_of_a_dead_agent_confirms_its_landed_paste", func() desired.Record {
			r := rec(sending(t0.Add(-time.Second), 1), ev1, ev2)
			r.Spec.ReleaseGeneration = 1
			return r
		}(), seen(obs(gone(), transcript), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.Release{Key: key, Session: sess, Generation: 1, Phase: desired.PhaseBackingOff},
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				resume(ev2, actions.ReasonReleased)}},
		{"restart_that_lost_the_send_record_confirms_instead_of_pasting", rec(running(), ev1), seen(obs(alive(), transcript), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript}}},
		{"restart_that_lost_the_spawn_record_boots_with_the_next_event", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1, ev2),
			seen(obs(dead(0), transcript), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaTranscript},
				resume(ev2, actions.ReasonNewEvent)}},
		{"event_not_in_the_conversation_is_pasted", rec(running(), ev1), seen(obs(alive(), transcript), "d-1", harness.Found{}), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},

		// The whole event, not only its marker.
		{"paste_found_mangled_needs_attention", rec(sending(t0.Add(-time.Second), 1), ev1), seen(obs(alive(), transcript), "d-1", harness.Found{Mangled: 1}), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonDeliveryMangled, Mangled: "d-1", Copies: 1}}},
		{"boot_prompt_found_mangled_needs_attention", rec(spawning(desired.SpawnFresh), ev1), seen(obs(alive(), grown), "d-1", harness.Found{Mangled: 1}), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonDeliveryMangled, Mangled: "d-1", Copies: 1}}},
		{"mangled_event_is_sent_once_more_after_release", rec(with(running(), func(s *desired.Status) { s.MangledDeliveryID, s.MangledCopies = "d-1", 1 }), ev1),
			seen(obs(alive(), transcript), "d-1", harness.Found{Mangled: 1}), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"mangled_again_needs_attention_again", rec(with(sending(t0.Add(-time.Second), 1), func(s *desired.Status) { s.MangledDeliveryID, s.MangledCopies = "d-1", 1 }), ev1),
			seen(obs(alive(), transcript), "d-1", harness.Found{Mangled: 2}), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonDeliveryMangled, Mangled: "d-1", Copies: 2}}},
		{"resent_mangled_event_that_arrives_whole_is_confirmed", rec(with(sending(t0.Add(-time.Second), 1), func(s *desired.Status) { s.MangledDeliveryID, s.MangledCopies = "d-1", 1 }), ev1),
			seen(obs(alive(), transcript), "d-1", harness.Found{Whole: true, Mangled: 1}), testPolicy(),
			[]actions.Action{actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaPaste}}},
		{"close_after_a_mangled_paste_keeps_it_pending", func() desired.Record {
			r := rec(sending(t0.Add(-time.Second), 1), ev1)
			r.Spec.Closed = true
			return r
		}(), seen(obs(alive(), transcript), "d-1", harness.Found{Mangled: 1}), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},
		{"crash_after_a_mangled_paste_is_not_marked_delivered", rec(sending(t0.Add(-time.Second), 1), ev1), seen(obs(dead(1), transcript), "d-1", harness.Found{Mangled: 1}), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonDeliveryMangled, Mangled: "d-1", Copies: 1}}},

		// Decision table: resume or fresh, first match wins.
		{"table_resume_recorded_id", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(dead(0), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},
		{"table_opt_out_is_silent_fresh", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(dead(0), transcript),
			policy(func(p *Policy) { p.Resume = false }), []actions.Action{fresh(ev1, actions.ReasonNewEvent, "")}},
		{"table_no_recorded_id_is_silent_fresh", rec(with(running(), func(s *desired.Status) { s.Phase, s.HarnessSessionID = desired.PhaseExited, "" }), ev1), obs(dead(0)), testPolicy(),
			[]actions.Action{prepareFirst(), actions.FreshSpawn{Spawn: func() actions.Spawn { s := spawnOf(ev1, actions.ReasonNewEvent); s.Respawn = false; return s }()}}},
		{"table_invalid_id_never_reaches_argv", rec(with(running(), func(s *desired.Status) { s.Phase, s.HarnessSessionID = desired.PhaseExited, "--verbose" }), ev1), obs(dead(0)), testPolicy(),
			[]actions.Action{replaying(actions.FreshSpawn{Spawn: spawnOf(ev1, actions.ReasonNewEvent), ResumeFailed: actions.ResumeInvalidID, AttemptedID: "--verbose"})}},
		{"table_non_uuid_id_for_claude_is_invalid", rec(with(running(), func(s *desired.Status) { s.Phase, s.HarnessSessionID = desired.PhaseExited, "my-session" }), ev1), obs(dead(0)), testPolicy(),
			[]actions.Action{replaying(actions.FreshSpawn{Spawn: spawnOf(ev1, actions.ReasonNewEvent), ResumeFailed: actions.ResumeInvalidID, AttemptedID: "my-session"})}},
		{"table_unsupported_harness_falls_back_to_fresh", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1)
			r.Spec.Harness = "cursor"
			return r
		}(), obs(dead(0)), testPolicy(),
			[]actions.Action{replaying(actions.FreshSpawn{Spawn: func() actions.Spawn { s := spawnOf(ev1, actions.ReasonNewEvent); s.Harness = "cursor"; return s }(),
				ResumeFailed: actions.ResumeUnsupported, AttemptedID: oldID})}},
		{"table_retired_id_is_never_resumed", rec(with(running(), func(s *desired.Status) { s.Phase, s.RetiredSessionIDs = desired.PhaseExited, []string{oldID} }), ev1), obs(dead(0), transcript), testPolicy(),
			[]actions.Action{fresh(ev1, actions.ReasonNewEvent, actions.ResumeCrashLoop)}},
		{"table_missing_transcript_goes_fresh", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(dead(0), noScript), testPolicy(),
			[]actions.Action{fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},

		// The probe is a state transition.
		{"probe_window_waits_until_deadline", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.ProbeDeadline = t0.Add(3 * time.Second) }), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(3 * time.Second), Reason: actions.ReasonProbing}}},
		{"resume_alive_with_its_boot_prompt_in_the_transcript_is_running", rec(spawning(desired.SpawnResume), ev1, ev2),
			seen(obs(alive(), grown), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{
				actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnResume, Confirmed: true, DeliveryID: "d-1", Respawn: true, PID: 10, Reason: actions.ReasonConfirmed},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-2"}}},
		// Issue 21, case 1: the SessionStart report says the CLI runs, and a
		// transcript that grew says it wrote something; neither says the
		// boot prompt is in the conversation.
		{"session_start_report_does_not_deliver_the_boot_prompt", func() desired.Record {
			r := rec(spawning(desired.SpawnResume), ev1)
			r.Report = &desired.SessionReport{SessionID: oldID, Source: "resume", At: t0.Add(-5 * time.Second)}
			return r
		}(), seen(obs(alive(), grown), "d-1", harness.Found{}), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"resume_with_a_nudge_runs_once_its_boot_line_is_seen", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnDeliveryID = "" })),
			seen(obs(alive(), grown), bootID, harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnResume, Confirmed: true, Respawn: true, PID: 10, Reason: actions.ReasonConfirmed}}},
		{"resume_with_a_nudge_not_yet_seen_waits", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnDeliveryID = "" })),
			seen(obs(alive(), grown), bootID, harness.Found{}), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"harness_without_a_transcript_runs_on_its_probe_unverified", func() desired.Record {
			r := rec(spawning(desired.SpawnFresh), ev1)
			r.Spec.Harness = "cursor"
			return r
		}(), obs(alive()), policy(func(p *Policy) {
			p.Harnesses["cursor"] = Capabilities{ValidSessionID: isUUID, ProcessNames: []string{"claude"}}
		}),
			[]actions.Action{actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, Confirmed: true, DeliveryID: "d-1", Respawn: true, PID: 10, Reason: actions.ReasonConfirmed}}},
		{"report_from_before_the_spawn_does_not_confirm", func() desired.Record {
			r := rec(spawning(desired.SpawnResume), ev1)
			r.Report = &desired.SessionReport{SessionID: oldID, Source: "startup", At: t0.Add(-time.Hour)}
			return r
		}(), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"running_harness_reporting_a_new_id_is_followed", func() desired.Record {
			r := rec(running(), ev1)
			r.Report = &desired.SessionReport{SessionID: "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", Source: "clear", At: t0.Add(-time.Second)}
			return r
		}(), reported(obs(alive()), "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", appeared), testPolicy(),
			[]actions.Action{
				actions.FollowSession{Key: key, Session: sess, From: oldID, To: "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", Source: "clear"},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"running_harness_reporting_a_new_id_without_its_transcript_is_not_followed_yet", func() desired.Record {
			r := rec(running(), ev1)
			r.Report = &desired.SessionReport{SessionID: "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", Source: "clear", At: t0.Add(-time.Second)}
			return r
		}(), reported(obs(alive()), "9a9a9a9a-1b4d-4c8e-9f00-0123456789ab", noScript), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"report_of_an_id_the_harness_refuses_is_not_followed", func() desired.Record {
			// Written by hand or by an old hook: not a canonical UUID, so
			// Claude Code would open its picker on --resume.
			r := rec(running(), ev1)
			r.Report = &desired.SessionReport{SessionID: "9A9A9A9A-1B4D-4C8E-9F00-0123456789AB", Source: "clear", At: t0.Add(-time.Second)}
			return r
		}(), obs(alive()), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"report_of_a_non_uuid_is_not_followed", func() desired.Record {
			r := rec(running(), ev1)
			r.Report = &desired.SessionReport{SessionID: "not-a-uuid", Source: "clear", At: t0.Add(-time.Second)}
			return r
		}(), obs(alive()), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"resume_alive_but_unconfirmed_waits", rec(spawning(desired.SpawnResume), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"resume_unconfirmed_past_timeout_needs_attention", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.SpawnedAt = t0.Add(-3 * time.Minute) }), ev1), obs(alive(), transcript), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonUnconfirmed}}},
		{"fresh_alive_with_its_prompt_in_the_transcript_is_running", rec(spawning(desired.SpawnFresh), ev1), seen(obs(alive(), grown), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{actions.MarkRunning{Key: key, Session: sess, PaneID: "%1", SessionID: oldID, Mode: desired.SpawnFresh, Confirmed: true, DeliveryID: "d-1", Respawn: true, PID: 10, Reason: actions.ReasonConfirmed}}},
		{"fresh_alive_without_transcript_waits", rec(spawning(desired.SpawnFresh), ev1), obs(alive(), noScript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"fresh_stuck_behind_a_dialog_needs_attention", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.SpawnedAt = t0.Add(-3 * time.Minute) }), ev1), obs(alive(), noScript), testPolicy(),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonSpawnUnconfirmed}}},
		// Go fresh only on the harness's own word (issue 21, cases 2 and 3).
		{"resume_refused_by_its_harness_falls_back_to_fresh_with_same_event", rec(spawning(desired.SpawnResume), ev2, ev1),
			refusing(obs(dead(1), transcript), harness.RefusalNotResumable, noConversation), testPolicy(),
			[]actions.Action{exit(1, desired.PhaseExited, 0, 0, actions.ReasonResumeFailed), fresh(ev1, actions.ReasonResumeFailed, actions.ResumeNotResumable)}},
		{"resume_killed_by_a_signal_in_the_probe_is_resumed_again", rec(spawning(desired.SpawnResume), ev2, ev1),
			obs(observed.Snapshot{Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", Dead: true, DeadSignal: 9, StatusKnown: true, Owner: testOwner}}}, transcript), testPolicy(),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, Signal: 9, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, DeliveryID: "d-1", PaneID: "%1",
				Reason: actions.ReasonCrash}, resume(ev1, actions.ReasonPaneDead)}},
		{"resume_exiting_without_a_refusal_is_resumed_again", rec(spawning(desired.SpawnResume), ev1), refusing(obs(dead(1), transcript), "", "Error: out of memory"), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonCrash)
				e.NextAttempt, e.DeliveryID, e.Words = t0, "d-1", "Error: out of memory"
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		{"resume_in_use_by_a_background_agent_waits_for_a_human", rec(spawning(desired.SpawnResume), ev1),
			refusing(obs(dead(1), transcript), harness.RefusalInUse, "Session "+oldID+" is currently running as a background agent (x)."), testPolicy(),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, ExitStatus: 1, Phase: desired.PhaseNeedsAttention, PaneID: "%1", Reason: actions.ReasonSpawnDied,
				Attention: actions.ReasonConversationInUse},
				actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonConversationInUse}}},
		{"resume_refused_on_a_live_screen_falls_back_to_fresh", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.ProbeDeadline = t0.Add(3 * time.Second) }), ev1),
			func() observed.Observation {
				o := obs(alive(), transcript)
				o.Screens = map[desired.Key]observed.Screen{key: {Refusal: harness.RefusalNotResumable}}
				return o
			}(), testPolicy(),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseExited, PaneID: "%1", Reason: actions.ReasonResumeFailed},
				fresh(ev1, actions.ReasonResumeFailed, actions.ResumeNotResumable)}},
		{"resume_session_missing_in_probe_is_resumed_again", rec(spawning(desired.SpawnResume), ev1), obs(gone(), transcript), testPolicy(),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, DeliveryID: "d-1", Reason: actions.ReasonCrash},
				resume(ev1, actions.ReasonPaneDead)}},
		{"fresh_spawn_died_keeps_delivery_pending_and_retries", rec(spawning(desired.SpawnFresh), ev1), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonSpawnDied)
				e.NextAttempt, e.DeliveryID = t0, "d-1"
				return e
			}(), resume(ev1, actions.ReasonNewEvent)}},
		{"resume_died_after_its_prompt_landed_is_not_sent_again", rec(spawning(desired.SpawnResume), ev1), seen(obs(dead(1), grown), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonCrash)
				e.NextAttempt, e.Delivered = t0, "d-1"
				return e
			}(), actions.ResumeSpawn{Spawn: spawnOf(none, actions.ReasonPaneDead), ResumeID: oldID}}},
		{"fresh_spawn_died_after_its_prompt_landed_resumes_it", rec(spawning(desired.SpawnFresh), ev1, ev2), seen(obs(dead(1), transcript), "d-1", harness.Found{Whole: true}), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonCrash)
				e.NextAttempt, e.Delivered = t0, "d-1"
				return e
			}(), resume(ev2, actions.ReasonPaneDead)}},
		{"fresh_spawn_died_under_policy_never_needs_attention_not_a_respawn", rec(spawning(desired.SpawnFresh), ev1), obs(dead(1), transcript),
			policy(func(p *Policy) { p.Restart = "Never" }),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseNeedsAttention, 1, 1, actions.ReasonSpawnDied)
				e.Attention = actions.ReasonPolicyNever
				e.DeliveryID = "d-1"
				return e
			}(), actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonPolicyNever}}},
		{"fresh_spawn_exited_at_once_again_backs_off_naming_it", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.Failures, s.FastFailures = 1, 1 }), ev1), obs(dead(1), noScript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 2, 2, actions.ReasonHarnessExitedAtOnce)
				e.NextAttempt, e.DeliveryID = t0.Add(2*time.Second), "d-1"
				e.Delay = 2 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},
		// A command that fails at once (/bin/false, a binary missing in the
		// sandbox) needs a person after maxFastFailures tries: its id, never
		// used, is not retired, and the event waits.
		{"harness_exited_at_once_the_third_time_needs_attention_retiring_nothing",
			rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.Failures, s.FastFailures = 2, 2 }), ev1), obs(dead(1), noScript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseNeedsAttention, 3, 3, actions.ReasonHarnessExitedAtOnce)
				e.DeliveryID, e.Attention = "d-1", actions.ReasonHarnessExitedAtOnce
				return e
			}(), actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonHarnessExitedAtOnce}}},
		{"harness_exited_at_once_under_policy_never_names_it", rec(spawning(desired.SpawnFresh), ev1), obs(dead(1), noScript),
			policy(func(p *Policy) { p.Restart = "Never" }),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseNeedsAttention, 1, 1, actions.ReasonHarnessExitedAtOnce)
				e.DeliveryID, e.Attention = "d-1", actions.ReasonHarnessExitedAtOnce
				return e
			}(), actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonHarnessExitedAtOnce}}},
		{"fresh_spawn_that_lived_past_fast_fail_is_a_spawn_that_died", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.SpawnedAt = t0.Add(-time.Minute) }), ev1),
			obs(dead(1), noScript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 0, actions.ReasonSpawnDied)
				e.NextAttempt, e.DeliveryID = t0, "d-1"
				return e
			}(), fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"spawn_after_an_exit_at_once_pins_the_same_id_again", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) {
			s.Phase, s.NextAttempt, s.LastExitReason, s.Failures, s.FastFailures = desired.PhaseBackingOff, t0, string(actions.ReasonHarnessExitedAtOnce), 1, 1
		}), ev1), obs(dead(1), noScript), testPolicy(),
			[]actions.Action{actions.FreshSpawn{Spawn: spawnOf(ev1, actions.ReasonNewEvent), SessionID: oldID}}},
		{"dead_pane_with_unknown_status_is_not_clean", rec(running()), obs(observed.Snapshot{Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", Dead: true, Owner: testOwner}}}), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonStatusPending}}},
		{"spawn_recorded_but_never_started_is_redone", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.PaneID = "" }), ev1), obs(dead(0), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonSpawnInterrupted)}},

		// Self-heal and crash loops.
		{"crash_self_heals_with_resume_and_nudge", rec(running()), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), resume(none, actions.ReasonPaneDead)}},
		{"crash_with_pending_event_boots_with_event", rec(running(), ev1), obs(dead(137), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(137, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		{"clean_exit_is_not_self_healed", rec(running()), obs(dead(0), transcript), testPolicy(),
			[]actions.Action{exit(0, desired.PhaseExited, 0, 0, actions.ReasonCleanExit)}},
		{"clean_exit_then_event_resumes", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(dead(0), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},
		{"clean_exit_restarts_under_always", rec(running()), obs(dead(0), transcript), policy(func(p *Policy) { p.Restart = "Always" }),
			[]actions.Action{func() actions.RecordExit {
				e := exit(0, desired.PhaseBackingOff, 1, 0, actions.ReasonExitedAlways)
				e.NextAttempt = t0
				return e
			}(), resume(none, actions.ReasonExitedAlways)}},
		{"never_policy_waits_for_event", rec(running()), obs(dead(1), transcript), policy(func(p *Policy) { p.Restart = "Never" }),
			[]actions.Action{exit(1, desired.PhaseExited, 1, 0, actions.ReasonPolicyNever)}},
		{"missing_session_counts_as_crash", rec(running()), obs(gone(), transcript), testPolicy(),
			[]actions.Action{actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1, NextAttempt: t0, Reason: actions.ReasonSessionMissing},
				resume(none, actions.ReasonSessionMissing)}},
		{"third_fast_failure_retires_id_and_goes_fresh", rec(with(running(), func(s *desired.Status) {
			s.SpawnedAt, s.Failures, s.FastFailures = t0.Add(-2*time.Second), 2, 2
		})), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 3, 0, actions.ReasonCrash)
				e.NextAttempt, e.Retire, e.ChurnFailures = t0.Add(4*time.Second), RetiredFastFailures, 0
				e.Delay = 4 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(4 * time.Second), Reason: actions.ReasonBackoff}}},
		{"retired_id_after_backoff_spawns_fresh", rec(with(running(), func(s *desired.Status) {
			s.Phase, s.NextAttempt, s.RetiredSessionIDs, s.LastExitReason = desired.PhaseBackingOff, t0, []string{oldID}, string(actions.ReasonCrash)
		})), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.FreshSpawn {
				f := fresh(none, actions.ReasonPaneDead, actions.ResumeCrashLoop)
				require.Contains(t, f.Prompt, "kept exiting")
				return f
			}()}},
		{"backing_off_waits", rec(with(running(), func(s *desired.Status) { s.Phase, s.NextAttempt = desired.PhaseBackingOff, t0.Add(8*time.Second) }), ev1), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(8 * time.Second), Reason: actions.ReasonBackoff}}},
		{"budget_exhausted_needs_attention", rec(with(running(), func(s *desired.Status) { s.Failures = 10 })), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseNeedsAttention, 11, 0, actions.ReasonBudgetExhausted)
				e.Attention = actions.ReasonBudgetExhausted
				return e
			}(),
				actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonBudgetExhausted}}},
		{"needs_attention_holds_without_new_event", rec(with(running(), func(s *desired.Status) { s.Phase, s.AttentionGeneration = desired.PhaseNeedsAttention, 3 }), ev1), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
		{"new_event_clears_needs_attention", rec(with(running(), func(s *desired.Status) { s.Phase, s.AttentionGeneration = desired.PhaseNeedsAttention, 2 }), ev1), obs(dead(1), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},

		// Stop, hold, reopen.
		{"closed_item_is_stopped", func() desired.Record { r := rec(running()); r.Spec.Closed = true; return r }(), obs(alive()), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},
		{"held_item_is_stopped_not_healed", func() desired.Record { r := rec(running()); r.Spec.Held = true; return r }(), obs(dead(1)), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonHeld}}},
		{"stopped_item_stays_stopped", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseStopped }), ev1)
			r.Spec.Closed = true
			return r
		}(), obs(gone()), testPolicy(), nil},
		{"reopened_item_resumes_its_conversation", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseStopped }), ev1), obs(gone(), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},

		// A pane whose foreground process is not the harness (issue 6,
		// item 13: a wrapper left an interactive shell after the CLI
		// exited, and the dead CLI's input box still looks ready).
		{"shell_left_in_a_running_pane_is_a_crash_not_a_paste", rec(running(), ev1), obs(stray("sh"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonForegroundNotHarness)
				e.Clean, e.NextAttempt, e.Foreground = false, t0, "sh"
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		// The config changed the harness's command (a wrapper, another
		// path) while its agent ran: the operator's change, not a crash.
		{"agent_running_the_harness_command_before_a_change_is_resumed_counting_nothing",
			rec(with(running(), func(s *desired.Status) { s.HarnessNames, s.Failures = []string{"claude-old"}, 1 }), ev1), obs(stray("claude-old"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonHarnessChanged)
				e.Clean, e.NextAttempt, e.Foreground = false, t0, "claude-old"
				return e
			}(), resume(ev1, actions.ReasonHarnessChanged)}},
		{"spawn_running_the_harness_command_before_a_change_is_resumed_counting_nothing",
			rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.HarnessNames = []string{"claude-old"} }), ev1), obs(stray("claude-old"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 0, 0, actions.ReasonHarnessChanged)
				e.Clean, e.NextAttempt, e.Foreground = false, t0, "claude-old"
				return e
			}(), resume(ev1, actions.ReasonHarnessChanged)}},
		{"shell_left_by_a_harness_whose_command_changed_is_still_a_crash",
			rec(with(running(), func(s *desired.Status) { s.HarnessNames = []string{"claude-old"} }), ev1), obs(stray("sh"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonForegroundNotHarness)
				e.Clean, e.NextAttempt, e.Foreground = false, t0, "sh"
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		{"shell_left_with_restart_policy_never_is_exited_not_healed", rec(running()), obs(stray("bash"), transcript), policy(func(p *Policy) { p.Restart = "Never" }),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseExited, 1, 0, actions.ReasonForegroundNotHarness)
				e.Clean, e.Foreground = false, "bash"
				return e
			}()}},
		{"shell_left_in_a_crash_loop_backs_off", rec(with(running(), func(s *desired.Status) { s.Failures = 1; s.SpawnedAt = t0.Add(-5 * time.Second) })), obs(stray("sh"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 2, 0, actions.ReasonForegroundNotHarness)
				e.Clean, e.NextAttempt, e.Foreground = false, t0.Add(2*time.Second), "sh"
				e.Delay = 2 * time.Second
				return e
			}(), actions.Wait{Key: key, Until: t0.Add(2 * time.Second), Reason: actions.ReasonBackoff}}},
		{"shell_left_after_an_exit_is_replaced_by_the_next_event", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), obs(stray("sh"), transcript), testPolicy(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},
		{"launcher_in_the_foreground_inside_the_probe_window_waits", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.ProbeDeadline = t0.Add(3 * time.Second) }), ev1), obs(stray("loopd"), noScript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(3 * time.Second), Reason: actions.ReasonProbing}}},
		{"no_probe_window_still_gives_the_launcher_a_poll_period", rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.SpawnedAt, s.ProbeDeadline = t0, t0 }), ev1), obs(stray("loopd"), noScript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonProbing}}},
		{"sandbox_still_being_made_past_the_probe_is_waited_for", rec(spawning(desired.SpawnFresh), ev1), obs(stray("bwrap"), noScript), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonProbing}}},
		{"loopds_launcher_past_the_probe_is_waited_for", rec(spawning(desired.SpawnFresh), ev1), obs(stray("loopd"), noScript),
			func() Policy { p := testPolicy(); p.Launcher = "loopd"; return p }(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonProbing}}},
		{"sandbox_not_made_within_the_confirm_timeout_is_a_failed_dispatch",
			rec(with(spawning(desired.SpawnFresh), func(s *desired.Status) { s.SpawnedAt = t0.Add(-2 * time.Minute) }), ev1), obs(stray("bwrap"), noScript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonSpawnDied)
				e.Clean, e.NextAttempt, e.DeliveryID, e.Foreground = false, t0, "d-1", "bwrap"
				return e
			}(), fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"fresh_spawn_left_with_a_shell_after_the_probe_is_a_failed_dispatch", rec(spawning(desired.SpawnFresh), ev1), obs(stray("sh"), noScript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonSpawnDied)
				e.Clean, e.NextAttempt, e.DeliveryID, e.Foreground = false, t0, "d-1", "sh"
				return e
			}(), fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"resume_left_with_a_shell_after_the_probe_is_resumed_again", rec(spawning(desired.SpawnResume), ev1), obs(stray("sh"), transcript), testPolicy(),
			[]actions.Action{func() actions.RecordExit {
				e := exit(-1, desired.PhaseBackingOff, 1, 0, actions.ReasonCrash)
				e.Clean, e.Foreground, e.NextAttempt, e.DeliveryID = false, "sh", t0, "d-1"
				return e
			}(), resume(ev1, actions.ReasonPaneDead)}},
		{"closed_item_with_a_shell_left_is_stopped", func() desired.Record { r := rec(running()); r.Spec.Closed = true; return r }(), obs(stray("sh")), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},

		// A session of the item's name without this loopd's owner mark
		// (issue 6, item 5: two daemons on one tmux server).
		{"foreign_session_is_not_adopted_nor_pasted_into", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(foreign(tmux.NewOwner("/other/state").ID)), testPolicy(),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonSessionForeign, Detail: sess}}},
		{"unmarked_session_is_foreign_even_when_the_record_names_it", rec(running(), ev1), obs(foreign("")), testPolicy(),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonSessionForeign, Detail: sess}}},
		{"foreign_dead_session_is_not_replaced", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseBackingOff; s.NextAttempt = t0 })), func() observed.Observation {
			o := obs(dead(1), transcript)
			p := o.Snapshot.Panes[sess]
			p.Owner = "?"
			o.Snapshot.Panes[sess] = p
			return o
		}(), testPolicy(), []actions.Action{actions.Block{Key: key, Reason: actions.ReasonSessionForeign, Detail: sess}}},
		{"foreign_session_of_a_closed_item_is_not_killed", func() desired.Record { r := rec(running()); r.Spec.Closed = true; return r }(), obs(foreign("")), testPolicy(),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},
		{"foreign_session_of_a_stopped_item_is_left_alone", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseStopped }))
			r.Spec.Closed = true
			return r
		}(), obs(foreign("")), testPolicy(), nil},
		{"foreign_session_of_an_item_at_rest_is_left_alone", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited })), obs(foreign("")), testPolicy(), nil},
		{"no_owner_configured_makes_every_session_foreign", rec(running(), ev1), obs(alive()), policy(func(p *Policy) { p.Owner = "" }),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonSessionForeign, Detail: sess}}},

		// Workspace and argv limits.
		{"respawn_with_missing_workdir_blocks", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1), func() observed.Observation {
			o := obs(gone(), transcript)
			o.MissingWorkdirs[key] = true
			return o
		}(), testPolicy(), []actions.Action{actions.Block{Key: key, Reason: actions.ReasonWorkspaceMissing, Detail: cwd}}},
		{"long_event_boots_with_header_and_is_pasted_later", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), longEv), obs(gone(), transcript), testPolicy(),
			[]actions.Action{actions.ResumeSpawn{Spawn: func() actions.Spawn {
				s := spawnOf(none, actions.ReasonNewEvent)
				s.Prompt = "[loopd] header line\n[loopd] This event is long; its full text follows as the next message."
				return s
			}(), ResumeID: oldID}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPlanIsStableAndKeyOrdered(t *testing.T) {
	a := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 10}, Spec: desired.Spec{Harness: "claude-code", Cwd: "/w/10"}, Pending: []desired.Delivery{ev1}}
	b := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 9}, Spec: desired.Spec{Harness: "claude-code", Cwd: "/w/9"}, Pending: []desired.Delivery{ev2}}
	o := obs(gone())
	o.Workdirs = map[desired.Key]observed.Workdir{a.Key: {Exists: true}, b.Key: {Exists: true}}
	first := Plan([]desired.Record{a, b}, o, testPolicy(), t0)
	second := Plan([]desired.Record{b, a}, o, testPolicy(), t0)
	require.Equal(t, first, second)
	require.Len(t, first, 2)
	require.Equal(t, 9, first[0].Item().Number)
	require.Equal(t, 10, first[1].Item().Number)
}

// TestPlanBlocksOnlyTheItemWhoseHarnessLeft: one item whose harness the
// config no longer has is blocked; the plan goes on for the others.
func TestPlanBlocksOnlyTheItemWhoseHarnessLeft(t *testing.T) {
	left := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 9}, Spec: desired.Spec{Harness: "old", Cwd: "/w/9"}, Pending: []desired.Delivery{ev1}}
	left.Status = running()
	ok := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 10}, Spec: desired.Spec{Harness: "claude-code", Cwd: "/w/10"}, Pending: []desired.Delivery{ev2}}
	o := obs(gone())
	o.Snapshot = observed.Snapshot{Panes: map[string]tmux.Pane{desired.SessionName(left.Key): {Session: desired.SessionName(left.Key), PaneID: "%9", CurrentCommand: "claude", Owner: testOwner}}}
	o.Workdirs = map[desired.Key]observed.Workdir{ok.Key: {Exists: true}}
	plan := Plan([]desired.Record{left, ok}, o, testPolicy(), t0)
	require.Len(t, plan, 2)
	require.Equal(t, actions.Block{Key: left.Key, Reason: actions.ReasonHarnessUnknown, Detail: "old"}, plan[0])
	require.Equal(t, ok.Key, plan[1].Item())
	require.IsType(t, actions.FreshSpawn{}, plan[1], "the other item spawns")
}

func TestFramesToCheckOnlyForItemsThatMaySend(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	closed := rec(running(), ev1)
	closed.Spec.Closed = true
	closedSending := rec(sending(t0, 1), ev1)
	closedSending.Spec.Closed = true
	tests := []struct {
		name string
		rec  desired.Record
		want []string
	}{
		{"running_with_pending_events", rec(running(), ev1, ev2), []string{"d-1", "d-2"}},
		{"only_pending_events_are_looked_for", rec(running(), ev2), []string{"d-2"}},
		{"waiting_in_needs_attention", rec(with(running(), func(s *desired.Status) {
			s.Phase, s.AttentionGeneration, s.SpawnDeliveryID = desired.PhaseNeedsAttention, 3, "d-1"
		}), ev1), nil},
		{"needs_attention_cleared_by_a_new_event", rec(with(running(), func(s *desired.Status) { s.Phase, s.AttentionGeneration = desired.PhaseNeedsAttention, 2 }), ev1), []string{"d-1"}},
		{"released", rec(with(running(), func(s *desired.Status) { s.Phase, s.SpawnDeliveryID = desired.PhaseBackingOff, "d-1" }), ev1), []string{"d-1"}},
		{"backing_off", rec(with(running(), func(s *desired.Status) { s.Phase, s.NextAttempt = desired.PhaseBackingOff, t0.Add(time.Second) }), ev1), nil},
		{"closed", closed, nil},
		{"closed_with_a_paste_in_flight", closedSending, []string{"d-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, f := range framesToCheck(tt.rec, t0) {
				ids = append(ids, f.ID)
			}
			require.Equal(t, tt.want, ids)
		})
	}
}

// TestNudgeSaysWhyTheSessionRestarted: a resume with no event to carry
// boots with a nudge that names why loopd restarted it; a release after a
// hold or NeedsAttention is not "your agent process exited".
func TestNudgeSaysWhyTheSessionRestarted(t *testing.T) {
	for _, tc := range []struct {
		reason actions.Reason
		says   string
	}{
		{actions.ReasonPaneDead, "your agent process exited"},
		{actions.ReasonExitedAlways, "your agent process exited"},
		{actions.ReasonReleased, "an operator released this work item (loopd release)"},
		{actions.ReasonServerLost, "tmux server your agent ran in was lost"},
		{actions.ReasonOutage, "tmux server your agent ran in was lost"},
		{actions.ReasonQueued, "waited for a free slot"},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			prompt := desired.NudgePrompt(key, nudgeCause(tc.reason))
			require.Contains(t, prompt, tc.says)
			require.True(t, strings.HasPrefix(prompt, "[loopd] restart on "+key.String()+": "), prompt)
		})
	}
	// Through the planner: a held item released with nothing pending.
	held := rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseBackingOff; s.Reason = string(actions.ReasonReleased) }))
	got := Plan([]desired.Record{held}, obs(gone(), transcript), testPolicy(), t0)
	var prompt string
	for _, a := range got {
		if r, ok := a.(actions.ResumeSpawn); ok {
			prompt = r.Prompt
		}
	}
	require.Contains(t, prompt, "an operator released this work item", "%#v", got)
}
