package journal

import (
	"strings"
	"unicode/utf8"
)

// StripControls returns s without invalid UTF-8 and without every control
// rune (C0, DEL, C1: U+0000–U+001F, U+007F–U+009F) that keep does not
// allow. It is the one sanitizer of outside text loopd passes on: the
// webhook's prompt text (internal/webhook) and a dead pane's last lines
// (internal/tmux.Tail). With ESC gone no escape sequence can act on the
// terminal that shows the result.
func StripControls(s string, keep func(rune) bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		drop := (r == utf8.RuneError && size == 1) ||
			((r < 0x20 || (r >= 0x7f && r <= 0x9f)) && !keep(r))
		if !drop {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
