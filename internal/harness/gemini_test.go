package harness

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

func TestGeminiArgv(t *testing.T) {
	a := newTestAdapter(t, AdapterGemini, schema.Harness{ExtraArgs: []string{"--approval-mode", "auto_edit"}})
	id := "7f3c5a44-1b2e-4c3d-9e8f-0a1b2c3d4e5f"
	assert.Equal(t, []string{"gemini", "--session-id", id, "--approval-mode", "auto_edit", "--prompt-interactive=-x first; --resume"},
		a.FreshArgv(id, "-x first; --resume"))
	assert.Equal(t, []string{"gemini", "--resume", id, "--approval-mode", "auto_edit", "--prompt-interactive=hi"}, a.ResumeArgv(id, "hi"))
	assert.Equal(t, []string{"gemini", "--resume", id, "--approval-mode", "auto_edit"}, a.ResumeArgv(id, ""))
	// The workdir is untrusted unless its project settings are.
	assert.Equal(t, "false", a.Env()["GEMINI_CLI_TRUST_WORKSPACE"])
	trusted := WithProjectSettings(a, true)
	assert.Equal(t, "true", trusted.Env()["GEMINI_CLI_TRUST_WORKSPACE"])
	assert.Equal(t, a.FreshArgv(id, "x"), trusted.FreshArgv(id, "x"), "the trust is in the environment, not argv")
	assert.Equal(t, "false", a.Env()["GEMINI_CLI_TRUST_WORKSPACE"], "the original is unchanged")
	assert.Equal(t, CauseUntrustedWorkdir, ExitCause(a, 55))
	assert.True(t, a.SupportsResume())
	assert.True(t, a.ValidSessionID(id))
	for _, bad := range []string{"1", "latest", "--yolo", strings.ToUpper(id), "00000000-0000-0000-0000-000000000000"} {
		assert.False(t, a.ValidSessionID(bad), bad)
	}
	assert.Equal(t, []string{"gemini", "node"}, a.ProcessNames())
	assert.True(t, StopsProcessGroup(a), "gemini outlives kill-session")
	assert.Equal(t, CauseAuthMissing, ExitCause(a, 41))
	assert.Equal(t, CauseSessionError, ExitCause(a, 42))
	assert.Empty(t, ExitCause(a, 1))

	h, ok := a.(Headless)
	require.True(t, ok)
	argv, stdin := h.HeadlessArgv(id, "-x event", true)
	assert.Equal(t, []string{"gemini", "--resume", id, "--approval-mode", "auto_edit", "--output-format", "json"}, argv)
	assert.Equal(t, "-x event", string(stdin))
	argv, _ = h.HeadlessArgv(id, "e", false)
	assert.Equal(t, []string{"gemini", "--session-id", id, "--approval-mode", "auto_edit", "--output-format", "json"}, argv)
	assert.Equal(t, id, h.HeadlessSessionID([]byte("Loaded cached credentials.\n{\n  \"session_id\": \""+id+"\",\n  \"response\": \"OK.\"\n}\n")))
	assert.Empty(t, h.HeadlessSessionID([]byte(`{"session_id": "../x"}`)))
	assert.Empty(t, h.HeadlessSessionID([]byte("Please set an Auth method")))

	for _, arg := range []string{"--resume", "-r", "--session-id=x", "-p", "--prompt-interactive", "-w", "--list-sessions", "--", "--skip-trust"} {
		_, err := New("gemini", schema.Harness{Command: "gemini", ExtraArgs: []string{arg}})
		assert.ErrorIs(t, err, ErrBadConfig, arg)
	}
	// Other adapters stop by process group only when configured to.
	claude, err := New("claude-code", schema.Harness{Command: "claude"})
	require.NoError(t, err)
	assert.False(t, StopsProcessGroup(claude))
	custom, err := New("x", schema.Harness{Adapter: "custom", Command: "x", FreshArgs: []string{"{{.Prompt}}"}, StopProcessGroup: true})
	require.NoError(t, err)
	assert.True(t, StopsProcessGroup(custom))
}

// chatFile writes a chat file as Gemini 0.61.0 does: a metadata line, then
// records.
func chatFile(t *testing.T, path, id string, records ...string) {
	t.Helper()
	meta := `{"sessionId":"` + id + `","projectHash":"h","startTime":"2026-11-30T22:07:12.584Z","lastUpdated":"2026-11-30T22:07:12.584Z","kind":"main"}`
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(append([]string{meta}, records...), "\n")+"\n"), 0o600))
}

// The session context Gemini writes into every new chat file at start
// (measured): a user message it ignores when it resumes.
const geminiContext = `{"$set":{"messages":[{"id":"d0","timestamp":"2026-11-30T22:07:12.585Z","type":"user","content":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"}]}],"lastUpdated":"2026-11-30T22:07:12.585Z"}}`

func geminiUser(text string) string {
	b, _ := json.Marshal(map[string]any{"id": uuid.NewString(), "timestamp": "2026-11-30T22:09:03.369Z", "type": "user",
		"content": []map[string]string{{"text": text}}})
	return string(b)
}

func TestGeminiTranscript(t *testing.T) {
	home := t.TempDir()
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a := newTestAdapter(t, AdapterGemini, schema.Harness{Env: map[string]string{"HOME": home}})
	config := filepath.Join(home, ".gemini")
	id := "7f3c5a44-1b2e-4c3d-9e8f-0a1b2c3d4e5f"
	twin := "7f3c5a44-0000-4000-8000-000000000000" // the same short id

	tr, err := a.Transcript(work, id)
	require.NoError(t, err)
	assert.Equal(t, Transcript{Known: true}, tr, "gemini never ran here")

	reg, err := json.Marshal(map[string]any{"projects": map[string]string{work: "proj-1", "/elsewhere": "proj"}})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(config, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, "projects.json"), reg, 0o600))
	chats := filepath.Join(config, "tmp", "proj-1", "chats")
	started := filepath.Join(chats, "session-2026-11-30T22-07-7f3c5a44.jsonl")
	chatFile(t, started, id, geminiContext)
	chatFile(t, filepath.Join(chats, "session-2026-11-30T22-01-7f3c5a44.jsonl"), twin, geminiUser("the twin's"))
	chatFile(t, filepath.Join(config, "tmp", "proj", "chats", "session-2026-11-30T22-01-7f3c5a44.jsonl"), id, geminiUser("another project's"))

	tr, err = a.Transcript(work, id)
	require.NoError(t, err)
	assert.False(t, tr.Exists, "a TUI's file before any prompt cannot be resumed")
	assert.Equal(t, started, tr.Path)

	require.NoError(t, os.Remove(started))
	chatFile(t, started, id, geminiContext, geminiUser("first prompt"), `{"$set":{"lastUpdated":"2026-11-30T22:09:03.369Z"}}`)
	// An interrupted resume's file, newer and not resumable, does not hide
	// the conversation.
	later := filepath.Join(chats, "session-2026-11-30T23-00-7f3c5a44.jsonl")
	chatFile(t, later, id)
	require.NoError(t, os.Chtimes(later, time.Now().Add(time.Hour), time.Now().Add(time.Hour)))
	tr, err = a.Transcript(work, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists)
	assert.Equal(t, started, tr.Path)
	info, err := os.Stat(started)
	require.NoError(t, err)
	assert.Equal(t, info.Size(), tr.Size)

	// A slug whose marker names another dir is not this project's; the
	// marker that names it is.
	require.NoError(t, os.WriteFile(filepath.Join(config, "tmp", "proj-1", ".project_root"), []byte("/other"), 0o600))
	tr, err = a.Transcript(work, id)
	require.NoError(t, err)
	assert.Equal(t, Transcript{Known: true}, tr)
	require.NoError(t, os.WriteFile(filepath.Join(config, "tmp", "proj", ".project_root"), []byte(work), 0o600))
	tr, err = a.Transcript(work, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists)
	assert.Equal(t, filepath.Join(config, "tmp", "proj", "chats", "session-2026-11-30T22-01-7f3c5a44.jsonl"), tr.Path)

	// GEMINI_CLI_HOME moves the config dir.
	b := newTestAdapter(t, AdapterGemini, schema.Harness{Env: map[string]string{"HOME": "/nowhere", "GEMINI_CLI_HOME": home}})
	tr, err = b.Transcript(work, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists)
	assert.Equal(t, AdapterGemini+":"+config, b.Account())

	_, err = a.Transcript(work, "../x")
	assert.ErrorIs(t, err, ErrInvalidSessionID)
}

func TestGeminiTranscriptFrames(t *testing.T) {
	body := "body:\nline\twith tab\n漢字\n"
	prompt := func(id string) string {
		return "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n" + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)
	}
	var frames []desired.Frame
	for _, id := range []string{"typed", "set", "string", "answer", "absent"} {
		frames = append(frames, desired.FrameOf(desired.Delivery{ID: id, Prompt: prompt(id)}))
	}
	answer, err := json.Marshal(map[string]any{"id": "a", "type": "gemini", "content": prompt("answer")})
	require.NoError(t, err)
	str, err := json.Marshal(map[string]any{"id": "s", "type": "user", "content": prompt("string")})
	require.NoError(t, err)
	set, err := json.Marshal(map[string]any{"$set": map[string]any{"messages": []any{
		map[string]any{"id": "x", "type": "user", "content": []map[string]string{{"text": prompt("set")}}}}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "session-x.jsonl")
	chatFile(t, path, "x", geminiContext, geminiUser(prompt("typed")), string(answer), string(str), string(set), `{"id":"torn","type":"user","content":"`)

	got, err := newTestAdapter(t, AdapterGemini, schema.Harness{}).TranscriptFrames(Transcript{Known: true, Exists: true, Path: path}, frames)
	require.NoError(t, err)
	for _, id := range []string{"typed", "string", "set"} {
		assert.Equal(t, Found{Whole: true}, got[id], id)
	}
	assert.Equal(t, Found{}, got["answer"], "the model's words never count")
	assert.Equal(t, Found{}, got["absent"])
}

func TestGeminiScreen(t *testing.T) {
	a := newTestAdapter(t, AdapterGemini, schema.Harness{})
	testCapturedScreens(t, a, "testdata/gemini-0.61.0", map[string]capturedScreen{
		"ready-empty":      {ScreenReady, ""},
		"ready-after-turn": {ScreenReady, ""},
		"draft-typed":      {ScreenDraft, DraftReason},
		"busy-thinking":    {ScreenBusy, ""},
		"blocked-trust":    {ScreenBlocked, BlockWorkspaceTrust},
		"blocked-auth":     {ScreenBlocked, BlockLoginRequired},
		"blocked-apikey":   {ScreenBlocked, BlockLoginRequired},
	})
	screen, _ := a.Screen("\n Gemini CLI v0.61.0\n")
	assert.Equal(t, ScreenBusy, screen, "starting")

	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.Local)
	l, ok := a.Limit("✕ Usage limit reached for gemini-2.5-pro.\nAccess resets at 5:10 PM UTC.\n/stats model for usage details", now)
	require.True(t, ok)
	assert.Equal(t, LimitUsage, l.Kind)
	assert.Equal(t, "Usage limit reached for gemini-2.5-pro.", l.Text)
	assert.True(t, time.Date(2026, 11, 30, 17, 10, 0, 0, time.UTC).Equal(l.Reset), "read in the zone written: %v", l.Reset)
	l, ok = a.Limit("ℹ Usage limit reached for gemini-2.5-pro.\n/stats model for usage details", now)
	require.True(t, ok)
	assert.Equal(t, WindowDaily, l.Window, "no reset named: the daily quota's, midnight Pacific")
	assert.True(t, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC).Equal(l.Reset), "%v", l.Reset)
	_, ok = a.Limit("ready", now)
	assert.False(t, ok)
}

func TestGeminiProvision(t *testing.T) {
	home := t.TempDir()
	a := newTestAdapter(t, AdapterGemini, schema.Harness{Env: map[string]string{"HOME": home}})
	p, ok := a.(Provisioner)
	require.True(t, ok)
	settings := filepath.Join(home, ".gemini", "settings.json")
	read := func() map[string]any {
		b, err := os.ReadFile(settings)
		require.NoError(t, err)
		var v map[string]any
		require.NoError(t, json.Unmarshal(b, &v))
		return v
	}

	require.NoError(t, p.Provision(""), "no settings yet")
	assert.Equal(t, map[string]any{"general": map[string]any{"sessionRetention": map[string]any{"enabled": false}}}, read())

	user := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"vimMode":true,"sessionRetention":{"enabled":true,"maxAge":"7d"}}}`
	require.NoError(t, os.WriteFile(settings, []byte(user), 0o600))
	require.NoError(t, os.Chmod(settings, 0o640))
	require.NoError(t, p.Provision(""))
	assert.Equal(t, map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"general":  map[string]any{"vimMode": true, "sessionRetention": map[string]any{"enabled": false, "maxAge": "7d"}},
	}, read(), "the user's keys are kept")
	info, err := os.Stat(settings)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), info.Mode().Perm())

	// Already provisioned: not written again.
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(settings, old, old))
	require.NoError(t, p.Provision(""))
	info, err = os.Stat(settings)
	require.NoError(t, err)
	assert.True(t, info.ModTime().Equal(old), "unchanged")

	// A file with comments (Gemini accepts them) is never rewritten.
	commented := "{\n  // mine\n  \"general\": {}\n}\n"
	require.NoError(t, os.WriteFile(settings, []byte(commented), 0o600))
	assert.ErrorIs(t, p.Provision(""), ErrBadSettings)
	b, err := os.ReadFile(settings)
	require.NoError(t, err)
	assert.Equal(t, commented, string(b))
	require.NoError(t, os.WriteFile(settings, []byte(`{"general":"x"}`), 0o600))
	assert.ErrorIs(t, p.Provision(""), ErrBadSettings)
	require.NoError(t, os.WriteFile(settings, []byte(`{"general":{}} {"x":1}`), 0o600))
	assert.ErrorIs(t, p.Provision(""), ErrBadSettings, "text after the object")

	// Numbers keep their text; a symlinked settings file (kept with the
	// user's dotfiles) stays a symlink, and the file it names is the one
	// rewritten.
	dotfile := filepath.Join(t.TempDir(), "gemini-settings.json")
	require.NoError(t, os.WriteFile(dotfile, []byte(`{"big":12345678901234567890,"ratio":1.0e2,"general":{"sessionRetention":{"enabled":true}}}`), 0o600))
	require.NoError(t, os.Remove(settings))
	require.NoError(t, os.Symlink(dotfile, settings))
	require.NoError(t, p.Provision(""))
	linfo, err := os.Lstat(settings)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, linfo.Mode().Type(), "still a symlink")
	b, err = os.ReadFile(dotfile)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"big": 12345678901234567890`)
	assert.Contains(t, string(b), `"ratio": 1.0e2`)
	assert.Contains(t, string(b), `"enabled": false`)

	// A link to a file not made yet: made there, the link kept.
	fresh := filepath.Join(filepath.Dir(dotfile), "new-settings.json")
	require.NoError(t, os.Remove(settings))
	require.NoError(t, os.Symlink(fresh, settings))
	require.NoError(t, p.Provision(""))
	linfo, err = os.Lstat(settings)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, linfo.Mode().Type(), "still a symlink")
	b, err = os.ReadFile(fresh)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"enabled": false`)
}

// TestGeminiResumableFollowsTheCLIsListing: a chat file exists (resumable)
// only when Gemini 0.61.0 would list it for --resume (getAllSessionFiles):
// a subagent's file, one whose messages were all rewound, or one whose
// sessionId a later line changed, is refused by the CLI with exit 42
// (measured for kind "subagent"), so loopd must not resume it.
func TestGeminiResumableFollowsTheCLIsListing(t *testing.T) {
	const id = "7f3c5a44-1b2e-4c3d-9e8f-0a1b2c3d4e5f"
	user := `{"id":"u1","timestamp":"2026-11-30T22:09:03.369Z","type":"user","content":[{"text":"first prompt"}]}`
	for _, tt := range []struct {
		name    string
		records []string
		want    bool
	}{
		{"a_user_message", []string{geminiContext, user}, true},
		{"a_subagents_file", []string{`{"$set":{"kind":"subagent"}}`, user}, false},
		{"kind_set_back_to_main", []string{`{"$set":{"kind":"subagent"}}`, user, `{"$set":{"kind":"main"}}`}, true},
		{"every_message_rewound", []string{geminiContext, user, `{"$rewindTo":"u1"}`}, false},
		{"rewound_to_an_unknown_id", []string{user, `{"$rewindTo":"gone"}`}, false},
		{"rewound_then_a_new_message", []string{user, `{"$rewindTo":"u1"}`, geminiUser("again")}, true},
		{"messages_replaced_by_context_only", []string{user, geminiContext}, false},
		{"session_id_changed_later", []string{user, `{"$set":{"sessionId":"00000000-1b2e-4c3d-9e8f-0a1b2c3d4e5f"}}`}, false},
		{"a_torn_last_line", []string{user, `{"id":"u2","type":"us`}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "session-2026-11-30T22-07-7f3c5a44.jsonl")
			chatFile(t, path, id, tt.records...)
			c, err := readGeminiChat(path, id, geminiChat{})
			require.NoError(t, err)
			assert.True(t, c.ours)
			assert.Equal(t, tt.want, c.resumable)

			// The same file as Gemini appends it, read after each line
			// (and each half line) from where the last read stopped,
			// says what reading it whole says.
			grown := filepath.Join(t.TempDir(), "session-2026-11-30T22-07-7f3c5a44.jsonl")
			chatFile(t, grown, id)
			cs := &geminiChats{byPath: map[string]geminiChat{}}
			for _, r := range tt.records {
				for _, part := range []string{r[:len(r)/2], r[len(r)/2:] + "\n"} {
					f, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
					require.NoError(t, err)
					_, err = f.WriteString(part)
					require.NoError(t, errors.Join(err, f.Close()))
					got, err := cs.read(grown, id)
					require.NoError(t, err)
					whole, err := readGeminiChat(grown, id, geminiChat{})
					require.NoError(t, err)
					require.Equal(t, whole.resumable, got.resumable, "after %q", part)
				}
			}
			got, err := cs.read(grown, id)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.resumable)
		})
	}
}

func TestGeminiChatsReadAFileAgainOnlyOnceItChanged(t *testing.T) {
	id := "11111111-2222-4333-8444-555555555555"
	path := filepath.Join(t.TempDir(), "session-2026-12-03T06-45-11111111.jsonl")
	meta := `{"sessionId":"` + id + `","projectHash":"h","kind":"main"}` + "\n"
	user := `{"id":"u1","type":"user","content":[{"text":"hi"}]}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(meta+user), 0o600))
	cs := &geminiChats{byPath: map[string]geminiChat{}}
	c, err := cs.read(path, id)
	require.NoError(t, err)
	require.True(t, c.resumable)

	// The same size and time, another content: not read again.
	info, err := os.Stat(path)
	require.NoError(t, err)
	blank := `{"id":"u1","type":"user","content":[{"text":"  "}]}` + "\n"
	require.Len(t, blank, len(user))
	require.NoError(t, os.WriteFile(path, []byte(meta+blank), 0o600))
	require.NoError(t, os.Chtimes(path, info.ModTime(), info.ModTime()))
	c, err = cs.read(path, id)
	require.NoError(t, err)
	assert.True(t, c.resumable, "an unchanged file keeps its verdict")

	// It grew: what follows is read.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"$rewindTo":"u1"}` + "\n")
	require.NoError(t, errors.Join(err, f.Close()))
	c, err = cs.read(path, id)
	require.NoError(t, err)
	assert.False(t, c.resumable, "what was appended is read")

	c, err = cs.read(path, "22222222-2222-4333-8444-555555555555")
	require.NoError(t, err)
	assert.False(t, c.ours, "read for another id, it is read again")

	// Replaced (written under another name, renamed over): read whole.
	other := path + ".tmp"
	require.NoError(t, os.WriteFile(other, []byte(meta+user+`{"$set":{"lastUpdated":"x"}}`+"\n"), 0o600))
	require.NoError(t, os.Rename(other, path))
	c, err = cs.read(path, id)
	require.NoError(t, err)
	assert.True(t, c.resumable, "a file replaced is read whole")
}
