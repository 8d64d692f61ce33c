package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/loopd/loopd/desired"
)

// The Claude Code adapter follows the CLI of Claude Code 2.1.197: its
// --help, and the behaviour measured in docs/reference/harness-cli-facts.md
// (section 1) and on captured screens under testdata/claude-2.1.197.

// claudeSessionFlags are the flags that choose or fork the conversation or
// leave the TUI. The adapter sets the conversation itself, so extraArgs
// must not: "--resume X --session-id Y" without --fork-session is an error,
// and -p would make the pane exit after one answer.
var claudeSessionFlags = []string{
	"--session-id", "-r", "--resume", "-c", "--continue", "--fork-session",
	"--from-pr", "-p", "--print", "--",
}

// claudeReady is the input box: a rule (maybe carrying the session name on
// its right) directly above the prompt line "❯" + NBSP. History lines
// ("❯ text") follow other lines, and dialogs draw "❯" indented.
var claudeReady = regexp.MustCompile(`(?m)^─.*\n❯(?:[ \x{a0}]|$)`)

// claudeInput captures the first line of the input box, after "❯" + NBSP.
var claudeInput = regexp.MustCompile(`(?m)^─.*\n❯[ \x{a0}]?(.*)$`)

// claudeBusy is in the footer under the input box while a turn runs
// ("esc to interrupt · ← for agents"); the box itself stays drawn, so
// typed text would be queued behind the turn.
const claudeBusy = "esc to interrupt"

// claudeDialogs are the screens that replace the input box and wait for a
// human, in the order they are checked; every marker must be present. The
// permission prompt's markers are those of Claude Code's tool dialogs
// ("Do you want to proceed?", "Do you want to make this edit to …?",
// "Do you want to create …?", their first choice "1. Yes"); the login and
// onboarding screens are those of a first run ("Select login method",
// the theme picker "Choose the text style"); the others are the CLI's own
// texts (its strings), listed in docs/design.md ("Screens that wait for
// a human") with what loopd does at each.
var claudeDialogs = []struct {
	markers []string
	reason  Block
}{
	{[]string{"Accessing workspace:", "Yes, I trust this folder"}, BlockWorkspaceTrust},
	// A project's .mcp.json servers to approve (one, or several), when
	// project settings are trusted (never with --strict-mcp-config).
	{[]string{"New MCP server found in this project", "Continue without using this MCP server"}, BlockWorkspaceTrust},
	{[]string{"new MCP servers found in this project", "Select any you wish to enable."}, BlockWorkspaceTrust},
	{[]string{"Resume session", "⌕"}, BlockResumePicker},
	{[]string{"Resume from summary (recommended)", "Resume full session as-is"}, BlockResumeSummary},
	{[]string{"You've spent $5 on the Anthropic API this session.", "Got it, thanks!"}, BlockCostNotice},
	{[]string{"Updates to Consumer Terms and Policies"}, BlockPolicyUpdate},
	{[]string{"Allow external CLAUDE.md file imports?"}, BlockExternalImports},
	{[]string{"Bypass Permissions mode", "Yes, I accept"}, BlockBypassConsent},
	{[]string{"Do you want to use this API key?"}, BlockAPIKey},
	{[]string{claudeLimitMenuTitle, claudeLimitWait}, BlockUsageLimitMenu},
	{[]string{"Do you want to proceed?", "1. Yes"}, BlockPermission},
	{[]string{"Do you want to make this edit to", "1. Yes"}, BlockPermission},
	{[]string{"Do you want to create", "1. Yes"}, BlockPermission},
	{[]string{"Select login method"}, BlockLoginRequired},
	{[]string{"Choose the text style"}, BlockOnboarding},
}

// claudeSettingsFlags are the flags that choose which settings Claude Code
// reads, which the adapter sets itself (claudeOwnSettings): extraArgs must
// not widen them to the workdir's.
var claudeSettingsFlags = []string{"--setting-sources"}

// claudeOwnSettings are the flags that keep a workdir's own settings from
// configuring Claude Code 2.1.197 (docs/design.md, "Repository content
// never configures the harness"): only the user settings of the config
// dir, none of the project's .claude/settings.json and
// .claude/settings.local.json (their hooks, statusLine, env and MCP
// approvals), nor its .claude/ commands, skills, agents and CLAUDE.md; and
// only the MCP servers of --mcp-config (extraArgs), none of .mcp.json or
// of the config's own. Measured: with them, a project SessionStart hook,
// a local one and a .mcp.json server all stay unstarted, in the TUI and
// with -p, while the hook of --settings still runs.
var claudeOwnSettings = []string{"--setting-sources", "user", "--strict-mcp-config"}

type claudeCode struct {
	base
	// settings is the --settings JSON that installs the SessionStart hook,
	// "" for none.
	settings string
}

func newClaudeCode(b base) (*claudeCode, error) {
	if err := b.refuseFlags(claudeSessionFlags); err != nil {
		return nil, err
	}
	if err := b.refuseFlags(claudeSettingsFlags); err != nil {
		return nil, err
	}
	b.pass = append(b.pass, claudePass...)
	return &claudeCode{base: b}, nil
}

// claudeProcessName is what the pane shows while Claude Code runs when its
// command is a wrapper that execs the installed CLI: the npm package's
// bin/claude, a native executable (2.1.197), keeps the argv[0] it was
// started with and never renames itself (measured: "claude" through the
// node_modules/.bin/claude link, "claude.exe" when started by that name).
const claudeProcessName = "claude"

// ProcessNames adds "claude" to the base names unless processName is set.
func (c *claudeCode) ProcessNames() []string { return c.withProcessNames(claudeProcessName) }

// SupportsResume is true: claude --resume <id> resumes interactively.
func (c *claudeCode) SupportsResume() bool { return true }

// ValidSessionID requires SessionIDPattern and a UUID in its lowercase
// canonical form, of the RFC 9562 variant with a version from 1 to 8, and
// not the nil UUID. Claude Code rejects a non-UUID --session-id, opens its
// picker for a non-UUID --resume, and looks transcripts up by exact file
// name, so an uppercase id would not be found again; the ids it mints
// itself are random (version 4) UUIDs, as are loopd's, so an id of another
// variant or the nil UUID can only come from someone else.
func (c *claudeCode) ValidSessionID(id string) bool { return canonicalUUID(id) }

// WithSessionStartHook returns a copy whose spawns pass --settings with a
// SessionStart hook running command (Claude Code settings, "hooks"). The
// hook's stdout would be added to the conversation's context, so command
// must print nothing there.
func (c *claudeCode) WithSessionStartHook(command string) Adapter {
	type hook struct {
		Type    string `json:"type"`
		Command string `json:"command"`
	}
	type matcher struct {
		Hooks []hook `json:"hooks"`
	}
	settings, _ := json.Marshal(map[string]map[string][]matcher{
		"hooks": {"SessionStart": {{Hooks: []hook{{Type: "command", Command: command}}}}},
	})
	cp := *c
	cp.settings = string(settings)
	return &cp
}

// WithProjectSettings returns a copy whose spawns leave out
// claudeOwnSettings when trusted: Claude Code then reads the workdir's
// project and local settings and its .mcp.json, as it does by default.
func (c *claudeCode) WithProjectSettings(trusted bool) Adapter {
	cp := *c
	cp.projectSettings = trusted
	return &cp
}

// ownSettings is claudeOwnSettings, or nothing when the workdir's project
// settings are trusted.
func (c *claudeCode) ownSettings() []string {
	if c.projectSettings {
		return nil
	}
	return claudeOwnSettings
}

// FreshArgv is [command --session-id id [--settings hook]
// [--setting-sources user --strict-mcp-config] extraArgs... -- prompt].
func (c *claudeCode) FreshArgv(id, prompt string) []string {
	return c.argv("--session-id", id, prompt)
}

// ResumeArgv is [command --resume id [--settings hook]
// [--setting-sources user --strict-mcp-config] extraArgs... -- prompt].
func (c *claudeCode) ResumeArgv(id, prompt string) []string {
	return c.argv("--resume", id, prompt)
}

// argv puts the id as its own element right after flag, so that --resume,
// whose value is optional, always takes it; "--" keeps a prompt that starts
// with "-" from being read as a flag. An empty prompt leaves both out.
func (c *claudeCode) argv(flag, id, prompt string) []string {
	argv := []string{c.command, flag, id}
	if c.settings != "" {
		argv = append(argv, "--settings", c.settings)
	}
	argv = append(argv, c.ownSettings()...)
	argv = append(argv, c.extra...)
	if prompt != "" {
		argv = append(argv, "--", prompt)
	}
	return argv
}

// claudePass are the variables of loopd's environment that the adapter
// passes on: CLAUDE_CONFIG_DIR says where the CLI keeps its transcripts,
// which Transcript must find where the CLI writes them.
var claudePass = []string{"CLAUDE_CONFIG_DIR"}

// Env is the harness env (on top of loopd's values of passEnv and
// claudePass) without CLAUDECODE (the variable Claude Code sets for its own
// children, which makes it refuse to start) and with DISABLE_AUTOUPDATER=1
// unless set: the auto-updater otherwise installs a newer version globally
// from the TUI.
func (c *claudeCode) Env() map[string]string {
	env := c.paneEnv()
	delete(env, "CLAUDECODE")
	if _, ok := env["DISABLE_AUTOUPDATER"]; !ok {
		env["DISABLE_AUTOUPDATER"] = "1"
	}
	return env
}

// Transcript reports <config>/projects/<enc(physical cwd)>/<id>.jsonl,
// where <config> is CLAUDE_CONFIG_DIR or $HOME/.claude as the pane sees
// them (the harness env first, then loopd's). It exists when it holds at
// least one JSON line of type user or assistant with a timestamp: that is
// what claude --resume needs, and a file of only "mode" lines (as /exit
// leaves) is "No conversation found". It returns ErrInvalidSessionID for an
// id that fails SessionIDPattern.
func (c *claudeCode) Transcript(cwd, id string) (Transcript, error) {
	if !SessionIDPattern.MatchString(id) {
		return Transcript{}, fmt.Errorf("transcript %q: %w", id, ErrInvalidSessionID)
	}
	dir, err := physicalDir(cwd)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err) // lstat <cwd>: …
	}
	config, err := c.configDir(dir)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	t, err := readTranscript(Transcript{Known: true, Path: filepath.Join(config, "projects", projectDirName(dir), id+".jsonl")}, hasTurn)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	return t, nil
}

// TranscriptFrames reads Claude Code's JSONL transcript: each user line's
// text (claudeUserText).
func (c *claudeCode) TranscriptFrames(tr Transcript, frames []desired.Frame) (map[string]Found, error) {
	return scanFrames(tr, frames, claudeUserText)
}

// configDir is where the pane's claude keeps projects/; a relative
// CLAUDE_CONFIG_DIR is taken against the pane's cwd.
func (c *claudeCode) configDir(cwd string) (string, error) {
	return c.dirOf("CLAUDE_CONFIG_DIR", ".claude", cwd)
}

// physicalDir is cwd made absolute with symlinks resolved, as Claude Code
// names projects after the physical cwd and ignores $PWD. A cwd that does
// not exist is kept as it is: nothing can have run there.
func physicalDir(cwd string) (string, error) {
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	return dir, err
}

// projectDirName encodes a physical cwd as Claude Code names its project
// directory: every UTF-16 code unit that is not [A-Za-z0-9] becomes "-";
// past 200 characters the name is cut to 200 and "-" plus the base-36
// absolute value of the Java-style 32-bit string hash of cwd is appended.
func projectDirName(cwd string) string {
	units := utf16.Encode([]rune(cwd))
	var b strings.Builder
	for _, u := range units {
		if u < 0x80 && isAlnum(byte(u)) {
			b.WriteByte(byte(u))
		} else {
			b.WriteByte('-')
		}
	}
	name := b.String()
	if len(name) <= 200 {
		return name
	}
	var h int32
	for _, u := range units {
		h = 31*h + int32(u) // wraps like JavaScript's (h << 5) - h + c | 0
	}
	return name[:200] + "-" + strconv.FormatInt(abs64(int64(h)), 36)
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// hasTurn reports whether r holds a JSON line with type user or assistant
// and a timestamp. Lines may be of any length.
func hasTurn(r io.Reader) (bool, error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		var l struct {
			Type      string `json:"type"`
			Timestamp string `json:"timestamp"`
		}
		if json.Unmarshal(line, &l) == nil && (l.Type == "user" || l.Type == "assistant") && l.Timestamp != "" {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// Screen classifies a plain capture-pane (no -e) of the Claude Code TUI:
// Ready when the input box is drawn (or cfg.ReadyPattern matches) and no
// turn is running, Busy while a turn runs or the TUI is still starting,
// Blocked at a dialog that replaces the input box (workspace trust, resume
// picker, bypass-permissions consent, API key, the usage-limit menu, a
// tool's permission prompt, the login and onboarding screens), with the
// dialog's Block as the reason. A dead pane keeps its last frame, so look
// at live panes only.
func (c *claudeCode) Screen(text string) (Screen, string) {
	ready := claudeReady
	if c.ready != nil {
		ready = c.ready
	}
	if ready.MatchString(text) {
		if strings.Contains(footer(text), claudeBusy) {
			return ScreenBusy, ""
		}
		if m := claudeInput.FindStringSubmatch(text); m != nil && strings.TrimSpace(strings.ReplaceAll(m[1], "\u00a0", " ")) != "" {
			return ScreenDraft, DraftReason
		}
		return ScreenReady, ""
	}
	for _, d := range claudeDialogs {
		if containsAll(text, d.markers) {
			return ScreenBlocked, d.reason
		}
	}
	return ScreenBusy, ""
}

// footer is the text below the last line that starts with a rule, the
// bottom edge of the input box.
func footer(text string) string {
	i := strings.LastIndex(text, "\n─")
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		return rest[j+1:]
	}
	return ""
}

func containsAll(text string, markers []string) bool {
	for _, m := range markers {
		if !strings.Contains(text, m) {
			return false
		}
	}
	return true
}
