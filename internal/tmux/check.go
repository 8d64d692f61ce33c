package tmux

import (
	"fmt"
	"strings"
)

// Pane size used when NewSession leaves Width or Height at 0.
const (
	defaultWidth  = 200
	defaultHeight = 50
)

// CheckNewSession reports why tmux would not run s as asked: a name tmux
// would change (CheckSessionName), or an argv of fewer than 2 words (tmux
// hands a single word to sh -c; tmux(1), new-session and "shell-command"),
// or an owner mark that is not an owner id (CheckOwnerID). Every Client
// refuses such an s before it acts (Exec, and the fake in tmuxtest).
func CheckNewSession(s NewSession) error {
	if err := CheckSessionName(s.Name); err != nil {
		return err
	}
	if len(s.Argv) < 2 {
		return fmt.Errorf("argv %q: want at least 2 words, or tmux runs it with sh -c", s.Argv)
	}
	if s.Owner != "" {
		return CheckOwnerID(s.Owner)
	}
	return nil
}

// CheckSessionName reports why tmux would not keep name as a session name:
// it is empty, or tmux would change it (it replaces '.' and ':' and escapes
// control characters, so exact targets would miss the session).
func CheckSessionName(name string) error {
	if name == "" {
		return fmt.Errorf("empty session name")
	}
	if strings.ContainsAny(name, ".:") || strings.ContainsFunc(name, isControl) {
		return fmt.Errorf("session name %q: tmux would rename it ('.', ':' or a control character)", name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// CheckTarget accepts only exact pane targets: a pane id ("%N") or a session
// name with the exact-match prefix and a window separator ("=name:"). Any
// other form may match by prefix or pattern (tmux(1), "COMMANDS": "-t loop-1"
// matches "loop-12"), so every Client refuses it.
func CheckTarget(target string) error {
	if isPaneID(target) {
		return nil
	}
	if name, ok := strings.CutPrefix(target, "="); ok {
		if name, ok = strings.CutSuffix(name, ":"); ok && CheckSessionName(name) == nil {
			return nil
		}
	}
	return fmt.Errorf("target %q is not exact (want %%N or =name:)", target)
}

// escapeArg keeps a trailing ';' literal. tmux splits its argv into commands
// at words ending in ';' and drops that ';' unless a backslash precedes it,
// in which case the backslash becomes the ';' (tmux 3.3a
// cmd_parse_from_arguments). So "x;" is sent as "x\;", ";" as "\;", and a
// word ending in "\;" keeps its backslash.
func escapeArg(arg string) string {
	if s, ok := strings.CutSuffix(arg, ";"); ok {
		return s + `\;`
	}
	return arg
}

// quote makes s one word for tmux's command parser (for command strings such
// as if-shell's and set-hook's): single quotes take everything literally, and
// a single quote is closed, escaped and reopened.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isPaneID reports whether s is a tmux pane id, "%" and a decimal number.
func isPaneID(s string) bool {
	id, ok := strings.CutPrefix(s, "%")
	return ok && id != "" && strings.Trim(id, "0123456789") == ""
}

// Target returns the tmux target of the active pane of the session named
// exactly session: "=session:" (tmux(1) TARGETS: "=" matches the name
// whole, so that loop-1 never names loop-12, and ":" names the session's
// current window and its active pane). Every target of a session's pane
// built from its name is this one.
func Target(session string) string {
	return "=" + session + ":"
}
