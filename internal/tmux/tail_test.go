package tmux

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTailOf(t *testing.T) {
	long := strings.Repeat("é", 10) // 20 bytes
	for _, tc := range []struct {
		name     string
		text     string
		lines    int
		maxBytes int
		want     string
	}{
		{name: "blank_screen", text: "\n\n   \n", lines: 3, maxBytes: 100, want: ""},
		{name: "trailing_blank_rows_dropped", text: "a\nb  \n\n\n", lines: 3, maxBytes: 100, want: "a\nb"},
		{name: "last_lines_kept", text: "1\n2\n3\n4\n5\n", lines: 2, maxBytes: 100, want: "4\n5"},
		{name: "blank_lines_dropped", text: "x\n\n\n   \ny\n\n\nPane is dead (status 1)\n", lines: 2, maxBytes: 100, want: "y\nPane is dead (status 1)"},
		{name: "controls_and_escapes_stripped", text: "ok\x1b[31mred\x07\r\n\x9bbad\xff\n", lines: 3, maxBytes: 100, want: "ok[31mred\nbad"},
		{name: "bytes_cut_on_a_line_start", text: "first line\nsecond\nthird\n", lines: 3, maxBytes: 12, want: "second\nthird"},
		{name: "bytes_cut_in_a_line_drops_its_part", text: "first line\nsecond\nthird\n", lines: 3, maxBytes: 14, want: "second\nthird"},
		{name: "bytes_cut_in_a_long_line_keeps_whole_runes", text: long, lines: 3, maxBytes: 7, want: "ééé"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tailOf(tc.text, tc.lines, tc.maxBytes)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), tc.maxBytes)
		})
	}
}

// TestLastWords: a dead pane's last words are its process's last line,
// never tmux's own "Pane is dead" line, which names the death's time.
func TestLastWords(t *testing.T) {
	for _, tc := range []struct{ tail, want string }{
		{"fakeclaude: simulated crash after 2s\nPane is dead (status 1, Thu Jan  1 12:00:00 2026)", "fakeclaude: simulated crash after 2s"},
		{"a\n  b  \n\nPane is dead (signal 9, Thu Jan  1 12:00:00 2026)\n", "b"},
		{"Pane is dead (status 1, Thu Jan  1 12:00:00 2026)", ""},
		{"", ""},
	} {
		if got := LastWords(tc.tail); got != tc.want {
			t.Errorf("LastWords(%q) = %q, want %q", tc.tail, got, tc.want)
		}
	}
}
