package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
)

// The Codex adapter follows the CLI of @openai/codex 0.171.0: its --help,
// and the behaviour measured in docs/reference/harness-cli-facts.md
// (section 2) and on captured screens under testdata/codex-0.171.0.
//
// Codex cannot start a conversation under an id chosen in advance: it
// mints a UUIDv7 and names its rollout file after it when the first prompt
// is submitted. loopd learns the id after the spawn (SessionLearner).

// codexSessionFlags are the arguments that choose the conversation, its
// directory or its server, which the adapter sets itself: extraArgs must
// not. A subcommand would turn the TUI into another program, -C/--cd and
// --worktree would move the conversation away from the workdir loopd finds
// it by, --remote would run it elsewhere, and a second --no-daemon is an
// error ("cannot be used multiple times").
var codexSessionFlags = []string{
	"resume", "fork", "exec", "e", "--last", "--all", "--no-daemon", "--remote", "-C", "--cd", "--worktree", "--",
}

// codexProcessNames are the names a pane shows while Codex runs: the npm
// package's bin/codex is a Node launcher (comm "node") that spawns the
// native binary (comm "codex") as its child, in its own process group;
// tmux shows the launcher's, the group's leader (measured on 0.171.0).
var codexProcessNames = []string{"codex", "node"}

// codexPass are the variables of loopd's environment that the adapter
// passes on: CODEX_HOME says where the CLI keeps its rollouts and its
// login, which Transcript and Account must find where the CLI writes them.
var codexPass = []string{"CODEX_HOME"}

// codexDialogs are the screens that replace the input box and wait for a
// human, in the order they are checked; every marker must be present.
// Captured on 0.171.0: blocked-login.txt (the first run without a login,
// or any start without a model provider that needs none) and
// blocked-resume-cwd.txt (codex resume <id> where the rollout's cwd is not
// the current one).
var codexDialogs = []struct {
	markers []string
	reason  Block
}{
	{[]string{"Working directory · resume", "Use session directory"}, BlockResumeChooser},
	{[]string{"Welcome to Codex", "Sign in with ChatGPT"}, BlockLoginRequired},
	// The folder dialog of a git workdir (or one with .codex/) that the
	// config does not trust (blocked-folder-trust.txt), and the one it
	// shows instead once the config marks it untrusted
	// (blocked-folder-restricted.txt). loopd answers neither: the first's
	// highlighted choice trusts the folder.
	{[]string{"Folder access", "Trust and continue"}, BlockWorkspaceTrust},
	{[]string{"Folder access", "Open restricted"}, BlockWorkspaceTrust},
	// A trusted workdir's new hooks, before they run or not
	// (blocked-hooks-review.txt); its MCP servers start after it.
	{[]string{"Hooks need review", "Continue without trusting"}, BlockWorkspaceTrust},
}

// codexInputBox is the input box's first line: "› " at the start of a
// line, the last such line of the screen (the user's earlier messages in
// the history start with it too).
const codexInputBox = "\n› "

// codexEmptyBox is in the footer under the input box while the box is
// empty ("← for agents · ? for shortcuts"); text in the box replaces it
// (by nothing, or by "tab to queue message" while a turn runs). The box's
// placeholder text varies, so the footer is what tells an empty box.
const codexEmptyBox = "? for shortcuts"

type codex struct {
	base
}

// WithProjectSettings returns a copy whose spawns trust the workdir in
// Codex's config when trusted (Provision): Codex 0.171.0 then loads its
// .codex/config.toml (its MCP servers at once, and its hooks once
// reviewed or with --dangerously-bypass-hook-trust). Otherwise Codex
// disables "untrusted project-local configuration" (measured, TUI and
// exec alike), and Provision takes back a trust the config holds for the
// workdir.
func (c *codex) WithProjectSettings(trusted bool) Adapter {
	cp := *c
	cp.projectSettings = trusted
	return &cp
}

// Provision sets projects."<physical workdir>".trust_level = "trusted" in
// the item's own <CODEX_HOME>/config.toml (home; made by ItemState, which
// copies the shared config.toml over it at each spawn, so it runs after
// it) when the workdir's project settings are trusted, and removes a "trusted" one otherwise (codexTrust): Codex
// trusts a project only by that key in the user config (a -c override of
// it counts for nothing; a parent directory's trust is not inherited by
// a git workdir: measured on 0.171.0). A workdir of "" is left alone. It
// returns an error wrapping ErrBadSettings for a config.toml where the
// workdir's entry has a form loopd does not edit, which it leaves as it
// is.
func (c *codex) Provision(workdir string) error {
	if workdir == "" {
		return nil
	}
	dir, err := physicalDir(workdir)
	if err != nil {
		return fmt.Errorf("provision codex config: %w", err)
	}
	home, err := c.home(dir)
	if err != nil {
		return fmt.Errorf("provision codex config: %w", err)
	}
	path := filepath.Join(home, "config.toml")
	if err := codexTrust(path, filepath.Clean(dir), c.projectSettings); err != nil {
		return fmt.Errorf("provision codex config %s: %w", path, err)
	}
	return nil
}

func newCodex(b base) (*codex, error) {
	if err := b.refuseFlags(codexSessionFlags); err != nil {
		return nil, err
	}
	b.pass = append(b.pass, codexPass...)
	return &codex{base: b}, nil
}

// ProcessNames adds "codex" and "node" to the base names unless
// processName is set.
func (c *codex) ProcessNames() []string { return c.withProcessNames(codexProcessNames...) }

// SupportsResume is true: codex resume <id> resumes interactively.
func (c *codex) SupportsResume() bool { return true }

// ValidSessionID is canonicalUUID. Codex mints UUIDv7 ids and names its
// rollouts after them in lowercase; a non-UUID would be looked up as a
// session name.
func (c *codex) ValidSessionID(id string) bool { return canonicalUUID(id) }

// FreshArgv is [command --no-daemon extraArgs... -- prompt]. Codex mints
// the conversation's id itself, so id is not passed (SessionLearner
// learns it). --no-daemon keeps Codex from starting the shared app-server
// processes, which outlive the pane; "--" keeps a prompt that starts with
// "-" from being read as a flag (measured). An empty prompt leaves both
// out.
func (c *codex) FreshArgv(_, prompt string) []string {
	return c.argv(nil, "", prompt)
}

// ResumeArgv is [command resume --no-daemon extraArgs... id -- prompt]: id
// as its own element, where the subcommand takes its session id. Codex
// looks the id up globally and opens its "Working directory" chooser when
// the rollout's cwd is not the current one: loopd always resumes in the
// recorded workdir, and takes that chooser for a failed resume.
func (c *codex) ResumeArgv(id, prompt string) []string {
	return c.argv([]string{"resume"}, id, prompt)
}

func (c *codex) argv(sub []string, id, prompt string) []string {
	argv := append([]string{c.command}, sub...)
	argv = append(argv, "--no-daemon")
	argv = append(argv, c.extra...)
	if id != "" {
		argv = append(argv, id)
	}
	if prompt != "" {
		argv = append(argv, "--", prompt)
	}
	return argv
}

// HeadlessArgv is [command exec [resume] --json --skip-git-repo-check
// extraArgs... [id] -], with prompt on stdin ("-": Codex reads the prompt
// from stdin, so no prompt is ever too long for argv). A fresh turn cannot
// pin id: its output names the id (HeadlessSessionID). exec has no
// --no-daemon (it starts no shared server), and --skip-git-repo-check lets
// it run in a workdir that is not a git repository.
func (c *codex) HeadlessArgv(id, prompt string, resume bool) ([]string, []byte) {
	// extraArgs go before "resume": they are exec's options then, which
	// exec resume does not all take after it (-s, -p, --oss, --add-dir;
	// measured on 0.171.0).
	argv := append([]string{c.command, "exec"}, c.extra...)
	if resume {
		argv = append(argv, "resume")
	}
	argv = append(argv, "--json", "--skip-git-repo-check")
	if resume {
		argv = append(argv, id)
	}
	return append(argv, "-"), []byte(prompt)
}

// HeadlessSessionID returns the thread_id of the first
// {"type":"thread.started"} line of codex exec --json's output (measured
// on 0.171.0: it is the run's first line, for a fresh turn and a resumed
// one alike), "" when there is none or it is not an id Codex writes.
// codexTUIOnlyFlags are the flags of Codex 0.171.0's TUI that codex exec
// refuses (exit 2, "unexpected argument"; measured by comparing `codex
// --help` with `codex exec --help`). --no-daemon is the adapter's own.
var codexTUIOnlyFlags = []string{"-a", "--ask-for-approval", "--search", "--no-alt-screen"}

// CheckHeadlessArgs refuses a TUI-only flag in extraArgs
// (codexTUIOnlyFlags): every run of a process route would exit 2 on it. An
// approval policy for both forms is -c approval_policy="never".
func (c *codex) CheckHeadlessArgs() error {
	if arg, ok := c.extraFlag(codexTUIOnlyFlags); ok {
		return fmt.Errorf("harness %s: extraArgs: %q is a flag of the TUI that codex exec refuses (for both, use -c approval_policy=… instead of -a): %w", c.name, arg, ErrBadConfig)
	}
	if arg, ok := c.extraFlag(codexHeadlessFlags); ok {
		return fmt.Errorf("harness %s: extraArgs: %q is set by the adapter for codex exec, which refuses it twice: %w", c.name, arg, ErrBadConfig)
	}
	return nil
}

// codexHeadlessFlags are the flags HeadlessArgv passes itself.
var codexHeadlessFlags = []string{"--json", "--skip-git-repo-check"}

func (c *codex) HeadlessSessionID(output []byte) string {
	for line := range bytes.Lines(output) {
		var l struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(line, &l) == nil && l.Type == "thread.started" {
			if c.ValidSessionID(l.ThreadID) {
				return l.ThreadID
			}
			return ""
		}
	}
	return ""
}

// Env is the harness env, on top of loopd's values of passEnv and
// codexPass.
func (c *codex) Env() map[string]string { return c.paneEnv() }

// sharedHome is the directory Codex keeps its login and config in:
// CODEX_HOME as the pane sees it (taken against cwd when relative), else
// $HOME/.codex. The conversations made before items had homes of their
// own are in its sessions too.
func (c *codex) sharedHome(cwd string) (string, error) { return c.dirOf("CODEX_HOME", ".codex", cwd) }

// home is the item's own CODEX_HOME for the physical workdir dir (itemDir
// in the shared home), where its sessions go: Codex files them by day
// (sessions/YYYY/MM/DD), so no bind could give an item only its own.
func (c *codex) home(dir string) (string, error) {
	shared, err := c.sharedHome(dir)
	if err != nil {
		return "", err
	}
	return itemDir(shared, dir), nil
}

// codexShared are the files of the shared home each item's home links to:
// the login. Codex replaces auth.json by a rename when it refreshes it
// (measured on 0.171.0: a bind of it fails with EBUSY), so a refreshed
// login lands in the item's home and is adopted at its next spawn
// (linkShared).
var codexShared = []string{"auth.json"}

// codexConfig is the operator's config.toml, copied into each item's home
// at each spawn: Codex may write it, which must not change another item's.
const codexConfig = "config.toml"

// ItemState makes the item's own CODEX_HOME (home) for a spawn in workdir
// in any mode: the shared login linked, the shared config.toml copied, and
// the rollout of id, when only the shared sessions hold it (a conversation
// made before), linked in. A sandbox shows the item's home and the shared
// login, writable.
func (c *codex) ItemState(workdir, id string, sandboxed bool) (State, error) {
	dir, err := physicalDir(workdir)
	if err != nil {
		return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
	}
	shared, err := c.sharedHome(dir)
	if err != nil {
		return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
	}
	home := itemDir(shared, dir)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
	}
	if err := linkShared(home, shared, codexShared...); err != nil {
		return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
	}
	if err := copyInto(filepath.Join(shared, codexConfig), filepath.Join(home, codexConfig)); err != nil {
		return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
	}
	if id != "" && c.ValidSessionID(id) {
		old, err := findRollout(filepath.Join(shared, "sessions"), id)
		if err != nil {
			return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
		}
		if rel, ok := strings.CutPrefix(old, shared+"/"); ok {
			mine, err := findRollout(filepath.Join(home, "sessions"), id)
			if err == nil && mine == "" {
				err = linkConversation(shared, home, rel)
			}
			if err != nil {
				return State{}, fmt.Errorf("codex home of %s: %w", workdir, err)
			}
		}
	}
	st := State{Env: map[string]string{"CODEX_HOME": home}}
	if sandboxed {
		st.Binds = append([]sandbox.Bind{{Source: home, Write: true}}, sharedBinds(shared, codexShared...)...)
	}
	return st, nil
}

// codexMeta is the part of a rollout's first line, its session_meta, that
// loopd reads.
type codexMeta struct {
	Type    string `json:"type"`
	Payload struct {
		ID        string `json:"id"`
		Timestamp string `json:"timestamp"`
		Cwd       string `json:"cwd"`
	} `json:"payload"`
}

// readMeta reads the session_meta line that opens the rollout at path;
// false when the file holds none (empty, torn, or another line first).
func readMeta(path string) (codexMeta, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return codexMeta{}, false, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return codexMeta{}, false, nil
	}
	var m codexMeta
	if json.Unmarshal(line, &m) != nil || m.Type != "session_meta" || m.Payload.ID == "" {
		return codexMeta{}, false, nil
	}
	return m, true, nil
}

// Transcript reports the rollout <home>/sessions/YYYY/MM/DD/rollout-
// <start>-<id>.jsonl in the item's home, else in the shared one (a
// conversation made before items had homes, which ItemState links in
// for its resume). Codex looks a resume's id up in every day's
// directory, so all are searched. It exists when its first
// line is the session_meta of id and the cwd it was last run in
// (codexSession) is the physical cwd: a rollout of another cwd opens
// Codex's chooser, which loopd never answers. It returns
// ErrInvalidSessionID for an id that fails ValidSessionID.
func (c *codex) Transcript(cwd, id string) (Transcript, error) {
	if !c.ValidSessionID(id) {
		return Transcript{}, fmt.Errorf("transcript %q: %w", id, ErrInvalidSessionID)
	}
	dir, err := physicalDir(cwd)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	home, err := c.home(dir)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	sessions := filepath.Join(home, "sessions")
	path, err := findRollout(sessions, id)
	if err == nil && path == "" {
		shared, serr := c.sharedHome(dir)
		if serr != nil {
			return Transcript{}, fmt.Errorf("transcript %s: %w", id, serr)
		}
		path, err = findRollout(filepath.Join(shared, "sessions"), id)
	}
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	t := Transcript{Known: true, Path: filepath.Join(sessions, "rollout-"+id+".jsonl")}
	if path == "" {
		return t, nil
	}
	t.Path = path
	t, err = readTranscript(t, func(r io.Reader) (bool, error) {
		s, err := scanCodexSession(r)
		return s.ok && s.meta.Payload.ID == id && s.cwd == dir, err
	})
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	return t, nil
}

// findRollout returns the rollout of id under sessions, "" when there is
// none.
func findRollout(sessions, id string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(sessions, "*", "*", "*", "rollout-*-"+id+".jsonl"))
	if err != nil || len(matches) == 0 {
		return "", err
	}
	return matches[0], nil
}

// codexSession is what a rollout records of its session.
type codexSession struct {
	meta codexMeta
	ok   bool // the rollout opens with a session_meta
	// cwd is the cwd the session was last run in, which Codex compares
	// with its own on a resume ("Session = latest cwd recorded in the
	// resumed session"): that of the last thread_settings_applied event,
	// else session_meta's. Measured on 0.171.0: a turn_context or a
	// world_state naming another cwd does not change it, a
	// thread_settings_applied does.
	cwd string
	// settings is the last thread_settings_applied line, nil when none.
	settings []byte
	// last is the rollout's last line.
	last []byte
}

// codexSettings is the part of a thread_settings_applied line that loopd
// reads.
type codexSettings struct {
	Type    string `json:"type"`
	Payload struct {
		Type     string `json:"type"`
		Settings struct {
			Cwd string `json:"cwd"`
		} `json:"thread_settings"`
	} `json:"payload"`
}

// scanCodexSession reads a rollout through; a torn last line is skipped.
func scanCodexSession(r io.Reader) (codexSession, error) {
	var s codexSession
	br := bufio.NewReader(r)
	for first := true; ; first = false {
		line, err := br.ReadBytes('\n')
		if first {
			if json.Unmarshal(line, &s.meta) == nil && s.meta.Type == "session_meta" && s.meta.Payload.ID != "" {
				s.ok, s.cwd = true, s.meta.Payload.Cwd
			}
		} else if bytes.Contains(line, []byte(`"thread_settings_applied"`)) {
			var l codexSettings
			if json.Unmarshal(line, &l) == nil && l.Type == "event_msg" && l.Payload.Type == "thread_settings_applied" && l.Payload.Settings.Cwd != "" {
				s.cwd, s.settings = l.Payload.Settings.Cwd, line
			}
		}
		if len(bytes.TrimSpace(line)) > 0 {
			s.last = line
		}
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return codexSession{}, err
		}
	}
}

// RestoreTarget is the rollout of id when one exists, else a new one
// dated by the session's start (its session_meta timestamp, else now) as
// Codex names it: sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl
// in UTC; Codex finds a resume's rollout by id in any day's directory.
// When the session was last run in another cwd, its last
// thread_settings_applied event is appended again with every path at or
// under that cwd re-rooted at cwd, as Codex itself records the choice
// "Use current directory" of its chooser (measured on 0.171.0: without
// it, codex resume in the new cwd opens the chooser; with it, it resumes,
// and its sandbox's writable roots follow). A rollout that records no
// such event gives ErrNoTranscriptRule.
func (c *codex) RestoreTarget(cwd, id string, data []byte, now time.Time) (string, []byte, error) {
	dir, err := physicalDir(cwd)
	if err != nil {
		return "", nil, err
	}
	home, err := c.home(dir)
	if err != nil {
		return "", nil, err
	}
	s, err := scanCodexSession(bytes.NewReader(data))
	if err != nil {
		return "", nil, err
	}
	if !s.ok || s.meta.Payload.ID != id {
		return "", nil, fmt.Errorf("stored rollout is not the session's: %w", ErrNoTranscriptRule)
	}
	sessions := filepath.Join(home, "sessions")
	path, err := findRollout(sessions, id)
	if err != nil {
		return "", nil, err
	}
	if path == "" {
		start, err := time.Parse(time.RFC3339Nano, s.meta.Payload.Timestamp)
		if err != nil {
			start = now
		}
		start = start.UTC()
		path = filepath.Join(sessions, start.Format("2006/01/02"), "rollout-"+start.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
	}
	if s.cwd == dir {
		return path, data, nil
	}
	if s.settings == nil {
		return "", nil, fmt.Errorf("rollout of %s records no thread settings to move from %s: %w", id, s.cwd, ErrNoTranscriptRule)
	}
	moved, err := codexMoveSettings(s, dir, now)
	if err != nil {
		return "", nil, err
	}
	out := slices.Clip(data)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n') // a torn last line stays torn, on its own
	}
	return path, append(append(out, moved...), '\n'), nil
}

// codexMoveSettings returns s's last thread_settings_applied line with
// every string of its thread_settings that is s.cwd or a path under it
// re-rooted at dir, dated now, its ordinal one past the last line's.
func codexMoveSettings(s codexSession, dir string, now time.Time) ([]byte, error) {
	var line map[string]any
	dec := json.NewDecoder(bytes.NewReader(s.settings))
	dec.UseNumber()
	if err := dec.Decode(&line); err != nil {
		return nil, fmt.Errorf("read thread settings: %w", err)
	}
	payload, _ := line["payload"].(map[string]any)
	payload["thread_settings"] = reroot(payload["thread_settings"], s.cwd, dir)
	line["timestamp"] = now.UTC().Format("2006-01-02T15:04:05.000Z")
	var last struct {
		Ordinal *int64 `json:"ordinal"`
	}
	if _, ok := line["ordinal"]; ok && json.Unmarshal(s.last, &last) == nil && last.Ordinal != nil {
		line["ordinal"] = *last.Ordinal + 1
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(line); err != nil {
		return nil, fmt.Errorf("write thread settings: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// reroot returns v with every string that is from, or a path under it,
// moved under to.
func reroot(v any, from, to string) any {
	switch v := v.(type) {
	case string:
		if v == from {
			return to
		}
		if rest, ok := strings.CutPrefix(v, from+"/"); ok {
			return to + "/" + rest
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = reroot(e, from, to)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = reroot(e, from, to)
		}
		return v
	}
	return v
}

// TranscriptFrames reads Codex's rollout: each user message's text
// (codexUserText).
func (c *codex) TranscriptFrames(tr Transcript, frames []desired.Frame) (map[string]Found, error) {
	return scanFrames(tr, frames, codexUserText)
}

// codexUserText returns the text of a rollout line that records a message
// the user typed or pasted, and whether it is one: an event_msg whose
// payload is an item_completed of a "UserMessage" item (0.171.0, its text
// parts joined), or a "user_message" event (its message; earlier
// versions). The response_item lines of role "user" are left out: Codex
// writes its own context there too (<environment_context>), and the
// agent's tools and its own words are other lines.
func codexUserText(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"event_msg"`)) {
		return "", false
	}
	var l struct {
		Type    string `json:"type"`
		Payload struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Item    struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"item"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "event_msg" {
		return "", false
	}
	switch {
	case l.Payload.Type == "user_message":
		return l.Payload.Message, true
	case l.Payload.Type == "item_completed" && l.Payload.Item.Type == "UserMessage":
		var b strings.Builder
		for _, p := range l.Payload.Item.Content {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String(), true
	}
	return "", false
}

// SessionsStarted returns the conversations Codex started in the physical
// cwd at or after since, oldest first: the rollouts under
// <home>/sessions whose session_meta names cwd and a start not before
// since, each with the text of its first user message. A rollout is
// written at the first prompt, with the session's start (the TUI's)
// as its session_meta timestamp. Only the day directories from the day
// before since on are read, as a rollout's directory is its start's date.
func (c *codex) SessionsStarted(cwd string, since time.Time) ([]Started, error) {
	dir, err := physicalDir(cwd)
	if err != nil {
		return nil, fmt.Errorf("sessions started in %s: %w", cwd, err)
	}
	home, err := c.home(dir)
	if err != nil {
		return nil, fmt.Errorf("sessions started in %s: %w", cwd, err)
	}
	var out []Started
	for _, day := range daysFrom(filepath.Join(home, "sessions"), since.AddDate(0, 0, -1)) {
		names, err := filepath.Glob(filepath.Join(day, "rollout-*.jsonl"))
		if err != nil {
			return nil, fmt.Errorf("sessions started in %s: %w", cwd, err)
		}
		for _, path := range names {
			m, ok, err := readMeta(path)
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted since the listing
			}
			if err != nil {
				return nil, fmt.Errorf("sessions started in %s: %w", cwd, err)
			}
			at, perr := time.Parse(time.RFC3339Nano, m.Payload.Timestamp)
			if !ok || perr != nil || m.Payload.Cwd != dir || at.Before(since.Truncate(time.Millisecond)) ||
				!c.ValidSessionID(m.Payload.ID) || !strings.HasSuffix(path, "-"+m.Payload.ID+".jsonl") {
				continue
			}
			first, err := firstUserText(path)
			if err != nil {
				return nil, fmt.Errorf("sessions started in %s: %w", cwd, err)
			}
			out = append(out, Started{ID: m.Payload.ID, At: at, First: first})
		}
	}
	slices.SortStableFunc(out, func(a, b Started) int { return a.At.Compare(b.At) })
	return out, nil
}

// daysFrom returns the day directories root/YYYY/MM/DD whose date is from
// (in UTC) or later, in order.
func daysFrom(root string, from time.Time) []string {
	first := from.UTC().Format("2006/01/02")
	days, _ := filepath.Glob(filepath.Join(root, "[0-9][0-9][0-9][0-9]", "[0-9][0-9]", "[0-9][0-9]"))
	var out []string
	for _, d := range days {
		rel, err := filepath.Rel(root, d)
		if err == nil && filepath.ToSlash(rel) >= first {
			out = append(out, d)
		}
	}
	return out
}

// firstUserText returns the text of the first user message in the rollout
// at path, "" when it holds none yet.
func firstUserText(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if text, ok := codexUserText(line); ok {
			return text, nil
		}
		if err != nil {
			return "", nil
		}
	}
}

// Screen classifies a plain capture-pane of the Codex TUI: Blocked at a
// dialog that replaces the input box (the login screen, the "Working
// directory · resume" chooser), Ready when the input box is drawn empty
// (or cfg.ReadyPattern matches), Draft when it holds text, else Busy
// (starting). A turn in progress keeps the box drawn and takes what is
// submitted into the turn (measured: a paste and Enter while "Working"
// reaches the rollout as a user message), so it is Ready too.
func (c *codex) Screen(text string) (Screen, string) {
	for _, d := range codexDialogs {
		if containsAll(text, d.markers) {
			return ScreenBlocked, d.reason
		}
	}
	if c.ready != nil {
		if c.ready.MatchString(text) {
			return ScreenReady, ""
		}
		return ScreenBusy, ""
	}
	i := strings.LastIndex("\n"+text, codexInputBox)
	if i < 0 {
		return ScreenBusy, ""
	}
	if strings.Contains(text[i:], codexEmptyBox) {
		return ScreenReady, ""
	}
	return ScreenDraft, DraftReason
}

// Blocked returns the dialog Screen reports, "" for none.
func (c *codex) Blocked(text string) Block { return blockedOn(c.Screen(text)) }

// codexLimitLine is how Codex words a usage limit (codex-rs error.rs,
// UsageLimitReachedError and QuotaExceeded; the 0.171.0 binary's strings):
// "You’ve hit your usage limit. … try again at Dec 1st, 2026 1:09 AM."
// (measured, with a typographic apostrophe), the same without the
// contraction ("You have hit your usage limit", as other versions word
// it), "You've reached your usage limit", "Quota exceeded. Check your plan
// and billing details.", the credit messages, and the backend's 429 body
// when the CLI shows it raw ({"error":{"type":"usage_limit_reached",…}}).
var codexLimitLine = regexp.MustCompile(`(?i)(you(?:'|’)ve|you have) (?:hit|reached) your usage limit|quota exceeded\. check your plan|you(?:'|’)re out of credits|workspace is out of credits|usage_limit_reached`)

// codexRate is an API rate-limit (HTTP 429) error Codex gave up retrying
// ("exceeded retry limit, last status: 429 Too Many Requests"), codexOverload
// its overload message.
var (
	codexRate     = regexp.MustCompile(`(?i)exceeded retry limit, last status: 429`)
	codexOverload = regexp.MustCompile(`(?i)currently experiencing high (?:demand|load)`)
)

// codexResetsAt and codexResetsIn are the reset of the backend's 429 body
// for a usage limit (codex-rs, UsageLimitReachedError's resets_at, Unix
// seconds, and resets_in_seconds), which a message may carry as it came.
var (
	codexResetsAt = regexp.MustCompile(`"resets_at"\s*:\s*(\d{9,11})\b`)
	codexResetsIn = regexp.MustCompile(`"resets_in_seconds"\s*:\s*(\d{1,9})\b`)
)

// codexWeekly is a message that names the weekly window.
var codexWeekly = regexp.MustCompile(`(?i)\bweekly\b`)

// codexLineLimit reads a usage limit, a rate limit or an overload from one
// message of Codex, seen at now; clock times are in loc, the zone the CLI
// prints in. A resets_at is taken as given, a resets_in_seconds counted
// from now, a date or clock time read by ParseReset.
func codexLineLimit(text string, now time.Time, loc *time.Location) (Limit, bool) {
	switch {
	case codexLimitLine.MatchString(text):
		l := Limit{Kind: LimitUsage, Text: clip(text)}
		if codexWeekly.MatchString(text) {
			l.Window = WindowWeekly
		}
		if m := codexResetsAt.FindStringSubmatch(text); m != nil {
			secs, _ := strconv.ParseInt(m[1], 10, 64)
			l.Reset = time.Unix(secs, 0).UTC()
		} else if m := codexResetsIn.FindStringSubmatch(text); m != nil {
			secs, _ := strconv.Atoi(m[1])
			l.Reset = now.Add(time.Duration(secs) * time.Second)
		} else if t, ok := ParseReset(text, now, loc); ok {
			l.Reset = t
		}
		return l, true
	case codexRate.MatchString(text):
		return Limit{Kind: LimitRate, Text: clip(text)}, true
	case codexOverload.MatchString(text):
		return Limit{Kind: LimitOverload, Text: clip(text)}, true
	}
	return Limit{}, false
}

// codexMarks are the marks of Codex's screen (0.171.0,
// testdata/codex-0.171.0): "■" starts an error the CLI shows (a usage
// limit among them), "›" a user message and "•" the agent's message or a
// tool's output.
var codexMarks = statusMarks{status: []string{"■"}, talk: []string{"›", "•"}}

// Limit reports the usage limit the latest turn on a Codex screen shows:
// an error of the CLI's own ("■ You’ve hit your usage limit. …", which may
// wrap onto the next lines), never the agent's message or a quoted
// comment; its reset read at now in the pane's zone.
func (c *codex) Limit(text string, now time.Time) (Limit, bool) {
	return statusLimit(codexLastTurn(text), codexMarks, func(block string) (Limit, bool) { return codexLineLimit(block, now, c.zone()) })
}

// codexLastTurn is the text between the latest user message shown and the
// input box (the last line starting with "› "), the whole text when there
// is no earlier one.
func codexLastTurn(text string) string {
	lines := strings.Split(text, "\n")
	var prompts []int
	for i, line := range lines {
		if strings.HasPrefix(line, "› ") {
			prompts = append(prompts, i)
		}
	}
	switch len(prompts) {
	case 0:
		return text
	case 1:
		return strings.Join(lines[:prompts[0]], "\n")
	}
	return strings.Join(lines[prompts[len(prompts)-2]+1:prompts[len(prompts)-1]], "\n")
}

// codexTail is how much of a rollout's end TranscriptLimit reads.
const codexTail = 64 << 10 // bytes

// TranscriptLimit reports the usage limit the latest turn of Codex's
// rollout tr ended on: its last task_complete event carries an error
// (measured on 0.171.0: {"type":"task_complete","error":{"message":
// "You’ve hit your usage limit. …","codex_error_info":
// "usage_limit_exceeded"}}) and no user message follows it. Its At is the
// line's timestamp, at which the reset is read. It reads at most the last
// 64 KiB.
func (c *codex) TranscriptLimit(tr Transcript) (Limit, bool, error) {
	if !tr.Known || !tr.Exists {
		return Limit{}, false, nil
	}
	tail, err := readTail(tr.Path, codexTail)
	if err != nil {
		return Limit{}, false, err
	}
	var last []byte
	for line := range bytes.Lines(tail) {
		if _, ok := codexUserText(line); ok {
			last = nil
			continue
		}
		if bytes.Contains(line, []byte(`"task_complete"`)) {
			last = line
		}
	}
	var l struct {
		Timestamp string `json:"timestamp"`
		Payload   struct {
			Type  string `json:"type"`
			Error *struct {
				Message string `json:"message"`
				Info    any    `json:"codex_error_info"`
			} `json:"error"`
		} `json:"payload"`
	}
	if last == nil || json.Unmarshal(last, &l) != nil || l.Payload.Type != "task_complete" || l.Payload.Error == nil {
		return Limit{}, false, nil
	}
	at, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return Limit{}, false, nil // not a line the CLI wrote
	}
	msg := l.Payload.Error.Message
	lim, ok := codexLineLimit(msg, at, c.zone())
	if !ok && l.Payload.Error.Info == "usage_limit_exceeded" {
		lim, ok = Limit{Kind: LimitUsage, Text: clip(msg)}, true
	}
	lim.At = at
	return lim, ok, nil
}

// Account is the shared directory Codex keeps its login in (CODEX_HOME as the
// pane sees it, else $HOME/.codex): harnesses that share it share one
// account, and so its usage limits.
func (c *codex) Account() string {
	if dir := c.getenv("CODEX_HOME"); dir != "" {
		return AdapterCodex + ":" + filepath.Clean(dir)
	}
	return AdapterCodex + ":" + filepath.Join(c.getenv("HOME"), ".codex")
}
