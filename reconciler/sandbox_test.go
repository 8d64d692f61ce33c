package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/schema"
)

// TestPlanCarriesTheRoutesSandbox: a spawn, fresh or resumed, carries its
// route's sandbox (a route's mode over the top-level one, the top-level
// binds then the route's); the default runs sandboxed with no bind.
func TestPlanCarriesTheRoutesSandbox(t *testing.T) {
	exited := desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: oldID, ConfirmedSessionID: oldID, Session: sess,
		SpawnMode: desired.SpawnFresh, SpawnedAt: spawnAt}, RestartHistory: desired.RestartHistory{LastExitAt: t0.Add(-1)}}
	spawnOf := func(t *testing.T, p Policy, r desired.Record) actions.Spawn {
		t.Helper()
		for _, a := range Plan([]desired.Record{r}, obs(gone(), transcript), p, t0) {
			switch a := a.(type) {
			case actions.FreshSpawn:
				return a.Spawn
			case actions.ResumeSpawn:
				return a.Spawn
			}
		}
		t.Fatal("no spawn planned")
		return actions.Spawn{}
	}
	p := testPolicy()
	s := spawnOf(t, p, rec(desired.Status{Phase: desired.PhaseIdle}, ev1))
	assert.False(t, s.NoSandbox)
	assert.Nil(t, s.Binds)

	p.Sandbox = schema.Sandbox{Mode: sandbox.ModeBubblewrap, Binds: []schema.SandboxBind{{Path: "/srv/cache", Write: true}}}
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/*": {Harness: "claude-code", Workdir: cwd,
		Sandbox: &schema.Sandbox{Mode: sandbox.ModeNone, Binds: []schema.SandboxBind{{Path: "/opt/tool"}}}}}}
	for _, r := range []desired.Record{rec(desired.Status{Phase: desired.PhaseIdle}, ev1), rec(exited, ev1)} {
		s := spawnOf(t, p, r)
		assert.True(t, s.NoSandbox)
		assert.Equal(t, []sandbox.Bind{{Source: "/srv/cache", Write: true}, {Source: "/opt/tool"}}, s.Binds)
	}
	var line string
	for _, a := range Plan([]desired.Record{rec(desired.Status{Phase: desired.PhaseIdle}, ev1)}, obs(gone(), transcript), p, t0) {
		if f, ok := a.(actions.FreshSpawn); ok {
			line = f.String()
		}
	}
	require.NotEmpty(t, line)
	assert.Contains(t, line, " sandbox=none ", "the dry run says so")
}

// TestUnsandboxed: an item runs unsandboxed when its route says none, or
// when its current spawn was made so; the reason says sandbox=none.
func TestUnsandboxed(t *testing.T) {
	p := testPolicy()
	boxed := rec(desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Sandbox: sandbox.ModeBubblewrap}})
	was := rec(desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Sandbox: sandbox.ModeNone}})
	assert.False(t, Unsandboxed(boxed, p))
	assert.True(t, Unsandboxed(was, p), "spawned so before a reload")
	assert.NotContains(t, Explain([]desired.Record{boxed}, p, t0, 0)[boxed.Key].Reason, "sandbox=")
	e := Explain([]desired.Record{was}, p, t0, 0)[was.Key]
	assert.True(t, e.Unsandboxed)
	assert.Contains(t, e.Reason, "sandbox=none")

	p.Sandbox = schema.Sandbox{Mode: sandbox.ModeNone}
	assert.True(t, Unsandboxed(boxed, p), "the route's choice applies before the next spawn")
	assert.True(t, Unsandboxed(rec(desired.Status{}), p), "an item never spawned")
}
