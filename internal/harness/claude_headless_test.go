package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

func TestClaudeHeadlessArgv(t *testing.T) {
	const id = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	ad, err := New("claude-code", schema.Harness{Command: "claude", ExtraArgs: []string{"--model", "opus"}})
	if err != nil {
		t.Fatal(err)
	}
	// The hook of the TUI's spawns is not a headless turn's.
	h := ad.(SessionStartReporter).WithSessionStartHook("loopd hook session-start").(Headless)
	big := strings.Repeat("x", schema.DefaultMaxBootPrompt+1)
	for _, tc := range []struct {
		name, prompt string
		resume       bool
		argv         []string
		stdin        []byte
	}{
		{"fresh", "-hi", false, []string{"claude", "-p", "--session-id", id, "--setting-sources", "user", "--strict-mcp-config", "--model", "opus", "--output-format", "json", "--", "-hi"}, nil},
		{"resume", "next", true, []string{"claude", "-p", "--resume", id, "--setting-sources", "user", "--strict-mcp-config", "--model", "opus", "--output-format", "json", "--", "next"}, nil},
		{"large_prompt_on_stdin", big, true, []string{"claude", "-p", "--resume", id, "--setting-sources", "user", "--strict-mcp-config", "--model", "opus", "--output-format", "json"}, []byte(big)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, stdin := h.HeadlessArgv(id, tc.prompt, tc.resume)
			assert.Equal(t, tc.argv, argv)
			assert.Equal(t, tc.stdin, stdin)
			// Trusted, the workdir's own settings are -p's default.
			argv, _ = WithProjectSettings(h.(Adapter), true).(Headless).HeadlessArgv(id, tc.prompt, tc.resume)
			assert.Equal(t, slices.DeleteFunc(slices.Clone(tc.argv), isOwnSettings), argv)
		})
	}
}

func TestClaudeHeadlessSessionID(t *testing.T) {
	ad, err := New("claude-code", schema.Harness{Command: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	h := ad.(Headless)
	// The result object measured on 2.1.197, offline.
	result := `{"type":"result","subtype":"success","is_error":true,"duration_ms":12,"num_turns":1,` +
		`"result":"Not logged in · Please run /login","session_id":"5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f","total_cost_usd":0}`
	for _, tc := range []struct{ name, output, want string }{
		{"result", result + "\n", "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f"},
		{"after_stderr_lines", "warning: something\n" + result + "\n", "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f"},
		{"no_result", "No conversation found with session ID: x\n", ""},
		// A run cut short (its timeout) has no result: the newest line of
		// its partial output that names a conversation says which.
		{"partial_output", `{"type":"system","subtype":"init","session_id":"1a1a1a1a-9e0b-4a43-8d6b-2b8c0f1d2e3f"}` + "\n" +
			`{"type":"assistant","session_id":"2b2b2b2b-9e0b-4a43-8d6b-2b8c0f1d2e3f"}` + "\n" + `{"type":"assistant","message":`,
			"2b2b2b2b-9e0b-4a43-8d6b-2b8c0f1d2e3f"},
		{"json_naming_none", `{"type":"system","subtype":"init"}` + "\n", ""},
		{"torn", result[:40], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, h.HeadlessSessionID([]byte(tc.output)))
		})
	}
}

// TestClaudeTurnConversation: a headless turn whose output names no id is
// found by its boot line, in the newest transcript of the cwd written
// since the run started that holds it (issue 21, case 4: a CLI that writes
// a resumed turn under a new id, stopped at its timeout).
func TestClaudeTurnConversation(t *testing.T) {
	config, cwd := t.TempDir(), t.TempDir()
	ad, err := New("claude-code", schema.Harness{Command: "claude", Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, err)
	tf := ad.(TurnFinder)
	boot := desired.BootFrame("b-42")
	write := func(id, text string, at time.Time) {
		tr, err := ad.Transcript(cwd, id)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(tr.Path), 0o700))
		line := fmt.Sprintf(`{"type":"user","sessionId":%q,"message":{"role":"user","content":%q}}`+"\n", id, text)
		require.NoError(t, os.WriteFile(tr.Path, []byte(line), 0o600))
		require.NoError(t, os.Chtimes(tr.Path, at, at))
	}
	start := time.Now().Add(-time.Minute)
	resumed, moved, other := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f", "1a1a1a1a-9e0b-4a43-8d6b-2b8c0f1d2e3f"
	write(resumed, "an older turn", start.Add(-time.Hour))
	write(other, "another run's turn "+desired.BootLine("b-41"), start.Add(time.Second))
	got, err := tf.TurnConversation(cwd, start, boot)
	require.NoError(t, err)
	assert.Empty(t, got, "no transcript holds the boot line")

	write(moved, "the event\n\n"+desired.BootLine("b-42"), start.Add(2*time.Second))
	got, err = tf.TurnConversation(cwd, start, boot)
	require.NoError(t, err)
	assert.Equal(t, moved, got)

	write(resumed, "the event\n\n"+desired.BootLine("b-42"), start.Add(-time.Hour))
	got, err = tf.TurnConversation(cwd, start, boot)
	require.NoError(t, err)
	assert.Equal(t, moved, got, "a transcript not written since the run started is not its")
}
