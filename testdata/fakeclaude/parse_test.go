package main

import (
	"strings"
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

func TestEditor(t *testing.T) {
	long := strings.Repeat("y", pasteHeuristic+1)
	tests := []struct {
		name    string
		reads   []string
		submits []string
		buf     string
	}{
		{name: "typed_then_enter_in_one_read", reads: []string{"fix it\r"}, submits: []string{"fix it"}},
		{name: "short_burst_with_enter_submits", reads: []string{strings.Repeat("x", pasteHeuristic) + "\r"}, submits: []string{strings.Repeat("x", pasteHeuristic)}},
		{name: "long_burst_enter_is_newline", reads: []string{long + "\r"}, buf: long + "\n"},
		{name: "long_burst_then_separate_enter", reads: []string{long + "\r", "\r"}, submits: []string{long + "\n"}},
		{name: "lf_inserts_newline", reads: []string{"a\nb\r"}, submits: []string{"a\nb"}},
		{
			name:    "bracketed_paste_then_enter_is_one_turn",
			reads:   []string{"\x1b[200~line one\nline two\r\nline three\x1b[201~", "\r"},
			submits: []string{"line one\nline two\nline three"},
		},
		{
			name:    "bracketed_paste_and_enter_in_one_read",
			reads:   []string{"\x1b[200~" + long + "\n" + long + "\x1b[201~\r"},
			submits: []string{long + "\n" + long},
		},
		{
			name:    "bracketed_paste_turns_tabs_into_four_spaces",
			reads:   []string{"\x1b[200~tab\there\t\t2  \n漢字\x1b[201~", "\r"},
			submits: []string{"tab    here        2  \n漢字"},
		},
		{
			name:    "paste_markers_split_across_reads",
			reads:   []string{"\x1b[20", "0~a\rb\x1b[2", "01~", "\r"},
			submits: []string{"a\nb"},
		},
		{
			name:    "escape_inside_paste_kept",
			reads:   []string{"\x1b[200~a\x1b[201", "x\x1b[201~\r"},
			submits: []string{"a\x1b[201x"},
		},
		{name: "arrow_keys_dropped", reads: []string{"a\x1b[Ab\x1bOC\r"}, submits: []string{"ab"}},
		{name: "backspace_removes_a_rune", reads: []string{"héé\x7f\x7f!\r"}, submits: []string{"h!"}},
		{name: "ctrl_c_clears", reads: []string{"draft\x03next"}, buf: "next"},
		{name: "blank_enter_submits_empty", reads: []string{"\r"}, submits: []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e editor
			var submits []string
			for _, r := range tt.reads {
				for _, ev := range e.feed([]byte(r)) {
					if ev.kind == eventSubmit {
						submits = append(submits, ev.text)
					}
				}
			}
			assert.Equal(t, tt.submits, submits)
			assert.Equal(t, tt.buf, string(e.buf))
		})
	}
}

func TestEditorEvents(t *testing.T) {
	var e editor
	assert.Equal(t, []event{{kind: eventEdit}}, e.feed([]byte("ab")))
	assert.Equal(t, []event{{kind: eventInterrupt}}, e.feed([]byte{0x03}))
	assert.Equal(t, []event{{kind: eventSubmit, text: "x"}}, e.feed([]byte("x\r")))
	assert.Empty(t, e.feed([]byte("\x1b[")), "an incomplete sequence waits for the next read")
	assert.Equal(t, []event{{kind: eventEdit}}, e.feed([]byte("Bz")))
	assert.Equal(t, "z", string(e.buf))
}
