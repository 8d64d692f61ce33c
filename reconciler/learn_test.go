package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
)

// codexPolicy is testPolicy with the item's harness one that cannot pin
// its conversation id (Codex): loopd learns it after the spawn.
func codexPolicy() Policy {
	p := testPolicy()
	p.Harnesses = map[string]Capabilities{"claude-code": {SupportsResume: true, ValidSessionID: isUUID, LearnsSessionID: true, ProcessNames: []string{"claude"}}}
	return p
}

// unconfirmed is a fresh Codex spawn whose id loopd has not learned yet,
// probed past its deadline, with d-1 as its boot prompt.
func unconfirmed() desired.Status {
	st := spawning(desired.SpawnFresh)
	st.HarnessSessionID, st.IDUnconfirmed = "", true
	return st
}

// started is what the observer read of the conversations the item's
// harness started since its spawn.
func started(o observed.Observation, s ...harness.Started) observed.Observation {
	o.Started = map[desired.Key][]harness.Started{key: s}
	return o
}

const (
	learnedID = "01a22e7f-9e38-7150-9d65-6f6f26796325"
	otherID   = "01a22e7f-9e38-7150-9d65-6f6f26796326"
)

// bootOf is the first user message of a conversation that the fresh spawn
// boot of k started: its boot prompt, which holds its boot line and ends
// with k's brief.
func bootOf(k desired.Key, boot string) string {
	return ev1Text + "\n\n" + desired.BootLine(boot) + "\n\n" + desired.AgentBrief(k)
}

func TestPlanLearnsTheConversationID(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	spawnAt := unconfirmed().SpawnedAt
	other := desired.Key{Owner: "octo-org", Repo: "api", Number: 4}
	mine := harness.Started{ID: learnedID, At: spawnAt.Add(300 * time.Millisecond), First: bootOf(key, bootID)}
	learned := []actions.Action{
		actions.FollowSession{Key: key, Session: sess, To: learnedID, Source: actions.SourceRollout},
		actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonSessionLearned},
	}
	idUnknown := func(delivery desired.Delivery, reason actions.Reason) actions.FreshSpawn {
		f := fresh(delivery, reason, actions.ResumeIDUnknown)
		f.AttemptedID, f.Unpinned = "", true
		return f
	}

	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		want []actions.Action
	}{
		{"first_spawn_is_unpinned", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), obs(gone()),
			[]actions.Action{prepareFirst(), actions.FreshSpawn{Unpinned: true, Spawn: func() actions.Spawn { s := spawnOf(ev1, actions.ReasonNewEvent); s.Respawn = false; return s }()}}},
		{"alive_without_the_id_is_not_confirmed", rec(unconfirmed(), ev1), obs(alive()),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingSessionID}}},
		{"id_never_learned_gives_up", rec(with(unconfirmed(), func(s *desired.Status) { s.SpawnedAt = t0.Add(-3 * time.Minute) }), ev1), obs(alive()),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonSpawnUnconfirmed}}},
		{"rollout_of_this_spawn_is_learned", rec(unconfirmed(), ev1), started(obs(alive()), mine), learned},
		{"rollout_learned_when_the_agent_already_died", rec(unconfirmed(), ev1), started(obs(dead(1)), mine), learned},
		{"rollout_of_an_earlier_spawn_is_not_this_one", rec(unconfirmed(), ev1),
			started(obs(alive()), harness.Started{ID: otherID, At: spawnAt.Add(time.Second), First: bootOf(key, "boot-0")}),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingSessionID}}},
		// Issue 21, case 6: two rollouts that both hold this spawn's boot
		// line are never settled by a guess.
		{"two_rollouts_that_fit_are_not_guessed", rec(unconfirmed(), ev1),
			started(obs(alive()), mine, harness.Started{ID: otherID, At: spawnAt.Add(time.Second), First: bootOf(key, bootID)}),
			[]actions.Action{actions.Ambiguous{Key: key, Session: sess, Candidates: []string{learnedID, otherID}}}},
		{"the_same_ambiguity_is_journaled_once_and_the_id_stays_unknown", rec(with(unconfirmed(), func(s *desired.Status) {
			s.AmbiguousIDs = []string{learnedID, otherID}
		}), ev1), started(obs(alive()), mine, harness.Started{ID: otherID, At: spawnAt.Add(time.Second), First: bootOf(key, bootID)}),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingSessionID}}},
		{"a_spawn_recorded_before_boot_ids_is_told_by_the_time", rec(with(unconfirmed(), func(s *desired.Status) { s.BootID = "" }), ev1),
			started(obs(alive()), harness.Started{ID: otherID, At: spawnAt.Add(-time.Second), First: ev1Text + "\n\n" + desired.AgentBrief(key)},
				harness.Started{ID: learnedID, At: spawnAt.Add(time.Second), First: ev1Text + "\n\n" + desired.AgentBrief(key)}), learned},
		{"rollout_of_another_item_in_the_same_cwd_is_not_this_one", rec(unconfirmed(), ev1),
			started(obs(alive()), harness.Started{ID: otherID, At: spawnAt.Add(time.Millisecond), First: bootOf(other, "boot-4")}, mine), learned},
		{"brief_quoted_before_the_boot_prompt_does_not_count", rec(unconfirmed(), ev1),
			started(obs(alive()), harness.Started{ID: otherID, At: spawnAt.Add(time.Millisecond), First: desired.AgentBrief(key) + "\n\n" + bootOf(other, "boot-4")}),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingSessionID}}},
		{"death_before_the_id_is_learned_is_fresh_id_unknown", rec(with(unconfirmed(), func(s *desired.Status) { s.Phase, s.SpawnDeliveryID = desired.PhaseRunning, "" }), ev2),
			obs(dead(1)),
			[]actions.Action{func() actions.RecordExit {
				e := exit(1, desired.PhaseBackingOff, 1, 1, actions.ReasonCrash)
				e.NextAttempt = t0
				return e
			}(), idUnknown(ev2, actions.ReasonPaneDead)}},
		{"paste_waits_for_the_id_before_it_is_verified", rec(with(unconfirmed(), func(s *desired.Status) {
			s.Phase, s.SpawnDeliveryID, s.SendingDeliveryID, s.SentAt, s.SendAttempts = desired.PhaseRunning, "", "d-1", t0.Add(-500*time.Millisecond), 1
		}), ev1), obs(alive()),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(500 * time.Millisecond), Reason: actions.ReasonAwaitingDelivery}}},
		{"release_fresh_before_the_id_is_learned_is_silent", rec(with(unconfirmed(), func(s *desired.Status) {
			s.Phase, s.SpawnDeliveryID, s.FreshRequested = desired.PhaseIdle, "", true
		}), ev1), obs(gone()),
			[]actions.Action{func() actions.FreshSpawn {
				f := fresh(ev1, actions.ReasonReleased, "")
				f.Unpinned = true
				return f
			}()}},
		{"resume_that_opens_the_cwd_chooser_falls_back_to_fresh", rec(with(spawning(desired.SpawnResume), func(s *desired.Status) { s.ProbeDeadline = t0.Add(time.Second) }), ev1),
			func() observed.Observation {
				o := obs(alive(), transcript)
				o.Screens = map[desired.Key]observed.Screen{key: {Blocked: harness.BlockResumeChooser}}
				return o
			}(),
			[]actions.Action{
				actions.MarkBlocked{Key: key, Session: sess, Block: harness.BlockResumeChooser},
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Reason: actions.ReasonResumeFailed, Phase: desired.PhaseExited, PaneID: "%1"},
				func() actions.FreshSpawn {
					f := fresh(ev1, actions.ReasonResumeFailed, actions.ResumeChooser)
					f.Unpinned = true
					return f
				}()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, codexPolicy(), t0))
		})
	}
}

// TestPlanNeverLearnsOneRolloutForTwoItems: items of one workdir whose
// spawns raced each learn the conversation their own boot prompt started,
// and none learns one another record already names.
func TestPlanNeverLearnsOneRolloutForTwoItems(t *testing.T) {
	k2 := desired.Key{Owner: "octo-org", Repo: "api", Number: 43}
	a := rec(unconfirmed(), ev1)
	b := rec(unconfirmed(), ev1)
	b.Key, b.Status.BootID = k2, "boot-2"
	at := a.Status.SpawnedAt
	// Both read the same two rollouts of the shared workdir.
	both := []harness.Started{{ID: otherID, At: at.Add(time.Millisecond), First: bootOf(k2, "boot-2")}, {ID: learnedID, At: at.Add(2 * time.Millisecond), First: bootOf(key, bootID)}}
	snap := alive()
	p2 := snap.Panes[sess]
	p2.Session, p2.PaneID = desired.SessionName(k2), "%2"
	snap.Panes[p2.Session] = p2
	o := obs(snap)
	o.Started = map[desired.Key][]harness.Started{key: both, k2: both}
	got := Plan([]desired.Record{a, b}, o, codexPolicy(), t0)
	require.Equal(t, []actions.Action{
		actions.FollowSession{Key: key, Session: sess, To: learnedID, Source: actions.SourceRollout},
		actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonSessionLearned},
		actions.FollowSession{Key: k2, Session: desired.SessionName(k2), To: otherID, Source: actions.SourceRollout},
		actions.Wait{Key: k2, Until: t0.Add(time.Second), Reason: actions.ReasonSessionLearned},
	}, got)

	// A rollout another record already names is never learned again,
	// even when its first message would match (an id recorded by hand, a
	// record restored from a backup).
	b.Status.IDUnconfirmed, b.Status.HarnessSessionID = false, learnedID
	got = Plan([]desired.Record{a, b}, o, codexPolicy(), t0)
	require.NotContains(t, got, actions.Action(actions.FollowSession{Key: key, Session: sess, To: learnedID, Source: actions.SourceRollout}))
	require.Contains(t, got, actions.Action(actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingSessionID}))
}

// TestNeedsLearnWhileTheIDIsUnconfirmed: the conversations the harness
// started are read for an item whose id is unconfirmed, in any phase, and
// for no other.
func TestNeedsLearnWhileTheIDIsUnconfirmed(t *testing.T) {
	n := needs(codexPolicy(), t0)
	idle := unconfirmed()
	idle.Phase, idle.SpawnDeliveryID = desired.PhaseExited, ""
	require.Equal(t, observed.Need{Learn: idle.SpawnedAt}, n(rec(idle), gone()), "an exited item with nothing pending still learns")
	require.Equal(t, unconfirmed().SpawnedAt, n(rec(unconfirmed(), ev1), alive()).Learn)
	require.True(t, n(rec(running(), ev1), alive()).Learn.IsZero(), "a known id is not learned")
	require.True(t, needs(testPolicy(), t0)(rec(unconfirmed(), ev1), alive()).Learn.IsZero(), "a harness that pins its ids learns nothing")
}
