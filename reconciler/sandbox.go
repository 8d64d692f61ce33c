package reconciler

import (
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/schema"
)

// SandboxOf is the sandbox the agents of item k run in under p: its
// route's (schema.Route.SandboxOf) under p's top-level sandbox; an item no
// route matches takes the top-level one.
func (p Policy) SandboxOf(k desired.Key) schema.Sandbox {
	route, _ := p.route(k)
	return route.SandboxOf(p.Sandbox)
}

// Unsandboxed reports whether r's agent runs, or will run, with no
// sandbox under p: its route says sandbox none, or its current spawn was
// made so (desired.Status.Sandbox, which a reload does not change until
// the next spawn). loopd get, describe, the status page and /metrics show
// it on every such item.
func Unsandboxed(r desired.Record, p Policy) bool {
	return r.Status.Sandbox == sandbox.ModeNone || !p.SandboxOf(r.Key).Sandboxed()
}

// starting reports whether a live pane whose foreground process tmux
// names name is still starting its harness: loopd's launcher (p.Launcher)
// or the sandbox being made (sandbox.Starting) leads it. Such a spawn is
// waited for up to the confirm timeout, however long a loaded machine
// takes; any other name is judged at the probe deadline.
func (p Policy) starting(name string) bool {
	return name == sandbox.Starting || p.Launcher != "" && name == p.Launcher
}
