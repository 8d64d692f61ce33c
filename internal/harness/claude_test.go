package harness

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

const testID = "7f3c1e52-9d4b-4c1a-8e2f-0123456789ab"

func TestClaudeArgv(t *testing.T) {
	tests := []struct {
		name       string
		extra      []string
		prompt     string
		wantFresh  []string
		wantResume []string
	}{
		{
			name:       "prompt_after_double_dash",
			prompt:     "fix issue 42",
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "fix issue 42"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "fix issue 42"},
		},
		{
			name:       "extra_args_before_prompt",
			extra:      []string{"--verbose", "--settings", "s.json"},
			prompt:     "hi there",
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--verbose", "--settings", "s.json", "--", "hi there"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--verbose", "--settings", "s.json", "--", "hi there"},
		},
		{
			name:       "prompt_starting_with_dash",
			prompt:     "--resume --session-id -p",
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "--resume --session-id -p"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "--resume --session-id -p"},
		},
		{
			name:       "slash_command_prompt_stays_one_element",
			prompt:     "/exit",
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "/exit"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "/exit"},
		},
		{
			name:       "multiline_prompt",
			prompt:     "line one\nline two;",
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "line one\nline two;"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--", "line one\nline two;"},
		},
		{
			name:       "empty_prompt_omits_double_dash",
			extra:      []string{"--verbose"},
			wantFresh:  []string{"claude", "--session-id", testID, "--setting-sources", "user", "--strict-mcp-config", "--verbose"},
			wantResume: []string{"claude", "--resume", testID, "--setting-sources", "user", "--strict-mcp-config", "--verbose"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{ExtraArgs: tt.extra})
			assert.True(t, a.SupportsResume())
			assert.Equal(t, tt.wantFresh, a.FreshArgv(testID, tt.prompt))
			assert.Equal(t, tt.wantResume, a.ResumeArgv(testID, tt.prompt))
			// Trusted, the workdir's own settings are Claude Code's default.
			trusted := WithProjectSettings(a, true)
			assert.Equal(t, slices.DeleteFunc(slices.Clone(tt.wantFresh), isOwnSettings), trusted.FreshArgv(testID, tt.prompt))
			assert.Equal(t, slices.DeleteFunc(slices.Clone(tt.wantResume), isOwnSettings), trusted.ResumeArgv(testID, tt.prompt))
			assert.Equal(t, tt.wantFresh, WithProjectSettings(trusted, false).FreshArgv(testID, tt.prompt))
		})
	}
}

// isOwnSettings reports whether arg is one of claudeOwnSettings.
func isOwnSettings(arg string) bool { return slices.Contains(claudeOwnSettings, arg) }

func TestClaudeArgvNeverBothFlags(t *testing.T) {
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{ExtraArgs: []string{"--verbose"}})
	fresh, resume := a.FreshArgv(testID, "x"), a.ResumeArgv(testID, "x")
	assert.NotContains(t, fresh, "--resume")
	assert.NotContains(t, resume, "--session-id")
	// Repeated calls must not share a backing array.
	fresh[1] = "changed"
	assert.Equal(t, "--session-id", a.FreshArgv(testID, "x")[1])
}

func TestClaudeValidSessionID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{name: "lowercase_uuid", id: testID, want: true},
		{name: "nil_uuid", id: "00000000-0000-0000-0000-000000000000"},
		{name: "max_uuid", id: "ffffffff-ffff-ffff-ffff-ffffffffffff"},
		{name: "ncs_variant", id: "11111111-2222-3333-4444-555555555555"},
		{name: "version_0", id: "7f3c1e52-9d4b-0c1a-8e2f-0123456789ab"},
		{name: "version_7", id: "019a3c1e-9d4b-7c1a-8e2f-0123456789ab", want: true},
		{name: "uppercase_uuid", id: strings.ToUpper(testID)},
		{name: "mixed_case_uuid", id: "7F3c1e52-9d4b-4c1a-8e2f-0123456789ab"},
		{name: "no_dashes", id: strings.ReplaceAll(testID, "-", "")},
		{name: "urn_form", id: "urn:uuid:" + testID},
		{name: "braces", id: "{" + testID + "}"},
		{name: "not_a_uuid", id: "not-a-uuid"},
		{name: "flag_shaped", id: "--verbose"},
		{name: "empty", id: ""},
		{name: "trailing_space", id: testID + " "},
		{name: "path_traversal", id: "../" + testID},
		{name: "too_short", id: testID[:35]},
	}
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, a.ValidSessionID(tt.id))
		})
	}
}

func TestClaudeEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{name: "none", want: map[string]string{"DISABLE_AUTOUPDATER": "1"}},
		{name: "kept", env: map[string]string{"CLAUDE_CONFIG_DIR": "/c"}, want: map[string]string{"CLAUDE_CONFIG_DIR": "/c", "DISABLE_AUTOUPDATER": "1"}},
		{name: "autoupdater_set_by_config", env: map[string]string{"DISABLE_AUTOUPDATER": "0"}, want: map[string]string{"DISABLE_AUTOUPDATER": "0"}},
		{name: "claudecode_dropped", env: map[string]string{"CLAUDECODE": "1"}, want: map[string]string{"DISABLE_AUTOUPDATER": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: tt.env}).Env())
		})
	}
}

// Of loopd's own environment, the harness gets only what it passes: its
// passEnv and CLAUDE_CONFIG_DIR, never a denied name; the tmux server gives
// it the base variables.
func TestClaudeEnvPassesOnlyNamedVariables(t *testing.T) {
	t.Setenv("CLAUDE_CONFIG_DIR", "/daemon/claude")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
	t.Setenv("OTHER_TOKEN", "x")
	t.Setenv("GITHUB_TOKEN", "ghp_x")
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{PassEnv: []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN"}})
	assert.Equal(t, map[string]string{"CLAUDE_CONFIG_DIR": "/daemon/claude", "ANTHROPIC_API_KEY": "sk-ant", "DISABLE_AUTOUPDATER": "1"}, a.Env())
	configured := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": "/conf"}})
	assert.Equal(t, map[string]string{"CLAUDE_CONFIG_DIR": "/conf", "DISABLE_AUTOUPDATER": "1"}, configured.Env(), "the harness env wins")
}

func TestProjectDirName(t *testing.T) {
	rep := strings.Repeat
	tests := []struct {
		name string
		cwd  string
		want string
	}{
		{name: "slashes", cwd: "/srv/agents/ws", want: "-srv-agents-ws"},
		{name: "punctuation", cwd: "/home/a_b/c.d e/x-y", want: "-home-a-b-c-d-e-x-y"},
		{name: "non_ascii_one_unit_each", cwd: "/ünï", want: "--n-"},
		{name: "astral_two_units", cwd: "/a🙂b", want: "-a--b"},
		{name: "collision_a", cwd: "/w/a-b/c", want: "-w-a-b-c"},
		{name: "collision_b", cwd: "/w/a/b-c", want: "-w-a-b-c"},
		{name: "exactly_200_kept", cwd: "/" + rep("x", 199), want: "-" + rep("x", 199)},
		// Names measured from Claude Code 2.1.197 (claude -p in these dirs).
		{
			name: "measured_197",
			cwd:  "/tmp/lp/" + rep("a", 60) + "/" + rep("b", 60) + "/" + rep("c", 60) + "/dd_ü.x",
			want: "-tmp-lp-" + rep("a", 60) + "-" + rep("b", 60) + "-" + rep("c", 60) + "-dd---x",
		},
		{
			name: "measured_211_hashed",
			cwd:  "/tmp/lp/" + rep("Z", 100) + "/🙂" + rep("y", 100),
			want: "-tmp-lp-" + rep("Z", 100) + "---" + rep("y", 89) + "-korhzk",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, projectDirName(tt.cwd))
		})
	}
	t.Run("201_gets_hash_suffix", func(t *testing.T) {
		got := projectDirName("/" + rep("x", 200))
		assert.Len(t, got, 207)
		assert.Equal(t, "-"+rep("x", 199)+"-", got[:201])
	})
}

// writeTranscript writes lines into the transcript file of id for dir under
// config and returns its path.
func writeTranscript(t *testing.T, config, dir, id string, lines ...string) string {
	t.Helper()
	path := filepath.Join(config, "projects", projectDirName(dir), id+".jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
	return path
}

func TestClaudeTranscript(t *testing.T) {
	const (
		user      = `{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u1","timestamp":"2026-01-01T00:00:00.000Z"}` + "\n"
		assistant = `{"type":"assistant","message":{"role":"assistant","content":[]},"timestamp":"2026-01-01T00:00:01.000Z"}`
		mode      = `{"type":"mode","mode":"normal","sessionId":"x"}` + "\n"
	)
	long := `{"type":"attachment","text":"` + strings.Repeat("z", 200_000) + `"}` + "\n"
	tests := []struct {
		name       string
		lines      []string
		wantExists bool
	}{
		{name: "user_line", lines: []string{mode, user}, wantExists: true},
		{name: "assistant_line_without_newline", lines: []string{long, assistant}, wantExists: true},
		{name: "empty_file"},
		{name: "only_mode_lines", lines: []string{mode, mode}},
		{name: "not_json", lines: []string{"hello\n", "{\n"}},
		{name: "user_without_timestamp", lines: []string{`{"type":"user","message":{"role":"user","content":"hi"}}` + "\n"}},
		{name: "timestamp_not_a_string", lines: []string{`{"type":"user","timestamp":12}` + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config, work := t.TempDir(), t.TempDir()
			dir, err := filepath.EvalSymlinks(work)
			require.NoError(t, err)
			path := writeTranscript(t, config, dir, testID, tt.lines...)
			a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})

			got, err := a.Transcript(work, testID)
			require.NoError(t, err)
			var mtime time.Time
			if info, err := os.Stat(path); err == nil {
				mtime = info.ModTime()
			}
			assert.Equal(t, Transcript{Known: true, Exists: tt.wantExists, Size: int64(len(strings.Join(tt.lines, ""))), Path: path, ModTime: mtime}, got)
		})
	}
}

func TestClaudeTranscriptLocation(t *testing.T) {
	line := `{"type":"user","timestamp":"2026-01-01T00:00:00Z"}` + "\n"

	t.Run("missing_file", func(t *testing.T) {
		config, work := t.TempDir(), t.TempDir()
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
		got, err := a.Transcript(work, testID)
		require.NoError(t, err)
		assert.True(t, got.Known)
		assert.False(t, got.Exists)
		assert.Zero(t, got.Size)
		assert.Equal(t, config, strings.Split(got.Path, "/projects/")[0])
	})
	t.Run("symlinked_cwd_uses_physical_dir", func(t *testing.T) {
		config, real, links := t.TempDir(), t.TempDir(), t.TempDir()
		link := filepath.Join(links, "ws")
		require.NoError(t, os.Symlink(real, link))
		physical, err := filepath.EvalSymlinks(real)
		require.NoError(t, err)
		path := writeTranscript(t, config, physical, testID, line)
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})

		got, err := a.Transcript(link, testID)
		require.NoError(t, err)
		assert.True(t, got.Exists)
		assert.Equal(t, path, got.Path)
	})
	t.Run("other_cwd_does_not_see_it", func(t *testing.T) {
		config, work, other := t.TempDir(), t.TempDir(), t.TempDir()
		dir, err := filepath.EvalSymlinks(work)
		require.NoError(t, err)
		writeTranscript(t, config, dir, testID, line)
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})

		got, err := a.Transcript(other, testID)
		require.NoError(t, err)
		assert.False(t, got.Exists)
	})
	t.Run("home_from_harness_env", func(t *testing.T) {
		home, work := t.TempDir(), t.TempDir()
		dir, err := filepath.EvalSymlinks(work)
		require.NoError(t, err)
		path := writeTranscript(t, filepath.Join(home, ".claude"), dir, testID, line)
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"HOME": home, "CLAUDE_CONFIG_DIR": ""}})

		got, err := a.Transcript(work, testID)
		require.NoError(t, err)
		assert.True(t, got.Exists)
		assert.Equal(t, path, got.Path)
	})
	t.Run("config_dir_from_loopd_env", func(t *testing.T) {
		config, work := t.TempDir(), t.TempDir()
		t.Setenv("CLAUDE_CONFIG_DIR", config)
		dir, err := filepath.EvalSymlinks(work)
		require.NoError(t, err)
		path := writeTranscript(t, config, dir, testID, line)

		got, err := newTestAdapter(t, AdapterClaudeCode, schema.Harness{}).Transcript(work, testID)
		require.NoError(t, err)
		assert.True(t, got.Exists)
		assert.Equal(t, path, got.Path)
	})
	t.Run("relative_config_dir_against_cwd", func(t *testing.T) {
		work := t.TempDir()
		dir, err := filepath.EvalSymlinks(work)
		require.NoError(t, err)
		path := writeTranscript(t, filepath.Join(dir, ".cfg"), dir, testID, line)
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": ".cfg"}})

		got, err := a.Transcript(work, testID)
		require.NoError(t, err)
		assert.Equal(t, path, got.Path)
	})
	t.Run("missing_cwd", func(t *testing.T) {
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": t.TempDir()}})
		got, err := a.Transcript(filepath.Join(t.TempDir(), "gone"), testID)
		require.NoError(t, err)
		assert.True(t, got.Known)
		assert.False(t, got.Exists)
	})
	t.Run("no_home_no_config_dir", func(t *testing.T) {
		t.Setenv("CLAUDE_CONFIG_DIR", "")
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"HOME": ""}})
		_, err := a.Transcript(t.TempDir(), testID)
		assert.ErrorContains(t, err, "HOME")
	})
	t.Run("invalid_id", func(t *testing.T) {
		a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{Env: map[string]string{"CLAUDE_CONFIG_DIR": t.TempDir()}})
		_, err := a.Transcript(t.TempDir(), "../../etc/passwd")
		assert.ErrorIs(t, err, ErrInvalidSessionID)
	})
}

func TestClaudeScreenCaptured(t *testing.T) {
	reasons := map[string]string{
		"blocked-apikey.txt":           BlockAPIKey,
		"blocked-bypass.txt":           BlockBypassConsent,
		"blocked-picker.txt":           BlockResumePicker,
		"blocked-picker-search.txt":    BlockResumePicker,
		"blocked-trust.txt":            BlockWorkspaceTrust,
		"blocked-mcp-server.txt":       BlockWorkspaceTrust,
		"blocked-permission-bash.txt":  BlockPermission,
		"blocked-permission-write.txt": BlockPermission,
		"draft-typed.txt":              DraftReason,
		"draft-pasted.txt":             DraftReason,
	}
	files, err := filepath.Glob("testdata/claude-2.1.197/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{})
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(strings.TrimSuffix(name, ".txt"), func(t *testing.T) {
			text, err := os.ReadFile(file)
			require.NoError(t, err)
			want := Screen(strings.TrimSuffix(strings.SplitN(name, "-", 2)[0], ".txt"))
			got, reason := a.Screen(string(text))
			assert.Equal(t, want, got)
			assert.Equal(t, reasons[name], reason)
		})
	}
}

func TestClaudeScreen(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata/claude-2.1.197", name))
		require.NoError(t, err)
		return string(b)
	}
	readyText, trustText := read("ready-after-turn.txt"), read("blocked-trust.txt")
	tests := []struct {
		name    string
		pattern string
		text    string
		want    Screen
	}{
		{name: "dialog_text_in_history_is_still_ready", text: strings.Replace(readyText, "Worked for 0s", "Yes, I trust this folder · Accessing workspace:", 1), want: ScreenReady},
		{name: "busy_words_in_history_are_still_ready", text: strings.Replace(readyText, "Worked for 0s", "press esc to interrupt", 1), want: ScreenReady},
		{name: "empty", text: "", want: ScreenBusy},
		{name: "ready_pattern_override_matches", pattern: `Welcome back`, text: read("busy-starting.txt") + "Welcome back!", want: ScreenReady},
		{name: "ready_pattern_override_misses", pattern: `NEVER`, text: readyText, want: ScreenBusy},
		{name: "ready_pattern_override_still_busy", pattern: `Opus`, text: read("busy.txt"), want: ScreenBusy},
		{name: "ready_pattern_override_keeps_dialogs", pattern: `NEVER`, text: trustText, want: ScreenBlocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := newTestAdapter(t, AdapterClaudeCode, schema.Harness{ReadyPattern: tt.pattern}).Screen(tt.text)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestClaudeSessionStartHookSettings(t *testing.T) {
	a := newTestAdapter(t, AdapterClaudeCode, schema.Harness{ExtraArgs: []string{"--verbose"}})
	r, ok := a.(SessionStartReporter)
	require.True(t, ok, "claude-code reports its session id at start")
	hooked := r.WithSessionStartHook(`'/usr/bin/loopd' hook session-start --config '/etc/loopd.yaml'`)

	settings := `{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"'/usr/bin/loopd' hook session-start --config '/etc/loopd.yaml'"}]}]}}`
	own := claudeOwnSettings
	assert.Equal(t, slices.Concat([]string{"claude", "--session-id", testID, "--settings", settings}, own, []string{"--verbose", "--", "p q"}), hooked.FreshArgv(testID, "p q"))
	assert.Equal(t, slices.Concat([]string{"claude", "--resume", testID, "--settings", settings}, own, []string{"--verbose", "--", "p q"}), hooked.ResumeArgv(testID, "p q"))
	assert.Equal(t, slices.Concat([]string{"claude", "--session-id", testID}, own, []string{"--verbose", "--", "p q"}), a.FreshArgv(testID, "p q"), "the original is unchanged")
	// The hook stays when the project settings are trusted, and the copy
	// made from the hooked adapter keeps it.
	assert.Equal(t, []string{"claude", "--session-id", testID, "--settings", settings, "--verbose", "--", "p q"},
		WithProjectSettings(hooked, true).FreshArgv(testID, "p q"))
}
