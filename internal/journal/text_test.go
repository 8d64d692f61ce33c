package journal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestIsControl(t *testing.T) {
	for _, r := range []rune{0, '\t', '\n', '\r', 0x1b, 0x1f, 0x7f, 0x80, 0x9b, 0x9f} {
		assert.True(t, IsControl(r), "%U", r)
	}
	for _, r := range []rune{' ', '~', 0xa0, 'é', 0x200b, 0xfeff} {
		assert.False(t, IsControl(r), "%U", r)
	}
}

func TestStripControls(t *testing.T) {
	in := "a\tb\r\nc\x1b[31md\x7fe\u009bf\xffg"
	assert.Equal(t, "a\tb\nc[31mdefg", StripControls(in, NewlineOrTab))
	assert.Equal(t, "abc[31mdefg", StripControls(in, func(rune) bool { return false }))
}

func TestClip(t *testing.T) {
	const n = 300
	long := strings.Repeat("é", n)          // two bytes each
	for _, limit := range []int{n, n + 1} { // on a rune start, inside a rune
		got := Clip(long, limit)
		assert.True(t, strings.HasSuffix(got, "…"))
		assert.LessOrEqual(t, len(got), limit+len("…"))
		assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(got, "…")), "cut on a rune boundary")
		assert.Equal(t, n, len(strings.TrimSuffix(got, "…")), "as many whole runes as fit")
	}
	assert.Equal(t, "short", Clip("short", n))
	assert.Equal(t, "short", Clip("short", len("short")), "a value of n bytes is whole")
}

// Quote escapes every control character, DEL and C1 included (U+009B is a
// terminal's CSI), so no logfmt value get or events prints reaches the
// terminal as one.
func TestQuoteEscapesEveryControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       "plain",
		"a b":         `"a b"`,
		"esc\x1b[2J":  `"esc\x1b[2J"`,
		"del\x7f":     `"del\x7f"`,
		"csi\u009b2J": `"csi\u009b2J"`,
		"":            `""`,
	} {
		assert.Equal(t, want, Quote(in), "%q", in)
	}
}
