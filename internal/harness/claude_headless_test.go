package harness

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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
		{"other_json", `{"type":"system","session_id":"a"}` + "\n", ""},
		{"torn", result[:40], ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, h.HeadlessSessionID([]byte(tc.output)))
		})
	}
}
