package actions

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/internal/runner"
	"github.com/loopd/loopd/schema"
)

// StopRun ends a run of the process runner with its process group
// (runner.Runner.Stop): SIGTERM, then SIGKILL. The next pass judges the
// run that ended by its transcript, as any other.
type StopRun struct {
	Key     desired.Key
	Session string
	Run     string
	// DeliveryID is the event the run carries, "" when it already
	// reached the conversation.
	DeliveryID string
	// Timeout is the route's dispatchTimeoutSeconds the run outlived.
	Timeout time.Duration
	Reason  Reason
}

// Item implements Action.
func (a StopRun) Item() desired.Key { return a.Key }

// Name implements Action.
func (StopRun) Name() string { return "stop_run" }

// Mutates implements Action.
func (StopRun) Mutates() bool { return true }

// Fields implements Action.
func (a StopRun) Fields() []Field {
	f := []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyRun, a.Run}}
	if a.DeliveryID != "" {
		f = append(f, Field{journal.KeyDelivery, a.DeliveryID})
	}
	return append(f, Field{journal.KeyTimeout, a.Timeout}, Field{journal.KeyReason, string(a.Reason)})
}

func (a StopRun) String() string { return Format(a) }

// Rest puts a process-runner item with no run in flight and no event
// pending at rest (Idle) until its next event: a headless run is only
// ever started for an event.
type Rest struct {
	Key     desired.Key
	Session string
	Reason  Reason
}

// Item implements Action.
func (a Rest) Item() desired.Key { return a.Key }

// Name implements Action.
func (Rest) Name() string { return "rest" }

// Mutates implements Action.
func (Rest) Mutates() bool { return true }

// Fields implements Action.
func (a Rest) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyReason, string(a.Reason)}}
}

func (a Rest) String() string { return Format(a) }

// runID names a new run: its start time in UTC, which sorts as runs
// start (runner.Start keeps the newest logs by it).
func runID(now time.Time) string { return now.UTC().Format("20060102T150405.000000000Z") }

// startRun starts the headless run of a spawn whose intent (phase
// Spawning, st.RunID) is recorded: argv and stdin are the adapter's
// headless form (harness.Headless) after the sandbox's wrapper, its
// environment the harness's with the item's harness state (harnessEnv) on
// top of what every pane gets (RunEnviron), its cwd the item's workdir. On
// a host of a shared store (Launcher.Fence) it runs through the launcher,
// fenced as a pane's harness is. A run that cannot be started is a refused
// spawn, as a pane tmux refused.
func (e *Executor) startRun(ctx context.Context, r *desired.Record, s Spawn, st desired.Status, token string, argv []string, stdin []byte, ad harness.Adapter, state map[string]string) error {
	if e.Runs == nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), fmt.Errorf("start run %s: no process runner", st.RunID))
	}
	env, err := e.harnessEnv(r, ad, state, s.Session, token, e.RunEnviron)
	if err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err)
	}
	if e.Launcher.Fence != "" {
		// A host of a shared store: the run goes through the pane's
		// launcher, whose watchdog ends it once this host can no longer
		// prove it holds the lease, and which never starts it under a
		// lapsed epoch (package fence). The environment goes in its file.
		launcher, _, err := e.Launcher.Prepare(s.Session, env, leaseEpoch(ctx))
		if err != nil {
			return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err)
		}
		argv, env = append(launcher, argv...), nil
	}
	spec := runner.Spec{Item: s.Session, ID: st.RunID, Cwd: s.Cwd, Argv: argv, Env: launch.Environ(e.RunEnviron, env), Stdin: stdin, Done: e.Wake}
	if err := e.Runs.Start(ctx, spec); err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err) // start run <id>: …
	}
	e.Log.InfoContext(ctx, string(journal.SessionStarting), "work_item", r.Key.String(), "session", s.Session, "run", st.RunID,
		"log", e.Runs.LogPath(s.Session, st.RunID), "mode", string(st.SpawnMode), "harness_session_id", st.HarnessSessionID,
		"delivery", s.DeliveryID, "bytes", len(s.Prompt), "project_settings", s.ProjectSettings, "reason", string(s.Reason))
	return nil
}

// headlessArgv is the argv and stdin of a headless turn of ad.
func headlessArgv(ad harness.Adapter, id, prompt string, resume bool) ([]string, []byte, error) {
	h, ok := ad.(harness.Headless)
	if !ok {
		return nil, nil, fmt.Errorf("harness %s: %w: no headless form", ad.Name(), ErrUnknownHarness)
	}
	argv, stdin := h.HeadlessArgv(id, prompt, resume)
	return argv, stdin, nil
}

// stopRun carries out a StopRun and journals dispatch.timeout.
func (e *Executor) stopRun(ctx context.Context, r *desired.Record, a StopRun) error {
	if e.Runs == nil {
		return fmt.Errorf("stop run %s of %s: no process runner", a.Run, r.Key)
	}
	f, err := e.Runs.Read(a.Session, a.Run)
	if err != nil {
		return fmt.Errorf("stop run %s of %s: %w", a.Run, r.Key, err)
	}
	killed, err := e.Runs.Stop(ctx, a.Session, f, schema.RunStopGrace, schema.RunStopPoll)
	e.record(ctx, slog.LevelError, journal.DispatchTimeout, r.Key, "session", a.Session, "run", a.Run, "delivery", a.DeliveryID,
		"timeout", a.Timeout, "pid", f.PID, "killed", killed, "log", f.Log, "reason", string(a.Reason))
	if err != nil {
		return fmt.Errorf("stop run %s of %s: %w", a.Run, r.Key, err)
	}
	// The reason stays until the pass that judges the run, which keeps it
	// for a run whose event landed (loopd get shows dispatch_timeout).
	st := r.Status
	st.Reason = string(a.Reason)
	return e.put(ctx, r, st)
}

// endRun ends the run in flight of an item that is stopped (closed or
// held), if any.
func (e *Executor) endRun(ctx context.Context, r *desired.Record, session string) error {
	if r.Status.RunID == "" || e.Runs == nil {
		return nil
	}
	f, err := e.Runs.Read(session, r.Status.RunID)
	if err != nil {
		return err
	}
	_, err = e.Runs.Stop(ctx, session, f, schema.RunStopGrace, schema.RunStopPoll)
	return err
}

// rest carries out a Rest.
func (e *Executor) rest(ctx context.Context, r *desired.Record, a Rest) error {
	st := r.Status
	st.Phase, st.Reason, st.NextAttempt = desired.PhaseIdle, string(a.Reason), time.Time{}
	return e.put(ctx, r, st)
}

// logOrAttach is what a journal line names to follow an agent: the log
// of a run, or the tmux command that attaches to its session.
func (e *Executor) logOrAttach(a MarkRunning) []any {
	if a.Log != "" {
		return []any{"log", a.Log}
	}
	return []any{"attach", AttachCommand(e.Socket, a.Session)}
}

// AttachArgv returns the argv, "tmux" first, that attaches a terminal to
// session on loopd's tmux server of socket name socket: tmux -L, and an
// exact target ("=" prefix, tmux(1) "target-session"), so that no other
// session whose name starts the same is taken for it. attach is tmux's
// alias of attach-session. loopd attach execs it.
func AttachArgv(socket, session string) []string {
	return []string{"tmux", "-L", socket, "attach", "-t", "=" + session}
}

// AttachCommand returns AttachArgv as the command line an operator types
// (the journal's attach=, loopd describe, the status page). Socket and
// session names hold no character a shell splits on (the schema's pattern
// for tmux.socket; desired.SessionName).
func AttachCommand(socket, session string) string {
	return strings.Join(AttachArgv(socket, session), " ")
}
