package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// TestPlanLeases covers each decision a host makes on an item by its lease
// and by the host that wrote its status (docs/design.md, "Many hosts").
func TestPlanLeases(t *testing.T) {
	const here, there = "h1", "h2"
	hosted := func(valid, draining bool) Policy {
		p := testPolicy()
		p.Host, p.LeaseValid, p.Draining = here, valid, draining
		return p
	}
	leased := func(r desired.Record, owner string) desired.Record {
		r.Lease = desired.Lease{Owner: owner, Generation: 4, Expires: t0.Add(10 * time.Second)}
		return r
	}
	// written is st as host wrote it.
	written := func(st desired.Status, host string) desired.Status { st.Host = host; return st }
	movedBack := func() desired.Status {
		// As RestoreTranscript left a running item that moved from h2.
		st := written(running(), here)
		st = actions.RestoreTranscript{ResumeID: oldID, From: there, To: here, Resume: true}.Apply(st, t0)
		return st
	}
	// exited is an item this host ran, whose agent exited cleanly.
	exited := func() desired.Status {
		st := written(running(), here)
		st.Phase, st.PaneID = desired.PhaseExited, ""
		return st
	}
	movedNudge := desired.MovedPrompt(key, there, here)
	restore := actions.RestoreTranscript{Key: key, Session: sess, ResumeID: oldID, Cwd: cwd, From: there, To: here, Resume: true}
	hostMoved := func() actions.ResumeSpawn {
		s := spawnOf(desired.Delivery{}, actions.ReasonHostMoved)
		s.Prompt = movedNudge
		return actions.ResumeSpawn{Spawn: s, ResumeID: oldID}
	}

	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"owned_item_is_planned_as_usual", leased(rec(written(running(), here), ev1), here), obs(alive()), hosted(true, false),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"another_hosts_item_with_a_local_agent_is_stopped_without_a_write", leased(rec(written(running(), here), ev1), there), obs(alive()), hosted(true, false),
			[]actions.Action{actions.Relinquish{Key: key, Session: sess, Owner: there, Reason: actions.ReasonLeaseLost}}},
		{"an_item_no_host_holds_is_not_planned", leased(rec(written(running(), here), ev1), ""), obs(alive()), hosted(true, false),
			[]actions.Action{actions.Relinquish{Key: key, Session: sess, Reason: actions.ReasonLeaseLost}}},
		{"another_hosts_item_without_a_local_agent_is_left_alone", leased(rec(written(running(), there), ev1), there), obs(gone()), hosted(true, false), nil},
		{"a_lapsed_lease_clock_stops_the_local_agent_of_an_owned_item", leased(rec(written(running(), here), ev1), here), obs(alive()), hosted(false, false),
			[]actions.Action{actions.Relinquish{Key: key, Session: sess, Reason: actions.ReasonLeaseLapsed}}},
		{"a_lapsed_lease_clock_never_pastes_or_spawns", leased(rec(written(running(), here), ev1), here), obs(gone()), hosted(false, false), nil},
		{"without_a_host_every_item_is_planned", rec(running(), ev1), obs(alive()), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},

		// The moved-item path.
		{"moved_running_item_restores_then_resumes_with_the_moved_nudge", leased(rec(written(running(), there), ev1), here), obs(gone(), noScript), hosted(true, false),
			[]actions.Action{restore, hostMoved()}},
		{"moved_item_with_its_workdir_missing_makes_it_again_then_resumes",
			leased(rec(written(running(), there), ev1), here),
			func() observed.Observation { o := obs(gone(), noScript); o.MissingWorkdirs[key] = true; return o }(), hosted(true, false),
			[]actions.Action{
				func() actions.RestoreTranscript { r := restore; r.WorkdirMissing = true; return r }(),
				actions.PrepareWorkspace{Key: key, Session: sess, Dir: cwd, Reason: actions.ReasonWorkspaceRemoved, Failures: 1, Retry: true, Resume: true},
				hostMoved()}},
		{"moved_parked_item_restores_its_conversation_and_waits", leased(rec(written(func() desired.Status {
			st := running()
			st.Phase, st.PaneID = desired.PhaseParked, ""
			return st
		}(), there)), here), obs(gone()), hosted(true, false),
			[]actions.Action{actions.RestoreTranscript{Key: key, Session: sess, ResumeID: oldID, Cwd: cwd, From: there, To: here},
				actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonHostMoved}}},
		{"moved_item_resumes_after_a_restore_that_held", leased(rec(movedBack(), ev1), here), obs(gone(), transcript), hosted(true, false),
			[]actions.Action{func() actions.ResumeSpawn { r := hostMoved(); return r }()}},
		{"moved_item_whose_transcript_the_store_lacked_goes_fresh_with_its_event", leased(rec(movedBack(), ev1), here), obs(gone(), noScript), hosted(true, false),
			[]actions.Action{func() actions.FreshSpawn {
				f := fresh(ev1, actions.ReasonHostMoved, actions.ResumeTranscriptMissing)
				return f
			}()}},

		// A conversation whose local transcript is missing on its own
		// host comes back from the store first (restoreFirst).
		{"own_item_with_its_transcript_missing_restores_it_then_resumes", leased(rec(exited(), ev1), here), obs(gone(), noScript), hosted(true, false),
			[]actions.Action{
				actions.RestoreTranscript{Key: key, Session: sess, ResumeID: oldID, Cwd: cwd, To: here, Resume: true},
				actions.ResumeSpawn{Spawn: spawnOf(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"own_item_whose_restore_was_tried_goes_fresh_with_its_event", leased(rec(func() desired.Status {
			st := exited()
			st.RestoredID = oldID
			return st
		}(), ev1), here), obs(gone(), noScript), hosted(true, false),
			[]actions.Action{fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"own_item_restored_for_an_earlier_conversation_restores_this_one", leased(rec(func() desired.Status {
			st := exited()
			st.RestoredID = "0d9e1f2a-3b4c-4d5e-8f60-718293a4b5c6"
			return st
		}(), ev1), here), obs(gone(), noScript), hosted(true, false),
			[]actions.Action{
				actions.RestoreTranscript{Key: key, Session: sess, ResumeID: oldID, Cwd: cwd, To: here, Resume: true},
				actions.ResumeSpawn{Spawn: spawnOf(ev1, actions.ReasonNewEvent), ResumeID: oldID}}},
		{"without_leases_a_missing_transcript_goes_fresh", rec(exited(), ev1), obs(gone(), noScript), testPolicy(),
			[]actions.Action{fresh(ev1, actions.ReasonNewEvent, actions.ResumeTranscriptMissing)}},
		{"closed_moved_item_is_stopped_as_usual", leased(func() desired.Record {
			r := rec(written(running(), there))
			r.Spec.Closed = true
			return r
		}(), here), obs(gone()), hosted(true, false),
			[]actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},

		// Drain.
		{"a_draining_host_hands_over_its_live_item", leased(rec(written(running(), here), ev1), here), obs(alive()), hosted(true, true),
			[]actions.Action{actions.Handover{Key: key, Session: sess, Live: true, Reason: actions.ReasonDrained}}},
		{"a_draining_host_hands_over_an_item_without_an_agent", leased(rec(written(running(), here)), here), obs(gone()), hosted(true, true),
			[]actions.Action{actions.Handover{Key: key, Session: sess, Reason: actions.ReasonDrained}}},
		{"a_draining_host_still_stops_another_hosts_agent", leased(rec(written(running(), here)), there), obs(alive()), hosted(true, true),
			[]actions.Action{actions.Relinquish{Key: key, Session: sess, Owner: there, Reason: actions.ReasonLeaseLost}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0))
		})
	}
}

// TestMovedItemCountsNoFailure: the status a move leaves and the resume it
// plans keep the restart budget's counts; a resume that then dies falls
// back as any resume does.
func TestMovedItemCountsNoFailure(t *testing.T) {
	st := running()
	st.Host, st.Failures, st.FastFailures = "h2", 2, 1
	got := actions.RestoreTranscript{From: "h2", To: "h1", Resume: true}.Apply(st, t0)
	require.Equal(t, 2, got.Failures)
	require.Equal(t, 1, got.FastFailures)
	require.Equal(t, desired.PhaseBackingOff, got.Phase)
	require.Equal(t, "h1", got.Host)
	require.Equal(t, "h2", got.MovedFrom)
	require.Zero(t, got.HarnessPID, "the old host's process is not this host's to wait for")
	require.Equal(t, actions.ReasonHostMoved, restartReason(actions.Reason(got.LastExitReason)))
}

func TestLeaseClock(t *testing.T) {
	var now time.Duration
	c := &LeaseClock{Elapsed: func() time.Duration { return now }}
	require.False(t, c.Valid(), "never renewed")
	require.False(t, c.Renewed())
	now = 10 * time.Second
	c.Renew(now, 15*time.Second) // valid until 10+15-3 s
	require.True(t, c.Valid())
	now = 21*time.Second + 999*time.Millisecond
	require.True(t, c.Valid())
	now = 22 * time.Second
	require.False(t, c.Valid(), "lapsed a margin before the store's expiry")
	require.True(t, c.Renewed())
}

func TestNeedsAssign(t *testing.T) {
	closed := func(phase desired.Phase) desired.Record {
		r := rec(desired.Status{Phase: phase})
		r.Spec.Closed = true
		return r
	}
	live := func(r desired.Record) desired.Record {
		r.Lease = desired.Lease{Owner: "h1", Generation: 1, Expires: t0.Add(time.Second)}
		return r
	}
	require.True(t, needsAssign([]desired.Record{rec(desired.Status{}, ev1)}, t0), "a new item")
	require.False(t, needsAssign([]desired.Record{live(rec(desired.Status{}, ev1))}, t0), "held by a live host")
	require.True(t, needsAssign([]desired.Record{live(rec(desired.Status{}, ev1))}, t0.Add(time.Second)), "its owner's lease expired")
	require.False(t, needsAssign([]desired.Record{closed(desired.PhaseStopped)}, t0), "closed and stopped")
	require.True(t, needsAssign([]desired.Record{closed(desired.PhaseRunning)}, t0), "closed with an agent that may run")
}

// TestNextBeat: a host's next heartbeat and Assign come at its period, or
// just after another host's leases lapse when that is sooner.
func TestNextBeat(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	host := func(name string, beat time.Duration, leases int) desired.Host {
		return desired.Host{Name: name, Heartbeat: now.Add(beat), LeaseTTL: 15 * time.Second, Leases: leases}
	}
	for _, tt := range []struct {
		name  string
		hosts []desired.Host
		want  time.Duration
	}{
		{"alone", []desired.Host{host("a", 0, 3)}, every},
		{"a live peer", []desired.Host{host("a", 0, 3), host("b", -time.Second, 3)}, every},
		{"a peer whose leases lapse in 2 s", []desired.Host{host("a", 0, 3), host("b", -13*time.Second, 3)}, 2*time.Second + schema.TakeoverMargin + schema.LeaseExpirySlack},
		{"the soonest of two", []desired.Host{host("b", -12*time.Second, 1), host("c", -14*time.Second, 1)}, time.Second + schema.TakeoverMargin + schema.LeaseExpirySlack},
		{"a peer holding nothing", []desired.Host{host("b", -14*time.Second, 0)}, every},
		{"already lapsed", []desired.Host{host("b", -time.Minute, 2)}, schema.LeaseExpirySlack},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, nextBeat(every, now, "a", tt.hosts))
		})
	}
}

// TestRestoreIsRememberedUntilTheResumeHolds: a restore records the
// conversation it tried (so a store without a copy leads to fresh, never
// to a loop), and a confirmed spawn forgets it (so a transcript lost again
// later is restored again).
func TestRestoreIsRememberedUntilTheResumeHolds(t *testing.T) {
	st := running()
	st.Host = "h1"
	st = actions.RestoreTranscript{ResumeID: oldID, To: "h1", Resume: true}.Apply(st, t0)
	require.Equal(t, oldID, st.RestoredID)
	require.Equal(t, desired.PhaseRunning, st.Phase, "a restore on the item's own host leaves its phase to the spawn")
	require.Empty(t, st.MovedFrom)
	st = actions.MarkRunning{Confirmed: false}.Apply(st)
	require.Equal(t, oldID, st.RestoredID, "an unconfirmed spawn proves nothing")
	st = actions.MarkRunning{Confirmed: true}.Apply(st)
	require.Empty(t, st.RestoredID)
}

// TestAgentThisHostStoppedIsNoCrash: an item whose agent this host
// stopped itself (its lease clock lapsed) and whose lease stayed or came
// back to it is resumed on its conversation counting no failure; without
// that memory (another daemon, a restart) the missing session is a crash.
func TestAgentThisHostStoppedIsNoCrash(t *testing.T) {
	p := testPolicy()
	p.Host, p.LeaseValid = "h1", true
	st := running()
	st.Host, st.Failures = "h1", 1
	r := rec(st, ev1)
	r.Lease = desired.Lease{Owner: "h1", Generation: 3, Expires: t0.Add(time.Minute)}

	crash := Plan([]desired.Record{r}, obs(gone(), transcript), p, t0)
	require.NotEmpty(t, crash)
	exit, ok := crash[0].(actions.RecordExit)
	require.True(t, ok, "%v", crash)
	assert.Equal(t, actions.ReasonSessionMissing, exit.Reason)
	assert.Equal(t, 2, exit.Failures, "without the memory it counts")

	p.Relinquished = map[desired.Key]bool{key: true}
	got := Plan([]desired.Record{r}, obs(gone(), transcript), p, t0)
	require.Len(t, got, 2, "%v", got)
	exit, ok = got[0].(actions.RecordExit)
	require.True(t, ok, "%v", got)
	assert.Equal(t, actions.ReasonLeaseLapsed, exit.Reason)
	assert.Equal(t, 1, exit.Failures, "no failure counted")
	assert.Equal(t, desired.PhaseBackingOff, exit.Phase)
	assert.Equal(t, resume(ev1, actions.ReasonLeaseLapsed), got[1])

	// The first pass after a lapse: the watchdog killed the agent, whose
	// pane is dead, and the daemon never saw it go.
	p.Relinquished, p.Fenced = nil, true
	got = Plan([]desired.Record{r}, obs(dead(137), transcript), p, t0)
	require.NotEmpty(t, got)
	exit, ok = got[0].(actions.RecordExit)
	require.True(t, ok, "%v", got)
	assert.Equal(t, actions.ReasonLeaseLapsed, exit.Reason)
	assert.Equal(t, 1, exit.Failures, "no failure counted")
}
