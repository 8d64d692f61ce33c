package faketerm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEditor(t *testing.T) {
	long := strings.Repeat("y", PasteHeuristic+1)
	tests := []struct {
		name    string
		reads   []string
		submits []string
		buf     string
	}{
		{name: "typed_then_enter_in_one_read", reads: []string{"fix it\r"}, submits: []string{"fix it"}},
		{name: "short_burst_with_enter_submits", reads: []string{strings.Repeat("x", PasteHeuristic) + "\r"}, submits: []string{strings.Repeat("x", PasteHeuristic)}},
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
			var e Editor
			var submits []string
			for _, r := range tt.reads {
				for _, ev := range e.Feed([]byte(r)) {
					if ev.Kind == Submit {
						submits = append(submits, ev.Text)
					}
				}
			}
			assert.Equal(t, tt.submits, submits)
			assert.Equal(t, tt.buf, string(e.Buf))
		})
	}
}

func TestEditorEvents(t *testing.T) {
	var e Editor
	assert.Equal(t, []Event{{Kind: Edit}}, e.Feed([]byte("ab")))
	assert.Equal(t, []Event{{Kind: Interrupt}}, e.Feed([]byte{0x03}))
	assert.Equal(t, []Event{{Kind: Submit, Text: "x"}}, e.Feed([]byte("x\r")))
	assert.Empty(t, e.Feed([]byte("\x1b[")), "an incomplete sequence waits for the next read")
	assert.Equal(t, []Event{{Kind: Edit}}, e.Feed([]byte("Bz")))
	assert.Equal(t, "z", string(e.Buf))
}
