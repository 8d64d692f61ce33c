package desired

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeliveryLifecycle(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Status{Phase: PhaseRunning}

	// pending → carried as a boot prompt → delivered
	booted := base.Carry("d1")
	assert.Equal(t, "d1", booted.SpawnDeliveryID)
	assert.Empty(t, booted.Deliver("d1").SpawnDeliveryID)
	assert.Equal(t, "d1", booted.Deliver("d2").SpawnDeliveryID, "another delivery leaves the boot prompt in flight")

	// pending → sending → delivered
	sent := base.Send("d2", at, false)
	assert.Equal(t, Status{Phase: PhaseRunning, DeliveryState: DeliveryState{SendingDeliveryID: "d2", SentAt: at, SendAttempts: 1}}, sent)
	again := sent.Resubmit(at.Add(time.Second)).Send("d2", at.Add(2*time.Second), true)
	assert.Equal(t, 3, again.SendAttempts, "a resubmit and a repaste are attempts of the same send")
	assert.Equal(t, 1, again.Send("d3", at, true).SendAttempts, "another delivery starts over")
	assert.Equal(t, 1, again.Send("d2", at, false).SendAttempts, "a first send starts over")
	assert.Equal(t, base, again.Deliver("d2"), "delivered: nothing left in flight")

	// in flight → pending again
	both := base.Carry("d1").Send("d2", at, false)
	assert.Equal(t, base.Carry("d1"), both.DropSend())
	assert.Equal(t, base, both.DropInFlight())
	assert.Equal(t, both, both.Deliver(""), "delivering nothing changes nothing")
}

func TestStatusRetire(t *testing.T) {
	var ids []string
	for i := 1; i <= RetiredSessionIDsMax+2; i++ {
		ids = append(ids, fmt.Sprintf("id%d", i))
	}
	st := Status{}
	for _, id := range ids {
		st = st.Retire(id)
		assert.Equal(t, id, st.RetiredSessionIDs[len(st.RetiredSessionIDs)-1], "newest last")
		assert.LessOrEqual(t, len(st.RetiredSessionIDs), RetiredSessionIDsMax)
	}
	assert.Equal(t, ids[2:], st.RetiredSessionIDs, "bounded, newest last")
	assert.True(t, st.Retired("id3"))
	assert.False(t, st.Retired("id1"), "the oldest fell out")
	assert.Equal(t, st, st.Retire("id5"), "an id is retired once")
	assert.Equal(t, st, st.Retire(""), "nothing to retire")

	// The receiver's slice is never written.
	shared := append(make([]string, 0, 8), "a")
	owner := Status{RestartHistory: RestartHistory{RetiredSessionIDs: shared}}
	_ = owner.Retire("b")
	assert.Empty(t, strings.Join(shared[1:cap(shared)], ""), "caller's spare capacity written")
}

func TestReportedConversation(t *testing.T) {
	spawned := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a, b := "aaaaaaaa-0000-4000-8000-000000000000", "bbbbbbbb-0000-4000-8000-000000000000"
	running := Status{Phase: PhaseRunning, SessionState: SessionState{HarnessSessionID: a, SpawnedAt: spawned}}
	report := func(id string, at time.Time) *SessionReport {
		return &SessionReport{SessionID: id, Source: "clear", At: at}
	}
	uuidOnly := func(id string) bool { return !strings.Contains(id, "not") }
	with := func(st Status, f func(*Status)) Status { f(&st); return st }
	tests := []struct {
		name string
		st   Status
		rep  *SessionReport
		want string
	}{
		{"no_report", running, nil, ""},
		{"report_of_the_recorded_id", running, report(a, spawned.Add(time.Second)), ""},
		{"clear_while_running", running, report(b, spawned.Add(time.Minute)), b},
		// The agent was killed a second after /clear, before a pass
		// followed the report: the death does not undo it.
		{"clear_then_killed", with(running, func(s *Status) { s.Phase, s.LastExitAt = PhaseBackingOff, spawned.Add(61*time.Second) }), report(b, spawned.Add(time.Minute)), b},
		{"clear_then_stopped", with(running, func(s *Status) { s.Phase = PhaseStopped }), report(b, spawned.Add(time.Minute)), b},
		{"report_of_an_earlier_spawn", running, report(b, spawned.Add(-time.Second)), ""},
		{"report_after_the_recorded_death", with(running, func(s *Status) { s.Phase, s.LastExitAt = PhaseExited, spawned.Add(time.Minute) }), report(b, spawned.Add(2*time.Minute)), ""},
		{"spawn_being_confirmed_keeps_its_id", with(running, func(s *Status) { s.Phase = PhaseSpawning }), report(b, spawned.Add(time.Second)), ""},
		{"id_the_harness_refuses", running, report("not-an-id", spawned.Add(time.Minute)), ""},
		{"nothing_recorded", Status{Phase: PhaseIdle}, report(b, spawned), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Record{Status: tt.st, Report: tt.rep}
			assert.Equal(t, tt.want, r.ReportedConversation(uuidOnly))
		})
	}
}

func TestReplay(t *testing.T) {
	ev := func(id, body string) Delivery {
		return Delivery{ID: id, Prompt: "[loopd] issue_comment.created on acme/api#42 by octocat (delivery " + id + ")\n" +
			FrameBegin(id) + body + "\n" + FrameEnd(id, body+"\n")}
	}
	opening, mid, last := ev("d1", "open it"), ev("d2", strings.Repeat("m", 300)), ev("d3", "latest")
	history := []Delivery{opening, mid, last}

	all, n := Replay(history, 8<<10)
	assert.Equal(t, 3, n)
	require.True(t, strings.HasPrefix(all, "[loopd] The events of this work item"), "loopd's line comes first: %q", all)
	assert.Equal(t, []int{strings.Index(all, opening.Prompt), strings.Index(all, mid.Prompt), strings.Index(all, last.Prompt)},
		sortedInts(strings.Index(all, opening.Prompt), strings.Index(all, mid.Prompt), strings.Index(all, last.Prompt)), "oldest first")
	assert.NotContains(t, all, "left out")
	for _, d := range history {
		assert.Equal(t, SeenWhole, FrameOf(d).Check(all), "each event whole, framed as stored")
	}

	// Too small for the middle event: the opening one and the latest stay
	// whole, the middle one is left out and counted; none is cut.
	small, n := Replay(history, len(opening.Prompt)+len(last.Prompt)+200)
	assert.Equal(t, 2, n)
	assert.LessOrEqual(t, len(small), len(opening.Prompt)+len(last.Prompt)+200)
	assert.Contains(t, small, opening.Prompt)
	assert.Contains(t, small, last.Prompt)
	assert.NotContains(t, small, DeliveryMarker("d2"))
	assert.Contains(t, small, "(1 left out for length)")

	none, n := Replay(nil, 8<<10)
	assert.Empty(t, none)
	assert.Zero(t, n)
	none, n = Replay(history, 10)
	assert.Empty(t, none, "nothing fits")
	assert.Zero(t, n)
}

func sortedInts(v ...int) []int {
	out := append([]int(nil), v...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestStatusReleased(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := Status{Phase: PhaseNeedsAttention, SessionState: SessionState{HarnessSessionID: "a"}, RestartHistory: RestartHistory{Failures: 11, FastFailures: 2, ChurnFailures: 3, NextAttempt: at}}
	got := st.Released(7, PhaseBackingOff, false, "")
	assert.Equal(t, Status{Phase: PhaseBackingOff, SessionState: SessionState{HarnessSessionID: "a"}, RestartHistory: RestartHistory{ChurnFailures: 3}, ReleasedGeneration: 7, Reason: "released"}, got,
		"the budget's counts go; the churn count is the conversation's and stays")
	limited := st
	limited.LimitUntil, limited.LimitSeen = at, SeenLimit{Kind: "usage_limit", Text: "You've hit your limit", Reset: at}
	assert.Equal(t, SeenLimit{Kind: "usage_limit", Text: "You've hit your limit", Reset: at, Released: true}, limited.Released(7, PhaseRunning, false, "").LimitSeen,
		"the limit it took is ended, and remembered so that it is not taken again")
	fresh := st.Released(8, PhaseBackingOff, true, "a")
	assert.True(t, fresh.FreshRequested)
	assert.True(t, fresh.Retired("a"))
	assert.Zero(t, fresh.ChurnFailures)
}

// TestReleasedLimitsAreKeptWithinTheirBound: every limit an operator
// released is remembered (the one taken, and the one shown at the
// release), each once, the oldest forgotten first past
// MaxReleasedLimits.
func TestReleasedLimitsAreKeptWithinTheirBound(t *testing.T) {
	t0 := time.Date(2026, 7, 14, 12, 0, 0, 0, time.UTC)
	limit := func(i int) SeenLimit {
		reset := t0.Add(time.Duration(i) * time.Hour)
		return SeenLimit{Kind: "usage", Text: "resets " + reset.Format(time.Kitchen), Reset: reset}
	}
	var st Status
	st.LimitSeen = limit(0)
	st = st.ReleaseShown(limit(1)).Released(1, PhaseRunning, false, "")
	assert.True(t, st.WasReleased(limit(0)), "the limit taken before the release")
	assert.True(t, st.WasReleased(limit(1)), "the limit shown at the release")
	st = st.Released(2, PhaseRunning, false, "")
	assert.Len(t, st.ReleasedLimits, 2, "a limit released twice is kept once")
	for i := 2; i < 2+MaxReleasedLimits; i++ {
		st.LimitSeen = limit(i)
		st = st.Released(int64(i+1), PhaseRunning, false, "")
	}
	assert.Len(t, st.ReleasedLimits, MaxReleasedLimits)
	assert.False(t, st.WasReleased(limit(0)), "the oldest is forgotten first")
	assert.True(t, st.WasReleased(limit(1+MaxReleasedLimits)))
	dated := limit(1 + MaxReleasedLimits)
	dated.At = t0
	assert.True(t, st.WasReleased(dated), "an undated release covers the same banner from any line")
}

// TestStatusCloneSharesNothing: Clone copies every field of Status that
// refers to memory (a slice, a pointer, a map), those of its groups
// included, so a status field added later cannot be shared between the
// store's cache and its callers unnoticed.
func TestStatusCloneSharesNothing(t *testing.T) {
	var st Status
	v := reflect.ValueOf(&st).Elem()
	fields := reflect.VisibleFields(v.Type())
	for _, sf := range fields {
		if sf.Anonymous {
			continue // a group: its fields are visible too
		}
		f := v.FieldByIndex(sf.Index)
		switch f.Kind() {
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
			t.Fatalf("Status.%s is a %s: Clone does not copy it", sf.Name, f.Kind())
		}
	}
	c := reflect.ValueOf(st.Clone())
	checked := 0
	for _, sf := range fields {
		if sf.Anonymous {
			continue
		}
		switch f := v.FieldByIndex(sf.Index); f.Kind() {
		case reflect.Slice, reflect.Pointer:
			checked++
			assert.NotEqual(t, f.Pointer(), c.FieldByIndex(sf.Index).Pointer(), "Status.%s is shared by Clone", sf.Name)
			assert.Equal(t, f.Interface(), c.FieldByIndex(sf.Index).Interface(), sf.Name)
		}
	}
	assert.Positive(t, checked, "Status has fields that refer to memory")
}
