package actions

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/internal/workspace"
)

// Sandbox is how the executor puts each spawn of a sandboxed route in a
// sandbox of its own (internal/sandbox, docs/design.md "Sandbox").
type Sandbox struct {
	// Host is this machine's sandbox, as sandbox.Check found it; Err,
	// when set, is why none can be made here (bwrap missing, no user
	// namespaces): a sandboxed spawn is then refused with it.
	Host sandbox.Host
	Err  error
	// Hide and Mask are loopd's own paths that no sandbox shows
	// (schema.Config.Hidden): its state dir, the dirs of its config and
	// secrets, or those files themselves.
	Hide, Mask []string
}

// modeOf is how the executor runs the harness of s: in a sandbox unless
// the route says none or the executor has no Sandbox.
func (e *Executor) modeOf(s Spawn) string {
	if s.NoSandbox || e.Sandbox == nil {
		return sandbox.ModeNone
	}
	return sandbox.ModeBubblewrap
}

// spawnSandbox is what a spawn runs in: the argv put before the harness's
// (after the launcher), the variables the harness gets on top of its
// adapter's, and the mode recorded in the status.
type spawnSandbox struct {
	wrap []string
	env  map[string]string
	mode string
}

// sandboxFor prepares the harness's state of the item for a spawn of s in
// its workdir (harness.ItemState: a per-item home, the per-item view of a
// sandbox) and, unless the route says sandbox none, the sandbox around
// argv: the workdir read-write, the harness's executable and install dir
// and loopd's own read-only, the harness's state, the mirror objects its
// clone borrows read-only (workspace.Borrowed), the item's channel
// read-write, the route's binds, a private $HOME and $TMPDIR, nothing of
// loopd's own (Sandbox.Hide, Mask). An executor without a Sandbox runs
// every spawn as sandbox none, and records it so.
func (e *Executor) sandboxFor(s Spawn, ad harness.Adapter, resumes string, argv []string) (spawnSandbox, error) {
	boxed := e.modeOf(s) == sandbox.ModeBubblewrap
	out := spawnSandbox{mode: sandbox.ModeNone}
	state, err := harness.ItemState(ad, s.Cwd, resumes, boxed)
	if err != nil {
		return out, fmt.Errorf("sandbox of %s: %w", s.Session, err)
	}
	out.env = state.Env
	if !boxed {
		return out, nil
	}
	if e.Sandbox.Err != nil {
		return out, fmt.Errorf("sandbox of %s: %w", s.Session, e.Sandbox.Err)
	}
	h := e.Sandbox.Host
	env := ad.Env()
	value := func(name string) string {
		if v, ok := state.Env[name]; ok {
			return v
		}
		if v, ok := env[name]; ok {
			return v
		}
		for _, kv := range e.RunEnviron {
			if v, ok := strings.CutPrefix(kv, name+"="); ok {
				return v
			}
		}
		return ""
	}
	program, err := h.Resolve(argv[0], value("PATH"))
	if err != nil {
		return out, fmt.Errorf("sandbox of %s: %w", s.Session, err)
	}
	// A clone's git needs the mirror's objects it borrows, and only
	// them: read-only, so that no agent changes what other items borrow.
	borrowed, err := workspace.Borrowed(s.Cwd)
	if err != nil {
		return out, fmt.Errorf("sandbox of %s: %w", s.Session, err)
	}
	spec := sandbox.Spec{
		Workdir: s.Cwd, Program: program.Path, ReadOnly: append(program.ReadOnly, borrowed...),
		Binds: append(state.Binds, s.Binds...), Hide: e.Sandbox.Hide, Mask: e.Sandbox.Mask,
	}
	for _, name := range []string{"HOME", "TMPDIR"} {
		if p := filepath.Clean(value(name)); filepath.IsAbs(p) && p != "/" {
			spec.Private = append(spec.Private, p)
		}
	}
	for _, b := range s.Binds {
		// A bind whose path is gone fails bwrap in the pane, where it
		// would look like a harness that exits 1: said here instead.
		if _, err := os.Stat(b.Source); err != nil {
			return out, fmt.Errorf("sandbox of %s: bind: %w", s.Session, err) // stat <path>: …
		}
	}
	if e.Channels != "" {
		// The item's channel, which harnessEnv makes before the
		// harness starts: its reports and its socket.
		spec.Channel = channel.Dir(e.Channels, s.Session)
	}
	if out.wrap, err = h.Wrap(spec); err != nil {
		return out, fmt.Errorf("sandbox of %s: %w", s.Session, err)
	}
	out.mode = sandbox.ModeBubblewrap
	return out, nil
}

// sandboxInit is the process of the sandbox whose end means every process
// in it has ended (sandbox.Init), for a pane or run whose process is pid
// and whose status says it was sandboxed; pid itself otherwise.
func sandboxInit(st desired.Status, pid int) int {
	if st.Sandbox != sandbox.ModeBubblewrap {
		return pid
	}
	if init, ok := sandbox.Init(pid); ok {
		return init
	}
	return pid
}
