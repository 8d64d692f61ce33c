package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// codexID is the id of the captured rollout (testdata/codex-0.171.0).
const codexID = "01a22e7f-9e38-7150-9d65-6f6f26796325"

func TestCodexArgv(t *testing.T) {
	a := newTestAdapter(t, AdapterCodex, schema.Harness{ExtraArgs: []string{"-c", "model=o3"}})
	assert.Equal(t, []string{"codex", "--no-daemon", "-c", "model=o3", "--", "-fix it"}, a.FreshArgv("ignored", "-fix it"),
		"codex cannot pin an id: fresh never passes one")
	assert.Equal(t, []string{"codex", "resume", "--no-daemon", "-c", "model=o3", codexID, "--", "next"}, a.ResumeArgv(codexID, "next"))
	assert.Equal(t, []string{"codex", "--no-daemon", "-c", "model=o3"}, a.FreshArgv("", ""))
	assert.True(t, a.SupportsResume())

	for _, bad := range [][]string{{"resume"}, {"--no-daemon"}, {"-C", "/x"}, {"-C=/x"}, {"-C/x"}, {"--cd=/x"}, {"exec"}, {"--last"}, {"--remote", "ws://x"}, {"--"}} {
		_, err := New("codex", schema.Harness{Adapter: AdapterCodex, Command: "codex", ExtraArgs: bad})
		assert.ErrorIs(t, err, ErrBadConfig, "%q is the adapter's", bad)
	}
	_, err := New("codex", schema.Harness{Adapter: AdapterCodex, Command: "codex", ExtraArgs: []string{"-c", "exec=x"}})
	assert.NoError(t, err, "a subcommand's name is refused alone, not as a value's prefix")
}

func TestCodexHeadless(t *testing.T) {
	a := newTestAdapter(t, AdapterCodex, schema.Harness{ExtraArgs: []string{"-m", "o3"}})
	h, ok := a.(Headless)
	require.True(t, ok)
	argv, stdin := h.HeadlessArgv("ignored", "the event", false)
	assert.Equal(t, []string{"codex", "exec", "-m", "o3", "--json", "--skip-git-repo-check", "-"}, argv)
	assert.Equal(t, []byte("the event"), stdin, "the prompt goes on stdin, never argv")
	argv, _ = h.HeadlessArgv(codexID, "next", true)
	assert.Equal(t, []string{"codex", "exec", "-m", "o3", "resume", "--json", "--skip-git-repo-check", codexID, "-"}, argv,
		"extraArgs are exec's options, before resume, which takes fewer after it")
	assert.NoError(t, h.CheckHeadlessArgs())

	// The TUI's own flags, which codex exec refuses with exit 2 (measured).
	for _, extra := range [][]string{{"-a", "never"}, {"-anever"}, {"--ask-for-approval=never"}, {"--search"}, {"--no-alt-screen"},
		{"--json"}, {"--skip-git-repo-check"}} {
		a := newTestAdapter(t, AdapterCodex, schema.Harness{ExtraArgs: extra})
		assert.ErrorIs(t, a.(Headless).CheckHeadlessArgs(), ErrBadConfig, "%q", extra)
	}

	// codex exec --json of 0.171.0, offline (measured).
	out := "{\"type\":\"thread.started\",\"thread_id\":\"01a22e80-8b90-7e63-9bb8-165eb41b44d4\"}\n{\"type\":\"turn.started\"}\n" +
		"{\"type\":\"error\",\"message\":\"Reconnecting... waiting for network\"}\n"
	assert.Equal(t, "01a22e80-8b90-7e63-9bb8-165eb41b44d4", h.HeadlessSessionID([]byte(out)))
	assert.Equal(t, "", h.HeadlessSessionID([]byte("{\"type\":\"thread.started\",\"thread_id\":\"../x\"}\n")), "not an id")
	assert.Equal(t, "", h.HeadlessSessionID([]byte("Error: stdin is not a terminal\n")))
}

func TestCodexValidSessionID(t *testing.T) {
	a := newTestAdapter(t, AdapterCodex, schema.Harness{})
	assert.True(t, a.ValidSessionID(codexID), "UUIDv7, as codex mints")
	assert.True(t, a.ValidSessionID("7f3c1e52-9d4b-4c1a-8e2f-0123456789ab"), "a v4 UUID is found too (hand-made rollouts)")
	for _, bad := range []string{"", "not-a-uuid", strings.ToUpper(codexID), "00000000-0000-0000-0000-000000000000", "--last",
		"01a22e80-8b90-7e63-1bb8-165eb41b44d4"} {
		assert.False(t, a.ValidSessionID(bad), bad)
	}
}

func TestCodexProcessNames(t *testing.T) {
	assert.Equal(t, []string{"codex", "node"}, newTestAdapter(t, AdapterCodex, schema.Harness{}).ProcessNames())
	assert.Equal(t, []string{"my-codex", "codex", "node"}, newTestAdapter(t, AdapterCodex, schema.Harness{Command: "/opt/bin/my-codex"}).ProcessNames())
	assert.Equal(t, []string{"cx"}, newTestAdapter(t, AdapterCodex, schema.Harness{ProcessName: "cx"}).ProcessNames())
}

// writeRollout writes the captured rollout as the session id's, in cwd,
// started at start, under home's sessions.
func writeRollout(t *testing.T, home, cwd, id string, start time.Time, extra ...string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/codex-0.171.0/rollout.jsonl")
	require.NoError(t, err)
	text := strings.ReplaceAll(string(data), codexID, id)
	text = strings.ReplaceAll(text, `"cwd":"/srv/acme"`, `"cwd":"`+cwd+`"`)
	text = strings.Replace(text, `"timestamp":"2026-11-30T22:07:25.245Z"`, `"timestamp":"`+start.UTC().Format("2006-01-02T15:04:05.000Z")+`"`, 1)
	text += strings.Join(extra, "")
	dir := filepath.Join(home, "sessions", start.UTC().Format("2006/01/02"))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, "rollout-"+start.UTC().Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestCodexTranscript(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": home}})
	start := time.Date(2026, 11, 30, 22, 7, 25, 0, time.UTC)

	tr, err := a.Transcript(cwd, codexID)
	require.NoError(t, err)
	assert.True(t, tr.Known)
	assert.False(t, tr.Exists, "no rollout yet: codex writes it at the first prompt")

	path := writeRollout(t, home, cwd, codexID, start)
	tr, err = a.Transcript(cwd, codexID)
	require.NoError(t, err)
	assert.Equal(t, path, tr.Path)
	assert.True(t, tr.Exists)
	assert.Positive(t, tr.Size)

	other, err := a.Transcript(t.TempDir(), codexID)
	require.NoError(t, err)
	assert.False(t, other.Exists, "a rollout of another cwd opens codex's chooser: not this cwd's conversation")

	require.NoError(t, os.WriteFile(path, nil, 0o600))
	tr, err = a.Transcript(cwd, codexID)
	require.NoError(t, err)
	assert.False(t, tr.Exists, "an empty rollout cannot be resumed (code -32603)")

	_, err = a.Transcript(cwd, "../../etc/passwd")
	assert.ErrorIs(t, err, ErrInvalidSessionID)

	t.Setenv("HOME", home)
	noHome := newTestAdapter(t, AdapterCodex, schema.Harness{})
	tr, err = noHome.Transcript(cwd, codexID)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(tr.Path, filepath.Join(home, ".codex", itemsDir)), "the item's own home: %s", tr.Path)
}

// itemHome is the item's own home under home for the workdir cwd, as the
// adapters name it (itemDir of the physical cwd).
func itemHome(t *testing.T, home, cwd string) string {
	t.Helper()
	dir, err := physicalDir(cwd)
	require.NoError(t, err)
	return itemDir(home, dir)
}

func TestCodexTranscriptFrames(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": home}})
	body := "line one\n<!-- hidden -->\n"
	prompt := func(id string) string {
		return "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n" + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)
	}
	userEvent := func(text string) string {
		return `{"timestamp":"2026-11-30T22:09:00.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":` +
			quoteJSON(t, text) + `,"text_elements":[]}]}}}` + "\n"
	}
	oldEvent := `{"timestamp":"2026-11-30T22:09:01.000Z","type":"event_msg","payload":{"type":"user_message","message":` + quoteJSON(t, prompt("old")) + `}}` + "\n"
	// What the agent or Codex itself writes never counts: the environment
	// context and a user-role response item, the agent's answer.
	context := `{"timestamp":"2026-11-30T22:09:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":` +
		quoteJSON(t, prompt("context")) + `}]}}` + "\n"
	agent := `{"timestamp":"2026-11-30T22:09:03.000Z","type":"event_msg","payload":{"type":"agent_message","message":` + quoteJSON(t, prompt("agent")) + `}}` + "\n"
	writeRollout(t, home, cwd, codexID, time.Now(), userEvent(prompt("whole")), userEvent(strings.Replace(prompt("mangled"), "line one", "line  one", 1)),
		oldEvent, context, agent, `{"type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"torn`)
	var frames []desired.Frame
	for _, id := range []string{"whole", "mangled", "old", "context", "agent", "absent"} {
		frames = append(frames, desired.FrameOf(desired.Delivery{ID: id, Prompt: prompt(id)}))
	}
	tr, err := a.Transcript(cwd, codexID)
	require.NoError(t, err)
	got, err := a.TranscriptFrames(tr, frames)
	require.NoError(t, err)
	assert.Equal(t, Found{Whole: true}, got["whole"])
	assert.Equal(t, Found{Mangled: 1}, got["mangled"])
	assert.Equal(t, Found{Whole: true}, got["old"], "earlier versions' user_message events")
	for _, id := range []string{"context", "agent", "absent"} {
		assert.Equal(t, Found{}, got[id], id)
	}

	// The captured rollout: the typed, pasted (multi-line) and exec stdin
	// messages are the user's; the environment context is not.
	paste := "line one of paste\nline two <!-- x -->\nend"
	data, err := os.ReadFile("testdata/codex-0.171.0/rollout.jsonl")
	require.NoError(t, err)
	var users []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if text, ok := codexUserText([]byte(line)); ok {
			users = append(users, text)
		}
	}
	assert.Equal(t, []string{"-hello first prompt", paste, "-second after resume", "resumed via stdin\n"}, users)
}

func quoteJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

func TestCodexSessionsStarted(t *testing.T) {
	home, cwd, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": home}})
	l, ok := a.(SessionLearner)
	require.True(t, ok)
	spawn := time.Date(2026, 11, 30, 23, 59, 59, 500e6, time.UTC)

	got, err := l.SessionsStarted(cwd, spawn)
	require.NoError(t, err)
	assert.Empty(t, got, "no sessions dir yet")

	const before, mine, later, other = "01a22e7f-0000-7000-8000-000000000001", "01a22e7f-0000-7000-8000-000000000002",
		"01a22e7f-0000-7000-8000-000000000003", "01a22e7f-0000-7000-8000-000000000004"
	own := itemHome(t, home, cwd)
	writeRollout(t, own, cwd, before, spawn.Add(-time.Second))
	writeRollout(t, own, cwd, later, spawn.Add(2*time.Second)) // the next day's directory
	writeRollout(t, own, cwd, mine, spawn.Add(300*time.Millisecond))
	writeRollout(t, own, elsewhere, other, spawn.Add(time.Second))
	writeRollout(t, home, cwd, "01a22e7f-0000-7000-8000-000000000006", spawn.Add(time.Second)) // another home's
	// A session started in the TUI but with no prompt yet has no rollout;
	// one that is empty is torn, and skipped.
	require.NoError(t, os.WriteFile(filepath.Join(own, "sessions", "2026", "11", "30", "rollout-2026-11-30T23-59-59-01a22e7f-0000-7000-8000-000000000005.jsonl"), nil, 0o600))

	got, err = l.SessionsStarted(cwd, spawn)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, mine, got[0].ID, "oldest first")
	assert.Equal(t, later, got[1].ID)
	assert.Equal(t, "-hello first prompt", got[0].First)
	assert.Equal(t, spawn.Add(300*time.Millisecond), got[0].At)
}

func TestCodexScreenCaptured(t *testing.T) {
	a := newTestAdapter(t, AdapterCodex, schema.Harness{})
	testCapturedScreens(t, a, "testdata/codex-0.171.0", map[string]capturedScreen{
		"ready-empty":               {ScreenReady, ""},
		"ready-working":             {ScreenReady, ""},
		"ready-after-paste":         {ScreenReady, ""},
		"ready-ctrl-c-once":         {ScreenReady, ""},
		"limit-usage":               {ScreenReady, ""},
		"draft-typed":               {ScreenDraft, DraftReason},
		"draft-pasted-working":      {ScreenDraft, DraftReason},
		"blocked-login":             {ScreenBlocked, BlockLoginRequired},
		"blocked-resume-cwd":        {ScreenBlocked, BlockResumeChooser},
		"blocked-folder-trust":      {ScreenBlocked, BlockWorkspaceTrust},
		"blocked-folder-restricted": {ScreenBlocked, BlockWorkspaceTrust},
		"blocked-hooks-review":      {ScreenBlocked, BlockWorkspaceTrust},
	})
	assert.Equal(t, ScreenBusy, func() Screen { s, _ := a.Screen(""); return s }(), "a blank screen is still starting")
}

func TestCodexLimitOnScreen(t *testing.T) {
	a := newTestAdapter(t, AdapterCodex, schema.Harness{})
	data, err := os.ReadFile("testdata/codex-0.171.0/limit-usage.txt")
	require.NoError(t, err)
	loc := time.Local
	now := time.Date(2026, 11, 30, 22, 9, 0, 0, loc)
	l, ok := a.Limit(string(data), now)
	require.True(t, ok)
	assert.Equal(t, LimitUsage, l.Kind)
	assert.Equal(t, time.Date(2026, 12, 1, 1, 9, 0, 0, loc), l.Reset, "the reset wraps onto the next line")
	assert.Contains(t, l.Text, "usage limit")

	for _, ready := range []string{"ready-empty", "ready-working"} {
		data, err := os.ReadFile("testdata/codex-0.171.0/" + ready + ".txt")
		require.NoError(t, err)
		_, ok := a.Limit(string(data), now)
		assert.False(t, ok, ready)
	}
	// A limit of an earlier turn is history.
	history := "› first\n■ You've hit your usage limit. Try again at 3:45 PM.\n› second\n• Working\n› Ask Codex to do anything\n  ? for shortcuts\n"
	_, ok = a.Limit(history, now)
	assert.False(t, ok)
	today := "› first\n■ You've hit your usage limit. Try again at 11:45 PM.\n› Ask Codex to do anything\n"
	l, ok = a.Limit(today, now)
	require.True(t, ok)
	assert.Equal(t, time.Date(2026, 11, 30, 23, 45, 0, 0, loc), l.Reset)
	l, ok = a.Limit("› x\n■ exceeded retry limit, last status: 429 Too Many Requests\n› \n", now)
	require.True(t, ok)
	assert.Equal(t, LimitRate, l.Kind)
	l, ok = a.Limit("› x\n■ We're currently experiencing high demand, which may cause temporary errors.\n› \n", now)
	require.True(t, ok)
	assert.Equal(t, LimitOverload, l.Kind)
}

func TestCodexTranscriptLimit(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	// One start for the three writes: a rollout's file is named by its
	// start, to the second, and a second one would be another file.
	start := time.Now()
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": home}})
	limit, err := os.ReadFile("testdata/codex-0.171.0/task-complete-limit.jsonl")
	require.NoError(t, err)
	writeRollout(t, home, cwd, codexID, start, string(limit))
	tr, err := a.Transcript(cwd, codexID)
	require.NoError(t, err)
	l, ok, err := a.TranscriptLimit(tr)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, LimitUsage, l.Kind)
	at := time.Date(2026, 11, 30, 22, 9, 2, 234e6, time.UTC)
	assert.Equal(t, at, l.At)
	assert.Equal(t, time.Date(2026, 12, 1, 1, 9, 0, 0, time.Local), l.Reset)

	// A user message after the limit: a later turn, no longer limited.
	writeRollout(t, home, cwd, codexID, start, string(limit),
		`{"timestamp":"2026-11-30T22:10:00.000Z","type":"event_msg","payload":{"type":"item_completed","item":{"type":"UserMessage","content":[{"type":"text","text":"again"}]}}}`+"\n")
	_, ok, err = a.TranscriptLimit(tr)
	require.NoError(t, err)
	assert.False(t, ok)

	// The captured rollout has no limit.
	writeRollout(t, home, cwd, codexID, start)
	_, ok, err = a.TranscriptLimit(tr)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestCodexAccount(t *testing.T) {
	assert.Equal(t, "codex:/srv/codex", newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": "/srv/codex/"}}).Account())
	t.Setenv("HOME", "/home/u")
	t.Setenv("CODEX_HOME", "")
	assert.Equal(t, "codex:/home/u/.codex", newTestAdapter(t, AdapterCodex, schema.Harness{}).Account())
}
