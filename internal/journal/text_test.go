package journal

import (
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
