package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/desired"
)

// A drain needs another live host that is not draining to take the items.
func TestDrainTaker(t *testing.T) {
	tests := []struct {
		name  string
		hosts []desired.Host
		want  error
	}{
		{name: "alone", hosts: []desired.Host{{Name: "a", Live: true}}, want: ErrNoTaker},
		{name: "other_live", hosts: []desired.Host{{Name: "a", Live: true}, {Name: "b", Live: true}}},
		{name: "other_dead", hosts: []desired.Host{{Name: "a", Live: true}, {Name: "b"}}, want: ErrNoTaker},
		{name: "other_draining", hosts: []desired.Host{{Name: "a", Live: true}, {Name: "b", Live: true, Draining: true}}, want: ErrNoTaker},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, DrainTaker(tt.hosts, "a"))
		})
	}
}

// A drain moves the items whose lease names its host, and waits for each
// until another live host holds it or it needs no host any more.
func TestDrainMovesAndLeft(t *testing.T) {
	key := func(n int) desired.Key { return desired.Key{Owner: "o", Repo: "r", Number: n} }
	rec := func(n int, owner string, phase desired.Phase, closed bool) desired.Record {
		return desired.Record{Key: key(n), Lease: desired.Lease{Owner: owner}, Spec: desired.Spec{Closed: closed},
			Status: desired.Status{Phase: phase}}
	}
	before := []desired.Record{
		rec(1, "a", desired.PhaseRunning, false),
		rec(2, "b", desired.PhaseRunning, false),
		rec(3, "a", desired.PhaseRunning, false),
		rec(4, "a", desired.PhaseRunning, false),
		rec(5, "a", desired.PhaseRunning, false),
		rec(6, "a", desired.PhaseRunning, false),
	}
	moves := DrainMoves(before, "a")
	assert.Equal(t, []desired.Key{key(1), key(3), key(4), key(5), key(6)}, moves, "only the drained host's items")

	hosts := []desired.Host{{Name: "a", Live: true, Draining: true}, {Name: "b", Live: true}, {Name: "c"}}
	now := []desired.Record{
		rec(1, "b", desired.PhaseRunning, false), // taken by a live host
		rec(3, "", desired.PhaseStopped, false),  // released, no host yet
		rec(4, "c", desired.PhaseRunning, false), // held by a dead host
		rec(5, "a", desired.PhaseStopped, true),  // closed and stopped: needs no host
		rec(6, "a", desired.PhaseRunning, false), // not moved yet
	}
	assert.Equal(t, []desired.Key{key(3), key(4), key(6)}, DrainLeft(now, hosts, "a", moves))
	assert.Empty(t, DrainLeft(nil, hosts, "a", moves), "items gone from the store wait for nothing")
}
