package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testID = "7f3c1e52-9d4b-4c1a-8e2f-0123456789ab"

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want invocation
	}{
		{name: "empty"},
		{
			name: "fresh_with_prompt_after_double_dash",
			args: []string{"--session-id", testID, "--verbose", "--", "-x --resume"},
			want: invocation{sessionID: testID, hasSessionID: true, prompt: "-x --resume", hasPrompt: true},
		},
		{
			name: "resume_with_value",
			args: []string{"--resume", testID, "--", "hi"},
			want: invocation{resume: true, resumeValue: testID, prompt: "hi", hasPrompt: true},
		},
		{
			name: "resume_followed_by_flag_takes_no_value",
			args: []string{"--resume", "--verbose"},
			want: invocation{resume: true},
		},
		{
			name: "resume_followed_by_double_dash_takes_no_value",
			args: []string{"-r", "--", "hello"},
			want: invocation{resume: true, prompt: "hello", hasPrompt: true},
		},
		{
			name: "resume_equals_form",
			args: []string{"--resume=" + testID},
			want: invocation{resume: true, resumeValue: testID},
		},
		{
			name: "session_id_equals_form",
			args: []string{"--session-id=" + testID, "hi"},
			want: invocation{sessionID: testID, hasSessionID: true, prompt: "hi", hasPrompt: true},
		},
		{
			name: "required_value_may_look_like_a_flag",
			args: []string{"--session-id", "--verbose"},
			want: invocation{sessionID: "--verbose", hasSessionID: true},
		},
		{
			name: "value_options_do_not_eat_the_prompt",
			args: []string{"--settings", "s.json", "--model", "opus", "-n", "acme", "the prompt"},
			want: invocation{prompt: "the prompt", hasPrompt: true, settings: "s.json"},
		},
		{
			name: "variadic_option_eats_until_a_flag",
			args: []string{"--add-dir", "a", "b", "--fork-session", "-c", "x"},
			want: invocation{fork: true, cont: true, prompt: "x", hasPrompt: true},
		},
		{
			name: "variadic_option_stops_at_double_dash",
			args: []string{"--allowed-tools", "Bash", "Edit", "--", "prompt"},
			want: invocation{prompt: "prompt", hasPrompt: true},
		},
		{
			name: "unknown_flags_tolerated_without_value",
			args: []string{"--dangerously-skip-permissions", "--no-such-flag", "prompt"},
			want: invocation{prompt: "prompt", hasPrompt: true},
		},
		{
			name: "optional_debug_takes_a_value",
			args: []string{"-d", "api,hooks", "prompt"},
			want: invocation{prompt: "prompt", hasPrompt: true},
		},
		{
			name: "first_positional_is_the_prompt",
			args: []string{"-p", "a", "b", "c"},
			want: invocation{print: true, prompt: "a", hasPrompt: true},
		},
		{
			name: "empty_prompt_after_double_dash",
			args: []string{"--", ""},
			want: invocation{prompt: "", hasPrompt: true},
		},
		{
			name: "help_and_version",
			args: []string{"-h", "--version"},
			want: invocation{help: true, version: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseArgs(tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseArgsMissingValue(t *testing.T) {
	for _, args := range [][]string{{"--session-id"}, {"--model"}, {"--add-dir"}} {
		_, err := parseArgs(args)
		assert.EqualError(t, err, "error: option '"+args[0]+"' argument missing")
	}
}
