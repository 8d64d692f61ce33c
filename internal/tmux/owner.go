package tmux

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// The user options that carry the owner marks (tmux(1), "OPTIONS": an option
// whose name starts with '@' is a user option). The server mark and the
// session mark have different names because a format looks an option up in
// the server options first (tmux 3.3a format_find, measured): a server
// option of the session mark's name would make every session look marked.
// The session mark is never set globally (set-option -g), because a session
// without its own value shows the global one.
const (
	serverOwnerOption  = "@loopd-server"
	serverDirOption    = "@loopd-server-dir"
	sessionOwnerOption = "@loopd-owner"
	// attenderOption names who attached to a session with loopd attach
	// (AttachArgv); tmux unsets it when the client detaches.
	attenderOption = "@loopd-attender"
)

// Markers that the guards print when they refuse.
const (
	refusedMarker     = "loopd-refused"
	serverOwnedMarker = "loopd-server-owned"
)

// ownerIDPattern is the shape of Owner.ID; it holds no character that means
// something in a tmux format, so it can be compared inside one.
var ownerIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// commandNamePattern is the shape of a name a Guard may allow: what tmux
// shows for common programs, and nothing that means something in a tmux
// format (',', '#', '{', '}').
var commandNamePattern = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// CommandName returns the name tmux shows as pane_current_command (and as
// the automatic window name) for a foreground process whose argv[0] is
// argv0, following tmux 3.3a parse_window_name: a leading "exec " and
// leading spaces or '-' (a login shell's "-bash") go, the name ends at the
// first space, and a path that starts with '/' becomes its base name. A
// relative path keeps its directory: "./fakeclaude" stays so. tmux reads
// argv[0] from /proc/<pgrp>/cmdline of the pane's foreground process group
// (tcgetpgrp), so a child run by a shell without job control shows the
// shell's name, and a program started through "#!/usr/bin/env node" shows
// "node" (measured, docs/design.md).
func CommandName(argv0 string) string {
	name := argv0
	if strings.HasPrefix(name, `"`) {
		name = name[1:]
	}
	if i := strings.IndexByte(name, '"'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimPrefix(name, "exec ")
	name = strings.TrimLeft(name, " -")
	if i := strings.IndexByte(name, ' '); i >= 0 {
		name = name[:i]
	}
	if strings.HasPrefix(name, "/") {
		name = filepath.Base(name)
	}
	return name
}

// ValidCommandName reports whether name may be given to a Guard.
func ValidCommandName(name string) bool { return commandNamePattern.MatchString(name) }

// SocketPath returns the path of the socket of tmux -L name: the directory
// tmux-<uid> in $TMUX_TMPDIR, or in /tmp when that is unset or empty, with
// symbolic links resolved as tmux resolves them (tmux(1), -L; tmux 3.3a
// make_label). It creates that directory with mode 0700 when it is missing,
// as tmux would.
func SocketPath(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("socket name %q: want a name without '/'", name)
	}
	tmp := os.Getenv("TMUX_TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	dir := filepath.Join(tmp, fmt.Sprintf("tmux-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("socket dir %s: %w", dir, err)
	}
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	return filepath.Join(dir, name), nil
}

// ServerListening reports whether a tmux server accepts connections on the
// socket named name (SocketPath), as a tmux client finds its server: a
// socket file with no server behind it (kill-server leaves one, tmux 3.3a)
// refuses them, and a missing one is no server. A connect that fails
// otherwise (a server too busy to accept within a second, say) counts as
// a server, so that no caller takes a running one for gone.
func ServerListening(name string) bool {
	path, err := SocketPath(name)
	if err != nil {
		return false
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist)
}

// RemoveStaleSocket removes the socket file named name (SocketPath) when
// no server is behind it: a connect is refused (kill-server leaves the
// file, tmux 3.3a; so does a server killed with SIGKILL). A next server
// would take the file over, so a stale one is only untidy. It reports
// whether it removed one; a listening server, a missing file and a file
// that is not a socket are left as they are.
func RemoveStaleSocket(name string) (bool, error) {
	path, err := SocketPath(name)
	if err != nil {
		return false, err
	}
	if st, err := os.Lstat(path); err != nil || st.Mode().Type() != fs.ModeSocket {
		return false, nil
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return false, nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove stale tmux socket %s: %w", path, err)
	}
	return true, nil
}

// CheckOwnerID reports why id cannot be an owner mark (NewOwner makes
// the only valid ones).
func CheckOwnerID(id string) error {
	if !ownerIDPattern.MatchString(id) {
		return fmt.Errorf("owner %q: want 16 lowercase hex digits (NewOwner)", id)
	}
	return nil
}

// CheckGuard reports why g cannot guard a pane: an owner that is not an
// owner id, no foreground command, or a command that is not a
// ValidCommandName.
func CheckGuard(g Guard) error {
	if err := CheckOwnerID(g.Owner); err != nil {
		return err
	}
	if len(g.Commands) == 0 {
		return fmt.Errorf("guard without a foreground command to allow")
	}
	for _, c := range g.Commands {
		if !ValidCommandName(c) {
			return fmt.Errorf("guard command %q: want %s", c, commandNamePattern)
		}
	}
	for _, l := range g.Shows {
		if len(showsLiteral.ReplaceAllString(l, "")) < minShows {
			return fmt.Errorf("guard line %q: fewer than %d characters of its own", l, minShows)
		}
	}
	return nil
}

// guardCondition is the tmux format that is true ("1") when the target
// pane passes g. tmux 3.3a's && and || take two operands, so the names
// nest.
func guardCondition(g Guard) string {
	cmds := ""
	for i := len(g.Commands) - 1; i >= 0; i-- {
		eq := "#{==:#{pane_current_command}," + g.Commands[i] + "}"
		if cmds == "" {
			cmds = eq
		} else {
			cmds = "#{||:" + eq + "," + cmds + "}"
		}
	}
	if len(g.Shows) > 0 {
		cmds = "#{&&:" + cmds + "," + showsCondition(g.Shows) + "}"
	}
	return "#{&&:#{==:#{pane_dead},0},#{&&:" + ownerCondition(g.Owner) + "," + cmds + "}}"
}

// showsCondition is the tmux format that is true when the target pane's
// visible screen shows each of lines (ScreenShows): tmux's C: modifier
// searches the visible screen's lines for an fnmatch pattern, wrapped in
// '*' (tmux 3.3a, window_pane_search), and gives the line number, 0 for
// none.
func showsCondition(lines []string) string {
	cond := ""
	for i := len(lines) - 1; i >= 0; i-- {
		c := "#{C:" + showsPattern(lines[i]) + "}"
		if cond == "" {
			cond = c
		} else {
			cond = "#{&&:" + c + "," + cond + "}"
		}
	}
	return cond
}

// showsLiteral is what a Shows line keeps as itself in a pattern: letters,
// digits, space and punctuation that means nothing to a tmux format or to
// fnmatch. Every other run of characters (non-ASCII ones included) is
// '*'.
var showsLiteral = regexp.MustCompile(`[^A-Za-z0-9 .'/()_-]+`)

// minShows is the fewest characters a Shows line keeps as themselves
// (showsLiteral): fewer would match nearly any screen.
const minShows = 3

// showsPattern is line as the fnmatch pattern showsCondition searches
// for: each run of characters showsLiteral does not keep becomes '*', so
// that untrusted text can neither escape the format nor widen the match
// past such a run.
func showsPattern(line string) string {
	return showsLiteral.ReplaceAllString(line, "*")
}

// ScreenShows reports whether screen (a capture of the visible screen)
// shows line as a guard's Shows checks it: one of screen's lines holds
// line, each run of characters showsPattern makes a '*' matching any run.
// The fake of tmuxtest uses it, so that the fake and tmux agree.
func ScreenShows(screen, line string) bool {
	parts := strings.Split(showsPattern(line), "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile(strings.Join(parts, ".*"))
	for _, l := range strings.Split(screen, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// ownerCondition is the tmux format that is true when the target's session
// carries owner's mark.
func ownerCondition(owner string) string {
	return "#{==:#{" + sessionOwnerOption + "}," + owner + "}"
}

// refusal is the command a guard runs instead of acting: it prints why,
// for refusedError.
func refusal(target, owner string) string {
	return "display-message -p -t " + quote(target) + " " + quote(refusedMarker+
		" #{?pane_dead,dead,#{?"+ownerCondition(owner)+",foreground,foreign}} #{pane_current_command}")
}

// refusalOf is the refusal of g: refusal's, and "changed" for a pane that
// passes all of g but Shows.
func refusalOf(target string, g Guard) string {
	if len(g.Shows) == 0 {
		return refusal(target, g.Owner)
	}
	ok := guardCondition(Guard{Owner: g.Owner, Commands: g.Commands})
	return "display-message -p -t " + quote(target) + " " + quote(refusedMarker+
		" #{?"+ok+",changed,#{?pane_dead,dead,#{?"+ownerCondition(g.Owner)+",foreground,foreign}}} #{pane_current_command}")
}

// refusedError maps a guard's output to its sentinel error; nil when the
// guard let the command through.
func refusedError(out []byte) error {
	line := strings.TrimSpace(string(out))
	rest, ok := strings.CutPrefix(line, refusedMarker+" ")
	if !ok {
		return nil
	}
	why, command, _ := strings.Cut(rest, " ")
	switch why {
	case "dead":
		return ErrPaneDead
	case "foreign":
		return ErrForeign
	case "changed":
		return ErrScreenChanged
	default:
		return fmt.Errorf("%w (it is %q)", ErrNotHarness, command)
	}
}

// AttachArgv returns the argv, "tmux" first, that attaches a terminal to
// session on the server of socket for the person by (a login name): in the
// same invocation, before the attach, it marks the session with by (the
// attender mark the listing shows, Pane.AttachedBy) and has tmux unset the
// mark when a client detaches from it. The exact session (=session:),
// never one whose name only starts the same.
func AttachArgv(socket, session, by string) []string {
	target := Target(session)
	return []string{"tmux", "-L", socket,
		"set-option", "-t", target, attenderOption, by, ";",
		"set-hook", "-t", target, "client-detached", "set-option -u " + attenderOption, ";",
		"attach", "-t", "=" + session}
}
