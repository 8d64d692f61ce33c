// Package harness adapts agent CLIs (Claude Code first) to loopd: the argv of
// a fresh spawn and of a resume, whether interactive resume exists at all,
// which session ids are safe to put in argv, where the transcript lives, and
// what a ready or blocked screen looks like.
package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// ErrUnknownAdapter is returned by New for an adapter name it does not know.
var ErrUnknownAdapter = errors.New("unknown harness adapter")

// SessionIDPattern is the id shape that may ever reach argv
// (docs/design.md, "Choosing resume or fresh").
var SessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Transcript is what an adapter knows of a conversation's transcript on disk.
type Transcript struct {
	// Known is false when the adapter cannot tell (no transcript rule); the
	// planner then trusts the probe alone.
	Known  bool
	Exists bool
	Size   int64 // bytes
	Path   string
	// ModTime is when the transcript was last written (its mtime); zero
	// when it does not exist. An agent that works writes it.
	ModTime time.Time
}

// Screen classifies a capture-pane of the harness's TUI.
type Screen string

// The screen classes.
const (
	ScreenReady   Screen = "ready"   // accepts input
	ScreenBusy    Screen = "busy"    // up, not (yet) showing its input prompt
	ScreenBlocked Screen = "blocked" // a dialog (workspace trust, picker, login) waits for a human
	// ScreenDraft is the input box holding text nobody submitted: a paste
	// whose Enter was lost, or an operator's draft.
	ScreenDraft Screen = "draft"
)

// DraftReason is the reason Screen gives with ScreenDraft.
const DraftReason = "input box holds unsubmitted text"

// Adapter is one agent CLI's argv grammar and habits.
type Adapter interface {
	// Name is the harness name from config.
	Name() string
	// SupportsResume reports whether the CLI can resume a conversation
	// interactively by id. When false, every spawn is fresh.
	SupportsResume() bool
	// ValidSessionID reports whether id may be passed to this CLI. It
	// implies SessionIDPattern; Claude Code also requires a UUID (a non-UUID
	// opens its interactive picker).
	ValidSessionID(id string) bool
	// FreshArgv returns the whole argv (command first) that starts a new
	// conversation pinned to id with prompt as its first message; prompt ""
	// starts it with no message.
	FreshArgv(id, prompt string) []string
	// ResumeArgv returns the whole argv that resumes id with prompt.
	ResumeArgv(id, prompt string) []string
	// Env returns the variables the harness gets on top of the tmux
	// server's environment (paneenv.Base), through loopd's launcher: the
	// harness's env and loopd's values of passEnv and of the variables
	// the adapter needs (paneenv.Pass).
	Env() map[string]string
	// Transcript reports the transcript of id for the physical cwd.
	Transcript(cwd, id string) (Transcript, error)
	// TranscriptFrames reads the transcript tr once and reports, for each
	// of frames by delivery id, what the CLI's user messages in it show of
	// it: only what a user typed or pasted counts, never the agent's own
	// words or its tools' output. A torn last line is skipped.
	TranscriptFrames(tr Transcript, frames []desired.Frame) (map[string]Found, error)
	// Screen classifies captured pane text, with a short reason for Blocked.
	Screen(text string) (Screen, string)
	// ProcessNames are the names tmux shows as the pane's foreground
	// process (pane_current_command) while the CLI itself runs there. A
	// pane showing any other name runs something else, a shell the CLI left
	// behind say: the agent is dead, and nothing is pasted into it.
	ProcessNames() []string
	// Blocked returns what the screen shows that keeps the agent from
	// working until a human acts (a Block: a dialog that replaces the
	// input box, as Screen's reason, or a login the replies ask for while
	// the box still takes prompts); "" for nothing.
	Blocked(text string) Block
	// Limit reports the usage limit the screen shows, its reset read at
	// now.
	Limit(text string, now time.Time) (Limit, bool)
	// TranscriptLimit reports the usage limit the latest turn of the
	// transcript tr ended on.
	TranscriptLimit(tr Transcript) (Limit, bool, error)
	// LimitMenuKeys returns the tmux keys that choose the usage-limit
	// menu's choice that waits for the reset, and never one that spends
	// money; nil when the screen shows no such menu.
	LimitMenuKeys(text string) []string
	// Account names the account the harness's usage counts against:
	// harnesses with the same Account share their usage limits.
	Account() string
}

// SessionStartReporter is implemented by adapters whose CLI can report the
// conversation id it runs at each session start, so that loopd confirms a
// resume positively and follows the id when it changes (Claude Code's
// /clear starts a new one).
type SessionStartReporter interface {
	// WithSessionStartHook returns a copy of the adapter whose spawns run
	// command, a shell command line, at every session start, with the
	// CLI's hook input (JSON with session_id and source) on stdin.
	WithSessionStartHook(command string) Adapter
}

// Headless is implemented by adapters whose CLI can run one turn without a
// TUI, for the process runner: the turn's event is its prompt, and the
// process exits when the turn ends.
type Headless interface {
	// HeadlessArgv returns the whole argv (command first) of one headless
	// turn with prompt, in conversation id when resume is true and in a new
	// one otherwise, and what the process gets on its stdin (nil: nothing,
	// /dev/null). The prompt reaches the CLI in argv or on stdin, never
	// through a shell. A CLI that can pin a new conversation's id (Claude
	// Code's and Gemini's --session-id) pins it to id; one that cannot
	// (Codex) ignores id on a fresh turn, and its output names the id
	// (HeadlessSessionID).
	HeadlessArgv(id, prompt string, resume bool) (argv []string, stdin []byte)
	// HeadlessSessionID returns the conversation id that the output of a
	// headless run (its stdout, as written to the run's log) names, "" when
	// it names none.
	HeadlessSessionID(output []byte) string
	// CheckHeadlessArgs reports a word of extraArgs that the headless form
	// refuses though the TUI takes it (Codex's exec has no -a), wrapping
	// ErrBadConfig; loopd config validate asks it of each process route.
	CheckHeadlessArgs() error
}

// TurnFinder is implemented by headless adapters that can tell, from the
// transcripts alone, which conversation a headless turn went into: for a
// run whose output names none (stopped at its timeout).
type TurnFinder interface {
	// TurnConversation returns the id of the conversation of the
	// physical cwd, written at or after since, whose user lines hold the
	// frame boot (the run's boot line), the newest of them; "" for none.
	TurnConversation(cwd string, since time.Time, boot desired.Frame) (string, error)
}

// SessionLearner is implemented by adapters whose CLI cannot start a
// conversation under an id chosen in advance (Codex): a fresh spawn's id
// is unconfirmed until loopd learns it from the files the CLI writes at
// the first prompt (docs/design.md, "Learning a conversation id").
type SessionLearner interface {
	// SessionsStarted returns the conversations the CLI started in the
	// physical cwd at or after since, oldest first.
	SessionsStarted(cwd string, since time.Time) ([]Started, error)
}

// Started is a conversation a SessionLearner found on disk.
type Started struct {
	ID string
	// At is when the CLI started the session (its own record of it).
	At time.Time
	// First is the text of its first user message: the boot prompt of the
	// spawn that started it.
	First string
}

// GroupStopper is implemented by adapters that can say their CLI outlives
// tmux kill-session (Gemini's two node processes keep running without
// their terminal), so that loopd ends the pane's process group to stop it.
type GroupStopper interface {
	// StopsProcessGroup reports whether stopping the CLI's pane takes
	// ending its process group.
	StopsProcessGroup() bool
}

// StopsProcessGroup reports whether a stops by process group
// (GroupStopper); adapters that do not say never do.
func StopsProcessGroup(a Adapter) bool {
	g, ok := a.(GroupStopper)
	return ok && g.StopsProcessGroup()
}

// ProjectSettingsGate is implemented by adapters whose CLI reads settings
// from its workdir that can run code as loopd's user the moment it starts
// (hooks, MCP servers, tool discovery): Claude Code's .claude/ and
// .mcp.json, Codex's .codex/config.toml, Gemini's .gemini/. Every adapter
// New makes starts its CLI with them off, and provisions no trust mark
// that would turn them on (docs/design.md, "Repository content never
// configures the harness").
type ProjectSettingsGate interface {
	// WithProjectSettings returns a copy of the adapter whose spawns let
	// the CLI read the workdir's own settings when trusted is true, and
	// keep them off otherwise: in argv, environment and provisioning
	// alike.
	WithProjectSettings(trusted bool) Adapter
}

// WithProjectSettings returns a with its workdir's project settings on
// (trusted) or off (ProjectSettingsGate); an adapter that cannot say
// (a custom harness: its CLI's settings are the operator's to set) is
// returned as it is.
func WithProjectSettings(a Adapter, trusted bool) Adapter {
	if g, ok := a.(ProjectSettingsGate); ok {
		return g.WithProjectSettings(trusted)
	}
	return a
}

// Provisioner is implemented by adapters whose CLI needs settings in its
// config dir before it runs under loopd (Claude Code: onboarding done, the
// workdir trusted, the auto-updater off; Gemini: session retention off).
type Provisioner interface {
	// Provision writes the settings for a spawn in workdir, keeping every
	// setting of the user's that it does not need; it is called before
	// every spawn (through Provision, which honours the opt-out).
	Provision(workdir string) error
}

// Provision has a's CLI provisioned for a spawn in workdir (Provisioner),
// unless a's harness config opts out (provision: false); an adapter that
// needs nothing passes.
func Provision(a Adapter, workdir string) error {
	p, ok := a.(Provisioner)
	if !ok {
		return nil
	}
	if o, ok := a.(interface{ provisions() bool }); ok && !o.provisions() {
		return nil
	}
	return p.Provision(workdir)
}

// ExitExplainer is implemented by adapters whose CLI gives exit statuses a
// meaning of their own (Gemini: 41 no auth, 42 no such session).
type ExitExplainer interface {
	// ExitCause names what exit status means, "" when it means nothing
	// in particular.
	ExitCause(status int) string
}

// ExitCause is a's name for exit status (ExitExplainer), "" when a gives
// none.
func ExitCause(a Adapter, status int) string {
	if e, ok := a.(ExitExplainer); ok {
		return e.ExitCause(status)
	}
	return ""
}

// Adapter names, the values of schema.Harness.Adapter.
const (
	AdapterClaudeCode = "claude-code"
	AdapterCodex      = "codex"
	AdapterGemini     = "gemini"
	AdapterCursor     = "cursor"
	AdapterCustom     = "custom"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrBadConfig means a harness config cannot make an adapter: no
	// command, a template or ready pattern that does not compile, or
	// extraArgs that would clash with the adapter's own flags.
	ErrBadConfig = errors.New("invalid harness config")
	// ErrCommandNotFound means LookCommand found no executable for the
	// harness command.
	ErrCommandNotFound = errors.New("harness command not found")
	// ErrInvalidSessionID means Transcript was asked about an id that fails
	// SessionIDPattern, so it cannot name a file.
	ErrInvalidSessionID = errors.New("invalid session id")
)

// New returns the adapter for the harness called name. cfg.Adapter selects
// it ("claude-code", "codex", "gemini", "cursor" or "custom"); an empty cfg.Adapter means the
// harness name. It returns ErrUnknownAdapter for any other adapter and
// ErrBadConfig for a config the adapter cannot use.
//
// cfg.Command is kept as given when it is a bare name, so that the pane
// finds it on PATH. A command containing a slash is made absolute against
// loopd's own working directory here, because tmux would otherwise resolve
// a relative path against the pane's cwd (docs/reference/harness-cli-facts.md,
// "tmux facts that bit during probing").
func New(name string, cfg schema.Harness) (Adapter, error) {
	kind := cfg.Adapter
	if kind == "" {
		kind = name
	}
	if !slices.Contains([]string{AdapterClaudeCode, AdapterCodex, AdapterGemini, AdapterCursor, AdapterCustom}, kind) {
		return nil, fmt.Errorf("harness %s: adapter %q: %w", name, kind, ErrUnknownAdapter)
	}
	b, err := newBase(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", name, err)
	}
	var a Adapter
	switch kind {
	case AdapterClaudeCode:
		a, err = newClaudeCode(b)
	case AdapterCodex:
		a, err = newCodex(b)
	case AdapterGemini:
		a, err = newGemini(b)
	case AdapterCursor:
		a, err = newCursor(b)
	default:
		a, err = newCustom(b, cfg.FreshArgs, cfg.ResumeArgs)
	}
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", name, err)
	}
	return a, nil
}

// LookCommand checks that the command of an adapter made by New can be
// started: a bare name must be an executable on the pane's PATH (the
// harness env's PATH when it sets one, else loopd's own, which its tmux
// server gets), a path must be an executable file. It returns an error
// wrapping ErrCommandNotFound when it cannot, so that loopd can say so
// before spawning: tmux shows a missing command only as a pane that died
// with status 1 and a blank screen (docs/reference/harness-cli-facts.md).
// Adapters not made by New always pass.
func LookCommand(a Adapter) error {
	if b, ok := a.(interface{ lookCommand() error }); ok {
		return b.lookCommand()
	}
	return nil
}

// Command returns the command an adapter made by New starts, as
// configured (absolute when it names a path), for what loopd shows of a
// harness that exits at once; "" for other adapters.
func Command(a Adapter) string {
	if b, ok := a.(interface{ commandName() string }); ok {
		return b.commandName()
	}
	return ""
}

// Found is what a transcript shows of one delivery's frame.
type Found struct {
	// Whole is true when some user message holds the frame whole.
	Whole bool
	// Mangled counts the user messages that hold the frame's begin line
	// but not the whole frame (desired.SeenMangled).
	Mangled int
}

// scanFrames reads the transcript tr once and reports, for each of frames
// by delivery id, what the user messages in it show of it; userText picks
// the text of a user message out of one line of the CLI's JSONL, and
// reports false for any other line (a line that is not JSON, as a torn
// last line, included).
func scanFrames(tr Transcript, frames []desired.Frame, userText func(line []byte) (string, bool)) (map[string]Found, error) {
	f, err := os.Open(tr.Path)
	if err != nil {
		return nil, fmt.Errorf("read transcript %s: %w", tr.Path, err)
	}
	defer f.Close()
	found := make(map[string]Found, len(frames))
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if text, ok := userText(line); ok {
			for _, fr := range frames {
				got := found[fr.ID]
				switch fr.Check(text) {
				case desired.SeenWhole:
					got.Whole = true
				case desired.SeenMangled:
					got.Mangled++
				}
				found[fr.ID] = got
			}
		}
		if err == io.EOF {
			return found, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read transcript %s: %w", tr.Path, err)
		}
	}
}

// claudeUserText returns the text of a Claude Code transcript line that
// holds a user's message, and whether it is one: a JSONL line of type
// "user" that is not a meta line, whose message content is a string or an
// array of {"type":"text","text":…} parts (tool results, which an agent's
// commands fill, are other part types).
func claudeUserText(line []byte) (string, bool) {
	// Most lines are not user messages; skip them before decoding.
	if !bytes.Contains(line, []byte(`"user"`)) {
		return "", false
	}
	var l struct {
		Type    string `json:"type"`
		IsMeta  bool   `json:"isMeta"`
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "user" || l.IsMeta || l.Message.Role != "user" {
		return "", false
	}
	var s string
	if json.Unmarshal(l.Message.Content, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(l.Message.Content, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), b.Len() > 0
}
