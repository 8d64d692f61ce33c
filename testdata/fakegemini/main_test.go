package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseArgs follows the real CLI's yargs grammar: --flag=value keeps a
// value that starts with "-", --resume takes no flag as its value, and a
// positional is a (headless) query.
func TestParseArgs(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want invocation
	}{
		{"fresh_interactive", []string{"--session-id", "x", "--prompt-interactive=-x first --resume"},
			invocation{sessionID: "x", interactive: "-x first --resume"}},
		{"resume_with_value", []string{"--resume", "x", "-i", "hi"}, invocation{resume: true, resumeValue: "x", interactive: "hi"}},
		{"resume_before_a_flag_means_latest", []string{"--resume", "--skip-trust"}, invocation{resume: true, skipTrust: true}},
		{"resume_latest", []string{"-r", "latest"}, invocation{resume: true}},
		{"headless_json", []string{"-p", "hi", "-o", "json"}, invocation{prompt: "hi", hasPrompt: true, json: true}},
		{"query", []string{"--yolo", "do", "it"}, invocation{query: []string{"do", "it"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseArgs(tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := parseArgs([]string{"--session-id"})
	assert.Error(t, err)
}
