package reconciler

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
)

// planFirst is the plan healFirst makes of h's items numbered first.
func planFirst(h *host, p Policy, first ...int) []actions.Action {
	p = p.withRoutes(h.recs)
	x := acrossOf(h.recs, h.obs, p, t0)
	x.only = map[desired.Key]bool{}
	for _, n := range first {
		x.only[itemKey(n)] = true
	}
	return planAcross(h.recs, h.obs, p, t0, x)
}

// TestHealFirstPlansTheDeadAsTheWholePassWould: the plan of the items
// whose agents died, made before the rest of the pass, holds what the
// whole pass plans for them and nothing for the others, whose starts in
// flight and slots still hold the dead item's respawn back.
func TestHealFirstPlansTheDeadAsTheWholePassWould(t *testing.T) {
	fleet := func() *host {
		return newHost().add(1, probing(), "alive").add(2, running(), "dead").add(3, running(), "dead").
			add(4, desired.Status{}, "", event(4, t0.Add(-time.Minute)))
	}
	unlimited, starts, slots := testPolicy(), testPolicy(), testPolicy()
	starts.MaxStarts = 1
	slots.MaxLive = 3
	tests := []struct {
		name string
		p    Policy
		want map[int]string
	}{
		{"unlimited_respawns", unlimited, map[int]string{2: "record_exit BackingOff; resume_spawn pane_dead"}},
		{"a_start_in_flight_holds_it", starts, map[int]string{2: "record_exit BackingOff; wait starts_in_flight"}},
		{"its_own_slot_is_kept_from_the_queue", slots, map[int]string{2: "record_exit BackingOff; resume_spawn pane_dead"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := planFirst(fleet(), tt.p, 2)
			assert.Equal(t, tt.want, decisions(first))
			whole := Plan(fleet().recs, fleet().obs, tt.p, t0)
			assert.Equal(t, slices.DeleteFunc(whole, func(a actions.Action) bool { return a.Item() != itemKey(2) }), first)
		})
	}
}
