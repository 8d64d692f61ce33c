package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// TestMergeSettings: the keys a provisioner owns are merged into what is
// there; every other key and value is kept; a second merge writes nothing.
func TestMergeSettings(t *testing.T) {
	tests := []struct {
		name string
		have string // "" for no file
		set  []setting
		want string
	}{
		{
			name: "no_file",
			set:  []setting{{[]string{"a"}, true}, {[]string{"p", "/w", "t"}, true}},
			want: `{"a":true,"p":{"/w":{"t":true}}}`,
		},
		{
			name: "user_keys_kept",
			have: `{"oauthAccount":{"email":"me@example.com"},"numStartups":12345678901234567890,"p":{"/other":{"t":true},"/w":{"allowedTools":["Bash"]}}}`,
			set:  []setting{{[]string{"a"}, true}, {[]string{"p", "/w", "t"}, true}},
			want: `{"a":true,"numStartups":12345678901234567890,"oauthAccount":{"email":"me@example.com"},"p":{"/other":{"t":true},"/w":{"allowedTools":["Bash"],"t":true}}}`,
		},
		{
			name: "owned_value_corrected",
			have: `{"a":false,"env":{"DISABLE_AUTOUPDATER":"0","OTHER":"x"}}`,
			set:  []setting{{[]string{"a"}, true}, {[]string{"env", "DISABLE_AUTOUPDATER"}, "1"}},
			want: `{"a":true,"env":{"DISABLE_AUTOUPDATER":"1","OTHER":"x"}}`,
		},
		{
			name: "empty_file",
			have: " \n",
			set:  []setting{{[]string{"a"}, true}},
			want: `{"a":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "conf", "settings.json")
			if tt.have != "" {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
				require.NoError(t, os.WriteFile(path, []byte(tt.have), 0o640))
			}
			require.NoError(t, mergeSettings(path, true, tt.set...))
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(b))
			info, err := os.Stat(path)
			require.NoError(t, err)
			if tt.have != "" {
				assert.Equal(t, os.FileMode(0o640), info.Mode().Perm(), "the mode is kept")
			} else {
				assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
			}
			assert.NoDirExists(t, path+".lock", "the lock is released")

			// Idempotent: a second merge leaves the file as it is.
			old := time.Now().Add(-time.Hour)
			require.NoError(t, os.Chtimes(path, old, old))
			require.NoError(t, mergeSettings(path, true, tt.set...))
			info, err = os.Stat(path)
			require.NoError(t, err)
			assert.True(t, info.ModTime().Equal(old), "not written again")
			entries, err := os.ReadDir(filepath.Dir(path))
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temporary file left")
		})
	}
}

// TestMergeSettingsRefusesWhatItCannotKeep: a file that is not a plain
// JSON object, or whose key on the way is not an object, is an error and
// stays as it is.
func TestMergeSettingsRefusesWhatItCannotKeep(t *testing.T) {
	for name, have := range map[string]string{
		"truncated":      `{"hasCompletedOnboarding": tr`,
		"array":          `[1,2]`,
		"comments":       "{\n  // mine\n}\n",
		"two_objects":    `{} {}`,
		"key_not_object": `{"projects":"x"}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".claude.json")
			require.NoError(t, os.WriteFile(path, []byte(have), 0o600))
			err := mergeSettings(path, true, setting{[]string{"projects", "/w", "t"}, true})
			assert.ErrorIs(t, err, ErrBadSettings)
			b, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			assert.Equal(t, have, string(b))
			assert.NoDirExists(t, path+".lock")
		})
	}
}

// TestSettingsLockTakesOverAStaleLock: a lock left by a process that died
// (older than proper-lockfile's stale period) is taken over; a fresh one
// held by a live CLI is waited for.
func TestSettingsLockTakesOverAStaleLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".claude.json")
	require.NoError(t, os.Mkdir(path+".lock", 0o700))
	old := time.Now().Add(-schema.SettingsLockStale - time.Second)
	require.NoError(t, os.Chtimes(path+".lock", old, old))
	require.NoError(t, mergeSettings(path, true, claudeOnboarded))
	assert.NoDirExists(t, path+".lock")

	require.NoError(t, os.Mkdir(path+".lock", 0o700))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.Remove(path + ".lock") // the CLI saved and let go
	}()
	require.NoError(t, mergeSettings(path, true, claudeTrusted("/w")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, `{"hasCompletedOnboarding":true,"projects":{"/w":{"hasTrustDialogAccepted":true}}}`, string(b))
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

// TestClaudeProvision: the config dir the pane's claude reads gets the
// onboarding mark and the physical workdir's trust in .claude.json and the
// auto-updater off in settings.json, next to the user's own keys.
func TestClaudeProvision(t *testing.T) {
	config := t.TempDir()
	real := t.TempDir()
	work := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(real, work))
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	user := `{"oauthAccount":{"emailAddress":"me@example.com"},"projects":{"/elsewhere":{"hasTrustDialogAccepted":false}}}`
	require.NoError(t, os.WriteFile(filepath.Join(config, ".claude.json"), []byte(user), 0o600))

	require.NoError(t, Provision(a, work))
	assert.Equal(t, map[string]any{
		"oauthAccount":           map[string]any{"emailAddress": "me@example.com"},
		"hasCompletedOnboarding": true,
		"resumeReturnDismissed":  true,
		"projects": map[string]any{
			"/elsewhere": map[string]any{"hasTrustDialogAccepted": false},
			real:         map[string]any{"hasTrustDialogAccepted": true},
		},
	}, readJSON(t, filepath.Join(config, ".claude.json")), "trust is keyed by the physical path")
	assert.Equal(t, map[string]any{"env": map[string]any{"DISABLE_AUTOUPDATER": "1"}}, readJSON(t, filepath.Join(config, "settings.json")))

	// A malformed .claude.json is an error and is never overwritten.
	require.NoError(t, os.WriteFile(filepath.Join(config, ".claude.json"), []byte("{oops"), 0o600))
	err := Provision(a, work)
	require.ErrorIs(t, err, ErrBadSettings)
	assert.Contains(t, err.Error(), filepath.Join(config, ".claude.json"), "the error names the file")
	b, err := os.ReadFile(filepath.Join(config, ".claude.json"))
	require.NoError(t, err)
	assert.Equal(t, "{oops", string(b))
}

// TestClaudeProvisionFiles: without CLAUDE_CONFIG_DIR the CLI reads
// $HOME/.claude.json and $HOME/.claude/settings.json; a legacy
// .config.json in the config dir replaces .claude.json.
func TestClaudeProvisionFiles(t *testing.T) {
	home := t.TempDir()
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"HOME": home}})
	require.NoError(t, Provision(a, ""))
	assert.Equal(t, map[string]any{"hasCompletedOnboarding": true, "resumeReturnDismissed": true}, readJSON(t, filepath.Join(home, ".claude.json")))
	assert.FileExists(t, filepath.Join(home, ".claude", "settings.json"))

	config := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(config, ".config.json"), []byte(`{"theme":"dark"}`), 0o600))
	a = newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, Provision(a, ""))
	assert.Equal(t, map[string]any{"theme": "dark", "hasCompletedOnboarding": true, "resumeReturnDismissed": true},
		readJSON(t, filepath.Join(config, ".config.json")))
	assert.NoFileExists(t, filepath.Join(config, ".claude.json"))
}

// TestProvisionOptOut: provision: false leaves the config dir untouched.
func TestProvisionOptOut(t *testing.T) {
	off := false
	for _, adapter := range []string{AdapterClaudeCode, AdapterGemini} {
		t.Run(adapter, func(t *testing.T) {
			home := t.TempDir()
			a := newTestAdapter(t, adapter, schema.Harness{Env: map[string]string{"HOME": home}, Provision: &off})
			require.NoError(t, Provision(a, home))
			entries, err := os.ReadDir(home)
			require.NoError(t, err)
			assert.Empty(t, entries)
		})
	}
}
