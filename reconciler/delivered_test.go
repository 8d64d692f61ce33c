package reconciler

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// marks returns the deliveries a marks delivered, found by reflection so
// that no action type is forgotten: every field named Delivered, and the
// DeliveryID of the actions whose DeliveryID is one delivered
// (MarkRunning's boot delivery, ConfirmDelivery's). verified says whether
// the action claims it was seen in the conversation: false only for a
// ConfirmDelivery that says so (Verified false); a mark that carries no
// such flag claims it was.
func marks(a actions.Action) (ids []string, verified bool) {
	v := reflect.ValueOf(a)
	verified = true
	if f := v.FieldByName("Verified"); f.IsValid() {
		verified = f.Bool()
	}
	if f := v.FieldByName("Delivered"); f.IsValid() && f.String() != "" {
		ids = append(ids, f.String())
	}
	switch a.(type) {
	case actions.MarkRunning, actions.ConfirmDelivery:
		if id := v.FieldByName("DeliveryID").String(); id != "" {
			ids = append(ids, id)
		}
	}
	return ids, verified
}

// TestEveryDeliveryMarkIsSeenInTheConversation is the check that "delivered"
// has one rule (issue 21, case 1): over the cross product of the states an
// item can be in when a delivery is in flight (each phase, spawn mode and
// pane state; a boot delivery, a paste or a nudge in flight; its frame
// seen whole, mangled, absent or unread; a SessionStart report or not; a
// transcript that grew or not; a usage limit on screen; closed, released,
// a new event), every delivery any action of the plan marks delivered is one
// whose frame the observation shows whole. A second rule (a report, a
// spawn that lives past its probe, a transcript that grew) marks one the
// frames do not show, and fails here. A harness with no transcript to
// read marks nothing verified.
func TestEveryDeliveryMarkIsSeenInTheConversation(t *testing.T) {
	type phase struct {
		name string
		st   func() desired.Status
	}
	spawn := func(mode desired.SpawnMode, probe time.Duration) func() desired.Status {
		return func() desired.Status {
			st := spawning(mode)
			st.ProbeDeadline = t0.Add(probe)
			return st
		}
	}
	in := func(p desired.Phase, reason actions.Reason) func() desired.Status {
		return func() desired.Status {
			st := spawning(desired.SpawnResume)
			st.Phase, st.Reason, st.AttentionGeneration = p, string(reason), 3
			return st
		}
	}
	phases := []phase{
		{"fresh_probing", spawn(desired.SpawnFresh, time.Second)},
		{"fresh_past_probe", spawn(desired.SpawnFresh, -time.Second)},
		{"resume_probing", spawn(desired.SpawnResume, time.Second)},
		{"resume_past_probe", spawn(desired.SpawnResume, -time.Second)},
		{"resume_past_confirm_timeout", func() desired.Status {
			st := spawning(desired.SpawnResume)
			st.SpawnedAt = t0.Add(-time.Hour)
			return st
		}},
		{"running", running},
		{"needs_attention_unconfirmed", in(desired.PhaseNeedsAttention, actions.ReasonUnconfirmed)},
		{"backing_off", in(desired.PhaseBackingOff, actions.ReasonCrash)},
		{"exited", in(desired.PhaseExited, actions.ReasonCleanExit)},
	}
	inFlight := map[string]func(desired.Status) desired.Status{
		"boot_delivery": func(st desired.Status) desired.Status { return st },
		"nudge":         func(st desired.Status) desired.Status { st.SpawnDeliveryID = ""; return st },
		"paste": func(st desired.Status) desired.Status {
			st.SpawnDeliveryID = ""
			return st.Send("d-1", t0.Add(-2*time.Second), false)
		},
	}
	panes := map[string]observed.Snapshot{
		"alive":   alive(),
		"dead":    dead(1),
		"killed":  {Panes: map[string]tmux.Pane{sess: {Session: sess, PaneID: "%1", Dead: true, DeadSignal: 9, StatusKnown: true, Owner: testOwner}}},
		"missing": gone(),
	}
	frames := map[string]func(observed.Observation) observed.Observation{
		"seen": func(o observed.Observation) observed.Observation {
			return seen(seen(o, "d-1", harness.Found{Whole: true}), bootID, harness.Found{Whole: true})
		},
		"boot_only": func(o observed.Observation) observed.Observation {
			return seen(seen(o, "d-1", harness.Found{}), bootID, harness.Found{Whole: true})
		},
		"mangled": func(o observed.Observation) observed.Observation { return seen(o, "d-1", harness.Found{Mangled: 1}) },
		"absent":  func(o observed.Observation) observed.Observation { return seen(o, "d-1", harness.Found{}) },
		"unread":  func(o observed.Observation) observed.Observation { return o },
	}
	transcripts := map[string]harness.Transcript{"grown": grown, "unchanged": transcript}
	specs := map[string]func(desired.Record) desired.Record{
		"open":     func(r desired.Record) desired.Record { return r },
		"closed":   func(r desired.Record) desired.Record { r.Spec.Closed = true; return r },
		"released": func(r desired.Record) desired.Record { r.Spec.ReleaseGeneration = 1; return r },
		"new_event": func(r desired.Record) desired.Record {
			r.Spec.Generation = 9
			r.Pending = append(r.Pending, ev2)
			return r
		},
	}
	reports := map[string]*desired.SessionReport{
		"no_report":     nil,
		"resume_report": {SessionID: oldID, Source: "resume", At: t0.Add(-time.Second)},
	}
	screens := map[string]*observed.Screen{
		"no_screen": nil,
		"limit":     {Limit: &harness.Limit{Kind: harness.LimitUsage, Reset: t0.Add(time.Hour), Text: "You've hit your session limit · resets 1:00pm"}},
	}
	var cases, marked int
	for _, ph := range phases {
		for flightName, flight := range inFlight {
			for paneName, snap := range panes {
				for frameName, frame := range frames {
					for trName, tr := range transcripts {
						for specName, spec := range specs {
							for repName, rep := range reports {
								for scName, sc := range screens {
									name := fmt.Sprintf("%s/%s/%s/%s/%s/%s/%s/%s", ph.name, flightName, paneName, frameName, trName, specName, repName, scName)
									r := spec(rec(flight(ph.st()), ev1))
									r.Report = rep
									o := frame(obs(snap, tr))
									if sc != nil {
										o.Screens = map[desired.Key]observed.Screen{key: *sc}
									}
									cases++
									for _, a := range Plan([]desired.Record{r}, o, testPolicy(), t0) {
										ids, _ := marks(a)
										for _, id := range ids {
											marked++
											require.Truef(t, o.Frames[key][id].Whole, "%s: %s marks %s delivered, which the conversation does not show", name, a, id)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	require.Positive(t, marked, "the walk reaches the marks")
	t.Logf("%d states, %d marks, each seen in the conversation", cases, marked)

	// Where nothing of the conversation can be seen, a spawn that lives
	// past its probe and a paste sent count as landed, and say they were
	// not seen.
	p := testPolicy()
	p.Harnesses["cursor"] = Capabilities{ValidSessionID: isUUID, ProcessNames: []string{"claude"}}
	for flightName, flight := range inFlight {
		r := rec(flight(spawning(desired.SpawnFresh)), ev1)
		if flightName == "paste" {
			r.Status.Phase = desired.PhaseRunning
		}
		r.Spec.Harness = "cursor"
		for _, a := range Plan([]desired.Record{r}, obs(alive()), p, t0) {
			if ids, verified := marks(a); len(ids) > 0 {
				_, isConfirm := a.(actions.ConfirmDelivery)
				require.Falsef(t, verified && isConfirm, "%s: %s claims a delivery seen where nothing can be", flightName, a)
			}
		}
	}
}
