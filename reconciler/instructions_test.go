package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// TestPlanCarriesStandingInstructions: a fresh spawn, which starts a new
// conversation, carries its route's standing instructions; a resume, whose
// conversation got them when it began, does not.
func TestPlanCarriesStandingInstructions(t *testing.T) {
	const text = "Work on the issue, open a pull request, reply on the issue."
	p := testPolicy()
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/*": {Harness: "claude-code", Workdir: cwd, Instructions: text}}}
	exited := desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: oldID, ConfirmedSessionID: oldID, Session: sess, SpawnMode: desired.SpawnFresh, SpawnedAt: spawnAt},
		RestartHistory: desired.RestartHistory{LastExitAt: t0.Add(-time.Second)}}
	tests := []struct {
		name string
		rec  desired.Record
		want func(t *testing.T, a actions.Action)
	}{
		{"first_event_fresh_spawn", rec(desired.Status{Phase: desired.PhaseIdle}, ev1), func(t *testing.T, a actions.Action) {
			require.IsType(t, actions.FreshSpawn{}, a)
			assert.Equal(t, text, a.(actions.FreshSpawn).Instructions)
		}},
		{"resume_gets_none", rec(exited, ev1), func(t *testing.T, a actions.Action) {
			require.IsType(t, actions.ResumeSpawn{}, a, "the conversation is resumed")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Plan([]desired.Record{tt.rec}, obs(gone(), transcript), p, t0)
			var spawn actions.Action
			for _, a := range plan {
				switch a.(type) {
				case actions.FreshSpawn, actions.ResumeSpawn:
					spawn = a
				}
			}
			require.NotNil(t, spawn, "%v", plan)
			tt.want(t, spawn)
		})
	}

	// Without instructions on the route, none.
	p.Routing.Repos["octo-org/*"] = schema.Route{Harness: "claude-code", Workdir: cwd}
	for _, a := range Plan([]desired.Record{rec(desired.Status{Phase: desired.PhaseIdle}, ev1)}, obs(gone()), p, t0) {
		if f, ok := a.(actions.FreshSpawn); ok {
			assert.Empty(t, f.Instructions)
		}
	}
}
