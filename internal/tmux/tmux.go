// Package tmux controls loopd's private tmux server (tmux -L <socket>) with
// domain verbs. Every verb is one exec of the tmux client; targets are always
// exact ("=name" for sessions, "=name:" or a %pane id for panes), because
// "-t loop-1" silently matches "loop-12" (tmux(1), "COMMANDS", target-session).
//
// Client is the interface and Exec the real implementation. The in-memory
// fake for tests, with the same sentinel errors, is tmuxtest.Fake;
// tmuxtest.RunConformance runs one suite against both, so that the fake
// stays honest.
package tmux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"
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
	// ErrForeign means the target session does not carry the caller's
	// owner mark (another loopd made it, or someone by hand): KillSession,
	// Paste and SendKeys refuse it and change nothing.
	ErrForeign = errors.New("tmux: session belongs to another owner")
	// ErrNotHarness means the target pane's foreground process is none of
	// the names the guard allows (the harness exited and left a shell, say):
	// Paste and SendKeys refuse it and send nothing.
	ErrNotHarness = errors.New("tmux: foreground process is not the harness")
	// ErrScreenChanged means the target pane's screen no longer shows
	// what the guard's Shows need (the question was answered or went
	// away): SendKeys and Paste refuse it and send nothing.
	ErrScreenChanged = errors.New("tmux: screen no longer shows the guarded text")
	// ErrServerOwned means EnsureServer found the server claimed by another
	// loopd instance; the error names that instance's state dir.
	ErrServerOwned = errors.New("tmux: server belongs to another loopd")
	// ErrServerEnvironment means EnsureServer found the server process
	// started with variables its ServerOptions.EnvAllowed refuses (a
	// server started by hand or by an older loopd with the daemon's whole
	// environment); only the names are reported.
	ErrServerEnvironment = errors.New("tmux: server process holds variables agents must not see")
)

// Owner identifies one loopd instance on a tmux server. The server carries
// the mark of the instance that claimed it (EnsureServer), and every session
// carries the mark of the instance that made it (NewSession.Owner).
type Owner struct {
	// ID is the mark compared inside tmux formats: 16 lowercase hex digits
	// (NewOwner).
	ID string
	// StateDir is the instance's absolute state dir, named to another
	// instance that finds the server taken.
	StateDir string
}

// NewOwner returns the Owner of the loopd whose absolute state dir is
// stateDir; its ID is the first 16 hex digits of the SHA-256 of the path, so
// the same state dir is the same owner across restarts.
func NewOwner(stateDir string) Owner {
	sum := sha256.Sum256([]byte(stateDir))
	return Owner{ID: hex.EncodeToString(sum[:8]), StateDir: stateDir}
}

// OwnerOf returns the Owner (NewOwner) of the loopd whose state dir is
// stateDir, made absolute first: a relative path and its absolute one
// name the same owner.
func OwnerOf(stateDir string) (Owner, error) {
	dir, err := filepath.Abs(stateDir)
	if err != nil {
		return Owner{}, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	return NewOwner(dir), nil
}

// Guard is what a pane must show, checked by tmux in the same invocation as
// the paste or keys it guards, so that nothing between a check and the act
// can change the answer: the session carries Owner's mark, the pane is
// alive, and its foreground process (pane_current_command, see
// CommandName) is one of Commands; and, when Shows is not empty, its
// visible screen shows each of Shows in one of its lines (ScreenShows).
type Guard struct {
	Owner    string
	Commands []string
	// Shows are the lines a question's answer needs on the screen still
	// (harness.Question.Lines): keys sent behind them reach that
	// question, never the one after it.
	Shows []string
}

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
	// DeadTime is when tmux recorded the pane's death (pane_dead_time, whole
	// seconds); zero while the pane lives or its status is not known. tmux
	// 3.3a sets it when it has both read the pane's end and reaped its child
	// (server_destroy_pane), so it is the death to within a few
	// milliseconds, except for a child tmux failed to reap (StatusKnown
	// false): there it is the reap that a later Kick brings, not the death.
	DeadTime time.Time
	// Activity is when the pane's window last had output (window_activity,
	// whole seconds; loopd's sessions have one pane): a screen captured in
	// a later second still shows what the pane shows.
	Activity time.Time
	PID      int
	// CurrentCommand is pane_current_command: the name of the pane's
	// foreground process (CommandName of its process group leader's argv[0]).
	CurrentCommand string
	// Owner is the owner mark (Owner.ID) of the pane's session: "" for a
	// session without one, "?" for a mark that is not an owner id.
	Owner string
	// ServerOwner is the owner mark of the server (the Owner.ID that
	// claimed it, EnsureServer) as the same listing showed it, the same on
	// every row: "" for an unclaimed server, "?" for a mark that is not an
	// owner id.
	ServerOwner string
	// Clients is how many tmux clients are attached to the pane's session
	// (session_attached): a person watching or typing. loopd's own control
	// client attaches to a session of its own.
	Clients int
	// Input is when the session last had a client's input, or an attach
	// (session_activity, whole seconds); while a client is attached,
	// tmux counts send-keys as input too.
	Input time.Time
	// AttachedBy is who attached to the session through loopd attach (the
	// attender mark, tmux.AttachArgv), "" when no one did or the mark is
	// not a login name.
	AttachedBy string
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
	// Owner is the owner mark (Owner.ID) set on the session in the same
	// tmux invocation that creates it; "" leaves it unmarked, like a
	// session made by hand.
	Owner string
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
	// Owner, when its ID is set, claims the server: EnsureServer marks an
	// unmarked server with it and fails with ErrServerOwned when another
	// owner's mark is there.
	Owner Owner
	// EnvAllowed, when set, is the rule for the server process's own
	// environment: EnsureServer reads it (/proc/<pid>/environ, Linux) and
	// fails with ErrServerEnvironment when it holds a name EnvAllowed
	// refuses. A server started by someone else keeps, in its process,
	// whatever it was started with: the global environment can be
	// scrubbed, that cannot, and same-uid agents can read it.
	EnvAllowed func(name string) bool
}

// Client is loopd's view of one tmux server. Every method takes ctx first and
// runs one tmux invocation. "no server running" and "no current target"
// count as zero sessions, never as errors.
type Client interface {
	// EnsureServer starts the server if needed and sets exit-empty off,
	// remain-on-exit on and the pane-died hook globally, and claims the
	// server for opts.Owner; Exec also makes the server's global
	// environment its client's (Exec.Env). It is idempotent. It returns
	// ErrServerOwned, naming the other state dir, when another owner
	// claimed the server; the options are set all the same (they are the
	// same for every loopd).
	EnsureServer(ctx context.Context, opts ServerOptions) error
	// ServerOwner returns the owner that claimed the server; the zero Owner
	// when none did or no server runs.
	ServerOwner(ctx context.Context) (Owner, error)
	// StopEmptyServer ends the server when it holds no session and carries
	// owner's mark, checked and done in one tmux invocation, so that no
	// session made meanwhile is lost, and returns once it is gone. It
	// reports whether it ended one; no server running is false and no
	// error.
	StopEmptyServer(ctx context.Context, owner Owner) (bool, error)
	// NewSession creates the session and returns its pane id ("%N") and
	// the pane's process id (the launcher, which execs the harness in
	// place, so the harness's pid). It returns ErrSessionExists when the name is taken and ErrCommandTooLong
	// when the argv is too long for tmux. A trailing ';' in an argument is
	// escaped so that tmux keeps it.
	NewSession(ctx context.Context, s NewSession) (paneID string, pid int, err error)
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
	// text is a no-op. It pastes only when the pane passes g, checked in
	// the same tmux invocation. It returns ErrNoSession for a missing
	// target, ErrPaneDead for a dead pane, ErrForeign for a session without
	// g.Owner's mark and ErrNotHarness for another foreground process, and
	// then pastes nothing.
	Paste(ctx context.Context, target string, g Guard, text string) error
	// SendKeys sends tmux key names (e.g. "Enter", "C-c") to target; a word
	// that is not a key name is typed as text. It sends them only when the
	// pane passes g, and returns the errors of Paste.
	SendKeys(ctx context.Context, target string, g Guard, keys ...string) error
	// CapturePane returns the visible screen of target, or the whole history
	// too when history is true. It returns ErrNoSession for a missing target.
	CapturePane(ctx context.Context, target string, history bool) (string, error)
	// CapturePanes returns the visible screens of targets, by target, read
	// in one tmux invocation whatever their number. A target that is
	// missing (no such session or pane, or no server) is left out of the
	// map; that is no error. An invalid target (CheckTarget) fails the
	// whole call.
	CapturePanes(ctx context.Context, targets []string) (map[string]string, error)
	// KillSession kills the session named name when it carries owner's
	// mark, checked in the same tmux invocation. It returns ErrNoSession if
	// the session is missing and ErrForeign, killing nothing, if it carries
	// another mark or none.
	KillSession(ctx context.Context, name, owner string) error
	// WaitFor blocks until channel is signalled (wait-for -S) or ctx ends,
	// and then returns ctx's error. A signal sent while nobody waits is kept
	// for the next WaitFor. It returns ErrNoSession when no server runs.
	// tmux 3.3a keeps a cancelled waiter until the channel's next signal,
	// which it then swallows if no other waiter is present, so a caller keeps
	// one long-lived WaitFor and a polling fallback.
	WaitFor(ctx context.Context, channel string) error
}
