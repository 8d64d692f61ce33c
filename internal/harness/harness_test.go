package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// newTestAdapter returns the adapter named adapter for cfg, with the
// CLI's usual command when cfg names none.
func newTestAdapter(t *testing.T, adapter string, cfg schema.Harness) Adapter {
	t.Helper()
	if cfg.Command == "" {
		cfg.Command = map[string]string{AdapterClaudeCode: "claude", AdapterCodex: "codex", AdapterGemini: "gemini"}[adapter]
	}
	cfg.Adapter = adapter
	a, err := New(adapter, cfg)
	require.NoError(t, err)
	return a
}

// capturedScreen is what Screen says of a captured screen: its class and
// reason.
type capturedScreen struct {
	screen Screen
	why    string
}

// testCapturedScreens checks a's Screen on every capture in dir (its
// *.txt files) against want, keyed by the file's name without .txt: every
// capture has an expectation and every expectation a capture, and Blocked
// gives a blocked screen's reason, and "" for any other (so not for
// claude-code, whose Blocked also reads a ready screen's login footer).
func testCapturedScreens(t *testing.T, a Adapter, dir string, want map[string]capturedScreen) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	require.NoError(t, err)
	require.Len(t, files, len(want), "one capture per expectation in %s", dir)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		w, ok := want[name]
		require.True(t, ok, "no expectation for %s", name)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		s, why := a.Screen(string(data))
		assert.Equal(t, w.screen, s, name)
		assert.Equal(t, w.why, why, name)
		if s == ScreenBlocked {
			assert.Equal(t, why, a.Blocked(string(data)), name)
		} else {
			assert.Empty(t, a.Blocked(string(data)), name)
		}
	}
}

func TestNew(t *testing.T) {
	wd, err := os.Getwd()
	require.NoError(t, err)
	tests := []struct {
		name        string
		harness     string
		cfg         schema.Harness
		wantErr     error
		wantCommand string
	}{
		{name: "adapter_from_harness_name", harness: "claude-code", cfg: schema.Harness{Command: "claude"}, wantCommand: "claude"},
		{name: "adapter_field_wins", harness: "work", cfg: schema.Harness{Adapter: "cursor", Command: "cursor-agent"}, wantCommand: "cursor-agent"},
		{name: "relative_path_made_absolute", harness: "claude-code", cfg: schema.Harness{Command: "bin/claude"}, wantCommand: filepath.Join(wd, "bin/claude")},
		{name: "dot_path_made_absolute", harness: "claude-code", cfg: schema.Harness{Command: "./claude"}, wantCommand: filepath.Join(wd, "claude")},
		{name: "absolute_path_kept", harness: "claude-code", cfg: schema.Harness{Command: "/opt/x/claude"}, wantCommand: "/opt/x/claude"},
		{name: "adapter_codex", harness: "codex", cfg: schema.Harness{Command: "codex"}, wantCommand: "codex"},
		{name: "unknown_adapter", harness: "aider", cfg: schema.Harness{Command: "aider"}, wantErr: ErrUnknownAdapter},
		{name: "adapter_gemini", harness: "gemini", cfg: schema.Harness{Command: "gemini"}, wantCommand: "gemini"},
		{name: "unknown_adapter_field", harness: "claude-code", cfg: schema.Harness{Adapter: "aider", Command: "aider"}, wantErr: ErrUnknownAdapter},
		{name: "no_command", harness: "claude-code", wantErr: ErrBadConfig},
		{name: "bad_ready_pattern", harness: "claude-code", cfg: schema.Harness{Command: "claude", ReadyPattern: "("}, wantErr: ErrBadConfig},
		{name: "extra_args_resume", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"--verbose", "--resume"}}, wantErr: ErrBadConfig},
		{name: "extra_args_session_id_equals", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"--session-id=x"}}, wantErr: ErrBadConfig},
		{name: "extra_args_print", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"-p"}}, wantErr: ErrBadConfig},
		{name: "extra_args_double_dash", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"--"}}, wantErr: ErrBadConfig},
		{name: "extra_args_setting_sources", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"--setting-sources", "user,project"}}, wantErr: ErrBadConfig},
		{name: "extra_args_setting_sources_equals", harness: "claude-code", cfg: schema.Harness{Command: "claude", ExtraArgs: []string{"--setting-sources=project"}}, wantErr: ErrBadConfig},
		{name: "extra_args_skip_trust", harness: "gemini", cfg: schema.Harness{Command: "gemini", ExtraArgs: []string{"--skip-trust"}}, wantErr: ErrBadConfig},
		{name: "env_sets_gemini_trust", harness: "gemini", cfg: schema.Harness{Command: "gemini", Env: map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true"}}, wantErr: ErrBadConfig},
		{name: "custom_without_fresh_args", harness: "custom", cfg: schema.Harness{Command: "agent"}, wantErr: ErrBadConfig},
		{name: "custom_template_syntax", harness: "custom", cfg: schema.Harness{Command: "agent", FreshArgs: []string{"{{.Prompt"}}, wantErr: ErrBadConfig},
		{name: "custom_template_unknown_field", harness: "custom", cfg: schema.Harness{Command: "agent", FreshArgs: []string{"{{.Title}}"}}, wantErr: ErrBadConfig},
		{name: "custom_resume_template_bad", harness: "custom", cfg: schema.Harness{Command: "agent", FreshArgs: []string{"x"}, ResumeArgs: []string{"{{.Nope}}"}}, wantErr: ErrBadConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(tt.harness, tt.cfg)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "harness "+tt.harness)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.harness, a.Name())
			assert.Equal(t, tt.wantCommand, a.FreshArgv("id", "p")[0])
		})
	}
}

func TestNewCopiesConfig(t *testing.T) {
	cfg := schema.Harness{Command: "claude", ExtraArgs: []string{"--verbose"}, Env: map[string]string{"A": "1"}}
	a, err := New("claude-code", cfg)
	require.NoError(t, err)

	cfg.ExtraArgs[0] = "--changed"
	cfg.Env["A"] = "2"
	a.Env()["A"] = "3"

	assert.Equal(t, []string{"claude", "--session-id", "id", "--setting-sources", "user", "--strict-mcp-config", "--verbose"}, a.FreshArgv("id", ""))
	assert.Equal(t, "1", a.Env()["A"])
}

// notFromNew is an Adapter that New did not make, as a test fake would be.
type notFromNew struct{ Adapter }

func TestLookCommand(t *testing.T) {
	bin := t.TempDir()
	exe := filepath.Join(bin, "agent")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(bin, "notes")
	require.NoError(t, os.WriteFile(plain, []byte("x"), 0o644))

	tests := []struct {
		name    string
		cfg     schema.Harness
		wantErr bool
	}{
		{name: "name_on_harness_path", cfg: schema.Harness{Command: "agent", Env: map[string]string{"PATH": "/nonexistent:" + bin}}},
		{name: "name_missing_from_path", cfg: schema.Harness{Command: "agent", Env: map[string]string{"PATH": "/nonexistent"}}, wantErr: true},
		{name: "name_not_executable", cfg: schema.Harness{Command: "notes", Env: map[string]string{"PATH": bin}}, wantErr: true},
		{name: "empty_path_entry_skipped", cfg: schema.Harness{Command: "agent", Env: map[string]string{"PATH": ""}}, wantErr: true},
		{name: "absolute_executable", cfg: schema.Harness{Command: exe}},
		{name: "absolute_missing", cfg: schema.Harness{Command: filepath.Join(bin, "missing")}, wantErr: true},
		{name: "absolute_not_executable", cfg: schema.Harness{Command: plain}, wantErr: true},
		{name: "directory", cfg: schema.Harness{Command: bin}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New("claude-code", tt.cfg)
			require.NoError(t, err)
			err = LookCommand(a)
			if !tt.wantErr {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, ErrCommandNotFound)
			assert.Contains(t, err.Error(), tt.cfg.Command)
		})
	}

	t.Run("loopd_path_when_harness_sets_none", func(t *testing.T) {
		t.Setenv("PATH", bin)
		a, err := New("custom", schema.Harness{Command: "agent", FreshArgs: []string{"{{.Prompt}}"}})
		require.NoError(t, err)
		assert.NoError(t, LookCommand(a))
	})
	t.Run("adapter_not_from_new_passes", func(t *testing.T) {
		assert.NoError(t, LookCommand(notFromNew{}))
	})
	t.Run("arguments_in_the_command_are_named", func(t *testing.T) {
		for _, command := range []string{exe + " --model opus", "agent --model opus"} {
			a, err := New("claude-code", schema.Harness{Command: command, Env: map[string]string{"PATH": bin}})
			require.NoError(t, err)
			err = LookCommand(a)
			require.ErrorIs(t, err, ErrCommandNotFound)
			assert.Contains(t, err.Error(), "put its arguments in extraArgs", command)
		}
	})
}

// ProcessNames are what tmux shows as the pane's foreground process while
// the CLI runs (measured on tmux 3.3a, docs/design.md).
func TestProcessNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  schema.Harness
		want []string
	}{
		{"claude-code", schema.Harness{Command: "/opt/claude-code/node_modules/.bin/claude"}, []string{"claude"}},
		{"claude-code", schema.Harness{Command: "/opt/claude-code/bin/claude.exe"}, []string{"claude.exe", "claude"}},
		{"claude-code", schema.Harness{Command: "/usr/local/bin/my-claude-wrapper"}, []string{"my-claude-wrapper", "claude"}},
		{"claude-code", schema.Harness{Command: "node-claude", ProcessName: "node"}, []string{"node"}},
		{"cursor", schema.Harness{Command: "cursor-agent"}, []string{"cursor-agent"}},
		{"custom", schema.Harness{Adapter: "custom", Command: "/srv/bin/agent.js", ProcessName: "node", FreshArgs: []string{"{{.Prompt}}"}}, []string{"node"}},
	} {
		ad, err := New(tc.name, tc.cfg)
		require.NoError(t, err)
		assert.Equal(t, tc.want, ad.ProcessNames(), "%s %q", tc.name, tc.cfg.Command)
	}
	_, err := New("custom", schema.Harness{Adapter: "custom", Command: "/srv/bin/a,b", FreshArgs: []string{"x"}})
	assert.ErrorIs(t, err, ErrBadConfig, "a name tmux formats cannot compare needs processName")
	for _, cfg := range []schema.Harness{
		{Command: "/srv/bin/claude-wrapper", ProcessName: "sh"},
		{Command: "/srv/bin/claude-wrapper", ProcessName: "bash"},
		{Adapter: "custom", Command: "/bin/bash", FreshArgs: []string{"-c", "{{.Prompt}}"}},
	} {
		_, err := New("claude-code", cfg)
		assert.ErrorIs(t, err, ErrBadConfig, "a shell cannot stand for the harness: %+v", cfg)
	}
}
