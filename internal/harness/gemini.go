package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
)

// The Gemini adapter follows the CLI of @google/gemini-cli 0.61.0: its
// --help, its bundled source, and the behaviour measured in
// docs/reference/harness-cli-facts.md (section 3) and on captured screens
// under testdata/gemini-0.61.0.

// geminiSessionFlags are the flags that choose the conversation, leave the
// TUI or move the cwd (and so the project whose chats hold the
// conversation). The adapter sets the conversation itself, so extraArgs
// must not.
var geminiSessionFlags = []string{
	"--session-id", "-r", "--resume", "--session-file", "--list-sessions", "--delete-session",
	"-p", "--prompt", "-i", "--prompt-interactive", "-w", "--worktree", "--acp", "--experimental-acp", "--",
	// The workspace's trust is the adapter's (geminiTrustEnv).
	"--skip-trust",
}

// geminiTrustEnv is the variable by which Gemini 0.61.0 takes the
// workspace's trust from its environment, before its trusted folders, an
// IDE's word and its folder-trust dialog (checkPathTrust): "false" runs
// the folder untrusted, without its .gemini/settings.json (hooks, MCP
// servers, tools.discoveryCommand), its skills, agents, policies and
// .gemini/.env, and with only the auth variables of its .env; "true"
// trusts it. The adapter always sets it (WithProjectSettings).
// --skip-trust sets it to "true" only after the settings are loaded, so
// that in the TUI it loads the workspace's skills but not its settings
// (measured).
const geminiTrustEnv = "GEMINI_CLI_TRUST_WORKSPACE"

// Gemini's exit codes (packages/cli ExitCodes): FATAL_AUTHENTICATION_ERROR
// when no auth method is set, FATAL_INPUT_ERROR for a session that cannot
// be resumed or started ("Error resuming session: …", "Error starting
// session: Session ID … already exists"),
// FATAL_UNTRUSTED_WORKSPACE when a headless run finds its folder
// untrusted.
const (
	GeminiExitNoAuth           = 41
	GeminiExitInputError       = 42
	GeminiExitUntrustedWorkdir = 55
)

// The causes an adapter gives an exit status (ExitCause).
const (
	CauseAuthMissing  = "auth_missing"  // the CLI has no auth method (Gemini exit 41)
	CauseSessionError = "session_error" // the CLI could not resume or start the conversation (Gemini exit 42)
	// CauseUntrustedWorkdir: the CLI refuses to run headless in a workdir
	// it does not trust (Gemini exit 55), as every workdir is whose
	// project settings are off.
	CauseUntrustedWorkdir = "untrusted_workdir"
)

// geminiPlaceholder is the empty input box's placeholder; geminiInput the
// box's prompt line (" > " then the text, " ! " in shell mode).
const geminiPlaceholder = "Type your message or @path/to/file"

var geminiInput = regexp.MustCompile(`(?m)^ [>!*] {1,3}(.*)$`)

// geminiBusy is in the line above the input box while a turn runs
// ("⠹ Thinking... (esc to cancel, 5s)"); the box itself stays drawn.
const geminiBusy = "(esc to cancel"

// geminiDialogs are the screens that replace the input box and wait for a
// human (0.61.0: the folder-trust dialog, the auth dialogs of a config
// without an auth method, a tool's confirmation), in the order they are
// checked; every marker must be present.
var geminiDialogs = []struct {
	markers []string
	reason  Block
}{
	{[]string{"Do you trust the files in this folder?"}, BlockWorkspaceTrust},
	{[]string{"How would you like to authenticate"}, BlockLoginRequired},
	{[]string{"Enter Gemini API Key"}, BlockLoginRequired},
	{[]string{"Allow execution of"}, BlockPermission},
	{[]string{"Apply this change?"}, BlockPermission},
	{[]string{"Do you want to proceed?", "Allow once"}, BlockPermission},
}

type gemini struct {
	base
	// chats keeps what each chat file was judged (readGeminiChat), by its
	// size and modification time, so that a pass that finds it unchanged
	// does not read it whole again; shared by the adapter's copies.
	chats *geminiChats
}

func newGemini(b base) (*gemini, error) {
	if err := b.refuseFlags(geminiSessionFlags); err != nil {
		return nil, err
	}
	if _, ok := b.env[geminiTrustEnv]; ok || slices.Contains(b.pass, geminiTrustEnv) {
		return nil, fmt.Errorf("env: %s is set by the adapter: %w", geminiTrustEnv, ErrBadConfig)
	}
	b.pass = append(b.pass, geminiPass...)
	// Gemini ignores tmux kill-session: its launcher ignores SIGHUP, and
	// the child it re-launches itself as never gets one (measured, 6/6).
	b.stopGroup = true
	return &gemini{base: b, chats: &geminiChats{byPath: map[string]geminiChat{}}}, nil
}

// geminiProcessName is what the pane shows while Gemini runs: its bin is a
// "#!/usr/bin/env node" script, so the process is node (measured).
const geminiProcessName = "node"

// ProcessNames adds "node" to the base names unless processName is set.
func (g *gemini) ProcessNames() []string { return g.withProcessNames(geminiProcessName) }

// SupportsResume is true: gemini --resume <id> resumes interactively.
func (g *gemini) SupportsResume() bool { return true }

// ValidSessionID is canonicalUUID: --resume takes a number as an index
// into the project's sessions, and "latest" or a flag as the latest one.
func (g *gemini) ValidSessionID(id string) bool { return canonicalUUID(id) }

// FreshArgv is [command --session-id id extraArgs... --prompt-interactive=prompt].
func (g *gemini) FreshArgv(id, prompt string) []string {
	return g.argv("--session-id", id, prompt)
}

// ResumeArgv is [command --resume id extraArgs... --prompt-interactive=prompt].
func (g *gemini) ResumeArgv(id, prompt string) []string {
	return g.argv("--resume", id, prompt)
}

// argv puts the id as its own element right after flag, so that --resume,
// whose value is optional, always takes it. The prompt goes in one
// "--prompt-interactive=<prompt>" element: yargs takes everything after
// "=" as the value, so a prompt that starts with "-" is never read as a
// flag (measured). An empty prompt leaves it out.
func (g *gemini) argv(flag, id, prompt string) []string {
	argv := append([]string{g.command, flag, id}, g.extra...)
	if prompt != "" {
		argv = append(argv, "--prompt-interactive="+prompt)
	}
	return argv
}

// HeadlessArgv is [command --session-id id | --resume id extraArgs...
// --output-format json] with prompt on stdin: Gemini runs headless when
// its stdin is not a terminal, and takes stdin as the prompt
// (isHeadlessMode, readStdin), so the prompt needs no argv element.
func (g *gemini) HeadlessArgv(id, prompt string, resume bool) ([]string, []byte) {
	flag := "--session-id"
	if resume {
		flag = "--resume"
	}
	argv := append([]string{g.command, flag, id}, g.extra...)
	return append(argv, "--output-format", "json"), []byte(prompt)
}

// HeadlessSessionID is the session_id of the JSON object that
// --output-format json prints ({"session_id", "response", "stats"}).
// CheckHeadlessArgs is nil: the headless form takes the TUI's flags.
func (g *gemini) CheckHeadlessArgs() error { return nil }

func (g *gemini) HeadlessSessionID(output []byte) string {
	var out struct {
		SessionID string `json:"session_id"`
	}
	// The object follows whatever the CLI printed before it.
	if i := bytes.IndexByte(output, '{'); i >= 0 && json.Unmarshal(output[i:], &out) == nil && canonicalUUID(out.SessionID) {
		return out.SessionID
	}
	return ""
}

// geminiPass are the variables of loopd's environment the adapter passes
// on: GEMINI_CLI_HOME moves the config dir (<it>/.gemini), which
// Transcript must find where the CLI writes it.
var geminiPass = []string{"GEMINI_CLI_HOME"}

// Env is the harness env, on top of loopd's values of passEnv and
// geminiPass, with geminiTrustEnv "false", or "true" when the workdir's
// project settings are trusted (WithProjectSettings).
func (g *gemini) Env() map[string]string {
	env := g.paneEnv()
	env[geminiTrustEnv] = strconv.FormatBool(g.projectSettings)
	return env
}

// WithProjectSettings returns a copy whose spawns trust the workdir
// (geminiTrustEnv "true") when trusted, and run it untrusted otherwise.
// Untrusted, Gemini 0.61.0 also refuses its privileged approval modes
// (auto_edit, yolo) and asks before a git command, and a headless run
// exits 55 (CauseUntrustedWorkdir).
func (g *gemini) WithProjectSettings(trusted bool) Adapter {
	cp := *g
	cp.projectSettings = trusted
	return &cp
}

// sharedConfigDir is Gemini's global dir as the pane sees it:
// $GEMINI_CLI_HOME/.gemini, else $HOME/.gemini (Storage.getGlobalGeminiDir),
// which holds the login and the settings, and the conversations made
// before items had homes of their own.
func (g *gemini) sharedConfigDir() (string, error) {
	home := g.getenv("GEMINI_CLI_HOME")
	if home == "" {
		home = g.getenv("HOME")
	}
	if home == "" {
		return "", errors.New("neither GEMINI_CLI_HOME nor HOME is set")
	}
	return filepath.Join(home, ".gemini"), nil
}

// configDir is the global dir of the item in the physical workdir dir:
// <home>/.gemini of its own GEMINI_CLI_HOME (itemDir in the shared dir),
// where its projects.json and tmp/<slug>/chats go, which no bind could
// split per item.
func (g *gemini) configDir(dir string) (string, error) {
	shared, err := g.sharedConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(itemDir(shared, dir), ".gemini"), nil
}

// geminiShared are the files of the shared config dir each item's links
// to: the login (Gemini writes oauth_creds.json in place) and the
// settings, where Provision turns retention off.
var geminiShared = []string{"oauth_creds.json", "google_accounts.json", "settings.json"}

// ItemState makes the item's own GEMINI_CLI_HOME for a spawn in workdir
// in any mode: its .gemini with the shared login and settings linked, and
// the chat file of id, when only the shared dir holds it (a conversation
// made before), linked into the project the item's Gemini finds. A
// sandbox shows the item's home and the shared files, writable.
func (g *gemini) ItemState(workdir, id string, sandboxed bool) (State, error) {
	dir, err := physicalDir(workdir)
	if err != nil {
		return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
	}
	shared, err := g.sharedConfigDir()
	if err != nil {
		return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
	}
	config, err := g.configDir(dir)
	if err != nil {
		return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
	}
	if err := os.MkdirAll(config, 0o700); err != nil {
		return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
	}
	if err := linkShared(config, shared, geminiShared...); err != nil {
		return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
	}
	if id != "" {
		if err := geminiAdopt(shared, config, dir, id); err != nil {
			return State{}, fmt.Errorf("gemini home of %s: %w", workdir, err)
		}
	}
	home := filepath.Dir(config)
	st := State{Env: map[string]string{"GEMINI_CLI_HOME": home}}
	if sandboxed {
		st.Binds = append([]sandbox.Bind{{Source: home, Write: true}}, sharedBinds(shared, geminiShared...)...)
	}
	return st, nil
}

// geminiAdopt links the chat files of id in dir's project of the shared
// config dir into dir's project of the item's config dir, claimed as
// Gemini claims one, when the item's has none of them.
func geminiAdopt(shared, config, dir, id string) error {
	if !SessionIDPattern.MatchString(id) || len(id) < 8 {
		return nil
	}
	pattern := "session-*-" + id[:8] + ".jsonl"
	old, err := geminiSlug(shared, dir)
	if err != nil || old == "" {
		return err
	}
	files, err := filepath.Glob(filepath.Join(shared, "tmp", old, "chats", pattern))
	if err != nil || len(files) == 0 {
		return err
	}
	slug, err := geminiSlug(config, dir)
	if err == nil && slug == "" {
		slug, err = geminiClaimSlug(config, dir)
	}
	if err != nil {
		return err
	}
	if mine, _ := filepath.Glob(filepath.Join(config, "tmp", slug, "chats", pattern)); len(mine) > 0 {
		return nil
	}
	chats := filepath.Join(config, "tmp", slug, "chats")
	if err := os.MkdirAll(chats, 0o700); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.Link(f, filepath.Join(chats, filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}

// Account is the shared config dir that holds the CLI's login: harnesses
// that share it share one account.
func (g *gemini) Account() string {
	dir, err := g.sharedConfigDir()
	if err != nil {
		return g.base.Account()
	}
	return AdapterGemini + ":" + dir
}

// ExitCause names Gemini's exit statuses 41 (no auth method), 42 (the
// conversation could not be resumed or started) and 55 (a headless run in
// an untrusted workdir); "" for any other.
func (g *gemini) ExitCause(status int) string {
	switch status {
	case GeminiExitUntrustedWorkdir:
		return CauseUntrustedWorkdir
	case GeminiExitNoAuth:
		return CauseAuthMissing
	case GeminiExitInputError:
		return CauseSessionError
	}
	return ""
}

// Transcript reports the chat file of id in the project of the physical
// cwd: <config>/tmp/<slug>/chats/session-<time>-<id[:8]>.jsonl whose first
// line names id as its sessionId, the slug read from <config>/projects.json
// (geminiSlug), in the item's config dir, else in the shared one (a
// conversation made before items had homes, which ItemState links in for
// its resume). It exists when it holds a message Gemini would resume
// (geminiResumable): a TUI writes the file at start, before any prompt.
// When several files hold id (a resume writes into the one it found, but
// an interrupted one can leave another), the resumable one written last
// is reported. It returns ErrInvalidSessionID for an id that fails
// SessionIDPattern.
func (g *gemini) Transcript(cwd, id string) (Transcript, error) {
	if !SessionIDPattern.MatchString(id) || len(id) < 8 {
		return Transcript{}, fmt.Errorf("transcript %q: %w", id, ErrInvalidSessionID)
	}
	dir, err := physicalDir(cwd)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	config, err := g.configDir(dir)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	t, err := g.chats.transcript(config, dir, id)
	if err == nil && t.Path == "" {
		shared, serr := g.sharedConfigDir()
		if serr != nil {
			return Transcript{}, fmt.Errorf("transcript %s: %w", id, serr)
		}
		t, err = g.chats.transcript(shared, dir, id)
	}
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	return t, nil
}

// transcript is Transcript of id in config's project of dir.
func (cs *geminiChats) transcript(config, dir, id string) (Transcript, error) {
	slug, err := geminiSlug(config, dir)
	if err != nil {
		return Transcript{}, err
	}
	t := Transcript{Known: true}
	if slug == "" {
		return t, nil
	}
	files, err := filepath.Glob(filepath.Join(config, "tmp", slug, "chats", "session-*-"+id[:8]+".jsonl"))
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
	}
	for _, f := range files {
		c, err := cs.read(f, id)
		if err != nil {
			return Transcript{}, fmt.Errorf("transcript %s: %w", id, err)
		}
		if !c.ours {
			continue
		}
		// A resumable file wins over one that is not; then the latest.
		if t.Path == "" || c.resumable && !t.Exists || c.resumable == t.Exists && c.file.ModTime.After(t.ModTime) {
			t = c.file
		}
	}
	return t, nil
}

// geminiSlug is the project slug Gemini files the physical dir under: the
// value projects.json maps dir to, when the ".project_root" marker in
// <config>/tmp/<slug> (if any) names dir; else the tmp dir whose marker
// names dir (ProjectRegistry.getShortId). It is "" when Gemini never ran
// in dir.
func geminiSlug(config, dir string) (string, error) {
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	b, err := os.ReadFile(filepath.Join(config, "projects.json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read projects: %w", err)
	}
	// A file Gemini cannot read it resets to empty; so does this.
	if err == nil && json.Unmarshal(b, &reg) == nil {
		if slug := reg.Projects[dir]; slug != "" && filepath.Base(slug) == slug {
			owner, err := os.ReadFile(filepath.Join(config, "tmp", slug, ".project_root"))
			if errors.Is(err, fs.ErrNotExist) || err == nil && strings.TrimSpace(string(owner)) == dir {
				return slug, nil
			}
		}
	}
	markers, err := filepath.Glob(filepath.Join(config, "tmp", "*", ".project_root"))
	if err != nil {
		return "", err
	}
	for _, m := range markers {
		if owner, err := os.ReadFile(m); err == nil && strings.TrimSpace(string(owner)) == dir {
			return filepath.Base(filepath.Dir(m)), nil
		}
	}
	return "", nil
}

// RestoreTarget is the chat file Transcript reports when there is one,
// else a new one as Gemini names it:
// <config>/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id[:8]>.jsonl, the
// time the session's start (its first line's startTime, else now) in UTC,
// data as it is. A cwd Gemini never ran in gets a slug claimed as Gemini
// claims one (geminiClaimSlug), which Gemini then finds by its marker.
func (g *gemini) RestoreTarget(cwd, id string, data []byte, now time.Time) (string, []byte, error) {
	t, err := g.Transcript(cwd, id)
	if err != nil {
		return "", nil, err
	}
	if t.Path != "" {
		return t.Path, data, nil
	}
	dir, err := physicalDir(cwd)
	if err != nil {
		return "", nil, err
	}
	config, err := g.configDir(dir)
	if err != nil {
		return "", nil, err
	}
	slug, err := geminiSlug(config, dir)
	if err == nil && slug == "" {
		slug, err = geminiClaimSlug(config, dir)
	}
	if err != nil {
		return "", nil, err
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	var meta struct {
		StartTime string `json:"startTime"`
	}
	start := now
	if json.Unmarshal(first, &meta) == nil {
		if at, err := time.Parse(time.RFC3339Nano, meta.StartTime); err == nil {
			start = at
		}
	}
	name := "session-" + start.UTC().Format("2006-01-02T15-04") + "-" + id[:8] + ".jsonl"
	return filepath.Join(config, "tmp", slug, "chats", name), data, nil
}

// geminiClaimSlug claims a slug for the physical dir as Gemini 0.61.0's
// ProjectRegistry does for a project it does not know (claimNewSlug): the
// base name lowercased, each run of characters other than [a-z0-9] made
// one "-", trimmed of "-" ("project" when nothing is left), then "-1",
// "-2"… after it, skipping the slugs projects.json maps to; a slug is
// claimed by creating <config>/tmp/<slug>/.project_root naming dir, which
// must not exist or must name dir already. Gemini finds the project by
// that marker (findExistingSlugForPath) and records it in projects.json
// itself.
func geminiClaimSlug(config, dir string) (string, error) {
	base := strings.Trim(geminiNonSlug.ReplaceAllString(strings.ToLower(filepath.Base(dir)), "-"), "-")
	if base == "" {
		base = "project"
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if b, err := os.ReadFile(filepath.Join(config, "projects.json")); err == nil {
		_ = json.Unmarshal(b, &reg) // Gemini reads an unreadable file as empty
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read projects: %w", err)
	}
	taken := map[string]bool{}
	for _, s := range reg.Projects {
		taken[s] = true
	}
	for n := range geminiMaxSlugs {
		slug := base
		if n > 0 {
			slug = base + "-" + strconv.Itoa(n)
		}
		if taken[slug] {
			continue
		}
		ok, err := claimMarker(filepath.Join(config, "tmp", slug), dir)
		if err != nil {
			return "", fmt.Errorf("claim project slug %s: %w", slug, err)
		}
		if ok {
			return slug, nil
		}
	}
	return "", fmt.Errorf("no free project slug for %s", dir)
}

// geminiMaxSlugs is how many slugs of one base name Gemini tries.
const geminiMaxSlugs = 1000

var geminiNonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// claimMarker creates slugDir/.project_root naming dir (O_EXCL, 0600, its
// directory 0700), and reports whether slugDir is dir's: it made the
// marker, or the marker already named dir.
func claimMarker(slugDir, dir string) (bool, error) {
	if err := os.MkdirAll(slugDir, 0o700); err != nil {
		return false, err
	}
	marker := filepath.Join(slugDir, ".project_root")
	f, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		owner, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(owner)) == dir, err
	}
	if err != nil {
		return false, err
	}
	_, err = f.WriteString(dir)
	return err == nil, errors.Join(err, f.Close())
}

// geminiChats are the chat files read, by path, each with the id it was
// read for and where its scan stopped (geminiChat): a file unchanged
// since (the same file, size and modification time) is not read again,
// and one that grew is read from the end of the last whole line read
// (Gemini only appends to its chat files, and writes a new one under a
// temporary name, renamed over, when it rewrites one). At most
// maxGeminiChats are kept; past that the whole map starts anew.
type geminiChats struct {
	mu     sync.Mutex
	byPath map[string]geminiChat
}

// maxGeminiChats bounds geminiChats: a few per item of a large fleet.
const maxGeminiChats = 8192

// read is readGeminiChat of f for id, continued from what cs kept of it;
// a nil cs reads it whole.
func (cs *geminiChats) read(f, id string) (geminiChat, error) {
	var prev geminiChat
	if cs != nil {
		cs.mu.Lock()
		prev = cs.byPath[f]
		cs.mu.Unlock()
	}
	if prev.id != id {
		prev = geminiChat{}
	}
	c, err := readGeminiChat(f, id, prev)
	if err != nil || cs == nil || c.info == nil {
		return c, err // a file gone since the glob is not kept
	}
	cs.mu.Lock()
	if len(cs.byPath) >= maxGeminiChats {
		cs.byPath = map[string]geminiChat{}
	}
	cs.byPath[f] = c
	cs.mu.Unlock()
	return c, nil
}

// geminiChat is what readGeminiChat found in one chat file: the file as
// a transcript (Exists when it is resumable), its verdicts, and, for the
// next read, the id it was read for, the file's info and the scan.
type geminiChat struct {
	file      Transcript
	ours      bool // line 1 names the id
	resumable bool
	id        string
	info      fs.FileInfo
	scan      chatScan
}

// readGeminiChat reads the chat file f: whether its first line's sessionId
// is id (with a projectHash, as loadConversationRecord requires), and
// whether Gemini would list it as a session to resume
// (getAllSessionFiles): the whole file read as loadConversationRecord
// reads it (geminiRecord), the session still id, a message it resumes
// left after every rewind, and not a subagent's (kind "subagent", which
// --resume refuses with exit 42: measured on 0.61.0).
// A file gone since the glob is not ours. prev is what an earlier read
// of f for id found (the zero geminiChat for none): the same file
// unchanged keeps its verdicts, and one that grew past the last whole
// line prev read (the byte before it still a newline) is read from there.
func readGeminiChat(f, id string, prev geminiChat) (geminiChat, error) {
	c := geminiChat{id: id}
	file, err := readTranscriptFile(Transcript{Known: true, Path: f}, func(fh *os.File, info fs.FileInfo) (bool, error) {
		c.info = info
		same := prev.info != nil && os.SameFile(prev.info, info)
		switch {
		case same && info.Size() == prev.file.Size && info.ModTime().Equal(prev.file.ModTime):
			c.ours, c.resumable, c.scan = prev.ours, prev.resumable, prev.scan
			return c.resumable, nil
		case same && prev.ours && prev.scan.offset > 0 && info.Size() >= prev.scan.offset && endsLine(fh, prev.scan.offset):
			if _, err := fh.Seek(prev.scan.offset, io.SeekStart); err != nil {
				return false, err
			}
			c.scan = prev.scan.clone()
		}
		var err error
		c.resumable, err = c.scan.scan(fh, id)
		c.ours = c.scan.ours
		return c.resumable, err
	})
	if err != nil {
		return geminiChat{}, err
	}
	c.file = file
	return c, nil
}

// endsLine reports whether the byte of f before offset is a newline.
func endsLine(f *os.File, offset int64) bool {
	b := make([]byte, 1)
	_, err := f.ReadAt(b, offset-1)
	return err == nil && b[0] == '\n'
}

// chatScan is where the scan of one chat file stands: whether its first
// line names the id (ours, once started), what its whole lines made
// (geminiRecord), and the byte after the last whole line.
type chatScan struct {
	started, ours bool
	rec           geminiRecord
	offset        int64
}

// clone returns s with a record of its own, for a scan that goes on from
// it while s is kept.
func (s chatScan) clone() chatScan {
	s.rec.ids, s.rec.resumable = slices.Clone(s.rec.ids), slices.Clone(s.rec.resumable)
	return s
}

// scan reads r's lines from where s stands for readGeminiChat: each whole
// line goes into the record; a last line without its newline (being
// written) counts for the verdict but is read again next time. It
// reports whether the file is resumable: ours, the session still id, not
// a subagent's, and a message Gemini resumes for left.
func (s *chatScan) scan(r io.Reader, id string) (bool, error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if !s.started {
			// Gemini reads a file whose metadata lacks projectHash as a
			// legacy JSON file, which a JSONL file is not.
			var meta struct {
				SessionID   string `json:"sessionId"`
				ProjectHash string `json:"projectHash"`
			}
			if json.Unmarshal(line, &meta) != nil || meta.SessionID != id || meta.ProjectHash == "" {
				s.ours = false
				return false, nil
			}
			s.started, s.ours = true, true
		}
		rec := &s.rec
		if err == nil {
			s.offset += int64(len(line))
		} else if len(line) > 0 {
			tail := s.clone()
			rec = &tail.rec
		}
		rec.add(line)
		if err == io.EOF {
			return rec.sessionID == id && rec.kind != "subagent" && slices.Contains(rec.resumable, true), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// geminiRecord is what loadConversationRecord (0.61.0, metadataOnly) makes
// of a chat file, line by line: the metadata, merged from every metadata
// line and "$set", and the messages left, in order, each with whether it
// is one Gemini resumes for (geminiResumable).
type geminiRecord struct {
	sessionID, kind string
	ids             []string
	resumable       []bool
}

// add reads one line: a rewind ({"$rewindTo": id} drops that message and
// every later one, all of them when id is not there), a message (a string
// id), a "$set" (merged into the metadata; its messages replace them all)
// or a metadata line (sessionId and projectHash strings, merged, its
// messages added). Any other line is skipped, as Gemini skips it.
func (r *geminiRecord) add(line []byte) {
	var l struct {
		Rewind      *string           `json:"$rewindTo"`
		ID          *string           `json:"id"`
		SessionID   *string           `json:"sessionId"`
		ProjectHash *string           `json:"projectHash"`
		Kind        *string           `json:"kind"`
		Messages    []json.RawMessage `json:"messages"`
		Set         *struct {
			SessionID *string           `json:"sessionId"`
			Kind      *string           `json:"kind"`
			Messages  []json.RawMessage `json:"messages"`
		} `json:"$set"`
	}
	if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &l) != nil {
		return
	}
	switch {
	case l.Rewind != nil:
		i := slices.Index(r.ids, *l.Rewind)
		if i < 0 {
			i = 0
		}
		r.ids, r.resumable = r.ids[:i], r.resumable[:i]
	case l.ID != nil:
		r.message(*l.ID, line)
	case l.Set != nil:
		r.merge(l.Set.SessionID, l.Set.Kind)
		if l.Set.Messages != nil {
			r.ids, r.resumable = nil, nil
			r.messages(l.Set.Messages)
		}
	case l.SessionID != nil && l.ProjectHash != nil:
		r.merge(l.SessionID, l.Kind)
		r.messages(l.Messages)
	}
}

func (r *geminiRecord) merge(sessionID, kind *string) {
	if sessionID != nil {
		r.sessionID = *sessionID
	}
	if kind != nil {
		r.kind = *kind
	}
}

func (r *geminiRecord) messages(msgs []json.RawMessage) {
	for _, m := range msgs {
		var l struct {
			ID *string `json:"id"`
		}
		if json.Unmarshal(m, &l) == nil && l.ID != nil {
			r.message(*l.ID, m)
		}
	}
}

func (r *geminiRecord) message(id string, raw []byte) {
	r.ids = append(r.ids, id)
	r.resumable = append(r.resumable, geminiResumable(raw))
}

// geminiMessage is a message record of a Gemini chat file.
type geminiMessage struct {
	ID      *string         `json:"id"`
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// geminiMessages returns the message records of one chat line: the line
// itself when it is one (it has a string id), or those a "$set" of
// messages rewrites the conversation with.
func geminiMessages(line []byte) []geminiMessage {
	var l struct {
		geminiMessage
		Set struct {
			Messages []geminiMessage `json:"messages"`
		} `json:"$set"`
	}
	if json.Unmarshal(line, &l) != nil {
		return nil
	}
	if l.ID != nil {
		return []geminiMessage{l.geminiMessage}
	}
	return l.Set.Messages
}

// text is the message's text: content is a string, a part {"text"} or an
// array of parts, as Gemini's partListUnionToString reads them.
func (m geminiMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	type part struct {
		Text string `json:"text"`
	}
	var one part
	if len(m.Content) > 0 && m.Content[0] == '{' && json.Unmarshal(m.Content, &one) == nil {
		return one.Text
	}
	var parts []part
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// userInput reports whether m is a message a user typed: a user message
// that Gemini itself does not ignore when it resumes (isIgnoredUserContent:
// empty, a "/" or "?" command, or the context it adds itself).
func (m geminiMessage) userInput() bool {
	if m.Type != "user" {
		return false
	}
	t := strings.TrimSpace(m.text())
	return t != "" && !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "?") &&
		!strings.HasPrefix(t, "<session_context>") && !strings.HasPrefix(t, "<hook_context>")
}

// geminiResumable reports whether a chat line holds a message Gemini
// resumes a session for (isResumableMessageRecord): a user's input, or a
// model's answer with text.
func geminiResumable(line []byte) bool {
	for _, m := range geminiMessages(line) {
		if m.userInput() || m.Type == "gemini" && strings.TrimSpace(m.text()) != "" {
			return true
		}
	}
	return false
}

// geminiUserText returns the text of the user messages in a chat line
// (geminiMessages), one after another, and whether it holds any.
func geminiUserText(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"user"`)) {
		return "", false
	}
	var texts []string
	for _, m := range geminiMessages(line) {
		if m.userInput() {
			texts = append(texts, m.text())
		}
	}
	return strings.Join(texts, "\n"), len(texts) > 0
}

// TranscriptFrames reads Gemini's chat file: each user message's text
// (geminiUserText).
func (g *gemini) TranscriptFrames(tr Transcript, frames []desired.Frame) (map[string]Found, error) {
	return scanFrames(tr, frames, geminiUserText)
}

// Screen classifies a plain capture-pane of the Gemini TUI: Busy while a
// turn runs ("esc to cancel" above the box), Ready at the input box with
// its placeholder (or when cfg.ReadyPattern matches), Draft when the box
// holds text, Blocked at a dialog that replaces the box (folder trust,
// authentication, a tool's confirmation), and Busy otherwise (starting).
func (g *gemini) Screen(text string) (Screen, string) {
	for _, d := range geminiDialogs {
		if containsAll(text, d.markers) {
			return ScreenBlocked, d.reason
		}
	}
	if strings.Contains(text, geminiBusy) {
		return ScreenBusy, ""
	}
	if g.ready != nil {
		if g.ready.MatchString(text) {
			return ScreenReady, ""
		}
		return ScreenBusy, ""
	}
	// The input box is the last prompt line below the last rule: history
	// shows earlier prompts with the same " > ".
	box := text
	if i := strings.LastIndex(text, "\n─"); i >= 0 {
		box = text[i:]
	}
	m := geminiInput.FindAllStringSubmatch(box, -1)
	if m == nil {
		return ScreenBusy, ""
	}
	input := strings.TrimSpace(m[len(m)-1][1])
	if input == geminiPlaceholder {
		return ScreenReady, ""
	}
	return ScreenDraft, DraftReason
}

// Blocked is the dialog Screen reports, "" for none.
func (g *gemini) Blocked(text string) Block { return blockedOn(g.Screen(text)) }

// What Gemini CLI 0.61.0 shows when a quota runs out (gemini-cli-core's
// googleQuotaErrors.ts and the TUI's messages): its own usage-limit
// notice, "Usage limit reached for <model>." with, when the API named a
// delay, "Access resets at 5:10 PM UTC." (Intl "en-US" hour and minute
// with the short zone name); "Your quota will reset after 2h52m39s.";
// and the API's 429 error as it came ("[API Error: {…"status":
// "RESOURCE_EXHAUSTED"…}]"), whose QuotaFailure names the quota
// ("…PerDay…", "…PerMinute…") and whose RetryInfo the delay
// ("retryDelay": "37s", or "Please retry in 37.4s.").
var (
	geminiUsageLimit = regexp.MustCompile(`(?i)usage limit reached for |quota will reset after`)
	geminiExhausted  = regexp.MustCompile(`RESOURCE_EXHAUSTED|exceeded your current quota`)
	geminiPerDay     = regexp.MustCompile(`(?i)PerDay|per day`)
	geminiPerMinute  = regexp.MustCompile(`(?i)PerMinute|per minute`)
	geminiRetryDelay = regexp.MustCompile(`"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"`)
	geminiRetryIn    = regexp.MustCompile(`(?i)retry in (\d+(?:\.\d+)?)\s*s`)
	geminiResetAfter = regexp.MustCompile(`(?i)reset after ((?:\d+h)?(?:\d+m)?(?:\d+(?:\.\d+)?s)?)\b`)
)

// geminiQuotaZone is where Gemini's per-day quotas reset, at midnight:
// "Requests per day (RPD) quotas reset at midnight Pacific time"
// (ai.google.dev/gemini-api/docs/rate-limits).
const geminiQuotaZone = "America/Los_Angeles"

// geminiMarks are the marks of Gemini's screen (0.61.0,
// testdata/gemini-0.61.0): "✕" starts an error and "ℹ" a notice of the
// CLI's own; ">" starts a user message, "✦" the model's answer, and a
// box ("╭", "│", "╰") a tool's call and output.
var geminiMarks = statusMarks{status: []string{"✕", "ℹ"}, talk: []string{">", "✦", "╭", "│", "╰"}}

// Limit reports the usage limit the latest turn on the screen shows, in
// an error or notice of the CLI's own (never the model's answer or a
// quoted comment): its usage-limit notice, reset at the time it names
// (read in the zone written, else the pane's) or after the delay it
// names, else at the daily quota's reset; a RESOURCE_EXHAUSTED error of a
// per-minute quota, reset after its retry delay (a minute when it names
// none); of a per-day quota, at its reset (midnight Pacific,
// geminiQuotaZone); and a bare one, a rate limit with no reset.
func (g *gemini) Limit(text string, now time.Time) (Limit, bool) {
	return statusLimit(geminiLastTurn(text), geminiMarks, func(block string) (Limit, bool) { return geminiTextLimit(block, now, g.zone()) })
}

// geminiTextLimit reads a usage limit from one message of the CLI, seen at
// now; loc is the zone it prints clock times in.
func geminiTextLimit(text string, now time.Time, loc *time.Location) (Limit, bool) {
	usage := geminiUsageLimit.MatchString(text)
	if !usage && !geminiExhausted.MatchString(text) {
		return Limit{}, false
	}
	first := text
	if i := strings.Index(text, ". "); i >= 0 {
		first = text[:i+1]
	}
	l := Limit{Kind: LimitUsage, Text: clip(first)}
	switch {
	case geminiPerMinute.MatchString(text):
		l.Window, l.Reset = WindowMinute, now.Add(time.Minute)
		// RetryInfo's delay is the API's own; the message's is a rounding.
		m := geminiRetryDelay.FindStringSubmatch(text)
		if m == nil {
			m = geminiRetryIn.FindStringSubmatch(text)
		}
		if m != nil {
			secs, _ := strconv.ParseFloat(m[1], 64)
			l.Reset = now.Add(time.Duration(math.Ceil(secs)) * time.Second)
		}
	case geminiPerDay.MatchString(text) || usage:
		l.Window = WindowDaily
		if t, ok := ParseReset(text, now, loc); ok {
			l.Reset = t
		} else if m := geminiResetAfter.FindStringSubmatch(text); m != nil && m[1] != "" {
			d, err := time.ParseDuration(m[1])
			if err == nil {
				l.Reset = now.Add(d)
			}
		} else if !strings.Contains(text, "resets at") {
			l.Reset = nextMidnight(now, geminiQuotaZone)
		}
	default:
		l.Kind = LimitRate
	}
	return l, true
}

// nextMidnight is the first midnight after now in zone.
func nextMidnight(now time.Time, zone string) time.Time {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return time.Time{}
	}
	local := now.In(loc)
	return time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, loc)
}

// geminiLastTurn is the text of the latest turn on a Gemini screen: after
// the last user message ("> …") above the input box (the rule "────"
// before it), and before that box; the whole text when there is neither.
func geminiLastTurn(text string) string {
	lines := strings.Split(text, "\n")
	end := len(lines)
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "────") {
			end = i
			break
		}
	}
	start := 0
	for i := end - 1; i >= 0; i-- {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), ">") {
			start = i + 1
			break
		}
	}
	return strings.Join(lines[start:end], "\n")
}

// geminiRetention is the setting that loopd provisions: Gemini's session
// retention (general.sessionRetention, on by default) deletes at each
// start every chat file it cannot resume together with every file that
// shares its 8-character short id (cleanupExpiredSessions), so an
// interrupted resume that leaves such a file loses the conversation.
var geminiRetention = []string{"general", "sessionRetention", "enabled"}

// Provision makes sure Gemini's shared user settings (<config>/settings.json
// of the shared config dir, which every item's links to: ItemState)
// turn session retention off (geminiRetention), whatever the workdir, so that no conversation
// loopd resumes is ever pruned. It merges the one key into the file and
// keeps every other key; it writes nothing when the file already says so.
// It returns ErrBadSettings when the file is not a JSON object, since
// rewriting it would lose what the user wrote (Gemini accepts comments in
// it; loopd does not rewrite such a file).
func (g *gemini) Provision(string) error {
	config, err := g.sharedConfigDir()
	if err != nil {
		return fmt.Errorf("provision gemini settings: %w", err)
	}
	path := filepath.Join(config, "settings.json")
	if err := mergeSettings(path, false, setting{geminiRetention, false}); err != nil {
		return fmt.Errorf("provision gemini settings %s: %w", path, err)
	}
	return nil
}
