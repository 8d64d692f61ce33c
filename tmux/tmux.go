// Package tmux controls loopd's private tmux server (tmux -L <socket>) with
// domain verbs. Every verb is one exec of the tmux client; targets are always
// exact ("=name" for sessions, "=name:" or a %pane id for panes), because
// "-t loop-1" silently matches "loop-12" (tmux(1), "COMMANDS", target-session).
//
// Client is the interface; Exec is the real implementation and Fake an
// in-memory one with the same sentinel errors. tmuxtest.RunConformance runs
// one suite against both, so that the Fake stays honest.
package tmux

import (
	"context"
	"errors"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNoSession means the target session does not exist.
	ErrNoSession = errors.New("tmux: no such session")
	// ErrSessionExists means new-session found a session of that name.
	ErrSessionExists = errors.New("tmux: duplicate session")
	// ErrCommandTooLong means tmux refused the argv (about 16 KiB, measured
	// in docs/reference: "command too long").
	ErrCommandTooLong = errors.New("tmux: command too long")
	// ErrNotInstalled means the tmux binary was not found.
	ErrNotInstalled = errors.New("tmux: binary not found")
	// ErrPaneDead means Paste found the target pane dead (its program has
	// exited and remain-on-exit keeps it). tmux 3.3a's server crashes when
	// paste-buffer targets a dead pane, so Paste checks first.
	ErrPaneDead = errors.New("tmux: pane is dead")
)

// Pane is one row of list-panes -a.
type Pane struct {
	Session string
	PaneID  string // "%N"
	Dead    bool
	// DeadStatus is the exit status of a dead pane. StatusKnown is false when
	// tmux shows pane_dead=1 with an empty pane_dead_status and an empty
	// pane_dead_signal (tmux ≤ 3.4 has not reaped the child yet); that is
	// "not known yet", never exit 0. A pane killed by a signal has a known
	// status, DeadStatus 0 and DeadSignal set.
	DeadStatus  int
	StatusKnown bool
	// DeadSignal is the signal number that killed the pane, 0 if none.
	DeadSignal int
	PID        int
	// StartCommand is the argv the pane was started with, as tmux shows it.
	StartCommand string
	// CurrentCommand is pane_current_command (the foreground process name).
	CurrentCommand string
}

// NewSession describes a detached session with one pane that runs Argv
// directly (no shell). The pane's environment is the server's global one;
// nothing is set per session, so no value ever sits in tmux's argv.
type NewSession struct {
	Name string
	Dir  string // -c
	// Launcher, when not empty, is the argv of a program that the pane runs
	// first, with Argv appended, and that replaces itself with Argv
	// (execve): loopd's launcher, which gives the harness its environment
	// from a private file. The pane's process then is Argv's, with the same
	// pid.
	Launcher []string
	// Argv is the command and its arguments, passed after "--" and
	// Launcher. It must have at least 2 elements: with one, tmux hands it
	// to sh -c.
	Argv   []string
	Width  int // columns; 0 means 200
	Height int // rows; 0 means 50
}

// ServerOptions are applied when the server is started, before any session,
// because setting remain-on-exit afterwards is too late for a command that
// dies at once.
type ServerOptions struct {
	// PaneDiedChannel, when not empty, installs a global pane-died hook that
	// runs wait-for -S <channel>.
	PaneDiedChannel string
	// HistoryLimit is history-limit for new panes; 0 keeps tmux's default.
	HistoryLimit int
}

// Client is loopd's view of one tmux server. Every method takes ctx first and
// runs one tmux invocation. "no server running" and "no current target"
// count as zero sessions, never as errors.
type Client interface {
	// EnsureServer starts the server if needed and sets exit-empty off,
	// remain-on-exit on and the pane-died hook globally; Exec also makes
	// the server's global environment its client's (Exec.Env). It is
	// idempotent.
	EnsureServer(ctx context.Context, opts ServerOptions) error
	// NewSession creates the session and returns its pane id ("%N"). It
	// returns ErrSessionExists when the name is taken and ErrCommandTooLong
	// when the argv is too long for tmux. A trailing ';' in an argument is
	// escaped so that tmux keeps it.
	NewSession(ctx context.Context, s NewSession) (paneID string, err error)
	// ListPanes lists every pane on the server in one call, in tmux's order:
	// sessions by name (byte order), then windows, then panes by index. With
	// no server or no sessions it returns an empty slice and no error.
	ListPanes(ctx context.Context) ([]Pane, error)
	// Kick makes the server fork and reap a child (run-shell true), so that
	// tmux ≤ 3.4 records the status of a pane it failed to reap.
	Kick(ctx context.Context) error
	// Paste delivers text to the pane target (a %pane id or "=name:") as a
	// bracketed paste: load-buffer from stdin into a unique buffer, then
	// paste-buffer -p -d -r. Any size works; it does not press Enter. Empty
	// text is a no-op. It returns ErrNoSession for a missing target and
	// ErrPaneDead for a dead pane (and then pastes nothing).
	Paste(ctx context.Context, target, text string) error
	// SendKeys sends tmux key names (e.g. "Enter", "C-c") to target; a word
	// that is not a key name is typed as text. It returns ErrNoSession for a
	// missing target; keys sent to a dead pane are dropped without error.
	SendKeys(ctx context.Context, target string, keys ...string) error
	// CapturePane returns the visible screen of target, or the whole history
	// too when history is true. It returns ErrNoSession for a missing target.
	CapturePane(ctx context.Context, target string, history bool) (string, error)
	// KillSession kills the session named name; ErrNoSession if missing.
	KillSession(ctx context.Context, name string) error
	// WaitFor blocks until channel is signalled (wait-for -S) or ctx ends,
	// and then returns ctx's error. A signal sent while nobody waits is kept
	// for the next WaitFor. It returns ErrNoSession when no server runs.
	// tmux 3.3a keeps a cancelled waiter until the channel's next signal,
	// which it then swallows if no other waiter is present, so a caller keeps
	// one long-lived WaitFor and a polling fallback.
	WaitFor(ctx context.Context, channel string) error
}
