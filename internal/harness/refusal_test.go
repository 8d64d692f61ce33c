package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// TestResumeRefusal: each adapter's table of its CLI's own refusals of a
// resume, the one proof that a conversation is lost (the texts from the
// pinned CLIs' strings and measurements), and what is no refusal: a
// signal's death, another id's refusal, a crash with other last words.
func TestResumeRefusal(t *testing.T) {
	const id = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	const other = "5f0c6f0a-9e0b-4a43-8d6b-2b8c0f1d2e3f"
	for _, tc := range []struct {
		adapter, text string
		status        int
		want          Refusal
	}{
		{AdapterClaudeCode, "No conversation found with session ID: " + id + "\nPane is dead (status 1, Thu Jan  1 12:00:00 2026)", 1, RefusalNotResumable},
		{AdapterClaudeCode, "No conversation found with session ID: " + other, 1, ""},
		{AdapterClaudeCode, "Error: Session " + id + " is currently running as a background agent (bg-1). Use `claude agents` to find and attach to it, " +
			"or add --fork-session to branch off a copy.", 1, RefusalInUse},
		{AdapterClaudeCode, "That session is still running as a background agent. Open `claude agents` to attach to it, or stop it there first to resume here.", -1, RefusalInUse},
		{AdapterClaudeCode, "fakeclaude: simulated crash after 2s", 1, ""},
		{AdapterClaudeCode, "", -1, ""},
		{AdapterCodex, "ERROR: No saved session found with ID " + id + ". Run `codex resume` without an ID to choose from existing sessions.", 1, RefusalNotResumable},
		{AdapterCodex, "Error: thread/resume: thread/resume failed: no rollout found for thread id " + id + " (code -32600)", 1, RefusalNotResumable},
		{AdapterCodex, "Cannot change this thread's model provider from `openai` to `loc` on resume", 1, RefusalNotResumable},
		{AdapterCodex, "Reconnecting... waiting for network", -1, ""},
		{AdapterGemini, "Error resuming session: No previous sessions found for this project.", 42, RefusalNotResumable},
		{AdapterGemini, "No previous sessions found for this project.", -1, RefusalNotResumable},
		{AdapterGemini, `Error resuming session: Invalid session identifier "` + id + `".`, 42, RefusalNotResumable},
		{AdapterGemini, "", 42, RefusalNotResumable},
		{AdapterGemini, "Please set an Auth method in your ~/.gemini/settings.json", 41, ""},
	} {
		ad, err := New(tc.adapter, schema.Harness{Command: tc.adapter})
		require.NoError(t, err)
		assert.Equal(t, tc.want, ResumeRefusal(ad, tc.text, tc.status, id), "%s %q status %d", tc.adapter, tc.text, tc.status)
	}
	custom, err := New(AdapterCustom, schema.Harness{Command: "agent", FreshArgs: []string{"{{.Prompt}}"}})
	require.NoError(t, err)
	assert.Empty(t, ResumeRefusal(custom, "No conversation found with session ID: "+id, 1, id), "a custom harness says nothing loopd knows")
}
