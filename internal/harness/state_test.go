package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/schema"
)

func physicalTemp(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	ia, err := os.Stat(a)
	require.NoError(t, err)
	ib, err := os.Stat(b)
	require.NoError(t, err)
	return ia.Sys().(*syscall.Stat_t).Ino == ib.Sys().(*syscall.Stat_t).Ino
}

func TestItemDir(t *testing.T) {
	a, b := itemDir("/h", "/srv/acme/api/42"), itemDir("/h", "/srv/acme/web/42")
	assert.Regexp(t, `^/h/loopd-items/42-[0-9a-f]{16}$`, a)
	assert.NotEqual(t, a, b, "two workdirs of one name")
	assert.Equal(t, a, itemDir("/h", "/srv/acme/api/42"), "the workdir is the key")
	assert.Regexp(t, `^/h/loopd-items/My-Repo.git-[0-9a-f]{16}$`, itemDir("/h", "/srv/My Repo.git"))
	assert.Regexp(t, `^/h/loopd-items/-[0-9a-f]{16}$`, itemDir("/h", "/"))
}

// TestCodexItemState: each item gets a CODEX_HOME of its own, in any mode,
// with the shared login linked and the shared config copied; a rollout
// the shared home has (made before) is linked in for its resume; a login
// the CLI replaced in the item's home (a refresh) becomes the shared one.
// A sandbox shows the item's home and the shared login.
func TestCodexItemState(t *testing.T) {
	shared, cwd := physicalTemp(t), physicalTemp(t)
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": shared}})
	require.NoError(t, os.WriteFile(filepath.Join(shared, "auth.json"), []byte(`{"tokens":"old"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "config.toml"), []byte("model = \"o9\"\n"), 0o600))
	old := writeRollout(t, shared, cwd, codexID, time.Date(2026, 11, 30, 22, 7, 25, 0, time.UTC))

	st, err := ItemState(a, cwd, codexID, false)
	require.NoError(t, err)
	home := itemHome(t, shared, cwd)
	assert.Equal(t, map[string]string{"CODEX_HOME": home}, st.Env)
	assert.Empty(t, st.Binds, "no sandbox, nothing to show")
	link, err := os.Readlink(filepath.Join(home, "auth.json"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(shared, "auth.json"), link)
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	require.NoError(t, err)
	assert.Equal(t, "model = \"o9\"\n", string(cfg))
	mine := filepath.Join(home, "sessions", "2026", "11", "30", filepath.Base(old))
	assert.True(t, sameFile(t, old, mine), "the old conversation, linked into the item's home")
	tr, err := a.Transcript(cwd, codexID)
	require.NoError(t, err)
	assert.Equal(t, mine, tr.Path, "found in the item's home first")
	assert.True(t, tr.Exists)

	st, err = ItemState(a, cwd, "", true)
	require.NoError(t, err)
	assert.Equal(t, []sandbox.Bind{{Source: home, Write: true}, {Source: filepath.Join(shared, "auth.json"), Write: true}}, st.Binds)

	// Codex renames a refreshed auth.json into place: the link becomes
	// a file of the item's own, newer than the shared one.
	own := filepath.Join(home, "auth.json")
	require.NoError(t, os.Remove(own))
	require.NoError(t, os.WriteFile(own, []byte(`{"tokens":"refreshed"}`), 0o600))
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(own, later, later))
	_, err = ItemState(a, cwd, "", false)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(shared, "auth.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"tokens":"refreshed"}`, string(got), "the refresh reaches every item")
	link, err = os.Readlink(own)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(shared, "auth.json"), link)

	// An older file of the item's (a stale copy) gives way to the shared one.
	require.NoError(t, os.Remove(own))
	require.NoError(t, os.WriteFile(own, []byte(`{"tokens":"stale"}`), 0o600))
	earlier := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(own, earlier, earlier))
	_, err = ItemState(a, cwd, "", false)
	require.NoError(t, err)
	got, err = os.ReadFile(filepath.Join(shared, "auth.json"))
	require.NoError(t, err)
	assert.Equal(t, `{"tokens":"refreshed"}`, string(got))
}

// TestGeminiItemState: each item gets a GEMINI_CLI_HOME of its own with the
// shared login and settings linked (Gemini writes them in place, so a
// refresh reaches the shared file), and a chat file the shared project has
// (made before) linked into its own project.
func TestGeminiItemState(t *testing.T) {
	home, cwd := physicalTemp(t), physicalTemp(t)
	a := newTestAdapter(t, AdapterGemini, schema.Harness{Env: map[string]string{"GEMINI_CLI_HOME": home}})
	shared := filepath.Join(home, ".gemini")
	require.NoError(t, os.MkdirAll(shared, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(shared, "oauth_creds.json"), []byte(`{}`), 0o600))
	require.NoError(t, Provision(a, cwd), "settings.json, shared")
	id := "7f3c5a44-1b2e-4c3d-9e8f-0a1b2c3d4e5f"
	slug, err := geminiClaimSlug(shared, cwd)
	require.NoError(t, err)
	old := filepath.Join(shared, "tmp", slug, "chats", "session-2026-11-30T22-07-7f3c5a44.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(old), 0o700))
	chatFile(t, old, id, geminiContext, geminiUser("earlier"))

	st, err := ItemState(a, cwd, id, true)
	require.NoError(t, err)
	item := itemHome(t, shared, cwd)
	assert.Equal(t, map[string]string{"GEMINI_CLI_HOME": item}, st.Env)
	assert.Equal(t, []sandbox.Bind{{Source: item, Write: true}, {Source: filepath.Join(shared, "oauth_creds.json"), Write: true},
		{Source: filepath.Join(shared, "settings.json"), Write: true}}, st.Binds)
	for _, name := range []string{"oauth_creds.json", "settings.json"} {
		link, err := os.Readlink(filepath.Join(item, ".gemini", name))
		require.NoError(t, err, name)
		assert.Equal(t, filepath.Join(shared, name), link)
	}
	tr, err := a.Transcript(cwd, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists)
	assert.True(t, filepath.HasPrefix(tr.Path, filepath.Join(item, ".gemini", "tmp")), tr.Path)
	assert.True(t, sameFile(t, old, tr.Path), "the old conversation, linked into the item's project")
}

// TestClaudeItemState: a sandboxed spawn sees a view of the config dir of
// its own: its .claude.json seeded from the shared one without the other
// workdirs' projects, the shared settings copied, both provisioned; its
// project dir, the login and the operator's own files bound from the
// shared dir. Without a sandbox, the shared dir is used as it is.
func TestClaudeItemState(t *testing.T) {
	config, cwd := physicalTemp(t), physicalTemp(t)
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	global := map[string]any{"oauthAccount": map[string]any{"emailAddress": "op@example.com"}, "userID": "u1",
		"projects": map[string]any{"/srv/other/7": map[string]any{"lastSessionId": "theirs"}, cwd: map[string]any{"allowedTools": []string{"Bash"}}}}
	b, err := json.Marshal(global)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(config, ".claude.json"), b, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, "settings.json"), []byte(`{"model":"opus"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, ".credentials.json"), []byte(`{}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, "CLAUDE.md"), []byte("be brief\n"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(config, "agents"), 0o700))

	st, err := ItemState(a, cwd, "", false)
	require.NoError(t, err)
	assert.Equal(t, State{}, st)

	st, err = ItemState(a, cwd, "", true)
	require.NoError(t, err)
	view := itemHome(t, config, cwd)
	project := filepath.Join(config, "projects", projectDirName(cwd))
	assert.Equal(t, map[string]string{"CLAUDE_CONFIG_DIR": config}, st.Env)
	assert.Equal(t, []sandbox.Bind{
		{Source: view, Target: config, Write: true},
		{Source: project, Write: true},
		{Source: filepath.Join(config, ".credentials.json"), Write: true},
		{Source: filepath.Join(config, "CLAUDE.md")},
		{Source: filepath.Join(config, "agents")},
	}, st.Binds)
	assert.DirExists(t, project)
	var own map[string]any
	b, err = os.ReadFile(filepath.Join(view, ".claude.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &own))
	assert.Equal(t, global["oauthAccount"], own["oauthAccount"], "the account comes along")
	assert.Equal(t, true, own["hasCompletedOnboarding"])
	projects := own["projects"].(map[string]any)
	assert.NotContains(t, projects, "/srv/other/7", "no other workdir's project")
	assert.Equal(t, map[string]any{"allowedTools": []any{"Bash"}, "hasTrustDialogAccepted": true}, projects[cwd])
	b, err = os.ReadFile(filepath.Join(view, "settings.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"opus","env":{"DISABLE_AUTOUPDATER":"1"}}`, string(b))

	// The CLI keeps its own .claude.json; the shared settings are the
	// operator's, copied again at each spawn.
	require.NoError(t, os.WriteFile(filepath.Join(view, ".claude.json"), []byte(`{"numStartups":3}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, "settings.json"), []byte(`{"model":"sonnet"}`), 0o600))
	_, err = ItemState(a, cwd, "", true)
	require.NoError(t, err)
	b, err = os.ReadFile(filepath.Join(view, ".claude.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &own))
	assert.EqualValues(t, 3, own["numStartups"])
	assert.Equal(t, true, own["hasCompletedOnboarding"], "provisioned again")
	b, err = os.ReadFile(filepath.Join(view, "settings.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"model":"sonnet","env":{"DISABLE_AUTOUPDATER":"1"}}`, string(b))

	// Without CLAUDE_CONFIG_DIR the config dir is ~/.claude and the global
	// config ~/.claude.json; the sandbox's $HOME is private, so the
	// variable names the dir.
	home := physicalTemp(t)
	t.Setenv("HOME", home)
	require.NoError(t, os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"userID":"u2"}`), 0o600))
	st, err = ItemState(newTestAdapter(t, AdapterClaudeCode, schema.Harness{}), cwd, "", true)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"CLAUDE_CONFIG_DIR": filepath.Join(home, ".claude")}, st.Env)
	b, err = os.ReadFile(filepath.Join(itemHome(t, filepath.Join(home, ".claude"), cwd), ".claude.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &own))
	assert.Equal(t, "u2", own["userID"])
}
