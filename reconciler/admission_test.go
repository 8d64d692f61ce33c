package reconciler

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// host is a fleet of items on one host, each numbered, for the admission
// tables: its records, and what one pass observed of them.
type host struct {
	recs []desired.Record
	obs  observed.Observation
}

func newHost() *host {
	return &host{obs: observed.Observation{Snapshot: observed.Snapshot{Panes: map[string]tmux.Pane{}},
		Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{}, Workdirs: map[desired.Key]observed.Workdir{}}}
}

func itemKey(n int) desired.Key { return desired.Key{Owner: "octo-org", Repo: "api", Number: n} }

// event is a pending event of item n received at, the item's own delivery.
func event(n int, at time.Time) desired.Delivery {
	return desired.Delivery{ID: fmt.Sprintf("d-%d-%d", n, at.Unix()), Event: "issue_comment", Action: "created", Sender: "octocat",
		Prompt: fmt.Sprintf("[loopd] issue_comment.created #%d", n), ReceivedAt: at}.Compact()
}

// add puts item n in status st with events pending; pane is its pane's
// state: "alive", "dead" (exit status 1), "clean" (exit status 0) or ""
// (no session). Items with a conversation have a transcript of 100 bytes.
func (h *host) add(n int, st desired.Status, pane string, pending ...desired.Delivery) *host {
	k := itemKey(n)
	if st.HarnessSessionID != "" {
		st.HarnessSessionID = fmt.Sprintf("7f3c2a9e-1b4d-4c8e-9f00-%012d", n)
		st.ConfirmedSessionID = st.HarnessSessionID
		h.obs.Transcripts[k] = harness.Transcript{Known: true, Exists: true, Size: 100}
	}
	st.Session = desired.SessionName(k)
	dir := fmt.Sprintf("/srv/agents/%d", n)
	h.obs.Workdirs[k] = observed.Workdir{Path: dir, Exists: true, Physical: dir}
	if st.PaneID != "" {
		st.PaneID = fmt.Sprintf("%%%d", n)
	}
	h.recs = append(h.recs, desired.Record{Key: k, Spec: desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: dir, Generation: 3},
		Status: st, Pending: pending})
	p := tmux.Pane{Session: st.Session, PaneID: fmt.Sprintf("%%%d", n), PID: 100 + n, StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}
	switch pane {
	case "":
		return h
	case "dead":
		p.Dead, p.DeadStatus = true, 1
	case "clean":
		p.Dead = true
	}
	h.obs.Snapshot.Panes[st.Session] = p
	return h
}

// with changes the record of item n.
func (h *host) with(n int, f func(*desired.Record)) *host {
	for i := range h.recs {
		if h.recs[i].Key.Number == n {
			f(&h.recs[i])
		}
	}
	return h
}

// unmade removes item n's workdir: its first spawn makes it.
func (h *host) unmade(n int) *host {
	delete(h.obs.Workdirs, itemKey(n))
	return h
}

// grown makes item n's transcript grow past its size at spawn.
// booted makes item n's boot prompt (its boot line, bootID) show in its
// conversation.
func (h *host) booted(n int) *host {
	h.obs.Transcripts[itemKey(n)] = harness.Transcript{Known: true, Exists: true, Size: 250}
	if h.obs.Frames == nil {
		h.obs.Frames = map[desired.Key]map[string]harness.Found{}
	}
	h.obs.Frames[itemKey(n)] = map[string]harness.Found{bootID: {Whole: true}}
	return h
}

// refused makes item n's dead agent have refused to resume its
// conversation.
func (h *host) refused(n int) *host {
	if h.obs.Exits == nil {
		h.obs.Exits = map[desired.Key]observed.Exit{}
	}
	h.obs.Exits[itemKey(n)] = observed.Exit{Refusal: harness.RefusalNotResumable}
	return h
}

// reported makes item n's harness report its session at (its
// SessionStart hook), with the id it runs.
func (h *host) reported(n int, at time.Time) *host {
	return h.with(n, func(r *desired.Record) {
		r.Report = &desired.SessionReport{SessionID: r.Status.HarnessSessionID, Source: "resume", At: at}
	})
}

// decisions sums up a plan per item: the names of its actions, with the
// reason of a wait, the position, reason and entry of a queue, and the
// reason of a spawn.
func decisions(plan []actions.Action) map[int]string {
	out := map[int]string{}
	for _, a := range plan {
		var s string
		switch a := a.(type) {
		case actions.Wait:
			s = "wait " + string(a.Reason)
		case actions.Queue:
			s = fmt.Sprintf("queue %d %s", a.Position, a.Reason)
			if a.Enter {
				s += " enter"
			}
		case actions.FreshSpawn:
			s = "fresh_spawn " + string(a.Reason)
		case actions.ResumeSpawn:
			s = "resume_spawn " + string(a.Reason)
		case actions.RecordExit:
			s = "record_exit " + string(a.Phase)
		case actions.Handover:
			s = "handover " + string(a.Reason)
		default:
			s = a.Name()
		}
		n := a.Item().Number
		out[n] = strings.TrimSpace(out[n] + "; " + s)
		out[n] = strings.TrimPrefix(out[n], "; ")
	}
	return out
}

func TestAdmission(t *testing.T) {
	ago := func(d time.Duration) time.Time { return t0.Add(-d) }
	run := running()
	crashed := func() desired.Status {
		st := running()
		st.Phase, st.Reason, st.LastExitReason, st.NextAttempt, st.Failures = desired.PhaseBackingOff, "crash", "crash", t0.Add(time.Minute), 2
		return st
	}
	in := func(phase desired.Phase) desired.Status { st := running(); st.Phase = phase; return st }
	queued := func(reason actions.Reason, at time.Time) desired.Status {
		return desired.Status{Phase: desired.PhaseQueued, Reason: string(reason), QueuedAt: at}
	}
	caps := func(live, starts int) Policy {
		p := testPolicy()
		p.MaxLive, p.MaxStarts = live, starts
		return p
	}
	roomElsewhere := func(p Policy, room int) Policy { p.RoomElsewhere = room; return p }

	tests := []struct {
		name string
		h    *host
		p    Policy
		want map[int]string
	}{
		{"a_new_item_makes_its_workdir_then_queues", newHost().add(1, run, "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))).unmade(2), caps(1, 2),
			map[int]string{2: "prepare_workspace; queue 1 capacity enter"}},
		{"a_full_host_queues_the_new_item", newHost().add(1, run, "alive").add(2, run, "alive").add(3, run, "alive").
			add(4, desired.Status{}, "", event(4, ago(time.Minute))), caps(3, 2),
			map[int]string{4: "queue 1 capacity enter"}},
		{"a_free_slot_admits_the_oldest_pending_event_first", newHost().add(1, run, "alive").add(2, run, "alive").
			add(4, desired.Status{}, "", event(4, ago(3*time.Minute))).
			add(5, desired.Status{}, "", event(5, ago(time.Minute))).
			add(6, desired.Status{}, "", event(6, ago(2*time.Minute))), caps(3, 0),
			map[int]string{4: "fresh_spawn new_event", 5: "queue 2 capacity enter", 6: "queue 1 capacity enter"}},
		{"equal_arrivals_go_in_key_order", newHost().add(1, run, "alive").
			add(3, desired.Status{}, "", event(3, ago(time.Minute))).add(2, desired.Status{}, "", event(2, ago(time.Minute))), caps(2, 0),
			map[int]string{2: "fresh_spawn new_event", 3: "queue 1 capacity enter"}},
		{"a_queued_item_stays_queued_without_a_write", newHost().add(1, run, "alive").
			add(2, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(2, ago(time.Minute))), caps(1, 2),
			map[int]string{2: "queue 1 capacity"}},
		{"a_queued_item_waiting_for_another_reason_is_rewritten", newHost().add(1, probing(), "alive").
			add(2, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(2, ago(time.Minute))), caps(3, 1),
			map[int]string{1: "wait probing", 2: "queue 1 starts_in_flight enter"}},
		{"a_closed_item_frees_its_slot_in_the_same_pass", newHost().add(1, run, "alive").add(2, run, "alive").
			add(3, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(3, ago(time.Minute))).
			with(1, func(r *desired.Record) { r.Spec.Closed = true }), caps(2, 2),
			map[int]string{1: "stop_session", 3: "fresh_spawn queued"}},
		{"a_clean_exit_frees_its_slot", newHost().add(1, run, "clean").add(2, run, "alive").
			add(3, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(3, ago(time.Minute))), caps(2, 2),
			map[int]string{1: "record_exit Exited", 3: "fresh_spawn queued"}},
		{"a_clean_exit_with_an_event_queues_behind_older_events", newHost().add(1, run, "clean", event(1, ago(time.Second))).add(2, run, "alive").
			add(3, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(3, ago(time.Minute))), caps(2, 2),
			map[int]string{1: "record_exit Exited; queue 1 capacity enter", 3: "fresh_spawn queued"}},
		{"a_crashed_agent_keeps_its_slot_before_older_queued_items", newHost().add(1, run, "dead").add(2, run, "alive").
			add(3, queued(actions.ReasonCapacity, ago(time.Hour)), "", event(3, ago(time.Hour))), caps(2, 2),
			map[int]string{1: "record_exit BackingOff; resume_spawn pane_dead", 3: "queue 1 capacity"}},
		{"an_agent_backing_off_holds_its_slot", newHost().add(1, crashed(), "dead").add(2, run, "alive").
			add(3, desired.Status{}, "", event(3, ago(time.Minute))), caps(2, 2),
			map[int]string{1: "wait backoff", 3: "queue 1 capacity enter"}},
		{"a_crashed_agent_comes_back_over_a_lowered_cap", newHost().add(1, crashed(), "dead").add(2, run, "alive").add(3, run, "alive").
			with(1, func(r *desired.Record) { r.Status.NextAttempt = ago(time.Second) }), caps(1, 2),
			map[int]string{1: "resume_spawn pane_dead"}},
		{"attention_parked_stopped_and_exited_items_hold_no_slot", newHost().add(1, in(desired.PhaseNeedsAttention), "dead").
			add(2, in(desired.PhaseParked), "").add(3, in(desired.PhaseStopped), "").add(4, in(desired.PhaseExited), "clean").
			add(5, desired.Status{}, "", event(5, ago(time.Minute))), caps(1, 2),
			map[int]string{1: "wait needs_attention", 2: "wait parked", 5: "fresh_spawn new_event"}},
		{"spawns_in_flight_cap_fresh_spawns", newHost().
			add(1, desired.Status{}, "", event(1, ago(4*time.Minute))).add(2, desired.Status{}, "", event(2, ago(3*time.Minute))).
			add(3, desired.Status{}, "", event(3, ago(2*time.Minute))).add(4, desired.Status{}, "", event(4, ago(time.Minute))), caps(0, 2),
			map[int]string{1: "fresh_spawn new_event", 2: "fresh_spawn new_event",
				3: "queue 1 starts_in_flight enter", 4: "queue 2 starts_in_flight enter"}},
		{"an_unconfirmed_spawn_counts_against_the_starts", newHost().add(1, probing(), "alive").
			add(2, desired.Status{}, "", event(2, ago(2*time.Minute))).add(3, desired.Status{}, "", event(3, ago(time.Minute))), caps(0, 2),
			map[int]string{1: "wait probing", 2: "fresh_spawn new_event", 3: "queue 1 starts_in_flight enter"}},
		{"a_start_reported_since_its_spawn_frees_its_start_and_is_still_probed", newHost().add(1, probing(), "alive").reported(1, ago(5*time.Second)).
			add(2, desired.Status{}, "", event(2, ago(2*time.Minute))).add(3, desired.Status{}, "", event(3, ago(time.Minute))), caps(0, 1),
			map[int]string{1: "wait probing", 2: "fresh_spawn new_event", 3: "queue 1 starts_in_flight enter"}},
		{"a_report_of_an_earlier_spawn_does_not_free_the_start", newHost().add(1, probing(), "alive").reported(1, ago(time.Hour)).
			add(2, desired.Status{}, "", event(2, ago(2*time.Minute))), caps(0, 1),
			map[int]string{1: "wait probing", 2: "queue 1 starts_in_flight enter"}},
		{"a_crashed_agent_waits_only_for_a_start_not_yet_reported", newHost().add(1, probing(), "alive").reported(1, ago(5*time.Second)).
			add(2, probing(), "alive").add(3, run, "dead"), caps(0, 2),
			map[int]string{1: "wait probing", 2: "wait probing", 3: "record_exit BackingOff; resume_spawn pane_dead"}},
		{"a_spawn_confirmed_in_the_pass_frees_its_start", newHost().add(1, spawning(desired.SpawnResume), "alive").booted(1).
			add(2, desired.Status{}, "", event(2, ago(time.Minute))).
			with(1, func(r *desired.Record) { r.Pending = nil; r.Status.SpawnDeliveryID = "" }), caps(0, 1),
			map[int]string{1: "mark_running", 2: "fresh_spawn new_event"}},
		{"a_crashed_agent_waits_for_a_start_and_keeps_its_slot", newHost().add(1, probing(), "alive").add(2, run, "dead").
			add(3, desired.Status{}, "", event(3, ago(time.Minute))), caps(3, 1),
			map[int]string{1: "wait probing", 2: "record_exit BackingOff; wait starts_in_flight", 3: "queue 1 starts_in_flight enter"}},
		{"a_crashed_agent_waiting_for_a_start_holds_its_slot", newHost().add(1, probing(), "alive").add(2, run, "dead").
			add(3, desired.Status{}, "", event(3, ago(time.Minute))), caps(2, 1),
			map[int]string{1: "wait probing", 2: "record_exit BackingOff; wait starts_in_flight", 3: "queue 1 capacity enter"}},
		// Issue 21, case 12: a spawn whose screen waits for a person has
		// started; it holds no start (others waited 66 s and 108 s behind
		// one trust dialog), and keeps its slot.
		{"a_blocked_spawn_holds_no_start", newHost().add(1, with(probing(), func(s *desired.Status) { s.Blocked = harness.BlockWorkspaceTrust }), "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))), caps(0, 1),
			map[int]string{1: "wait probing", 2: "fresh_spawn new_event"}},
		{"a_blocked_spawn_keeps_its_slot", newHost().add(1, with(probing(), func(s *desired.Status) { s.Blocked = harness.BlockWorkspaceTrust }), "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))), caps(1, 1),
			map[int]string{1: "wait probing", 2: "queue 1 capacity enter"}},
		{"a_resume_that_failed_falls_back_whatever_the_starts", newHost().add(1, probing(), "alive").add(2, spawning(desired.SpawnResume), "dead", ev1).refused(2),
			caps(1, 1),
			map[int]string{1: "wait probing", 2: "record_exit Exited; fresh_spawn resume_failed"}},
		{"a_release_brings_an_item_back_through_the_queue", newHost().add(1, run, "alive").
			add(2, in(desired.PhaseNeedsAttention), "").
			with(2, func(r *desired.Record) { r.Spec.ReleaseGeneration = 1 }), caps(1, 2),
			map[int]string{2: "release; queue 1 capacity enter"}},
		{"a_queued_item_with_no_event_is_spawned_when_admitted", newHost().add(1, queued(actions.ReasonCapacity, ago(time.Minute)), ""), caps(1, 2),
			map[int]string{1: "fresh_spawn queued"}},
		{"a_parked_agent_with_an_event_resumes_through_admission", newHost().add(1, run, "alive").add(2, in(desired.PhaseParked), "", event(2, ago(time.Minute))),
			caps(1, 2),
			map[int]string{2: "queue 1 capacity enter"}},
		// A full host beside one with room (a drain undone, a host
		// that joined): the items it has no slot for go there.
		{"a_full_host_hands_the_new_item_to_a_host_with_room", newHost().add(1, run, "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))), roomElsewhere(caps(1, 2), 1),
			map[int]string{2: "handover no_slot"}},
		{"a_queued_item_goes_to_a_host_with_room", newHost().add(1, run, "alive").
			add(2, queued(actions.ReasonCapacity, ago(time.Minute)), "", event(2, ago(time.Minute))), roomElsewhere(caps(1, 2), 3),
			map[int]string{2: "handover no_slot"}},
		{"room_for_one_hands_over_the_oldest_and_queues_the_rest", newHost().add(1, run, "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))).add(3, desired.Status{}, "", event(3, ago(3*time.Minute))),
			roomElsewhere(caps(1, 2), 1),
			map[int]string{2: "queue 1 capacity enter", 3: "handover no_slot"}},
		{"a_free_slot_here_is_taken_before_any_hand_over", newHost().add(1, run, "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))), roomElsewhere(caps(2, 2), 5),
			map[int]string{2: "fresh_spawn new_event"}},
		{"a_start_in_flight_is_waited_for_here_whatever_the_room", newHost().add(1, probing(), "alive").
			add(2, desired.Status{}, "", event(2, ago(time.Minute))), roomElsewhere(caps(0, 1), 5),
			map[int]string{1: "wait probing", 2: "queue 1 starts_in_flight enter"}},
		{"a_crashed_agent_keeps_its_slot_here_whatever_the_room", newHost().add(1, run, "dead").add(2, run, "alive"),
			roomElsewhere(caps(1, 2), 5),
			map[int]string{1: "record_exit BackingOff; resume_spawn pane_dead"}},
		{"zero_is_no_limit", newHost().add(1, run, "alive").add(2, run, "alive").
			add(3, desired.Status{}, "", event(3, ago(time.Minute))).add(4, desired.Status{}, "", event(4, ago(time.Minute))), caps(0, 0),
			map[int]string{3: "fresh_spawn new_event", 4: "fresh_spawn new_event"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sort.Slice(tt.h.recs, func(i, j int) bool { return tt.h.recs[i].Key.Number < tt.h.recs[j].Key.Number })
			got := decisions(Plan(tt.h.recs, tt.h.obs, tt.p, t0))
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestAdmissionOfAServerLoss: a lost server's resumes go through the
// starts in flight like any spawn; the others keep their slot and their
// exit, backing off with the next attempt now, and are resumed as starts
// are confirmed.
func TestAdmissionOfAServerLoss(t *testing.T) {
	h := newHost()
	for n := 1; n <= 5; n++ {
		h.add(n, running(), "")
	}
	h.add(6, desired.Status{}, "", event(6, t0.Add(-time.Hour)))
	h.obs.Snapshot.ServerGone = true
	p := testPolicy()
	p.MaxLive, p.MaxStarts = 5, 2
	got := decisions(Plan(h.recs, h.obs, p, t0))
	assert.Equal(t, map[int]string{
		1: "record_exit BackingOff; resume_spawn server_lost", 2: "record_exit BackingOff; resume_spawn server_lost",
		3: "record_exit BackingOff; wait starts_in_flight", 4: "record_exit BackingOff; wait starts_in_flight", 5: "record_exit BackingOff; wait starts_in_flight",
		6: "queue 1 capacity enter",
	}, got)
	for _, a := range Plan(h.recs, h.obs, p, t0) {
		if e, ok := a.(actions.RecordExit); ok {
			assert.Zero(t, e.Failures, "no failure counted")
			assert.Equal(t, t0, e.NextAttempt)
		}
	}

	// The next passes: the first two resumes spawned; each reported start
	// admits the next resume, while the reported resumes stay on probe
	// until their window has passed.
	resumed := func(n int, at time.Time) {
		h.with(n, func(r *desired.Record) {
			r.Status.Phase, r.Status.SpawnMode, r.Status.SpawnedAt = desired.PhaseSpawning, desired.SpawnResume, at
			r.Status.ProbeDeadline, r.Status.LastExitReason = at.Add(p.Probe), "server_lost"
		})
		k := itemKey(n)
		h.obs.Snapshot.Panes[desired.SessionName(k)] = tmux.Pane{Session: desired.SessionName(k), PaneID: fmt.Sprintf("%%%d", n), PID: 100 + n,
			StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}
	}
	h.obs.Snapshot.ServerGone = false
	for n := 3; n <= 5; n++ {
		h.with(n, func(r *desired.Record) {
			r.Status.Phase, r.Status.Reason, r.Status.NextAttempt, r.Status.LastExitReason = desired.PhaseBackingOff, "server_lost", t0, "server_lost"
		})
	}
	h.with(6, func(r *desired.Record) {
		r.Status = desired.Status{Phase: desired.PhaseQueued, Reason: string(actions.ReasonCapacity), QueuedAt: t0}
	})
	resumed(1, t0)
	resumed(2, t0)
	now := t0.Add(300 * time.Millisecond)
	assert.Equal(t, map[int]string{1: "wait probing", 2: "wait probing",
		3: "wait starts_in_flight", 4: "wait starts_in_flight", 5: "wait starts_in_flight", 6: "queue 1 capacity"},
		decisions(Plan(h.recs, h.obs, p, now)), "no start reported yet")
	h.reported(1, t0.Add(200*time.Millisecond))
	assert.Equal(t, map[int]string{1: "wait probing", 2: "wait probing",
		3: "resume_spawn server_lost", 4: "wait starts_in_flight", 5: "wait starts_in_flight", 6: "queue 1 capacity"},
		decisions(Plan(h.recs, h.obs, p, now)), "one start reported: one more resume")
	assert.Equal(t, Load{Live: 5, Starts: 1}, LoadOf(h.recs), "the gauges count the same starts")
}

// probing is a resume in flight whose probe is due 2 s after t0.
func probing() desired.Status {
	st := spawning(desired.SpawnResume)
	st.ProbeDeadline = t0.Add(2 * time.Second)
	return st
}

// TestHeldStartsAreLookedAtAgainSoon: a spawn held by the starts in
// flight is planned again after StartPoll while a start in flight is of a
// harness that reports its start (its report, written by the hook to the
// store, is no trigger), and after Poll otherwise; a queue held by the
// slots waits for a stop or an exit.
func TestHeldStartsAreLookedAtAgainSoon(t *testing.T) {
	fleet := func() *host {
		return newHost().add(1, probing(), "alive").add(2, running(), "dead").
			add(3, desired.Status{}, "", event(3, t0.Add(-time.Minute)))
	}
	reports, silent := testPolicy(), testPolicy()
	reports.Harnesses = map[string]Capabilities{"claude-code": {SupportsResume: true, ValidSessionID: isUUID, ProcessNames: []string{"claude"}, ReportsSession: true}}
	for _, p := range []*Policy{&reports, &silent} {
		p.MaxStarts = 1
	}
	until := func(plan []actions.Action) map[int]time.Time {
		out := map[int]time.Time{}
		for _, a := range plan {
			switch a := a.(type) {
			case actions.Wait:
				if a.Reason == actions.ReasonStartsInFlight {
					out[a.Key.Number] = a.Until
				}
			case actions.Queue:
				out[a.Key.Number] = a.Until
			}
		}
		return out
	}
	soon, poll := t0.Add(reports.StartPoll), t0.Add(silent.Poll)
	assert.Equal(t, map[int]time.Time{2: soon, 3: soon}, until(Plan(fleet().recs, fleet().obs, reports, t0)), "the start may be reported")
	assert.Equal(t, map[int]time.Time{2: poll, 3: poll}, until(Plan(fleet().recs, fleet().obs, silent, t0)), "only a confirmation frees it")
	plan := Plan(fleet().recs, fleet().obs, reports, t0)
	d, ok := requeueAfter(plan, actions.Result{}, reports, t0)
	assert.True(t, ok)
	assert.Equal(t, reports.StartPoll, d, "the next pass is due then")

	full := reports
	full.MaxLive = 2
	h := fleet()
	assert.Equal(t, map[int]time.Time{2: soon, 3: {}}, until(Plan(h.recs, h.obs, full, t0)), "a queue held by the slots has no deadline")
}

func TestStartInFlight(t *testing.T) {
	r := rec(spawning(desired.SpawnResume))
	at := r.Status.SpawnedAt
	report := func(at time.Time) *desired.SessionReport {
		return &desired.SessionReport{SessionID: oldID, Source: "resume", At: at}
	}
	tests := []struct {
		name   string
		phase  desired.Phase
		report *desired.SessionReport
		want   bool
	}{
		{"spawning_without_a_report", desired.PhaseSpawning, nil, true},
		{"spawning_with_a_report_of_an_earlier_spawn", desired.PhaseSpawning, report(at.Add(-time.Second)), true},
		{"spawning_reported_at_its_spawn", desired.PhaseSpawning, report(at), false},
		{"spawning_reported_since", desired.PhaseSpawning, report(at.Add(300 * time.Millisecond)), false},
		{"running", desired.PhaseRunning, nil, false},
		{"backing_off", desired.PhaseBackingOff, nil, false},
		{"queued", desired.PhaseQueued, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := r
			r.Report = tt.report
			assert.Equal(t, tt.want, startInFlight(tt.phase, r))
		})
	}
}

// TestQueueIsStableAcrossPasses: the order comes from durable facts (the
// events' arrival, the time an item entered the queue), not from the pass:
// a restart or a later pass sees the same queue, which loopd get shows.
func TestQueueIsStableAcrossPasses(t *testing.T) {
	h := newHost().add(1, running(), "alive").
		add(2, desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: t0.Add(-time.Hour)}, "").
		add(3, desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: t0.Add(-time.Minute)}, "", event(3, t0.Add(-2*time.Hour))).
		add(4, desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: t0.Add(-time.Minute)}, "", event(4, t0.Add(-time.Minute)))
	p := testPolicy()
	p.MaxLive, p.MaxStarts = 1, 2
	for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
		got := decisions(Plan(h.recs, h.obs, p, now))
		assert.Equal(t, map[int]string{2: "queue 2 capacity", 3: "queue 1 capacity", 4: "queue 3 capacity"}, got)
		assert.Equal(t, map[desired.Key]int{itemKey(3): 1, itemKey(2): 2, itemKey(4): 3}, QueuePositions(h.recs, now))
	}
}

// TestQueuePositionsArePerHost: each host admits its own items, so each
// host's queue counts from 1 (loopd get, the status page): an item
// queued on another host takes no place in this one's.
func TestQueuePositionsArePerHost(t *testing.T) {
	h := newHost()
	for n, owner := range map[int]string{1: "host-a", 2: "host-b", 3: "host-b", 4: "host-a"} {
		h.add(n, desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: t0.Add(-time.Duration(10-n) * time.Minute)}, "").
			with(n, func(r *desired.Record) { r.Lease.Owner = owner })
	}
	assert.Equal(t, map[desired.Key]int{itemKey(1): 1, itemKey(4): 2, itemKey(2): 1, itemKey(3): 2}, QueuePositions(h.recs, t0))
}

func TestHoldsSlot(t *testing.T) {
	tests := []struct {
		phase  desired.Phase
		reason string
		want   bool
	}{
		{desired.PhaseSpawning, "new_event", true},
		{desired.PhaseRunning, "delivered", true},
		{desired.PhaseBackingOff, "crash", true},
		{desired.PhaseBackingOff, "server_lost", true},
		{desired.PhaseBackingOff, "workspace_missing", true}, // a crashed agent blocked on its workdir
		{desired.PhaseBackingOff, "released", false},
		{desired.PhaseBackingOff, "workspace_failed", false},
		{desired.PhaseBackingOff, "host_moved", false}, // its agent ran on another host
		{desired.PhaseBackingOff, "drained", false},    // stopped on purpose by a drain
		{desired.PhaseIdle, "", false},
		{desired.PhasePreparing, "first_spawn", false},
		{desired.PhaseQueued, "capacity", false},
		{desired.PhaseExited, "clean_exit", false},
		{desired.PhaseNeedsAttention, "restart_budget_exhausted", false},
		{desired.PhaseParked, "idle", false},
		{desired.PhaseStopped, "closed", false},
		{"RateLimited", "usage_limit", false},
		{desired.PhaseBudgetExhausted, "budget_exhausted", true},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, holdsSlot(tt.phase, tt.reason), "%s %s", tt.phase, tt.reason)
	}
}

func TestPlanPark(t *testing.T) {
	idle := func(f func(*desired.Status)) desired.Status {
		st := running()
		st.SpawnedAt = t0.Add(-time.Hour)
		if f != nil {
			f(&st)
		}
		return st
	}
	quiet := harness.Transcript{Known: true, Exists: true, Size: 100, ModTime: t0.Add(-10 * time.Minute)}
	parkOn := func() Policy { p := testPolicy(); p.IdlePark = 5 * time.Minute; return p }
	park := actions.Park{Key: key, Session: sess, PaneID: "%1", IdleFor: 10 * time.Minute}
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"an_idle_agent_is_parked", rec(idle(nil)), obs(alive(), quiet), parkOn(), []actions.Action{park}},
		{"parking_off_never_parks", rec(idle(nil)), obs(alive(), quiet), testPolicy(), nil},
		{"a_transcript_written_lately_is_not_idle", rec(idle(nil)), obs(alive(), harness.Transcript{Known: true, Exists: true, Size: 100, ModTime: t0.Add(-time.Minute)}), parkOn(), nil},
		{"a_recent_spawn_is_not_idle", rec(idle(func(s *desired.Status) { s.SpawnedAt = t0.Add(-time.Minute) })), obs(alive(), quiet), parkOn(), nil},
		{"a_recent_send_is_not_idle", rec(idle(func(s *desired.Status) { s.SentAt = t0.Add(-time.Minute) })), obs(alive(), quiet), parkOn(), nil},
		{"a_recent_delivery_is_not_idle", rec(idle(func(s *desired.Status) { s.DeliveredAt = []time.Time{t0.Add(-time.Minute)} })), obs(alive(), quiet), parkOn(), nil},
		{"an_agent_seen_at_work_lately_is_not_idle", rec(idle(func(s *desired.Status) { s.ActiveSeenAt = t0.Add(-time.Minute) })), obs(alive(), quiet), parkOn(), nil},
		{"a_pending_event_is_pasted_not_parked", rec(idle(nil), ev1), obs(alive(), quiet), parkOn(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_paste_in_flight_is_not_parked", rec(idle(func(s *desired.Status) { s.SendingDeliveryID, s.SentAt = "d-1", t0.Add(-time.Hour) }), ev1),
			landed(obs(alive(), quiet)), parkOn(), []actions.Action{actions.ConfirmDelivery{Key: key, Session: sess, DeliveryID: "d-1", Verified: true, Via: actions.ViaPaste}}},
		{"an_unread_transcript_never_parks", rec(idle(nil)), obs(alive()), parkOn(), nil},
		{"a_harness_without_transcripts_never_parks", rec(idle(nil)), obs(alive(), harness.Transcript{}), parkOn(), nil},
		{"a_parked_item_waits_for_an_event", rec(idle(func(s *desired.Status) { s.Phase = desired.PhaseParked })), obs(gone(), quiet), parkOn(),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonParked}}},
		{"the_next_event_resumes_the_same_conversation_with_it", rec(idle(func(s *desired.Status) { s.Phase = desired.PhaseParked }), ev1), obs(gone(), quiet), parkOn(),
			[]actions.Action{resume(ev1, actions.ReasonNewEvent)}},
		{"a_closed_parked_item_is_stopped", func() desired.Record {
			r := rec(idle(func(s *desired.Status) { s.Phase = desired.PhaseParked }))
			r.Spec.Closed = true
			return r
		}(), obs(gone(), quiet), parkOn(), []actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0))
		})
	}
}

func TestNeedsFactsForParking(t *testing.T) {
	p := testPolicy()
	assert.False(t, needsFacts(rec(running()), alive(), p), "without parking a quiet agent is not read")
	p.IdlePark = time.Minute
	assert.True(t, needsFacts(rec(running()), alive(), p), "parking reads the transcript's last write")
	parked := running()
	parked.Phase = desired.PhaseParked
	assert.False(t, needsFacts(rec(parked), gone(), p), "a parked item at rest is left alone")
	assert.True(t, needsFacts(rec(parked, ev1), gone(), p), "its next event resumes it")
}

func TestLoadOf(t *testing.T) {
	h := newHost().add(1, running(), "alive").add(2, spawning(desired.SpawnFresh), "alive").
		add(3, desired.Status{Phase: desired.PhaseBackingOff, Reason: "crash"}, "").
		add(4, desired.Status{Phase: desired.PhaseBackingOff, Reason: "released"}, "").
		add(5, desired.Status{Phase: desired.PhaseQueued}, "").add(6, desired.Status{Phase: desired.PhaseParked}, "").
		add(7, spawning(desired.SpawnResume), "alive").reported(7, t0)
	assert.Equal(t, Load{Live: 4, Starts: 1}, LoadOf(h.recs), "a start reported is no longer in flight")
}

// TestPlanSpawnsAfterWhatFreesTheirSlots: a stop that frees a slot is
// carried out before the spawn it admits, whatever their keys' order, so
// the host never runs more agents than its capacity, even for a moment.
func TestPlanSpawnsAfterWhatFreesTheirSlots(t *testing.T) {
	h := newHost().add(1, desired.Status{Phase: desired.PhaseQueued, Reason: "capacity", QueuedAt: t0.Add(-time.Minute)}, "", event(1, t0.Add(-time.Minute))).
		add(2, running(), "alive").with(2, func(r *desired.Record) { r.Spec.Closed = true })
	p := testPolicy()
	p.MaxLive = 1
	plan := Plan(h.recs, h.obs, p, t0)
	require.Len(t, plan, 2)
	assert.IsType(t, actions.StopSession{}, plan[0])
	assert.IsType(t, actions.FreshSpawn{}, plan[1])
}

// TestMovedItemsGoThroughAdmission: the resumes of items that moved here
// (a takeover, a drain elsewhere) and of items a drain handed over and
// this host takes back are new starts: they are admitted while a slot is
// free, and the others wait Queued, oldest event first, counting no
// failure; their turn resumes them on their conversations, as moves.
func TestMovedItemsGoThroughAdmission(t *testing.T) {
	const here, there = "h1", "h2"
	by := func(st desired.Status, host string) desired.Status {
		st.Host = host
		return st
	}
	drained := by(running(), here)
	drained.Phase, drained.PaneID, drained.NextAttempt = desired.PhaseBackingOff, "", t0.Add(-time.Second)
	drained.LastExitReason, drained.Reason = string(actions.ReasonDrained), string(actions.ReasonDrained)
	h := newHost().add(1, by(running(), here), "alive").
		add(2, by(running(), there), "", event(2, t0.Add(-4*time.Hour))).
		add(3, by(running(), there), "", event(3, t0.Add(-3*time.Hour))).
		add(4, drained, "", event(4, t0.Add(-2*time.Hour))).
		add(5, by(spawning(desired.SpawnResume), there), "", event(5, t0.Add(-time.Hour)))
	for i := range h.recs {
		h.recs[i].Lease = desired.Lease{Owner: here, Generation: 2, Expires: t0.Add(time.Minute)}
	}
	p := testPolicy()
	p.Host, p.LeaseValid, p.MaxLive = here, true, 2
	plan := Plan(h.recs, h.obs, p, t0)
	assert.Equal(t, map[int]string{
		2: "restore_transcript; resume_spawn host_moved",
		3: "restore_transcript; queue 1 capacity enter",
		4: "queue 2 capacity enter",
		5: "restore_transcript; queue 3 capacity enter",
	}, decisions(plan))
	for _, a := range plan {
		if q, ok := a.(actions.Queue); ok {
			assert.Equal(t, 2, q.Live, "the host runs no more than its capacity")
		}
	}

	// Item 3, queued after its move, gets a slot: it resumes its
	// conversation as a move, with the move's nudge, counting no failure.
	st := h.recs[2].Status
	st = actions.RestoreTranscript{ResumeID: st.HarnessSessionID, From: there, To: here, Resume: true}.Apply(st, t0)
	st.Phase, st.Reason, st.QueuedAt = desired.PhaseQueued, string(actions.ReasonCapacity), t0
	q := newHost().add(3, st, "", event(3, t0.Add(-3*time.Hour)))
	q.recs[0].Lease = h.recs[2].Lease
	got := Plan(q.recs, q.obs, p, t0.Add(time.Second))
	require.Len(t, got, 1)
	r, ok := got[0].(actions.ResumeSpawn)
	require.True(t, ok, "%v", got)
	assert.Equal(t, actions.ReasonHostMoved, r.Reason)
	assert.Equal(t, desired.MovedPrompt(itemKey(3), there, here), r.Prompt)
	assert.Equal(t, st.Failures, h.recs[2].Status.Failures)

	// Once it ran again, a later wait in the queue is an ordinary one.
	st.SpawnedAt = t0.Add(2 * time.Second)
	q.recs[0].Status = st
	got = Plan(q.recs, q.obs, p, t0.Add(time.Minute))
	assert.Equal(t, map[int]string{3: "resume_spawn queued"}, decisions(got))
}
