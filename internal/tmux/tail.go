package tmux

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/internal/journal"
)

// The bounds of Tail: what a dead pane's last words may cost one journal
// row.
const (
	// TailLines is how many of the last lines of a pane Tail keeps.
	TailLines = 20
	// TailBytes is the most Tail returns, in bytes.
	TailBytes = 2 << 10
)

// Tail returns the last lines target's pane shows: its screen as
// capture-pane -p -J gives it (text only: without -e tmux emits no escape
// sequence, tmux(1)), blank lines and trailing spaces dropped (a TUI that
// ended leaves its last words at the top of an empty screen), the last
// TailLines lines of that, cut from the front to at most
// TailBytes bytes on a rune boundary, with every control character but
// newline and tab removed (journal.StripControls). The pane is read as it
// is: on a dead pane (remain-on-exit) it is what the agent printed last,
// and tmux's own "Pane is dead (status N, …)" line. "" for a blank
// screen. The error is CapturePane's: a target that is not exact, a pane
// that is gone (ErrNoSession and the like).
func Tail(ctx context.Context, c Client, target string) (string, error) {
	screen, err := c.CapturePane(ctx, target, false)
	if err != nil {
		return "", err
	}
	return tailOf(screen, TailLines, TailBytes), nil
}

// tailOf is Tail's cut of text: its last non-blank lines, at most maxBytes bytes of them, controls stripped.
func tailOf(text string, lines, maxBytes int) string {
	text = journal.StripControls(text, journal.NewlineOrTab)
	var all []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimRight(line, " \t"); line != "" {
			all = append(all, line)
		}
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	out := strings.Join(all, "\n")
	if cut := len(out) - maxBytes; cut > 0 {
		whole := out[cut-1] == '\n'
		out = out[cut:]
		// A line cut in two is left out when a whole one follows it;
		// else the kept part starts on a whole rune.
		if i := strings.IndexByte(out, '\n'); !whole && i >= 0 {
			out = out[i+1:]
		}
		for len(out) > 0 && !utf8.RuneStart(out[0]) {
			out = out[1:]
		}
	}
	return out
}

// deadLine starts the line tmux adds to a dead pane (remain-on-exit):
// "Pane is dead (status 1, Mon Dec  1 12:00:00 2026)".
const deadLine = "Pane is dead ("

// LastWords returns the last line of a dead pane's Tail that its own
// process printed, tmux's "Pane is dead (…)" line left out (it names the
// time of the death, so no two deaths share it); "" for none. Two deaths
// of one harness that end on the same LastWords died the same way.
func LastWords(tail string) string {
	lines := strings.Split(tail, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, deadLine) {
			return l
		}
	}
	return ""
}
