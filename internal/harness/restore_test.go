package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

func TestClaudeRestoreTarget(t *testing.T) {
	config := t.TempDir()
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	id := uuid.NewString()
	data := []byte(`{"type":"user","message":{"role":"user","content":"hi"},"timestamp":"2026-01-01T00:00:00.000Z"}` + "\n")

	path, out, err := RestoreTarget(a, work, id, data, time.Now())
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(config, "projects", projectDirName(work), id+".jsonl"), path,
		"the project dir of the physical cwd, the id as the file name")
	assert.Equal(t, data, out)

	// Through a symlink, the physical cwd names the project.
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(work, link))
	viaLink, _, err := RestoreTarget(a, link, id, data, time.Now())
	require.NoError(t, err)
	assert.Equal(t, path, viaLink)

	_, _, err = RestoreTarget(a, work, "../../x", data, time.Now())
	require.ErrorIs(t, err, ErrInvalidSessionID)
	_, _, err = RestoreTarget(a, work, strings.ToUpper(id), data, time.Now())
	require.ErrorIs(t, err, ErrInvalidSessionID, "claude finds a transcript by its exact name")
}

func TestRestoreTargetWithoutARule(t *testing.T) {
	for _, kind := range []string{AdapterCursor, AdapterCustom} {
		cfg := schema.Harness{Command: "x"}
		if kind == AdapterCustom {
			cfg.FreshArgs = []string{"{{.Prompt}}"}
		}
		a := newTestAdapter(t, kind, cfg)
		_, _, err := RestoreTarget(a, t.TempDir(), uuid.NewString(), nil, time.Now())
		require.ErrorIs(t, err, ErrNoTranscriptRule, kind)
	}
}

// codexSettingsLine is a thread_settings_applied event as Codex 0.171.0
// writes it (the model's and the approvals' settings left out) for a
// session run in cwd.
func codexSettingsLine(id, cwd string, ordinal int) string {
	return `{"timestamp":"2026-11-30T22:07:25.340Z","ordinal":` + itoa(ordinal) + `,"type":"event_msg","payload":{"type":"thread_settings_applied","thread_id":"` + id +
		`","thread_settings":{"model":"gpt-6.2-sol","permission_profile":{"type":"managed","file_system":{"type":"restricted","entries":[` +
		`{"path":{"type":"special","value":{"kind":"root"}},"access":"read"},{"path":{"type":"path","path":"` + cwd + `"},"access":"write"},` +
		`{"path":{"type":"path","path":"` + cwd + `/.git"},"access":"read","missing_path_behavior":"skip"},` +
		`{"path":{"type":"path","path":"` + cwd + `-other"},"access":"read"}]},"network":"restricted"},` +
		`"cwd":"` + cwd + `","runtime_workspace_roots":["` + cwd + `"],"note":"<b> & text"}}}` + "\n"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestCodexRestoreTarget(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	workA, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	workB, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": homeA}})
	b := newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": homeB}})
	start := time.Date(2026, 11, 30, 22, 7, 25, 0, time.UTC)
	srcPath := writeRollout(t, homeA, workA, codexID, start, codexSettingsLine(codexID, workA, 40))
	data, err := os.ReadFile(srcPath)
	require.NoError(t, err)
	src, err := a.Transcript(workA, codexID)
	require.NoError(t, err)
	require.True(t, src.Exists)

	now := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	path, out, err := RestoreTarget(b, workB, codexID, data, now)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(itemHome(t, homeB, workB), "sessions", "2026", "11", "30", "rollout-2026-11-30T22-07-25-"+codexID+".jsonl"), path,
		"in the item's own home, named after the session's start, as codex names it")
	require.True(t, bytes.HasPrefix(out, data), "the stored copy goes on by offset")
	added := string(out[len(data):])
	require.Equal(t, 1, strings.Count(added, "\n"))
	var moved struct {
		Timestamp string `json:"timestamp"`
		Ordinal   int    `json:"ordinal"`
		Payload   struct {
			Type     string `json:"type"`
			Settings struct {
				Cwd   string   `json:"cwd"`
				Roots []string `json:"runtime_workspace_roots"`
				Note  string   `json:"note"`
				Perm  struct {
					FS struct {
						Entries []struct {
							Path struct {
								Path string `json:"path"`
							} `json:"path"`
						} `json:"entries"`
					} `json:"file_system"`
				} `json:"permission_profile"`
			} `json:"thread_settings"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(added), &moved))
	assert.Equal(t, "thread_settings_applied", moved.Payload.Type)
	assert.Equal(t, workB, moved.Payload.Settings.Cwd)
	assert.Equal(t, []string{workB}, moved.Payload.Settings.Roots)
	var paths []string
	for _, e := range moved.Payload.Settings.Perm.FS.Entries {
		paths = append(paths, e.Path.Path)
	}
	assert.Equal(t, []string{"", workB, workB + "/.git", workA + "-other"}, paths, "paths at or under the old cwd move, others stay")
	assert.Equal(t, "<b> & text", moved.Payload.Settings.Note)
	assert.Equal(t, "2027-01-02T03:04:05.000Z", moved.Timestamp)
	assert.Equal(t, 41, moved.Ordinal, "one past the last line's")

	// Written there, it is workB's conversation, no longer workA's.
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, out, 0o600))
	tr, err := b.Transcript(workB, codexID)
	require.NoError(t, err)
	assert.True(t, tr.Exists)
	assert.Equal(t, path, tr.Path)
	tr, err = b.Transcript(workA, codexID)
	require.NoError(t, err)
	assert.False(t, tr.Exists, "the latest cwd recorded is workB's")

	// An existing rollout is the target; in the same cwd nothing is added.
	again, same, err := RestoreTarget(b, workB, codexID, out, now)
	require.NoError(t, err)
	assert.Equal(t, path, again)
	assert.Equal(t, out, same)

	// Without settings to move, codex would open its chooser: no rule.
	bare := writeRollout(t, t.TempDir(), workA, codexID, start)
	bareData, err := os.ReadFile(bare)
	require.NoError(t, err)
	_, _, err = RestoreTarget(b, t.TempDir(), codexID, bareData, now)
	require.ErrorIs(t, err, ErrNoTranscriptRule)
	// A rollout of the same cwd needs none.
	_, same, err = RestoreTarget(newTestAdapter(t, AdapterCodex, schema.Harness{Env: map[string]string{"CODEX_HOME": t.TempDir()}}), workA, codexID, bareData, now)
	require.NoError(t, err)
	assert.Equal(t, bareData, same)
	// Another session's rollout is not this id's.
	_, _, err = RestoreTarget(b, workB, "01a22e7f-0000-7000-8000-000000000000", data, now)
	require.ErrorIs(t, err, ErrNoTranscriptRule)
}

func TestGeminiRestoreTarget(t *testing.T) {
	home := t.TempDir()
	a := newTestAdapter(t, AdapterGemini, schema.Harness{Env: map[string]string{"GEMINI_CLI_HOME": home}})
	id := "7f3c5a44-1b2e-4c3d-9e8f-0a1b2c3d4e5f"
	parent, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(parent, "My Repo.git")
	require.NoError(t, os.MkdirAll(work, 0o700))
	// The item's own config dir.
	config := filepath.Join(itemHome(t, filepath.Join(home, ".gemini"), work), ".gemini")
	src := filepath.Join(t.TempDir(), "chat.jsonl")
	chatFile(t, src, id, geminiContext, geminiUser("earlier"))
	data, err := os.ReadFile(src)
	require.NoError(t, err)

	// "my-repo-git" is mapped to another project, "my-repo-git-1" is
	// claimed by a third on disk.
	reg, err := json.Marshal(map[string]any{"projects": map[string]string{"/elsewhere": "my-repo-git"}})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(config, "tmp", "my-repo-git-1"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, "projects.json"), reg, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(config, "tmp", "my-repo-git-1", ".project_root"), []byte("/third"), 0o600))

	path, out, err := RestoreTarget(a, work, id, data, time.Now())
	require.NoError(t, err)
	assert.Equal(t, data, out)
	assert.Equal(t, filepath.Join(config, "tmp", "my-repo-git-2", "chats", "session-2026-11-30T22-07-7f3c5a44.jsonl"), path,
		"the first free slug, the file named after the session's start")
	marker, err := os.ReadFile(filepath.Join(config, "tmp", "my-repo-git-2", ".project_root"))
	require.NoError(t, err)
	assert.Equal(t, work, string(marker))

	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, out, 0o600))
	tr, err := a.Transcript(work, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists, "found through the marker, as gemini finds it")
	assert.Equal(t, path, tr.Path)
	again, _, err := RestoreTarget(a, work, id, data, time.Now())
	require.NoError(t, err)
	assert.Equal(t, path, again, "an existing chat file is the target")
}
