package journal

import (
	"strings"
	"unicode/utf8"
)

// IsControl reports whether r is a control character: C0, DEL or C1
// (U+0000–U+001F, U+007F–U+009F). It is the one rule of what a control
// is in outside text: StripControls removes them, and the standing
// instructions refuse them (schema).
func IsControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f)
}

// NewlineOrTab reports whether r is '\n' or '\t', the controls that text
// of several lines keeps: a keep for StripControls (a prompt's text, a
// pane's last lines), and what the standing instructions may hold.
func NewlineOrTab(r rune) bool {
	return r == '\n' || r == '\t'
}

// StripControls returns s without invalid UTF-8 and without every control
// rune (IsControl) that keep does not allow. It is the one sanitizer of
// outside text loopd passes on: the webhook's prompt text
// (internal/webhook) and a dead pane's last lines (internal/tmux.Tail). With ESC gone no escape sequence can act on the
// terminal that shows the result.
func StripControls(s string, keep func(rune) bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		drop := (r == utf8.RuneError && size == 1) ||
			(IsControl(r) && !keep(r))
		if !drop {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Clip returns s cut to at most n bytes on a rune boundary, with "…"
// marking the cut (so at most n+3 bytes in all), or s itself when it has
// no more than n bytes. It is how loopd cuts an untrusted value it shows:
// a journal attribute on the status page, a rejected report's values.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
