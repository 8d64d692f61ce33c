// Command fakecodex stands in for the Codex CLI (@openai/codex 0.171.0) in
// tests and demos. It copies the argv grammar, the rollout files and the
// screens that loopd depends on, as measured in
// docs/reference/harness-cli-facts.md (section 2) and on the screens under
// internal/harness/testdata/codex-0.171.0, and answers every prompt "OK."
// (the real CLI offline never answers: "Reconnecting... waiting for
// network").
//
// Build it with: go build -o fakecodex ./testdata/fakecodex
//
// Behaviour:
//   - codex [OPTIONS] [PROMPT] runs the TUI; codex resume [OPTIONS]
//     <SESSION_ID> [PROMPT] resumes; codex exec [resume <id>] runs one
//     turn without a TUI. Options: -c/--config k=v, -m/--model, -p/--profile,
//     -s/--sandbox, -a/--ask-for-approval (each with a value), --no-daemon,
//     --json, --skip-git-repo-check; "--" ends them. Any other option is
//     refused as clap does: "error: unexpected argument '<arg>' found", exit 2.
//   - The TUI needs a terminal ("Error: stdin is not a terminal", exit 1).
//     Without a -c model_provider=… override it shows the login screen
//     ("Welcome to Codex…"), which never goes away by itself.
//   - The session id is a new UUIDv7. The rollout is written at the first
//     submitted prompt, at <CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD/
//     rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl (the session's start, UTC):
//     a session_meta line (id, start timestamp, cwd) and a
//     thread_settings_applied event (cwd), then per prompt the
//     user's response_item and its event_msg item_completed UserMessage,
//     and the answer.
//   - resume <id>: an id with no rollout prints "ERROR: No saved session
//     found with ID <id>. Run `codex resume` without an ID to choose from
//     existing sessions." and exits 1 after FAKECODEX_RESUME_FAIL_DELAY;
//     a rollout whose latest cwd (its last thread_settings_applied
//     event's, else session_meta's) is not this one opens the "Working directory ·
//     resume" chooser, which waits (Ctrl-C quits, exit 0); otherwise the
//     history is shown and the prompt submitted, appended to that rollout.
//   - The input box is "› " with the placeholder "Ask Codex to do
//     anything" and the footer "← for agents · ? for shortcuts" while it
//     is empty; Enter (CR) submits, bracketed pastes are inserted whole.
//     Ctrl-C twice within a second exits 0 with "To continue this session,
//     run:" / "codex resume <id>" when the rollout exists.
//     SIGHUP and SIGTERM exit with 128+signal (the real TUI exits on
//     kill-session).
//   - exec [resume <id>] [--json] [PROMPT|-]: the prompt is the argument,
//     or stdin for "-" or none (kept as read, its newline too). Outside a
//     git repository it needs --skip-git-repo-check ("Not inside a trusted
//     directory and --skip-git-repo-check was not specified.", exit 1). A
//     resume of a missing id exits 1 with "Error: thread/resume:
//     thread/resume failed: no rollout found for thread id <id> (code
//     -32600)" on stderr and nothing on stdout. Otherwise, as 0.171.0 does
//     before it asks the model: with --json it prints
//     {"type":"thread.started","thread_id":<id>} and {"type":"turn.started"}
//     at once, and the rollout (session_meta with originator "codex_exec"
//     and source "exec", for a fresh turn) gets the user message; a resume
//     appends to the rollout it found. The answer follows after
//     FAKECODEX_REPLY_DELAY, then the turn's events, and exit 0. With
//     FAKECODEX_OFFLINE=1 it never answers: it prints {"type":"error",
//     "message":"Reconnecting... waiting for network …"} and waits until a
//     signal ends it, as the real CLI does offline (measured: it writes the
//     rollout, then waits forever; a SIGTERM to its group ends it).
//   - A project's own config counts only when CODEX_HOME's config.toml
//     trusts the cwd (project.go): its MCP servers start, its hooks run
//     with --dangerously-bypass-hook-trust. In a git workdir or one with
//     .codex/ that the config does not trust, the TUI first shows the
//     folder dialog, which waits for Enter.
//
// Environment knobs:
//
//	FAKECODEX_RESUME_FAIL_DELAY  Go duration before a missing resume exits (default 450ms)
//	FAKECODEX_REPLY_DELAY        Go duration exec waits before it answers (default none)
//	FAKECODEX_OFFLINE=1          exec never answers, as offline
//	FAKECODEX_RESUME_FAIL=1      every exec resume fails as one of a missing rollout, even of a rollout that exists
//	FAKECODEX_USAGE              "input,cached,output": each answer is preceded by a token_count event of that request, its running total kept over resumes
//	FAKECODEX_START_LOG          file to which each start appends {"time": RFC 3339 with ns, "pid": n, "argv": [...]} as a line
//	FAKECODEX_LIMIT_UNTIL        Unix seconds: every prompt the TUI submits before then hits a usage limit that resets then; its
//	                             answer is an error cell ("■ …", wrapped to the pane's width) and a task_complete event whose
//	                             error has codex_error_info "usage_limit_exceeded", in the form of FAKECODEX_LIMIT_FORM
//	FAKECODEX_LIMIT_FORM         plain (default: "You have hit your usage limit. … try again at <Mon Dth, YYYY h:mm PM>." in
//	                             the local zone), resets_in (the backend's 429 body with resets_in_seconds) or resets_at (with
//	                             resets_at, Unix seconds)
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/testdata/fakecli"
	"github.com/loopd/loopd/testdata/faketerm"
)

const (
	version     = "0.171.0"
	answer      = "OK."
	placeholder = "Ask Codex to do anything"
	emptyFooter = "  ← for agents · ? for shortcuts"
)

// valued are the options that take a value.
var valued = map[string]bool{"-c": true, "--config": true, "-m": true, "--model": true, "-p": true, "--profile": true,
	"-s": true, "--sandbox": true, "-a": true, "--ask-for-approval": true, "-C": true, "--cd": true}

// flags are the options without a value.
var flags = map[string]bool{"--no-daemon": true, "--json": true, "--skip-git-repo-check": true, "--ephemeral": true,
	"--dangerously-bypass-hook-trust": true}

// invocation is a parsed argv.
type invocation struct {
	sub       string // "", "resume" or "exec"
	resume    bool   // exec resume
	id        string
	prompt    string
	hasPrompt bool
	json      bool
	skipGit   bool
	provider  bool // -c model_provider=… given
	// bypassHookTrust is --dangerously-bypass-hook-trust: a trusted
	// project's hooks run unreviewed.
	bypassHookTrust bool
}

// parseArgs reads argv the way clap reads codex's: options anywhere before
// "--", then the positionals: a subcommand first, then its own.
func parseArgs(args []string) (invocation, error) {
	var inv invocation
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			pos = append(pos, args[i+1:]...)
			i = len(args)
		case valued[a]:
			if i+1 >= len(args) {
				return inv, fmt.Errorf("error: a value is required for '%s <VALUE>' but none was supplied", a)
			}
			i++
			if (a == "-c" || a == "--config") && strings.HasPrefix(args[i], "model_provider=") {
				inv.provider = true
			}
		case strings.HasPrefix(a, "--config="), strings.HasPrefix(a, "-c="):
			inv.provider = inv.provider || strings.Contains(a, "=model_provider=")
		case flags[a]:
			inv.json = inv.json || a == "--json"
			inv.skipGit = inv.skipGit || a == "--skip-git-repo-check"
			inv.bypassHookTrust = inv.bypassHookTrust || a == "--dangerously-bypass-hook-trust"
		case len(a) > 1 && a[0] == '-' && a != "-":
			return inv, fmt.Errorf("error: unexpected argument '%s' found", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) > 0 && (pos[0] == "resume" || pos[0] == "exec" || pos[0] == "e") {
		inv.sub, pos = pos[0], pos[1:]
		if inv.sub == "e" {
			inv.sub = "exec"
		}
		if inv.sub == "exec" && len(pos) > 0 && pos[0] == "resume" {
			inv.resume, pos = true, pos[1:]
		}
	}
	if inv.sub == "resume" || inv.resume {
		if len(pos) == 0 {
			return inv, errors.New("error: a session id is required (the picker is not emulated)")
		}
		inv.id, pos = pos[0], pos[1:]
	}
	if len(pos) > 1 {
		return inv, fmt.Errorf("error: unexpected argument '%s' found", pos[1])
	}
	if len(pos) == 1 {
		inv.prompt, inv.hasPrompt = pos[0], true
	}
	return inv, nil
}

// store finds and writes rollouts, by the same rule loopd's codex adapter
// reads them.
type store struct {
	cwd     string
	home    string
	adapter harness.Adapter
}

func newStore() (store, error) {
	wd, err := fakecli.PhysicalCwd()
	if err != nil {
		return store{}, err
	}
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		home = filepath.Join(os.Getenv("HOME"), ".codex")
	}
	a, err := harness.New(harness.AdapterCodex, schema.Harness{Command: "codex", Env: map[string]string{"CODEX_HOME": home}})
	if err != nil {
		return store{}, err
	}
	return store{cwd: wd, home: home, adapter: a}, nil
}

// find returns the rollout of id and the cwd its session names; "" when
// there is none.
func (s store) find(id string) (path, cwd string) {
	t, err := s.adapter.Transcript(s.cwd, id)
	if err != nil {
		return "", ""
	}
	f, err := os.Open(t.Path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	// The cwd Codex compares with its own is the session's latest: that
	// of its last thread_settings_applied event, else session_meta's.
	var m struct {
		Type    string `json:"type"`
		Payload struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			Cwd      string `json:"cwd"`
			Settings struct {
				Cwd string `json:"cwd"`
			} `json:"thread_settings"`
		} `json:"payload"`
	}
	r := bufio.NewReader(f)
	line, _ := r.ReadBytes('\n')
	if json.Unmarshal(line, &m) != nil || m.Type != "session_meta" || m.Payload.ID != id {
		return "", ""
	}
	cwd = m.Payload.Cwd
	for {
		line, err := r.ReadBytes('\n')
		m.Payload.Type, m.Payload.Settings.Cwd = "", ""
		if json.Unmarshal(line, &m) == nil && m.Payload.Type == "thread_settings_applied" && m.Payload.Settings.Cwd != "" {
			cwd = m.Payload.Settings.Cwd
		}
		if err != nil {
			return t.Path, cwd
		}
	}
}

// session is the conversation being written.
type session struct {
	store
	id      string
	started time.Time
	path    string // "" until the first prompt
	exec    bool   // started by codex exec
}

func (s *session) newPath() string {
	t := s.started.UTC()
	return filepath.Join(s.home, "sessions", t.Format("2006/01/02"), "rollout-"+t.Format("2006-01-02T15-04-05")+"-"+s.id+".jsonl")
}

// line appends one rollout line of type kind with payload.
func (s *session) line(kind string, payload any) error {
	if s.path == "" {
		s.path = s.newPath()
		if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
			return err
		}
		originator, source := "codex-tui", "cli"
		if s.exec {
			originator, source = "codex_exec", "exec"
		}
		meta := map[string]any{"id": s.id, "session_id": s.id, "timestamp": s.started.UTC().Format("2006-01-02T15:04:05.000Z"),
			"cwd": s.cwd, "originator": originator, "cli_version": version, "source": source, "model_provider": "loc"}
		if err := s.write("session_meta", meta); err != nil {
			return err
		}
		// Trimmed: the real one also holds the model, the approval
		// policy and the sandbox's permission profile.
		settings := map[string]any{"cwd": s.cwd, "runtime_workspace_roots": []string{s.cwd}, "model_provider_id": "loc"}
		if err := s.write("event_msg", map[string]any{"type": "thread_settings_applied", "thread_id": s.id, "thread_settings": settings}); err != nil {
			return err
		}
	}
	return s.write(kind, payload)
}

func (s *session) write(kind string, payload any) error {
	line := map[string]any{"timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "type": kind, "payload": payload}
	return fakecli.AppendJSONLine(s.path, line, 0o600)
}

// turn records a user message and its answer, as 0.171.0 does.
func (s *session) turn(text string) error {
	if err := s.user(text); err != nil {
		return err
	}
	return s.answer()
}

// user records a user message: the rollout has it before the model is
// asked.
func (s *session) user(text string) error {
	if err := s.line("response_item", map[string]any{"type": "message", "role": "user",
		"content": []map[string]string{{"type": "input_text", "text": text}}}); err != nil {
		return err
	}
	return s.line("event_msg", map[string]any{"type": "item_completed", "thread_id": s.id,
		"item": map[string]any{"type": "UserMessage", "id": uuid.NewString(), "content": []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}}}})
}

// limited records a user message whose turn ended on usage limit text,
// as 0.171.0 does (task_complete with the error).
func (s *session) limited(text, limit string) error {
	if err := s.user(text); err != nil {
		return err
	}
	return s.line("event_msg", map[string]any{"type": "task_complete",
		"error": map[string]any{"message": limit, "codex_error_info": "usage_limit_exceeded"}})
}

// answer records the model's answer and the end of the turn; with
// FAKECODEX_USAGE, the turn's token count first, as Codex writes it.
func (s *session) answer() error {
	if err := s.tokenCount(os.Getenv("FAKECODEX_USAGE")); err != nil {
		return err
	}
	if err := s.line("event_msg", map[string]any{"type": "agent_message", "message": answer}); err != nil {
		return err
	}
	return s.line("event_msg", map[string]any{"type": "task_complete", "last_agent_message": answer})
}

func main() { os.Exit(run()) }

func run() int {
	if err := fakecli.LogStart(os.Getenv("FAKECODEX_START_LOG")); err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 2
	}
	inv, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	st, err := newStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 1
	}
	if inv.sub == "exec" {
		return runExec(inv, st)
	}
	if !faketerm.IsTerminal(os.Stdin) {
		fmt.Fprintln(os.Stderr, "Error: stdin is not a terminal")
		return 1
	}
	return runTUI(inv, st)
}

// runExec is codex exec: one turn, no TUI.
func runExec(inv invocation, st store) int {
	if !inv.skipGit && !inGit(st.cwd) {
		fmt.Fprintln(os.Stderr, "Not inside a trusted directory and --skip-git-repo-check was not specified.")
		return 1
	}
	prompt := inv.prompt
	if !inv.hasPrompt || prompt == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil || len(b) == 0 {
			fmt.Fprintln(os.Stderr, "No prompt provided via stdin.")
			return 1
		}
		prompt = string(b)
	}
	if trustLevel(st.home, st.cwd) == "trusted" {
		defer fakecli.StopServers(readProject(st.cwd).start(inv.bypassHookTrust), 5*time.Second)
	}
	sess := &session{store: st, started: time.Now(), exec: true}
	if inv.resume {
		path, _ := st.find(inv.id)
		if path == "" || os.Getenv("FAKECODEX_RESUME_FAIL") == "1" {
			fmt.Fprintf(os.Stderr, "Error: thread/resume: thread/resume failed: no rollout found for thread id %s (code -32600)\n", inv.id)
			return 1
		}
		sess.id, sess.path = inv.id, path
	} else {
		id, err := uuid.NewV7()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakecodex:", err)
			return 1
		}
		sess.id = id.String()
	}
	events := func(evs ...string) {
		if inv.json {
			for _, ev := range evs {
				fmt.Println(ev)
			}
		}
	}
	events(fmt.Sprintf(`{"type":"thread.started","thread_id":%q}`, sess.id), `{"type":"turn.started"}`)
	if err := sess.user(prompt); err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 1
	}
	if os.Getenv("FAKECODEX_OFFLINE") == "1" {
		events(`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`)
		for {
			time.Sleep(time.Hour) // until a signal ends it
		}
	}
	if d, err := time.ParseDuration(os.Getenv("FAKECODEX_REPLY_DELAY")); err == nil {
		time.Sleep(d)
	}
	if err := sess.answer(); err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 1
	}
	events(fmt.Sprintf(`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":%q}}`, answer), `{"type":"turn.completed"}`)
	if !inv.json {
		fmt.Println(answer)
	}
	return 0
}

// inGit reports whether dir is inside a git work tree.
func inGit(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

type screenState int

const (
	showLogin   screenState = iota // the login screen
	showChooser                    // the "Working directory · resume" chooser
	showChat                       // the conversation and input box
	showNothing                    // blank, before a failing resume exits
	showFolder                     // the folder dialog of a workdir the config does not trust
	showHooks                      // the review of a trusted project's hooks
)

// tui is the interactive mode.
type tui struct {
	inv       invocation
	sess      *session
	state     screenState
	ed        faketerm.Editor
	history   []string
	replies   []string // by history: "" for the answer, else the usage-limit error shown
	lastCtrlC time.Time
	events    *fakecli.Loop[exitCode] // its timer: a failing resume's exit
	failText  string
	// trust is the trust_level the config gives the cwd, asked whether
	// the folder dialog was answered, and servers the project's MCP
	// servers started.
	trust   string
	asked   bool
	servers []*exec.Cmd
	// reviewed is set once the hooks' review was answered, and runHooks
	// when it trusted them.
	reviewed, runHooks bool
}

type exitCode struct {
	code    int
	message string
}

func runTUI(inv invocation, st store) int {
	term, err := faketerm.Open(os.Stdout, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 1
	}
	u := &tui{inv: inv, sess: &session{store: st, started: time.Now()}, trust: trustLevel(st.home, st.cwd)}
	end := u.loop(term)
	fakecli.CloseTUI(term, u.servers, end.message)
	return end.code
}

// start resolves what the TUI shows first and submits the positional
// prompt.
func (u *tui) start() (exitCode, bool) {
	switch {
	case !u.inv.provider:
		u.state = showLogin
		return exitCode{}, false
	case !u.asked && askFolder(u.sess.cwd, u.trust):
		u.state = showFolder
		return exitCode{}, false
	}
	if u.trust == "trusted" {
		p := readProject(u.sess.cwd)
		if len(p.hooks) > 0 && !u.inv.bypassHookTrust && !u.reviewed {
			u.state = showHooks
			return exitCode{}, false
		}
		u.servers = p.start(u.inv.bypassHookTrust || u.runHooks)
	}
	switch {
	case u.inv.sub == "resume":
		path, cwd := u.sess.find(u.inv.id)
		if path == "" {
			delay := 450 * time.Millisecond
			if d, err := time.ParseDuration(os.Getenv("FAKECODEX_RESUME_FAIL_DELAY")); err == nil {
				delay = d
			}
			u.state = showNothing
			u.events.After(delay, func() (exitCode, bool) { return exitCode{1, u.failText}, true })
			u.failText = fmt.Sprintf("ERROR: No saved session found with ID %s. Run `codex resume` without an ID to choose from existing sessions.\n", u.inv.id)
			return exitCode{}, false
		}
		if cwd != u.sess.cwd {
			u.state = showChooser
			return exitCode{}, false
		}
		u.sess.id, u.sess.path = u.inv.id, path
		u.history = readHistory(path)
	default:
		id, err := uuid.NewV7()
		if err != nil {
			return exitCode{1, fmt.Sprintf("fakecodex: %v\n", err)}, true
		}
		u.sess.id = id.String()
	}
	u.state = showChat
	if u.inv.hasPrompt {
		return u.submit(u.inv.prompt)
	}
	return exitCode{}, false
}

// readHistory returns the user messages of the rollout at path.
func readHistory(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Payload struct {
				Type string `json:"type"`
				Item struct {
					Type    string `json:"type"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"item"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Payload.Type == "item_completed" && l.Payload.Item.Type == "UserMessage" && len(l.Payload.Item.Content) > 0 {
			out = append(out, l.Payload.Item.Content[0].Text)
		}
	}
	return out
}

func (u *tui) loop(term *faketerm.TUI) exitCode {
	u.events = &fakecli.Loop[exitCode]{Term: term, Feed: u.ed.Feed, Handle: u.handle, Draw: u.draw,
		Signal: func(sig os.Signal) exitCode { return exitCode{faketerm.SignalStatus(sig), ""} }}
	if end, done := u.start(); done {
		return end
	}
	return u.events.Run()
}

func (u *tui) handle(ev faketerm.Event) (exitCode, bool) {
	if ev.Kind == faketerm.Interrupt {
		now := time.Now()
		if u.state != showChat || now.Sub(u.lastCtrlC) < time.Second {
			return exitCode{0, u.hint()}, true
		}
		u.lastCtrlC = now
		return exitCode{}, false
	}
	if u.state == showHooks && (strings.HasSuffix(string(u.ed.Buf), "2") || strings.HasSuffix(string(u.ed.Buf), "3")) {
		// "2. Trust all and continue", "3. Continue without trusting".
		u.reviewed, u.runHooks = true, strings.HasSuffix(string(u.ed.Buf), "2")
		u.ed.Buf = u.ed.Buf[:0]
		return u.start()
	}
	if ev.Kind == faketerm.Submit && u.state == showFolder {
		// The highlighted choice: "Trust and continue", or "Open
		// restricted" for a folder the config marks untrusted.
		u.asked = true
		if u.trust == "" {
			u.trust = "trusted"
		}
		return u.start()
	}
	if ev.Kind != faketerm.Submit || u.state != showChat || strings.TrimSpace(ev.Text) == "" {
		return exitCode{}, false
	}
	return u.submit(ev.Text)
}

func (u *tui) submit(text string) (exitCode, bool) {
	limit, limited := limitText(time.Now())
	var err error
	if limited {
		err = u.sess.limited(text, limit)
	} else {
		err = u.sess.turn(text)
	}
	if err != nil {
		return exitCode{1, fmt.Sprintf("fakecodex: %v\n", err)}, true
	}
	for len(u.replies) < len(u.history) {
		u.replies = append(u.replies, "")
	}
	u.history, u.replies = append(u.history, text), append(u.replies, limit)
	return exitCode{}, false
}

// limitText is the usage-limit error of a prompt submitted at now
// (FAKECODEX_LIMIT_UNTIL, FAKECODEX_LIMIT_FORM); false outside the limit.
func limitText(now time.Time) (string, bool) {
	secs, err := strconv.ParseInt(os.Getenv("FAKECODEX_LIMIT_UNTIL"), 10, 64)
	until := time.Unix(secs, 0)
	if err != nil || !now.Before(until) {
		return "", false
	}
	switch os.Getenv("FAKECODEX_LIMIT_FORM") {
	case "resets_in":
		return fmt.Sprintf(`unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_in_seconds":%d}}`,
			int(math.Ceil(until.Sub(now).Seconds()))), true
	case "resets_at":
		return fmt.Sprintf(`unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","resets_at":%d}}`, secs), true
	}
	return "You have hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) or try again at " + until.Format("Jan 2") +
		ordinal(until.Day()) + until.Format(", 2006 3:04 PM") + ".", true
}

// ordinal is the suffix Codex writes after a day of the month.
func ordinal(day int) string {
	switch {
	case day%10 == 1 && day != 11:
		return "st"
	case day%10 == 2 && day != 12:
		return "nd"
	case day%10 == 3 && day != 13:
		return "rd"
	}
	return "th"
}

// hint is what the TUI prints when it exits: how to resume, once there is
// a rollout.
func (u *tui) hint() string {
	if u.state != showChat || u.sess.path == "" {
		return ""
	}
	return "To continue this session, run:\n  codex resume " + u.sess.id + "\n"
}

// wrap cuts text into lines of at most w runes, as the TUI wraps a cell.
func wrap(text string, w int) []string {
	var out []string
	r := []rune(text)
	for len(r) > w {
		out, r = append(out, string(r[:w])), r[w:]
	}
	return append(out, string(r))
}

func (u *tui) draw() {
	w, h := faketerm.Size(80, 24)
	var lines []string
	switch u.state {
	case showLogin:
		lines = []string{"", "  Welcome to Codex, OpenAI's command-line coding agent", "", "  Choose how you want to use Codex.", "",
			"> 1. Sign in with ChatGPT", "     Usage included with Plus, Pro, Business, and Enterprise plans",
			"  2. Sign in with Device Code", "  3. Sign in another way", "", "  Press enter to continue"}
	case showHooks:
		lines = []string{"", "  Hooks need review", "  Hooks can run outside the sandbox after you trust them.", "",
			"› 1. Review hooks", "  2. Trust all and continue", "  3. Continue without trusting (hooks won't run)", "", "  enter confirm · esc skip"}
	case showFolder:
		lines = []string{"", "  Folder access", "  " + u.sess.cwd, ""}
		if u.trust == "untrusted" {
			lines = append(lines, "  Config, hooks, and exec policies from untrusted folders stay disabled.", "",
				"› 1. Open restricted", "  2. Back to Agent Command Center", "", "  enter continue · esc back")
		} else {
			lines = append(lines, "  Trust this folder? Codex can read, edit, and run files here, subject to your permission settings.", "",
				"› 1. Trust and continue", "  2. Back to Agent Command Center", "", "  enter continue · esc back")
		}
	case showChooser:
		lines = []string{"", "  Working directory · resume", "  Session = latest cwd recorded in the resumed session",
			"  Current = your current working directory", "", "› 1. Use session directory", "  2. Use current directory",
			"  3. Always use session directory", "  4. Always use current directory", "", "  enter continue · esc use session · ^c quit"}
	case showChat:
		lines = []string{"", "  >_ OpenAI Codex (v" + version + ")", "     " + u.sess.cwd, ""}
		for n, text := range u.history {
			for i, l := range strings.Split(text, "\n") {
				prefix := "  "
				if i == 0 {
					prefix = "› "
				}
				lines = append(lines, prefix+l)
			}
			if n < len(u.replies) && u.replies[n] != "" {
				lines = append(append(lines, ""), wrap("■ "+u.replies[n], w)...)
				lines = append(lines, "")
				continue
			}
			lines = append(lines, "", "• "+answer, "")
		}
		box, footer := placeholder, emptyFooter
		if len(u.ed.Buf) > 0 {
			box, footer = strings.ReplaceAll(string(u.ed.Buf), "\n", "\n  "), ""
		}
		lines = append(lines, strings.Split("› "+box, "\n")...)
		lines = append(lines, "", "  fake-model default · "+u.sess.cwd, footer)
	}
	if len(lines) > h {
		lines = lines[len(lines)-h:]
	}
	for i, l := range lines {
		if r := []rune(l); len(r) > w {
			lines[i] = string(r[:w])
		}
	}
	fmt.Print("\x1b[H\x1b[2J" + strings.Join(lines, "\r\n"))
}

// tokenCount appends the token_count event of one request that used
// spec's "input,cached,output" tokens: last_token_usage is the request's,
// total_token_usage the rollout's running total (read back from its last
// token count, so that a resume goes on counting). An empty spec writes
// nothing.
func (s *session) tokenCount(spec string) error {
	if spec == "" {
		return nil
	}
	var n [3]int64
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return fmt.Errorf("FAKECODEX_USAGE: %q is not input,cached,output", spec)
	}
	for i, p := range parts {
		var err error
		if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return fmt.Errorf("FAKECODEX_USAGE: %w", err)
		}
	}
	last := map[string]int64{"input_tokens": n[0], "cached_input_tokens": n[1], "output_tokens": n[2], "reasoning_output_tokens": 0, "total_tokens": n[0] + n[2]}
	total := map[string]int64{}
	if s.path != "" {
		b, err := os.ReadFile(s.path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		for line := range strings.Lines(string(b)) {
			var l struct {
				Payload struct {
					Type string `json:"type"`
					Info *struct {
						Total map[string]int64 `json:"total_token_usage"`
					} `json:"info"`
				} `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Payload.Type == "token_count" && l.Payload.Info != nil {
				total = l.Payload.Info.Total
			}
		}
	}
	for k, v := range last {
		total[k] += v
	}
	return s.line("event_msg", map[string]any{"type": "token_count",
		"info": map[string]any{"total_token_usage": total, "last_token_usage": last, "model_context_window": 272000}, "rate_limits": nil})
}
