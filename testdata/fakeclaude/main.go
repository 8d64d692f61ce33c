// Command fakeclaude stands in for the Claude Code 2.1.197 CLI in tests
// and demos. It copies the argv grammar, the transcript files and the
// screens that loopd depends on, as measured in
// docs/reference/harness-cli-facts.md, and answers every prompt the way the
// real CLI does logged in ("OK."), or offline ("Not logged in · Please run
// /login", FAKECLAUDE_NOT_LOGGED_IN=1).
//
// Build it with: go build -o fakeclaude ./testdata/fakeclaude
//
// Behaviour:
//   - --session-id <uuid> starts a new conversation. A value that is not a
//     UUID exits 1 at once with "Error: Invalid session ID. Must be a valid
//     UUID."; a transcript file already there for this cwd exits 1 with
//     "Error: Session ID <id> is already in use.".
//   - -r/--resume [value] resumes. Without a value (a following "--flag" is
//     not one) or with a non-UUID value it opens the "Resume session"
//     picker, which never exits by itself. A UUID without a conversation in
//     this cwd prints "No conversation found with session ID: <id>" and
//     exits 1 after FAKECLAUDE_RESUME_FAIL_DELAY. --resume with --session-id
//     needs --fork-session.
//   - The transcript is <CLAUDE_CONFIG_DIR or ~/.claude>/projects/<encoded
//     physical cwd>/<id>.jsonl, created at the first submitted prompt, with
//     a user line and an assistant line per turn.
//   - With a terminal on stdin and stdout it runs a TUI: raw mode,
//     bracketed paste, an input box below a rule ("❯" + NBSP), the
//     positional prompt submitted at start, Enter (CR) submits, LF and
//     bracketed pastes insert newlines, and an Enter in the same read as
//     more than 50 bytes of unbracketed text is a newline. Ctrl-C twice
//     within a second, or the prompt /exit, exits 0 with "Resume this
//     session with:" / "claude --resume <id>" when the transcript exists.
//     The prompt /clear starts a new conversation under a new id and runs
//     the SessionStart hooks with "source": "clear".
//     SIGHUP and SIGTERM exit with 128+signal, as the real CLI does.
//   - The SessionStart hooks of the settings it reads run through sh -c at
//     start, with {"session_id", "transcript_path", "cwd",
//     "hook_event_name": "SessionStart", "source": "startup" or "resume"}
//     on stdin, as Claude Code does ("clear" after /clear), in the TUI and
//     with -p: the user settings (<config>/settings.json), the project's
//     .claude/settings.json and .claude/settings.local.json (each unless
//     --setting-sources leaves its source out), and --settings <json or
//     file>. The project's .mcp.json servers start when a settings file it
//     read enables them (enableAllProjectMcpServers, enabledMcpjsonServers)
//     and neither --strict-mcp-config nor --setting-sources without
//     "project" turns them off; those of --mcp-config always. A -p turn
//     waits up to 5 s for its servers to end; the TUI ends them when it
//     exits.
//   - Otherwise it behaves like -p: it answers one prompt (the positional
//     one, or stdin) on stdout and exits 1 offline (0 logged in). The user
//     line goes into the transcript first, the answer after
//     FAKECLAUDE_REPLY_DELAY. With --output-format json the answer is one
//     result object, {"type":"result", "is_error", "result",
//     "session_id", …}, as the real CLI prints (harness-cli-facts.md,
//     "Headless turns"). SIGTERM ends it at once, with the signal.
//
// Environment knobs:
//
//	FAKECLAUDE_RESUME_FAIL_DELAY  Go duration before a missing resume exits (default 600ms)
//	FAKECLAUDE_REPLY_DELAY        Go duration each turn stays busy ("esc to interrupt"; default 0); in print mode, between the user line and the answer
//	FAKECLAUDE_CHILD_PID_FILE     print mode: start a child (sleep) in the fake's process group and write its pid to this file, as a CLI's tool would
//	FAKECLAUDE_TRUST_PROMPT=1     show the workspace trust dialog until Enter (TUI only, like the real one)
//	FAKECLAUDE_CRASH_AFTER        Go duration after which the TUI exits 1
//	FAKECLAUDE_IGNORE_SIGHUP=1    ignore SIGHUP (and keep running when the terminal goes away)
//	FAKECLAUDE_START_LOG          file to which each start appends {"time": RFC 3339 with ns, "pid": n, "argv": [...]} as a line
//	FAKECLAUDE_RESUME_FAIL=1      every resume of a UUID fails like a missing conversation, even when the transcript exists
//	FAKECLAUDE_MANGLE=1           the TUI folds every run of spaces in a submitted prompt into one space before writing it
//	FAKECLAUDE_HANGUP_DELAY       Go duration the TUI runs on after SIGHUP or SIGTERM before it exits (the real CLI: 40–150 ms)
//	FAKECLAUDE_LOCK_DIR           directory where the TUI holds an flock on <session id>.lock while it runs; a start that finds
//	                              the lock held by another process appends {"time", "pid", "session_id"} to overlaps.log there
//	FAKECLAUDE_NOT_LOGGED_IN=1    answer every prompt "Not logged in · Please run /login", with the footer "Not logged in · Run /login", as the real CLI does offline
//	FAKECLAUDE_LIMIT_UNTIL        Unix seconds: every prompt submitted before then hits a usage limit that resets then (TUI only); a comma-separated list is limits back to back, a prompt hitting the first that ends after it; its answer is an API error line in the transcript and on screen, in the form of FAKECLAUDE_LIMIT_FORM, and the TUI then waits
//	FAKECLAUDE_LIMIT_FORM         epoch (default: "Claude AI usage limit reached|<unix seconds>"), banner ("You've hit your session limit · resets 3:04pm (UTC)"), or menu (the banner, then the usage-limit menu until a choice is made)
//	FAKECLAUDE_LIMIT_WHILE        a file: the limits of FAKECLAUDE_LIMIT_UNTIL hold only while it exists (a limit that ends before the reset its banner names, as when more usage is bought)
//	FAKECLAUDE_LIMIT_MENU_CURSOR  the menu choice (1-3) the cursor starts on (default 1); a digit moves the cursor, Enter chooses
//	FAKECLAUDE_LIMIT_MENU_NO_CURSOR=1  the menu is drawn without its cursor (a frame caught mid-draw), and every key it gets is logged to FAKECLAUDE_MENU_LOG as {"key": …}
//	FAKECLAUDE_MENU_LOG           file to which each choice made in a menu appends its label as a line
//	FAKECLAUDE_PERMISSION_PROMPT=1 every prompt opens a tool permission dialog ("Do you want to proceed?", a command of its
//	  own, three choices) that waits for a key: a choice's number picks it, Enter the one under the cursor; the choice
//	  and the command are logged to FAKECLAUDE_MENU_LOG; its last choice ("No", as 2.1.197 draws it) ends the turn
//	  interrupted ("What should Claude do instead?"), and the next prompt is the person's words
//	FAKECLAUDE_ECHO=1             answer a prompt that holds "ECHO: <text>" with that text (to the end of its line), as an agent quoting what it was asked about
//	FAKECLAUDE_PROBE=1            run each line of a submitted prompt that starts with "PROBE: " through sh -c in the cwd, before the answer, as an
//	                              agent runs what a comment talks it into; each appends {"cmd", "output", "status"} to probes.jsonl in the cwd
//	FAKECLAUDE_BOOT_DELAY         Go duration the TUI waits after its start (and its SessionStart hooks) before it submits its positional prompt, busy meanwhile (the real CLI: 1.2–7.8 s on a resume)
//	FAKECLAUDE_RESUME_KILL_AFTER  Go duration after which a resumed TUI sends itself SIGKILL (a death by signal in the probe window)
//	FAKECLAUDE_REFUSE_ALIVE=1     a resume prints "No conversation found with session ID: <id>" and stays up, never exiting (as gemini-cli#14941 did)
//	FAKECLAUDE_BACKGROUND_AGENT=1 a resume prints "Error: Session <id> is currently running as a background agent (…)" and exits 1, TUI or print mode
//	FAKECLAUDE_SCREEN             a dialog that waits for a person, shown at start until Enter, before the positional prompt is submitted: resume_summary
//	                              (the resume-return chooser, on a resume only, unless .claude.json says resumeReturnDismissed or the conversation is
//	                              younger than CLAUDE_CODE_RESUME_THRESHOLD_MINUTES, default 70), cost_threshold, policy_update, mcp_server, mcp_servers,
//	                              external_imports, api_key, onboarding, bypass_consent (whose Enter, "No, exit", exits 1); connectivity prints the
//	                              preflight's "Unable to connect to Anthropic services" and exits 1
//	FAKECLAUDE_ONCE_DIR           directory in which FAKECLAUDE_RESUME_KILL_AFTER, FAKECLAUDE_REFUSE_ALIVE and FAKECLAUDE_BACKGROUND_AGENT take a marker
//	                              per conversation id: each applies to the first resume of a conversation only
//	FAKECLAUDE_USAGE              "input,output,cache_creation,cache_read": every assistant message carries this message.usage and an id
//	                              of its own (msg_…), written as two lines as the real CLI writes a message's content blocks: the first
//	                              with 1 output token, the second with the whole usage
//	FAKECLAUDE_LONG_TURN          n: a prompt that holds "LONG TURN" runs a turn of n assistant messages, one per FAKECLAUDE_REPLY_DELAY
//	                              (at least 100ms), before its answer; Escape interrupts it ("[Request interrupted by user]", as the real
//	                              CLI writes it) and the turn ends there
//	FAKECLAUDE_HEADLESS_NEW_ID=1  print mode: a resumed turn is written under a new id, the old conversation copied in first, and the result names
//	                              the new id (older CLIs did, anthropics/claude-code#4926)
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/testdata/fakecli"
	"github.com/loopd/loopd/testdata/faketerm"
)

const (
	version     = "2.1.197 (Claude Code)"
	notLoggedIn = "Not logged in · Please run /login"
	loggedIn    = "OK."
)

// The usage-limit menu's title and choices (Claude Code 2.1.x); only the
// first spends nothing.
var (
	limitMenuTitle   = "What do you want to do?"
	limitMenuChoices = []string{"Stop and wait for limit to reset", "Switch to extra usage", "Upgrade your plan"}
)

// spaceRuns is what FAKECLAUDE_MANGLE folds.
var spaceRuns = regexp.MustCompile(` {2,}`)

// uuidPattern is the shape claude accepts for --session-id and treats as
// an id (not a search term) for --resume; case is kept.
var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// knobs are the FAKECLAUDE_* settings.
type knobs struct {
	resumeFailDelay time.Duration
	replyDelay      time.Duration
	crashAfter      time.Duration // 0: never
	trustPrompt     bool
	ignoreSIGHUP    bool
	startLog        string
	resumeFail      bool // every resume fails as if the conversation were missing
	mangle          bool // fold runs of spaces in submitted prompts
	hangupDelay     time.Duration
	lockDir         string
	notLoggedIn     bool
	limitUntil      []time.Time // the ends of back-to-back limits, in order; none: no limit
	limitForm       string      // epoch, banner or menu
	limitWhile      string      // a file without which limitUntil holds nothing; "": always
	limitCursor     int         // 1-based
	noCursor        bool        // the limit menu is drawn without its cursor
	menuLog         string
	permission      bool
	echo            bool
	probe           bool
	childPIDFile    string
	bootDelay       time.Duration
	resumeKillAfter time.Duration
	refuseAlive     bool
	backgroundAgent bool
	screen          string
	onceDir         string
	headlessNewID   bool
	usage           *usage // nil: no usage on the assistant lines
	longTurn        int
}

// usage is an assistant message's message.usage, as Claude Code writes it.
type usage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheWrite int64 `json:"cache_creation_input_tokens"`
	CacheRead  int64 `json:"cache_read_input_tokens"`
}

// reply is the answer to prompt outside a usage limit.
func (k knobs) reply(prompt string) string {
	if k.notLoggedIn {
		return notLoggedIn
	}
	if _, quoted, ok := strings.Cut(prompt, "ECHO: "); ok && k.echo {
		quoted, _, _ = strings.Cut(quoted, "\n")
		return strings.TrimSpace(quoted)
	}
	return loggedIn
}

// runProbes runs the probes of prompt (fakecli.RunProbes) with the probe
// knob on.
func (k knobs) runProbes(prompt string) error {
	if !k.probe {
		return nil
	}
	return fakecli.RunProbes(prompt)
}

// limit returns the end of the usage limit a prompt submitted at now
// hits: the first of limitUntil after now; false after the last, and
// while limitWhile names a file that is not there.
func (k knobs) limit(now time.Time) (time.Time, bool) {
	if k.limitWhile != "" {
		if _, err := os.Stat(k.limitWhile); err != nil {
			return time.Time{}, false
		}
	}
	for _, t := range k.limitUntil {
		if now.Before(t) {
			return t, true
		}
	}
	return time.Time{}, false
}

// limitText is the answer of a usage limit that ends at until, in the
// form the knobs ask for.
func (k knobs) limitText(until time.Time) string {
	if k.limitForm == "epoch" {
		return fmt.Sprintf("Claude AI usage limit reached|%d", until.Unix())
	}
	return "You've hit your session limit · resets " + strings.ToLower(until.UTC().Format("3:04PM")) + " (UTC)"
}

func readKnobs() (knobs, error) {
	k := knobs{
		resumeFailDelay: 600 * time.Millisecond,
		trustPrompt:     os.Getenv("FAKECLAUDE_TRUST_PROMPT") == "1",
		ignoreSIGHUP:    os.Getenv("FAKECLAUDE_IGNORE_SIGHUP") == "1",
		startLog:        os.Getenv("FAKECLAUDE_START_LOG"),
		resumeFail:      os.Getenv("FAKECLAUDE_RESUME_FAIL") == "1",
		noCursor:        os.Getenv("FAKECLAUDE_LIMIT_MENU_NO_CURSOR") == "1",
		mangle:          os.Getenv("FAKECLAUDE_MANGLE") == "1",
		lockDir:         os.Getenv("FAKECLAUDE_LOCK_DIR"),
		notLoggedIn:     os.Getenv("FAKECLAUDE_NOT_LOGGED_IN") == "1",
		limitForm:       "epoch",
		limitWhile:      os.Getenv("FAKECLAUDE_LIMIT_WHILE"),
		limitCursor:     1,
		menuLog:         os.Getenv("FAKECLAUDE_MENU_LOG"),
		childPIDFile:    os.Getenv("FAKECLAUDE_CHILD_PID_FILE"),
		permission:      os.Getenv("FAKECLAUDE_PERMISSION_PROMPT") == "1",
		echo:            os.Getenv("FAKECLAUDE_ECHO") == "1",
		probe:           os.Getenv("FAKECLAUDE_PROBE") == "1",
		refuseAlive:     os.Getenv("FAKECLAUDE_REFUSE_ALIVE") == "1",
		backgroundAgent: os.Getenv("FAKECLAUDE_BACKGROUND_AGENT") == "1",
		screen:          os.Getenv("FAKECLAUDE_SCREEN"),
		onceDir:         os.Getenv("FAKECLAUDE_ONCE_DIR"),
		headlessNewID:   os.Getenv("FAKECLAUDE_HEADLESS_NEW_ID") == "1",
	}
	if _, ok := screens[k.screen]; k.screen != "" && k.screen != "connectivity" && !ok {
		return knobs{}, fmt.Errorf("FAKECLAUDE_SCREEN: %q is no screen of the fake's", k.screen)
	}
	if v := os.Getenv("FAKECLAUDE_LIMIT_UNTIL"); v != "" {
		for _, f := range strings.Split(v, ",") {
			secs, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return knobs{}, fmt.Errorf("FAKECLAUDE_LIMIT_UNTIL: %w", err)
			}
			k.limitUntil = append(k.limitUntil, time.Unix(secs, 0))
		}
	}
	switch v := os.Getenv("FAKECLAUDE_LIMIT_FORM"); v {
	case "":
	case "epoch", "banner", "menu":
		k.limitForm = v
	default:
		return knobs{}, fmt.Errorf("FAKECLAUDE_LIMIT_FORM: %q is not epoch, banner or menu", v)
	}
	if v := os.Getenv("FAKECLAUDE_LIMIT_MENU_CURSOR"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > len(limitMenuChoices) {
			return knobs{}, fmt.Errorf("FAKECLAUDE_LIMIT_MENU_CURSOR: %q is not 1 to %d", v, len(limitMenuChoices))
		}
		k.limitCursor = n
	}
	if v := os.Getenv("FAKECLAUDE_USAGE"); v != "" {
		var n [4]int64
		parts := strings.Split(v, ",")
		if len(parts) != 4 {
			return knobs{}, fmt.Errorf("FAKECLAUDE_USAGE: %q is not four counts", v)
		}
		for i, p := range parts {
			var err error
			if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
				return knobs{}, fmt.Errorf("FAKECLAUDE_USAGE: %w", err)
			}
		}
		k.usage = &usage{Input: n[0], Output: n[1], CacheWrite: n[2], CacheRead: n[3]}
	}
	if v := os.Getenv("FAKECLAUDE_LONG_TURN"); v != "" {
		var err error
		if k.longTurn, err = strconv.Atoi(v); err != nil {
			return knobs{}, fmt.Errorf("FAKECLAUDE_LONG_TURN: %w", err)
		}
	}
	for name, d := range map[string]*time.Duration{
		"FAKECLAUDE_RESUME_FAIL_DELAY": &k.resumeFailDelay,
		"FAKECLAUDE_REPLY_DELAY":       &k.replyDelay,
		"FAKECLAUDE_CRASH_AFTER":       &k.crashAfter,
		"FAKECLAUDE_HANGUP_DELAY":      &k.hangupDelay,
		"FAKECLAUDE_BOOT_DELAY":        &k.bootDelay,
		"FAKECLAUDE_RESUME_KILL_AFTER": &k.resumeKillAfter,
	} {
		if v := os.Getenv(name); v != "" {
			var err error
			if *d, err = time.ParseDuration(v); err != nil {
				return knobs{}, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return k, nil
}

func main() {
	code := run()
	if code != 0 {
		// Let tmux draw the error before the pane dies.
		time.Sleep(fakecli.LastWords)
	}
	os.Exit(code)
}

func run() int {
	k, err := readKnobs()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 2
	}
	if err := fakecli.LogStart(k.startLog); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 2
	}
	inv, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch {
	case inv.help:
		fmt.Println("Usage: claude [options] [command] [prompt]")
		return 0
	case inv.version:
		fmt.Println(version)
		return 0
	case inv.hasSessionID && !uuidPattern.MatchString(inv.sessionID):
		fmt.Fprintln(os.Stderr, "Error: Invalid session ID. Must be a valid UUID.")
		return 1
	case inv.hasSessionID && (inv.resume || inv.cont) && !inv.fork:
		fmt.Fprintln(os.Stderr, "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.")
		return 1
	}
	st, err := newStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	if inv.hasSessionID {
		if _, err := os.Stat(st.path(inv.sessionID)); err == nil {
			fmt.Fprintf(os.Stderr, "Error: Session ID %s is already in use.\n", inv.sessionID)
			return 1
		}
	}
	if inv.print || !faketerm.IsTerminal(os.Stdin) || !faketerm.IsTerminal(os.Stdout) {
		return printMode(inv, k, st)
	}
	return runTUI(inv, k, st)
}

// overlapRecord is one line of overlaps.log in FAKECLAUDE_LOCK_DIR: a TUI
// started on a conversation another process of the fake still ran.
type overlapRecord struct {
	Time      string `json:"time"`
	PID       int    `json:"pid"`
	SessionID string `json:"session_id"`
}

// held are the lock files holdConversation keeps open.
var held []*os.File

// holdConversation takes an flock on <dir>/<id>.lock for the life of the
// process (the kernel drops it when the process ends, however it ends), and
// records an overlap when another process holds it: two agents on one
// conversation at once. An id that cannot name a file takes no lock.
func holdConversation(dir, id string) error {
	if !uuidPattern.MatchString(id) {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, id+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// f stays open, and so the lock held, until the process exits: held
	// keeps it from the collector, whose finalizer would close it.
	held = append(held, f)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		return nil
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	rec := overlapRecord{Time: time.Now().UTC().Format(time.RFC3339Nano), PID: os.Getpid(), SessionID: id}
	return fakecli.AppendJSONLine(filepath.Join(dir, "overlaps.log"), rec, 0o644)
}

// store finds and writes transcripts for the physical cwd, by the same
// rule loopd's claude-code adapter reads them.
type store struct {
	cwd     string
	adapter harness.Adapter
}

func newStore() (store, error) {
	wd, err := fakecli.PhysicalCwd()
	if err != nil {
		return store{}, err
	}
	a, err := harness.New(harness.AdapterClaudeCode, schema.Harness{Command: "claude"})
	if err != nil {
		return store{}, err
	}
	return store{cwd: wd, adapter: a}, nil
}

// path is the transcript file of id; "" when id cannot name a file.
func (s store) path(id string) string {
	t, err := s.adapter.Transcript(s.cwd, id)
	if err != nil {
		return ""
	}
	return t.Path
}

// configDir is the CLI's config dir: CLAUDE_CONFIG_DIR, else ~/.claude.
func (s store) configDir() string {
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".claude")
}

// conversation reports whether id has a resumable transcript here.
func (s store) conversation(id string) bool {
	t, err := s.adapter.Transcript(s.cwd, id)
	return err == nil && t.Exists
}

// latest is the id of the most recently written conversation here.
func (s store) latest() (string, bool) {
	project := filepath.Dir(s.path(uuid.NewString())) // any id names the directory
	files, _ := filepath.Glob(filepath.Join(project, "*.jsonl"))
	var best string
	var bestTime time.Time
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		info, err := os.Stat(f)
		if err == nil && s.conversation(id) && info.ModTime().After(bestTime) {
			best, bestTime = id, info.ModTime()
		}
	}
	return best, best != ""
}

// session is the conversation being written.
type session struct {
	store
	id       string
	forkFrom string // transcript copied in before the first line (--fork-session)
	parent   string // uuid of the last line written
}

// user appends a user line.
func (s *session) user(text string) error {
	return s.write("user", message{Role: "user", Content: text})
}

// answer appends text as an assistant line; with u, as a message of its
// own id whose usage is u, in two lines (the real CLI writes one per
// content block): the first with 1 output token so far.
func (s *session) answer(text string, u *usage) error {
	m := message{Model: "<synthetic>", Role: "assistant", Type: "message", Content: []textBlock{{Type: "text", Text: text}}}
	if u == nil {
		return s.write("assistant", m)
	}
	m.Model, m.ID = "claude-sonnet-4-5", "msg_"+strings.ReplaceAll(uuid.NewString(), "-", "")
	first := *u
	first.Output = 1
	m.Usage = &first
	if err := s.write("assistant", m); err != nil {
		return err
	}
	m.Usage = u
	return s.write("assistant", m)
}

// apiError appends text as the API error line the CLI writes when a
// request fails for good (a usage limit).
func (s *session) apiError(text string) error {
	return s.write("assistant", message{
		Model: "<synthetic>", Role: "assistant", Type: "message",
		Content: []textBlock{{Type: "text", Text: text}},
	}, true)
}

func (s *session) write(kind string, m message, apiError ...bool) error {
	path := s.path(s.id)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	var prefix []byte
	if s.forkFrom != "" {
		var err error
		if prefix, err = os.ReadFile(s.forkFrom); err != nil {
			return err
		}
		s.forkFrom = ""
	}
	l := transcriptLine{
		IsSidechain: false, Type: kind, Message: m, UUID: uuid.NewString(),
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		UserType:  "external", Entrypoint: "cli", CWD: s.cwd, SessionID: s.id, Version: "2.1.197",
		IsAPIErrorMessage: len(apiError) > 0 && apiError[0],
	}
	if s.parent != "" {
		l.ParentUUID = &s.parent
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(prefix, b.Bytes()...))
	if err = errors.Join(err, f.Close()); err == nil {
		s.parent = l.UUID
	}
	return err
}

type message struct {
	ID      string `json:"id,omitempty"`
	Model   string `json:"model,omitempty"`
	Role    string `json:"role"`
	Type    string `json:"type,omitempty"`
	Content any    `json:"content"` // a string for the user, []textBlock for the assistant
	Usage   *usage `json:"usage,omitempty"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// transcriptLine is one user or assistant line, with the fields of the
// real CLI's lines in their order.
type transcriptLine struct {
	ParentUUID  *string `json:"parentUuid"`
	IsSidechain bool    `json:"isSidechain"`
	Type        string  `json:"type"`
	Message     message `json:"message"`
	UUID        string  `json:"uuid"`
	Timestamp   string  `json:"timestamp"`
	UserType    string  `json:"userType"`
	Entrypoint  string  `json:"entrypoint"`
	CWD         string  `json:"cwd"`
	SessionID   string  `json:"sessionId"`
	Version     string  `json:"version"`
	// IsAPIErrorMessage marks the line the CLI writes for a request that
	// failed for good (a usage limit).
	IsAPIErrorMessage bool `json:"isApiErrorMessage,omitempty"`
}

// resumeHint is what claude prints on leaving a conversation that has a
// transcript.
func (s *session) resumeHint() string {
	if s == nil || !s.conversation(s.id) {
		return ""
	}
	return "Resume this session with:\nclaude --resume " + s.id + "\n"
}

// printMode answers one prompt like claude -p (also what claude does when
// stdout is not a terminal) and exits 1, as the real CLI does offline.
func printMode(inv invocation, k knobs, st store) int {
	s := &session{store: st, id: inv.sessionID}
	switch {
	case inv.resume && !uuidPattern.MatchString(inv.resumeValue):
		fmt.Fprintln(os.Stderr, "Error: --resume requires a valid session ID or session title when used with --print. Usage: claude -p --resume <session-id|title>")
		return 1
	case inv.resume && (k.resumeFail || !st.conversation(inv.resumeValue)):
		time.Sleep(k.resumeFailDelay)
		fmt.Fprintf(os.Stderr, "No conversation found with session ID: %s\n", inv.resumeValue)
		return 1
	case inv.resume && k.backgroundAgent && k.once("background_agent", inv.resumeValue):
		fmt.Fprint(os.Stderr, backgroundAgentRefusal(inv.resumeValue))
		return 1
	case inv.resume && k.headlessNewID:
		// The turn goes into a new conversation that starts as a copy of
		// the one resumed.
		s.forkFrom, s.id = s.path(inv.resumeValue), uuid.NewString()
	case inv.resume:
		s.resume(inv)
	case inv.cont:
		if id, ok := st.latest(); ok {
			s.id = id
		}
	}
	if s.id == "" {
		s.id = uuid.NewString()
	}
	prompt := inv.prompt
	if !inv.hasPrompt && !faketerm.IsTerminal(os.Stdin) {
		b, _ := io.ReadAll(os.Stdin)
		prompt = string(b)
	}
	if prompt == "" {
		fmt.Fprintln(os.Stderr, "Error: Input must be provided either through stdin or as a prompt argument when using --print")
		return 1
	}
	// -p skips the workspace trust dialog and reads the settings all the
	// same (measured): its SessionStart hooks and MCP servers start first.
	settings := loadedSettings(inv, st)
	source := "startup"
	if inv.resume {
		source = "resume"
	}
	runSessionStartHooks(settings, s.id, st.path(s.id), source)
	defer fakecli.StopServers(startMCPServers(inv, st, settings), mcpWait)
	if k.childPIDFile != "" {
		// A tool the turn runs: a child in the CLI's own process group.
		child := exec.Command("sleep", "3600")
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fakeclaude:", err)
			return 1
		}
		if err := os.WriteFile(k.childPIDFile, []byte(strconv.Itoa(child.Process.Pid)+"\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakeclaude:", err)
			return 1
		}
	}
	if err := s.user(prompt); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	if err := k.runProbes(prompt); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	time.Sleep(k.replyDelay)
	if err := s.answer(k.reply(prompt), k.usage); err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	code := 0
	if k.notLoggedIn {
		code = 1
	}
	if inv.outputFormat != "json" {
		fmt.Println(k.reply(prompt))
		return code
	}
	out, err := json.Marshal(map[string]any{"type": "result", "subtype": "success", "is_error": code != 0, "num_turns": 1,
		"result": k.reply(prompt), "session_id": s.id})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	fmt.Println(string(out))
	return code
}

// resume points s at the conversation inv resumes, or at a fork of it.
func (s *session) resume(inv invocation) {
	s.id = inv.resumeValue
	if inv.fork {
		s.forkFrom, s.id = s.path(inv.resumeValue), inv.sessionID
		if s.id == "" {
			s.id = uuid.NewString()
		}
	}
}

// screenState is what the TUI shows.
type screenState int

const (
	showTrust      screenState = iota // the workspace trust dialog
	showPicker                        // the resume picker
	showChat                          // the conversation and input box
	showNothing                       // blank, before a failing resume exits
	showLimitMenu                     // the usage-limit menu, below the conversation
	showPermission                    // a tool's permission dialog
	showScreen                        // the dialog FAKECLAUDE_SCREEN names
	showRefusal                       // a refusal to resume, printed by a TUI that stays up
)

// tui is the interactive mode.
type tui struct {
	inv     invocation
	knobs   knobs
	store   store
	out     io.Writer
	state   screenState
	sess    *session
	ed      faketerm.Editor
	history []string
	replies []string // the answer line shown under each of history (cliLine, answerLine)
	queue   []string // prompts submitted while busy
	cursor  int      // the menu choice the cursor is on, 1-based
	busy    bool
	// turn numbers the turns, so that a timer of a turn Escape
	// interrupted does nothing; steps are the messages a long turn
	// still writes before its answer.
	turn      int
	steps     int
	lastCtrlC time.Time
	status    string
	// events is the TUI's event loop; its timers are the running turn's
	// answer, a failing resume's exit and the positional prompt's late
	// submission (FAKECLAUDE_BOOT_DELAY).
	events   *fakecli.Loop[exitCode]
	failText string
	// settings are the settings files the session read at its start, and
	// mcp the MCP servers it started then.
	settings []settingsFile
	mcp      []*exec.Cmd
}

// exitCode ends the loop; message is printed after the terminal is
// restored.
type exitCode struct {
	code    int
	message string
}

func runTUI(inv invocation, k knobs, st store) int {
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGWINCH}
	if k.ignoreSIGHUP {
		signal.Ignore(syscall.SIGHUP)
	} else {
		sigs = append(sigs, syscall.SIGHUP)
	}
	if k.lockDir != "" {
		id := inv.sessionID
		if inv.resume && !inv.fork {
			id = inv.resumeValue
		}
		if err := holdConversation(k.lockDir, id); err != nil {
			fmt.Fprintln(os.Stderr, "fakeclaude:", err)
			return 1
		}
	}
	term, err := faketerm.Open(os.Stdout, sigs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeclaude:", err)
		return 1
	}
	u := &tui{inv: inv, knobs: k, store: st, out: os.Stdout, state: showTrust}
	if inv.resume && k.resumeKillAfter > 0 && k.once("resume_kill", inv.resumeValue) {
		// A death by signal: no exit status, no last words.
		time.AfterFunc(k.resumeKillAfter, func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	end := u.loop(term)
	fakecli.CloseTUI(term, u.mcp, end.message)
	return end.code
}

func (u *tui) loop(term *faketerm.TUI) exitCode {
	u.events = &fakecli.Loop[exitCode]{Term: term, Feed: u.ed.Feed, Handle: u.handle, Draw: u.draw,
		Signal: func(sig os.Signal) exitCode {
			time.Sleep(u.knobs.hangupDelay)
			return exitCode{faketerm.SignalStatus(sig), ""}
		}}
	if u.knobs.crashAfter > 0 {
		u.events.After(u.knobs.crashAfter, func() (exitCode, bool) {
			return exitCode{1, fmt.Sprintf("fakeclaude: simulated crash after %s\n", u.knobs.crashAfter)}, true
		})
	}
	if !u.knobs.trustPrompt {
		if end, done := u.start(); done {
			return end
		}
	}
	return u.events.Run()
}

// start leaves the trust dialog: it resolves which conversation runs and
// submits the positional prompt.
func (u *tui) start() (exitCode, bool) {
	u.state = showChat
	u.sess = &session{store: u.store, id: u.inv.sessionID}
	switch {
	case u.inv.resume && !uuidPattern.MatchString(u.inv.resumeValue):
		u.state, u.sess = showPicker, nil
		return exitCode{}, false
	case u.inv.resume && (u.knobs.resumeFail || !u.store.conversation(u.inv.resumeValue)):
		u.failLater(fmt.Sprintf("No conversation found with session ID: %s\n", u.inv.resumeValue))
		return exitCode{}, false
	case u.inv.resume && u.knobs.backgroundAgent && u.knobs.once("background_agent", u.inv.resumeValue):
		u.failLater(backgroundAgentRefusal(u.inv.resumeValue))
		return exitCode{}, false
	case u.inv.resume && u.knobs.refuseAlive && u.knobs.once("refuse_alive", u.inv.resumeValue):
		u.state, u.sess = showRefusal, nil
		return exitCode{}, false
	case u.inv.resume:
		u.sess.resume(u.inv)
	case u.inv.cont:
		id, ok := u.store.latest()
		if !ok {
			u.failLater("No conversation found to continue\n")
			return exitCode{}, false
		}
		u.sess.id = id
	}
	if u.sess.id == "" {
		u.sess.id = uuid.NewString()
	}
	source := "startup"
	if u.inv.resume {
		source = "resume"
	}
	u.settings = loadedSettings(u.inv, u.store)
	runSessionStartHooks(u.settings, u.sess.id, u.store.path(u.sess.id), source)
	u.mcp = startMCPServers(u.inv, u.store, u.settings)
	if u.knobs.screen == "connectivity" {
		// The preflight fails before anything is shown.
		return exitCode{1, connectivityFailure}, true
	}
	if u.showsScreen() {
		u.state = showScreen
		return exitCode{}, false
	}
	return u.bootPrompt()
}

// bootPrompt submits the positional prompt, at once or after
// FAKECLAUDE_BOOT_DELAY (busy meanwhile).
func (u *tui) bootPrompt() (exitCode, bool) {
	switch {
	case !u.inv.hasPrompt:
		return exitCode{}, false
	case u.knobs.bootDelay > 0:
		u.busy = true
		u.events.After(u.knobs.bootDelay, func() (exitCode, bool) {
			u.busy = false
			return u.submit(u.inv.prompt)
		})
		return exitCode{}, false
	}
	return u.submit(u.inv.prompt)
}

func (u *tui) failLater(text string) {
	u.state, u.sess = showNothing, nil
	u.failText = text
	u.events.After(u.knobs.resumeFailDelay, func() (exitCode, bool) { return exitCode{1, u.failText}, true })
}

func (u *tui) handle(ev faketerm.Event) (exitCode, bool) {
	if ev.Kind == faketerm.Interrupt {
		now := time.Now()
		if now.Sub(u.lastCtrlC) < time.Second {
			return exitCode{0, u.sess.resumeHint()}, true
		}
		u.lastCtrlC, u.status = now, "Press Ctrl-C again to exit"
		return exitCode{}, false
	}
	u.status = ""
	if ev.Kind == faketerm.Escape {
		return u.interrupt()
	}
	if u.state == showLimitMenu || u.state == showPermission {
		return u.menuKey(ev)
	}
	if ev.Kind != faketerm.Submit {
		return exitCode{}, false
	}
	switch u.state {
	case showTrust:
		return u.start()
	case showScreen:
		if code, ok := screenExits[u.knobs.screen]; ok {
			return exitCode{code, ""}, true
		}
		u.state = showChat
		return u.bootPrompt()
	case showChat:
		if strings.TrimSpace(ev.Text) != "" {
			return u.submit(ev.Text)
		}
	}
	return exitCode{}, false
}

// menuKey takes a key at a menu: a digit moves the cursor to that choice,
// Enter chooses the one under it, which is logged (FAKECLAUDE_MENU_LOG);
// the menu then closes.
func (u *tui) menuKey(ev faketerm.Event) (exitCode, bool) {
	if u.knobs.noCursor && u.state == showLimitMenu && u.knobs.menuLog != "" {
		key := string(u.ed.Buf) + ev.Text
		if ev.Kind == faketerm.Submit {
			key += "Enter"
		}
		if err := fakecli.AppendJSONLine(u.knobs.menuLog, map[string]string{"key": key}, 0o644); err != nil {
			return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
		}
	}
	picked := false
	for _, c := range string(u.ed.Buf) + ev.Text {
		if c >= '1' && c <= '3' {
			u.cursor = int(c - '0')
			// Claude Code's permission dialog takes a choice's number as
			// the choice itself; the usage-limit menu moves its cursor.
			picked = u.state == showPermission
		}
	}
	u.ed.Buf = nil
	if ev.Kind != faketerm.Submit && !picked {
		return exitCode{}, false
	}
	if u.state == showPermission {
		return u.permissionAnswered(permissionChoices[u.cursor-1])
	}
	label := limitMenuChoices[u.cursor-1]
	if u.knobs.menuLog != "" {
		if err := fakecli.AppendJSONLine(u.knobs.menuLog, map[string]string{"choice": label}, 0o644); err != nil {
			return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
		}
	}
	u.state = showChat
	return exitCode{}, false
}

// permissionChoices are the permission dialog's choices, in order; the
// last rejects the tool and returns to the input box for the person's
// words, as Claude Code 2.1.197's "No" does
// (internal/harness/testdata/claude-2.1.197/blocked-permission-bash.txt).
var permissionChoices = []string{"Yes", "Yes, and don't ask again for make commands", "No"}

// permissionCommand is the command the permission dialog of the
// current turn asks to run: each turn's its own.
func (u *tui) permissionCommand() string { return "make test-" + strconv.Itoa(len(u.history)) }

// permissionAnswered closes the permission dialog with choice, which is
// logged with the command it was asked for (FAKECLAUDE_MENU_LOG): a yes
// runs the tool and ends the turn; the no that asks what to do instead
// ends the turn where it is, as an interrupt does, and the next prompt is
// the person's words.
func (u *tui) permissionAnswered(choice string) (exitCode, bool) {
	if u.knobs.menuLog != "" {
		if err := fakecli.AppendJSONLine(u.knobs.menuLog, map[string]string{"choice": choice, "command": u.permissionCommand()}, 0o644); err != nil {
			return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
		}
	}
	u.state = showChat
	if choice != permissionChoices[len(permissionChoices)-1] {
		return u.finishTurn()
	}
	u.busy = false
	if err := u.sess.user("[Request interrupted by user for tool use]"); err != nil {
		return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
	}
	u.replies = append(u.replies, cliLine("Interrupted · What should Claude do instead?"))
	if len(u.queue) > 0 {
		next := u.queue[0]
		u.queue = u.queue[1:]
		return u.submit(next)
	}
	return exitCode{}, false
}

// submit runs one turn, or queues it behind the running one. The prompts
// /exit and /quit leave.
func (u *tui) submit(text string) (exitCode, bool) {
	switch strings.TrimSpace(text) {
	case "/exit", "/quit":
		return exitCode{0, u.sess.resumeHint()}, true
	case "/clear":
		// A new conversation under a new id, reported to the SessionStart
		// hooks with source "clear", as Claude Code does; its transcript
		// is created at its first prompt.
		u.sess, u.history, u.replies = &session{store: u.store, id: uuid.NewString()}, nil, nil
		runSessionStartHooks(u.settings, u.sess.id, u.store.path(u.sess.id), "clear")
		return exitCode{}, false
	}
	if u.knobs.mangle {
		text = spaceRuns.ReplaceAllString(text, " ")
	}
	if u.busy {
		u.queue = append(u.queue, text)
		return exitCode{}, false
	}
	if err := u.sess.user(text); err != nil {
		return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
	}
	if err := u.knobs.runProbes(text); err != nil {
		return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
	}
	u.history = append(u.history, text)
	if until, ok := u.knobs.limit(time.Now()); ok {
		// The usage limit: an API error line, the banner, and maybe the
		// menu; the TUI then waits.
		limit := u.knobs.limitText(until)
		if err := u.sess.apiError(limit); err != nil {
			return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
		}
		u.replies = append(u.replies, cliLine(limit))
		if u.knobs.limitForm == "menu" {
			u.state, u.cursor = showLimitMenu, u.knobs.limitCursor
		}
		return exitCode{}, false
	}
	if u.knobs.permission {
		u.state, u.cursor, u.busy = showPermission, 1, true
		return exitCode{}, false
	}
	u.turn++
	if u.knobs.longTurn > 0 && strings.Contains(text, "LONG TURN") {
		u.busy, u.steps = true, u.knobs.longTurn
		u.events.After(max(u.knobs.replyDelay, 100*time.Millisecond), u.step(u.turn))
		return exitCode{}, false
	}
	if u.knobs.replyDelay <= 0 {
		return u.finishTurn()
	}
	u.busy = true
	turn := u.turn
	u.events.After(u.knobs.replyDelay, func() (exitCode, bool) {
		if turn != u.turn {
			return exitCode{}, false // interrupted
		}
		return u.finishTurn()
	})
	return exitCode{}, false
}

// step writes one message of the long turn turn, and the next one after
// the reply delay, or the answer after the last; nothing once Escape
// interrupted the turn.
func (u *tui) step(turn int) func() (exitCode, bool) {
	return func() (exitCode, bool) {
		if turn != u.turn || !u.busy {
			return exitCode{}, false
		}
		u.steps--
		if err := u.sess.answer(fmt.Sprintf("Working (%d left).", u.steps), u.knobs.usage); err != nil {
			return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
		}
		if u.steps > 0 {
			u.events.After(max(u.knobs.replyDelay, 100*time.Millisecond), u.step(turn))
			return exitCode{}, false
		}
		return u.finishTurn()
	}
}

// interrupt is Escape: a running turn ends where it is, with the user
// line Claude Code writes for it; the prompts queued behind it stay.
func (u *tui) interrupt() (exitCode, bool) {
	if !u.busy || u.state != showChat || u.sess == nil {
		return exitCode{}, false
	}
	u.turn++
	u.busy, u.steps = false, 0
	if err := u.sess.user("[Request interrupted by user]"); err != nil {
		return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
	}
	u.replies = append(u.replies, cliLine("Interrupted · What should Claude do instead?"))
	return exitCode{}, false
}

// finishTurn writes the answer and starts the next queued prompt.
func (u *tui) finishTurn() (exitCode, bool) {
	u.busy = false
	reply := u.knobs.reply(u.history[len(u.history)-1])
	if err := u.sess.answer(reply, u.knobs.usage); err != nil {
		return exitCode{1, fmt.Sprintf("fakeclaude: %v\n", err)}, true
	}
	line := answerLine(reply)
	if u.knobs.notLoggedIn {
		line = cliLine(reply) // offline, the CLI answers for the model
	}
	u.replies = append(u.replies, line)
	if len(u.queue) > 0 {
		next := u.queue[0]
		u.queue = u.queue[1:]
		return u.submit(next)
	}
	return exitCode{}, false
}

// draw repaints the whole screen, bottom-aligned like the real TUI's last
// frame: the lines that do not fit scroll off the top.
func (u *tui) draw() {
	w, h := faketerm.Size(80, 24)
	var lines []string
	switch u.state {
	case showTrust:
		lines = u.trustLines(w)
	case showPicker:
		lines = u.pickerLines(w)
	case showChat:
		lines = u.chatLines(w)
	case showLimitMenu, showPermission:
		lines = append(u.chatLines(w), u.menuLines()...)
	case showScreen:
		lines = append([]string{strings.Repeat("─", w)}, screens[u.knobs.screen]...)
	case showRefusal:
		lines = []string{"No conversation found with session ID: " + u.inv.resumeValue}
	}
	if len(lines) > h {
		lines = lines[len(lines)-h:]
	}
	for i, l := range lines {
		lines[i] = truncate(l, w)
	}
	fmt.Fprint(u.out, "\x1b[H\x1b[2J"+strings.Join(lines, "\r\n"))
}

func (u *tui) trustLines(w int) []string {
	return []string{
		strings.Repeat("─", w),
		" Accessing workspace:", "", " " + u.store.cwd, "",
		" Quick safety check: Is this a project you created or one you trust? (Like your own code, a",
		" well-known open source project, or work from your team). If not, take a moment to review what's in",
		" this folder first.", "",
		" Claude Code'll be able to read, edit, and execute files here.", "",
		" Security guide", "",
		" ❯ 1. Yes, I trust this folder",
		"   2. No, exit", "",
		" Enter to confirm · Esc to cancel",
	}
}

func (u *tui) pickerLines(w int) []string {
	search, result := "Search…", "  (no sessions)"
	if u.inv.resumeValue != "" {
		search = u.inv.resumeValue
		result = fmt.Sprintf("   No sessions match %q.", u.inv.resumeValue)
	}
	inner := w - 6
	return []string{
		strings.Repeat("─", w),
		"  Resume session",
		"  ╭" + strings.Repeat("─", inner) + "╮",
		"  │ " + pad("⌕ "+search, inner-1) + "│",
		"  ╰" + strings.Repeat("─", inner) + "╯",
		result, "",
		"    Type to Search · Enter to select · Esc to clear",
	}
}

func (u *tui) chatLines(w int) []string {
	inner := w - 2
	lines := []string{
		"╭─── Claude Code v2.1.197 " + strings.Repeat("─", max(0, w-27)) + "╮",
		"│" + center("Welcome back!", inner) + "│",
		"│" + center("fakeclaude · API Usage Billing", inner) + "│",
		"│" + center(u.store.cwd, inner) + "│",
		"╰" + strings.Repeat("─", inner) + "╯", "",
	}
	for i, text := range u.history {
		lines = append(lines, "❯ "+summary(text))
		if i < len(u.replies) {
			lines = append(lines, u.replies[i], "")
		}
	}
	if u.state == showLimitMenu || u.state == showPermission {
		// The dialog replaces the input box.
		return lines
	}
	footer := "  ? for shortcuts"
	if u.busy {
		lines = append(lines, "✻ Processing…")
		footer = "  esc to interrupt"
	}
	for _, q := range u.queue {
		lines = append(lines, "  ❯ "+summary(q))
	}
	if len(u.ed.Buf) > 0 {
		footer = ""
	}
	if u.status != "" {
		footer = "  " + u.status
	}
	if u.knobs.notLoggedIn {
		footer = pad(footer, w-28) + "Not logged in · Run /login"
	}
	rule := strings.Repeat("─", w)
	return append(lines, rule, "❯\u00a0"+summary(string(u.ed.Buf)), rule, footer)
}

// menuLines is the usage-limit menu or the permission dialog, the cursor
// on u.cursor.
func (u *tui) menuLines() []string {
	title, choices := limitMenuTitle, limitMenuChoices
	lines := []string{strings.Repeat("─", 40)}
	if u.state == showPermission {
		title, choices = "Do you want to proceed?", permissionChoices
		lines = append(lines, " Bash command", "", "   "+u.permissionCommand(), "")
	}
	lines = append(lines, " "+title)
	for i, c := range choices {
		mark := "  "
		if i+1 == u.cursor && (u.state != showLimitMenu || !u.knobs.noCursor) {
			mark = "❯ "
		}
		lines = append(lines, " "+mark+strconv.Itoa(i+1)+". "+c)
	}
	if u.state == showPermission {
		return append(lines, "", " Esc to cancel · Tab to amend · ctrl+e to explain")
	}
	return append(lines, "", " Enter to confirm · Esc to cancel")
}

// cliLine draws text as Claude Code 2.1.197 draws its own reply to a
// prompt (offline's "Not logged in", a usage limit, an interrupt): under
// "⎿" (internal/harness/testdata/claude-2.1.197/ready-after-turn.txt).
func cliLine(text string) string { return "  ⎿  " + text }

// answerLine draws text as Claude Code draws the model's answer: after "⏺",
// the mark internal/harness reads as the start of the conversation
// (claudeMarks).
func answerLine(text string) string { return "⏺ " + text }

// summary shows text on one line, as the real TUI shows a paste.
func summary(text string) string {
	if n := strings.Count(text, "\n"); n > 0 {
		return fmt.Sprintf("[Pasted text #1 +%d lines]", n)
	}
	return text
}

func truncate(s string, w int) string {
	r := []rune(s)
	if len(r) <= w {
		return s
	}
	return string(r[:w-1]) + "…"
}

func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-len([]rune(s))))
}

func center(s string, w int) string {
	left := max(0, (w-len([]rune(s)))/2)
	return pad(strings.Repeat(" ", left)+s, w)
}
