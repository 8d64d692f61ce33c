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

// attached is s with clients attached to the item's session, its last
// input at input and the attender mark by.
func attached(s observed.Snapshot, clients int, input time.Time, by string) observed.Snapshot {
	p := s.Panes[sess]
	p.Clients, p.Input, p.AttachedBy = clients, input, by
	s.Panes[sess] = p
	return s
}

// attendedSince is st attended by octo since at.
func attendedSince(st desired.Status, at time.Time) desired.Status {
	st.AttendedSince, st.AttendedBy = at, "octo"
	return st
}

// TestPlanAttendance is the rule table of takeover and handback
// (attend): who attends an item, what waits while they do, and what the
// handback plans in the same pass.
func TestPlanAttendance(t *testing.T) {
	since := t0.Add(-40 * time.Minute)
	timeout := 30 * time.Minute
	pol := testPolicy()
	pol.AttendedTimeout = timeout
	left := func(st desired.Status) desired.Status { st.HandedBackAt, st.HandedBackLeft = since, true; return st }
	wait := func(input time.Time) actions.Wait {
		return actions.Wait{Key: key, Until: input.Add(timeout), Reason: actions.ReasonAttended}
	}
	handBack := func(how string, left bool, ids ...string) actions.HandBack {
		if ids == nil {
			ids = []string{}
		}
		return actions.HandBack{Key: key, Session: sess, By: "octo", Since: since, How: how, Left: left, Deliveries: ids}
	}
	deadAttended := func() actions.RecordExit {
		e := actions.RecordExit{Key: key, Session: sess, ExitStatus: 0, Signal: 9, PaneID: "%1", Reason: actions.ReasonAttended,
			Phase: desired.PhaseBackingOff, NextAttempt: t0}
		return e
	}
	killed := func(s observed.Snapshot) observed.Snapshot {
		p := s.Panes[sess]
		p.DeadSignal = 9
		s.Panes[sess] = p
		return s
	}
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		want []actions.Action
	}{
		{"a_client_attaching_takes_the_item_over_and_nothing_is_pasted", rec(running(), ev1), obs(attached(alive(), 1, t0, "octo")),
			[]actions.Action{actions.MarkAttended{Key: key, Session: sess, By: "octo"}, wait(t0)}},
		{"a_plain_tmux_attach_takes_the_item_over_by_no_one_named", rec(running(), ev1), obs(attached(alive(), 1, t0, "")),
			[]actions.Action{actions.MarkAttended{Key: key, Session: sess}, wait(t0)}},
		{"attended_events_stay_pending", rec(attendedSince(running(), since), ev1, ev2), obs(attached(alive(), 1, t0.Add(-time.Minute), "octo")),
			[]actions.Action{wait(t0.Add(-time.Minute))}},
		{"attended_death_is_not_respawned", rec(attendedSince(running(), since), ev1), obs(attached(killed(dead(0)), 1, t0, "")),
			[]actions.Action{wait(t0)}},
		{"attended_session_gone_with_the_client_hands_back", rec(attendedSince(running(), since), ev1), obs(gone(), transcript),
			[]actions.Action{handBack(actions.HandBackDetached, false, "d-1"),
				actions.RecordExit{Key: key, Session: sess, ExitStatus: -1, Reason: actions.ReasonAttended, Phase: desired.PhaseBackingOff, NextAttempt: t0},
				resumeTelling(ev1)}},
		{"detach_hands_back_and_the_oldest_event_is_pasted", rec(attendedSince(running(), since), ev1, ev2), obs(alive()),
			[]actions.Action{handBack(actions.HandBackDetached, false, "d-1", "d-2"), toldOf(ev1, ev2)}},
		{"detach_after_a_death_resumes_the_same_conversation_counting_nothing", rec(attendedSince(running(), since), ev1, ev2),
			obs(killed(dead(0)), transcript),
			[]actions.Action{handBack(actions.HandBackDetached, false, "d-1", "d-2"), deadAttended(), resumeTelling(ev1, ev2)}},
		{"no_input_for_the_timeout_hands_back_with_the_client_attached", rec(attendedSince(running(), since), ev1),
			obs(attached(alive(), 1, t0.Add(-timeout), "octo")),
			[]actions.Action{handBack(actions.HandBackIdle, true, "d-1"), toldOf(ev1)}},
		{"a_client_left_attached_by_a_handback_does_not_take_over_again", rec(left(running()), ev1), obs(attached(alive(), 1, t0, "octo")),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"that_client_gone_the_next_attach_takes_over", rec(left(running()), ev1), obs(alive()),
			[]actions.Action{actions.MarkAttended{Key: key, Session: sess, Gone: true}, actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_foreign_session_is_nobody_s_takeover", rec(running(), ev1), obs(attached(foreign("0123456789abcdef"), 1, t0, "octo")),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonSessionForeign, Detail: sess}}},
		{"a_hold_stops_an_attended_item", rec(attendedSince(running(), since), ev1), obs(attached(alive(), 1, t0, "octo")),
			nil}, // set below: Held
	}
	tests[len(tests)-1].rec.Spec.Held = true
	tests[len(tests)-1].want = []actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonHeld}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan([]desired.Record{tt.rec}, tt.obs, pol, t0)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestReleaseHandsBackAnAttendedItem: loopd release ends the attendance
// before the release, the client staying attached; the next pass does not
// take the item over again while that client stays.
func TestReleaseHandsBackAnAttendedItem(t *testing.T) {
	since := t0.Add(-time.Minute)
	r := rec(attendedSince(running(), since), ev1)
	r.Spec.ReleaseGeneration = 1
	o := obs(attached(alive(), 1, t0, "octo"))
	o.Snapshot.At = t0
	got := Plan([]desired.Record{r}, o, testPolicy(), t0)
	require.NotEmpty(t, got)
	require.Equal(t, actions.HandBack{Key: key, Session: sess, By: "octo", Since: since, How: actions.HandBackReleased, Left: true, Deliveries: []string{"d-1"}}, got[0])
	require.IsType(t, actions.Release{}, got[1])
	require.Equal(t, toldOf(ev1), got[len(got)-1])
}

// TestAttendedAgentIsNotParked: an attended agent idle past the park time
// is not parked: parking waits for the handback.
func TestAttendedAgentIsNotParked(t *testing.T) {
	since := t0.Add(-time.Hour)
	st := attendedSince(running(), since)
	st.SpawnedAt = t0.Add(-time.Hour)
	p := testPolicy()
	p.IdlePark, p.AttendedTimeout = 5*time.Minute, 2*time.Hour
	quiet := harness.Transcript{Known: true, Exists: true, Size: 100, ModTime: t0.Add(-10 * time.Minute)}
	got := Plan([]desired.Record{rec(st)}, obs(attached(alive(), 1, t0.Add(-30*time.Minute), "octo"), quiet), p, t0)
	require.Equal(t, []actions.Action{actions.Wait{Key: key, Until: t0.Add(-30 * time.Minute).Add(2 * time.Hour), Reason: actions.ReasonAttended}}, got)
}

// TestReleaseOfAnAttendedDeadAgentResumesIt: an agent killed while
// attended waits for the person; loopd release hands it back and resumes
// the same conversation in the same pass, counting no crash.
func TestReleaseOfAnAttendedDeadAgentResumesIt(t *testing.T) {
	since := t0.Add(-time.Minute)
	r := rec(attendedSince(running(), since), ev1)
	dead := attached(dead(0), 1, t0, "octo")
	p := dead.Panes[sess]
	p.DeadSignal = 9
	dead.Panes[sess] = p
	require.Equal(t, []actions.Action{actions.Wait{Key: key, Reason: actions.ReasonAttended}},
		Plan([]desired.Record{r}, obs(dead, transcript), testPolicy(), t0), "not respawned while attended")
	r.Spec.ReleaseGeneration = 1
	got := Plan([]desired.Record{r}, obs(dead, transcript), testPolicy(), t0)
	require.NotEmpty(t, got)
	require.Equal(t, actions.HandBack{Key: key, Session: sess, By: "octo", Since: since, How: actions.HandBackReleased, Left: true, Deliveries: []string{"d-1"}}, got[0])
	last, ok := got[len(got)-1].(actions.ResumeSpawn)
	require.True(t, ok, "%v", got)
	require.Equal(t, oldID, last.ResumeID, "the same conversation")
	for _, a := range got {
		if x, ok := a.(actions.RecordExit); ok {
			require.Equal(t, actions.ReasonAttended, x.Reason, "no crash")
		}
	}
}

// toldOf is the first paste after a handback with pending, oldest first:
// pending[0] behind the one prompt that names them all.
func toldOf(pending ...desired.Delivery) actions.DeliverPrompt {
	a := actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: pending[0].ID}
	var headers []string
	for _, d := range pending {
		headers = append(headers, d.Header)
		a.Told = append(a.Told, d.ID)
	}
	a.Preamble = desired.HandBackPrompt(key, headers)
	return a
}

// resumeTelling is the resume of a handback that found the agent dead:
// it boots with the prompt that names pending, which are pasted after it.
func resumeTelling(pending ...desired.Delivery) actions.ResumeSpawn {
	told := toldOf(pending...)
	r := resume(desired.Delivery{}, actions.ReasonAttended)
	r.Prompt, r.Told = told.Preamble, told.Told
	return r
}
