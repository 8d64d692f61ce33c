// Command fakegemini stands in for the Gemini CLI 0.61.0 (@google/gemini-cli)
// in tests. It copies the argv grammar, the chat files, the exit codes and
// the process habits that loopd depends on, as measured in
// docs/reference/harness-cli-facts.md (section 3) and read in the CLI's
// source, and answers every prompt "OK." when "authenticated".
//
// Build it with: go build -o fakegemini ./testdata/fakegemini
//
// Behaviour:
//   - It re-launches itself as a child, as the real CLI does (its launcher
//     runs "node --max-old-space-size=… gemini …"): the launcher ignores
//     SIGHUP, SIGTERM and SIGINT and exits with the child's status; the
//     child exits 129 on SIGHUP. tmux kill-session hangs up only the
//     session leader, the launcher, so both keep running without their
//     terminal, as the real ones do.
//   - --session-id <uuid> starts a new conversation; an id some chat file
//     of this project already names exits 42 with "Error starting session:
//     Session ID "<id>" already exists. …".
//   - -r/--resume [value] resumes (a following flag is no value: latest).
//     An id without a resumable chat file exits 42 after
//     FAKEGEMINI_RESUME_FAIL_DELAY with "Error resuming session: No previous
//     sessions found for this project." or "… Invalid session identifier
//     "<id>". …" when the project has other sessions.
//   - Chat files are <GEMINI_CLI_HOME or HOME>/.gemini/tmp/<slug>/chats/
//     session-<YYYY-MM-DDTHH-MM>-<id[:8]>.jsonl with the slug from
//     projects.json (the lowercased base name of the physical cwd, "-N" on a
//     collision) and a ".project_root" marker. A new session's file is
//     written at start (its metadata line); a resume appends to the file it
//     found. Each turn appends a user record and a gemini record.
//   - A positional query, -p/--prompt, or a stdin that is not a terminal run
//     one headless turn: without auth it exits 41 with "Please set an Auth
//     method in your …" on stderr (with --output-format json as
//     {"session_id", "error": {"type", "message", "code": 41}}), after the
//     session lookup and before any chat file is written (measured: a fresh
//     one leaves none, a resumed one is left as it was); otherwise it
//     prints the answer ("OK.", or with --output-format json
//     {"session_id", "response", "stats"}) and exits 0. The prompt is
//     stdin, then the -p value and the query.
//   - A headless run of a folder that is not trusted
//     (GEMINI_CLI_TRUST_WORKSPACE=true or --skip-trust) exits 55 after the
//     auth check; a folder trusted by GEMINI_CLI_TRUST_WORKSPACE=true runs
//     the SessionStart hooks, tools.discoveryCommand and MCP servers of its
//     .gemini/settings.json at start, in the TUI and headless alike
//     (workspace.go).
//   - Otherwise it runs a TUI: the folder-trust dialog first (when
//     FAKEGEMINI_TRUST_PROMPT=1 and neither GEMINI_CLI_TRUST_WORKSPACE nor
//     --skip-trust decides the trust; Enter trusts), the
//     auth dialog forever without auth, else the input box
//     (" >   Type your message or @path/to/file") with bracketed paste. The
//     -i/--prompt-interactive value is submitted at start. Ctrl-C twice
//     within a second exits 0.
//
// Environment knobs:
//
//	FAKEGEMINI_AUTH=1               an auth method is set (the real CLI needs a key or a login)
//	FAKEGEMINI_TRUST_PROMPT=1       show the folder-trust dialog (unless the trust is decided)
//	FAKEGEMINI_RESUME_FAIL_DELAY    Go duration before a failing resume exits (default 500ms; the real CLI: ~2s)
//	FAKEGEMINI_PID_FILE             file to which the launcher and the child each append their pid as a line
//	FAKEGEMINI_START_LOG            file to which each start of the child appends {"time": RFC 3339 with ns, "pid": n, "argv": [...]} as a line
//	FAKEGEMINI_RESUME_FAIL=1        every resume fails with exit 42 ("Invalid session identifier"), even of a conversation that exists
//	FAKEGEMINI_LIMIT_UNTIL          Unix seconds: every prompt the TUI submits before then meets a quota that resets then: the
//	                                chat file gets the user message and no answer, and the screen the error of
//	                                FAKEGEMINI_LIMIT_FORM, wrapped to its width
//	FAKEGEMINI_USAGE                "input,output,cached,thoughts,tool": every gemini message carries these tokens (total
//	                                their sum less cached), and is written twice, the second time with a tool call, as
//	                                Gemini 0.61.0 writes a message again whole with the same id when its tool calls change
//	FAKEGEMINI_LIMIT_FORM           per_minute (default: "✕ [API Error: {…RESOURCE_EXHAUSTED…}]" naming a per-minute quota and
//	                                its RetryInfo retryDelay), or access ("ℹ Usage limit reached for gemini-2.5-pro." /
//	                                "Access resets at h:mm PM UTC.")
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/testdata/fakecli"
	"github.com/loopd/loopd/testdata/faketerm"
)

// childEnv marks the re-launched child (the real CLI's GEMINI_CLI_NO_RELAUNCH).
const childEnv = "GEMINI_CLI_NO_RELAUNCH"

const answer = "OK."

func main() {
	if os.Getenv(childEnv) == "" {
		os.Exit(launch())
	}
	os.Exit(run())
}

// launch re-runs the program as a child in the same process group and
// terminal, ignoring the signals the real launcher ignores, and returns
// the child's exit status.
func launch() int {
	signal.Ignore(syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	if err := logPID(); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), childEnv+"=true")
	// The ignored signals stay ignored across exec; the child's TUI
	// handles SIGHUP and SIGTERM again (signal.Notify), as the real
	// child does.
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "Error: Failed to start child process:", err)
		return 1
	}
	return 0
}

// logPID appends this process's pid to FAKEGEMINI_PID_FILE as a line.
func logPID() error {
	file := os.Getenv("FAKEGEMINI_PID_FILE")
	if file == "" {
		return nil
	}
	return fakecli.AppendJSONLine(file, os.Getpid(), 0o644)
}

// invocation is what the fake needs from its argv.
type invocation struct {
	sessionID   string
	resume      bool
	resumeValue string // "" for latest
	interactive string // -i value
	prompt      string // -p value
	hasPrompt   bool
	query       []string
	skipTrust   bool
	json        bool
}

// stringFlags take a value (yargs string options); "--flag=value" works
// for each.
var stringFlags = map[string]string{
	"--session-id": "session-id", "-i": "interactive", "--prompt-interactive": "interactive",
	"-p": "prompt", "--prompt": "prompt", "-o": "output", "--output-format": "output",
	"-m": "model", "--model": "model", "--approval-mode": "other", "-w": "other", "--worktree": "other",
}

func parseArgs(args []string) (invocation, error) {
	var inv invocation
	for i := 0; i < len(args); i++ {
		arg := args[i]
		name, value, hasValue := strings.Cut(arg, "=")
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			inv.query = append(inv.query, arg)
			continue
		}
		if arg == "--" {
			inv.query = append(inv.query, args[i+1:]...)
			break
		}
		if name == "-r" || name == "--resume" {
			inv.resume = true
			switch {
			case hasValue:
				inv.resumeValue = value
			case i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
				inv.resumeValue, i = args[i+1], i+1
			}
			continue
		}
		if name == "--skip-trust" {
			inv.skipTrust = true
			continue
		}
		kind, ok := stringFlags[name]
		if !ok {
			continue // a boolean option
		}
		if !hasValue {
			if i+1 >= len(args) {
				return inv, fmt.Errorf("Not enough arguments following: %s", strings.TrimLeft(name, "-"))
			}
			value, i = args[i+1], i+1
		}
		switch kind {
		case "session-id":
			inv.sessionID = value
		case "interactive":
			inv.interactive = value
		case "prompt":
			inv.prompt, inv.hasPrompt = value, true
		case "output":
			inv.json = value == "json"
		}
	}
	if inv.resume && inv.resumeValue == "latest" {
		inv.resumeValue = ""
	}
	return inv, nil
}

// store finds and writes chat files for the physical cwd, by the rule
// loopd's gemini adapter reads them with.
type store struct {
	cwd     string
	config  string
	adapter harness.Adapter
}

func newStore() (store, error) {
	wd, err := fakecli.PhysicalCwd()
	if err != nil {
		return store{}, err
	}
	home := os.Getenv("GEMINI_CLI_HOME")
	if home == "" {
		home = os.Getenv("HOME")
	}
	a, err := harness.New(harness.AdapterGemini, schema.Harness{Command: "gemini"})
	if err != nil {
		return store{}, err
	}
	return store{cwd: wd, config: filepath.Join(home, ".gemini"), adapter: a}, nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// chats returns the project's chats dir, registering the project in
// projects.json (as ProjectRegistry.getShortId does) when it is new.
func (s store) chats() (string, error) {
	reg := struct {
		Projects map[string]string `json:"projects"`
	}{Projects: map[string]string{}}
	path := filepath.Join(s.config, "projects.json")
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &reg)
		if reg.Projects == nil {
			reg.Projects = map[string]string{}
		}
	}
	slug := reg.Projects[s.cwd]
	if slug == "" {
		base := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(filepath.Base(s.cwd)), "-"), "-")
		if base == "" {
			base = "project"
		}
		taken := map[string]bool{}
		for _, v := range reg.Projects {
			taken[v] = true
		}
		slug = base
		for n := 1; taken[slug]; n++ {
			slug = base + "-" + strconv.Itoa(n)
		}
		reg.Projects[s.cwd] = slug
		b, err := json.MarshalIndent(reg, "", "  ")
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(s.config, 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(s.config, "tmp", slug)
	if err := os.MkdirAll(filepath.Join(dir, "chats"), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ".project_root"), []byte(s.cwd), 0o600); err != nil {
		return "", err
	}
	return filepath.Join(dir, "chats"), nil
}

// find returns the chat file of id: resumable reports whether Gemini would
// resume it, any whether any file names id.
func (s store) find(id string) (path string, resumable bool) {
	t, err := s.adapter.Transcript(s.cwd, id)
	if err != nil {
		return "", false
	}
	return t.Path, t.Exists
}

// others reports whether the project has a resumable session other than id.
func (s store) others(id string) bool {
	dir, err := s.chats()
	if err != nil {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(dir, "session-*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(b), "\n")
		var meta struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal([]byte(first), &meta) == nil && meta.SessionID != id {
			if _, ok := s.find(meta.SessionID); ok {
				return true
			}
		}
	}
	return false
}

// session is the conversation being written.
type session struct {
	id   string
	path string
}

// open starts the conversation inv asks for, or returns the exit status
// and message the real CLI gives for it. dry leaves a new conversation's
// chat file unwritten (a headless turn that fails for want of auth).
func (s store) open(inv invocation, failDelay time.Duration, dry bool) (*session, int, string) {
	if inv.resume {
		path, ok := s.find(inv.resumeValue)
		if ok && os.Getenv("FAKEGEMINI_RESUME_FAIL") != "1" {
			sess := &session{id: inv.resumeValue, path: path}
			return sess, 0, ""
		}
		time.Sleep(failDelay)
		if !ok && !s.others(inv.resumeValue) {
			return nil, harness.GeminiExitInputError, "Error resuming session: No previous sessions found for this project.\n"
		}
		dir, _ := s.chats()
		return nil, harness.GeminiExitInputError, fmt.Sprintf("Error resuming session: Invalid session identifier %q.\n"+
			"  Searched for sessions in %s.\n", inv.resumeValue, dir)
	}
	id := inv.sessionID
	if id == "" {
		id = uuid.NewString()
	} else if path, _ := s.find(id); path != "" {
		return nil, harness.GeminiExitInputError, fmt.Sprintf("Error starting session: Session ID %q already exists. "+
			"Use --resume to resume it, or provide a different ID.\n", id)
	}
	dir, err := s.chats()
	if err != nil {
		return nil, 1, fmt.Sprintf("fakegemini: %v\n", err)
	}
	now := time.Now().UTC()
	name := "session-" + strings.ReplaceAll(now.Format("2006-01-02T15:04"), ":", "-") + "-" + id[:min(8, len(id))] + ".jsonl"
	sess := &session{id: id, path: filepath.Join(dir, name)}
	if dry {
		return sess, 0, ""
	}
	meta := map[string]any{"sessionId": id, "projectHash": "fake", "startTime": now.Format(time.RFC3339Nano),
		"lastUpdated": now.Format(time.RFC3339Nano), "kind": "main"}
	if err := sess.append(meta); err != nil {
		return nil, 1, fmt.Sprintf("fakegemini: %v\n", err)
	}
	return sess, 0, ""
}

func (s *session) append(v any) error { return fakecli.AppendJSONLine(s.path, v, 0o600) }

// turn records prompt and its answer.
func (s *session) turn(prompt string) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return errors.Join(
		s.append(map[string]any{"id": uuid.NewString(), "timestamp": now, "type": "user", "content": []map[string]string{{"text": prompt}}}),
		s.answer(now),
		s.append(map[string]any{"$set": map[string]string{"lastUpdated": now}}),
	)
}

// answer records the model's answer at now: with FAKEGEMINI_USAGE, its
// tokens, and the same message again with a tool call.
func (s *session) answer(now string) error {
	msg := map[string]any{"id": uuid.NewString(), "timestamp": now, "type": "gemini", "content": answer, "thoughts": []any{}, "model": "gemini-2.5-pro"}
	v := os.Getenv("FAKEGEMINI_USAGE")
	if v == "" {
		return s.append(msg)
	}
	var n [5]int64
	parts := strings.Split(v, ",")
	if len(parts) != len(n) {
		return fmt.Errorf("FAKEGEMINI_USAGE: %q is not five counts", v)
	}
	for i, p := range parts {
		var err error
		if n[i], err = strconv.ParseInt(strings.TrimSpace(p), 10, 64); err != nil {
			return fmt.Errorf("FAKEGEMINI_USAGE: %w", err)
		}
	}
	msg["tokens"] = map[string]int64{"input": n[0], "output": n[1], "cached": n[2], "thoughts": n[3], "tool": n[4], "total": n[0] + n[1] + n[3] + n[4]}
	if err := s.append(msg); err != nil {
		return err
	}
	msg["toolCalls"] = []map[string]any{{"id": "list_directory_0", "name": "list_directory", "args": map[string]string{"dir_path": "."}, "status": "success"}}
	return s.append(msg)
}

// user records prompt alone: the model never answered it (a quota).
func (s *session) user(prompt string) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	return errors.Join(
		s.append(map[string]any{"id": uuid.NewString(), "timestamp": now, "type": "user", "content": []map[string]string{{"text": prompt}}}),
		s.append(map[string]any{"$set": map[string]string{"lastUpdated": now}}),
	)
}

func run() int {
	inv, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := logPID(); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	if err := fakecli.LogStart(os.Getenv("FAKEGEMINI_START_LOG")); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	failDelay := 500 * time.Millisecond
	if v := os.Getenv("FAKEGEMINI_RESUME_FAIL_DELAY"); v != "" {
		if failDelay, err = time.ParseDuration(v); err != nil {
			fmt.Fprintln(os.Stderr, "fakegemini: FAKEGEMINI_RESUME_FAIL_DELAY:", err)
			return 2
		}
	}
	st, err := newStore()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	authed := os.Getenv("FAKEGEMINI_AUTH") == "1"
	isHeadless := inv.hasPrompt || len(inv.query) > 0 || !faketerm.IsTerminal(os.Stdin) || !faketerm.IsTerminal(os.Stdout)
	sess, code, msg := st.open(inv, failDelay, isHeadless && !authed)
	if sess == nil {
		fmt.Fprint(os.Stderr, msg)
		return code
	}
	if isHeadless {
		return headless(inv, sess, st, authed)
	}
	_, decided := trusted(inv)
	defer fakecli.StopServers(startWorkspace(st.cwd), 0)
	return runTUI(inv, sess, authed, os.Getenv("FAKEGEMINI_TRUST_PROMPT") == "1" && !decided)
}

// headless runs one turn, as gemini does with -p, a query, or a stdin that
// is not a terminal.
func headless(inv invocation, sess *session, st store, authed bool) int {
	if !authed {
		msg := fmt.Sprintf("Please set an Auth method in your %s or specify one of the following environment variables "+
			"before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA", filepath.Join(st.config, "settings.json"))
		if inv.json {
			out, _ := json.MarshalIndent(map[string]any{"session_id": sess.id,
				"error": map[string]any{"type": "Error", "message": msg, "code": harness.GeminiExitNoAuth}}, "", "  ")
			msg = string(out)
		}
		fmt.Fprintln(os.Stderr, msg)
		return harness.GeminiExitNoAuth
	}
	if ok, _ := trusted(inv); !ok {
		fmt.Fprintln(os.Stderr, untrustedText)
		return exitUntrusted
	}
	// A headless turn waits for its MCP servers a while before it ends
	// them.
	defer fakecli.StopServers(startWorkspace(st.cwd), 5*time.Second)
	var parts []string
	if !faketerm.IsTerminal(os.Stdin) {
		b, _ := io.ReadAll(os.Stdin)
		if len(b) > 0 {
			parts = append(parts, string(b))
		}
	}
	if inv.prompt != "" {
		parts = append(parts, inv.prompt)
	}
	if len(inv.query) > 0 {
		parts = append(parts, strings.Join(inv.query, " "))
	}
	prompt := strings.Join(parts, "\n\n")
	if prompt == "" {
		fmt.Fprintln(os.Stderr, "No input provided via stdin. Input can be provided by piping data into gemini or using the --prompt option.")
		return 1
	}
	if err := sess.turn(prompt); err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	if inv.json {
		out, _ := json.MarshalIndent(map[string]any{"session_id": sess.id, "response": answer, "stats": map[string]any{}}, "", "  ")
		fmt.Println(string(out))
	} else {
		fmt.Println(answer)
	}
	return 0
}

// screen is what the TUI shows.
type screen int

const (
	showTrust screen = iota
	showAuth
	showChat
)

type tui struct {
	sess      *session
	state     screen
	ed        faketerm.Editor
	history   []string
	replies   []string // by history: "" for the answer, else the quota error shown
	lastCtrlC time.Time
}

func runTUI(inv invocation, sess *session, authed, trust bool) int {
	term, err := faketerm.Open(os.Stdout, syscall.SIGHUP, syscall.SIGTERM)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakegemini:", err)
		return 1
	}
	defer term.Close()
	u := &tui{sess: sess, state: showChat}
	if !authed {
		u.state = showAuth
	}
	if trust {
		u.state = showTrust
	}
	if inv.resume {
		_ = sess.append(map[string]any{"$set": map[string]string{"sessionId": sess.id}})
	}
	if u.state == showChat && inv.interactive != "" {
		if err := u.submit(inv.interactive); err != nil {
			fmt.Fprintln(os.Stderr, "fakegemini:", err)
			return 1
		}
	}
	return u.loop(term, authed, inv.interactive)
}

func (u *tui) loop(term *faketerm.TUI, authed bool, initial string) int {
	handle := func(ev faketerm.Event) (int, bool) {
		switch ev.Kind {
		case faketerm.Interrupt:
			if time.Since(u.lastCtrlC) < time.Second {
				return 0, true
			}
			u.lastCtrlC = time.Now()
		case faketerm.Submit:
			switch u.state {
			case showTrust:
				u.state = showAuth
				if authed {
					u.state = showChat
					if initial != "" {
						if err := u.submit(initial); err != nil {
							return 1, true
						}
					}
				}
			case showChat:
				if strings.TrimSpace(ev.Text) != "" {
					if err := u.submit(ev.Text); err != nil {
						fmt.Fprintln(os.Stderr, "fakegemini:", err)
						return 1, true
					}
				}
			}
		}
		return 0, false
	}
	l := &fakecli.Loop[int]{Term: term, Feed: u.ed.Feed, Handle: handle, Draw: u.draw, Signal: faketerm.SignalStatus}
	return l.Run()
}

func (u *tui) submit(text string) error {
	limit, limited := limitText(time.Now())
	var err error
	if limited {
		err = u.sess.user(text)
	} else {
		err = u.sess.turn(text)
	}
	if err != nil {
		return err
	}
	for len(u.replies) < len(u.history) {
		u.replies = append(u.replies, "")
	}
	u.history, u.replies = append(u.history, text), append(u.replies, limit)
	return nil
}

// limitText is the quota error of a prompt submitted at now
// (FAKEGEMINI_LIMIT_UNTIL, FAKEGEMINI_LIMIT_FORM); false outside the
// limit.
func limitText(now time.Time) (string, bool) {
	secs, err := strconv.ParseInt(os.Getenv("FAKEGEMINI_LIMIT_UNTIL"), 10, 64)
	until := time.Unix(secs, 0)
	if err != nil || !now.Before(until) {
		return "", false
	}
	if os.Getenv("FAKEGEMINI_LIMIT_FORM") == "access" {
		return "ℹ Usage limit reached for gemini-2.5-pro.\nAccess resets at " + until.UTC().Format("3:04 PM") + " UTC.", true
	}
	delay := int(math.Ceil(until.Sub(now).Seconds()))
	return fmt.Sprintf(`✕ [API Error: {"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. Please retry in %d.0s.",`+
		`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":`+
		`"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},`+
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"%ds"}]}}]`, delay, delay), true
}

// wrap cuts each line of text into lines of at most w runes, as the TUI
// wraps a message.
func wrap(text string, w int) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		r := []rune(line)
		for len(r) > w {
			out, r = append(out, string(r[:w])), r[w:]
		}
		out = append(out, string(r))
	}
	return out
}

// draw repaints the screen in the layout of the real TUI's last frame.
func (u *tui) draw() {
	w, _ := faketerm.Size(100, 24)
	lines := []string{"", " Gemini CLI v0.61.0 (fake)", "", "Tips for getting started:", "1. /help for more information", ""}
	box := func(body ...string) {
		lines = append(lines, "╭"+strings.Repeat("─", w-2)+"╮")
		for _, b := range body {
			lines = append(lines, "│ "+b)
		}
		lines = append(lines, "╰"+strings.Repeat("─", w-2)+"╯")
	}
	switch u.state {
	case showTrust:
		box("", "Do you trust the files in this folder?", "", "● 1. Trust folder", "  2. Trust parent folder", "  3. Don't trust", "")
	case showAuth:
		box("", "? Get started", "", "  How would you like to authenticate for this project?", "",
			"  ● 1. Sign in with Google", "    2. Use Gemini API Key", "    3. Vertex AI", "", "  No authentication method selected.", "")
	case showChat:
		for i, h := range u.history {
			first, _, _ := strings.Cut(h, "\n")
			if i < len(u.replies) && u.replies[i] != "" {
				lines = append(append(append(lines, " > "+first, ""), wrap(u.replies[i], w)...), "")
				continue
			}
			lines = append(lines, " > "+first, "", "✦ "+answer, "")
		}
		input := "  Type your message or @path/to/file"
		if len(u.ed.Buf) > 0 {
			first, _, _ := strings.Cut(string(u.ed.Buf), "\n")
			input = first
		}
		lines = append(lines, strings.Repeat(" ", max(0, w-16))+"? for shortcuts", strings.Repeat("─", w),
			" Shift+Tab to accept edits", "", " > "+input, "", " workspace (/directory)      sandbox      /model")
	}
	fmt.Print("\x1b[H\x1b[2J" + strings.Join(lines, "\r\n"))
}
