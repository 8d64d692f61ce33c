package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Class says whether a failure may pass by itself (Transient: retried with
// the item's backoff) or needs an operator (Permanent).
type Class string

// The classes of a failure.
const (
	Transient Class = "transient"
	Permanent Class = "permanent"
)

// Error is a failed workspace operation: the git command (URLs masked), its
// exit status (-1 when it did not run to an exit, e.g. a timeout), the last
// lines of its stderr (masked), and the class of the failure.
type Error struct {
	Op      string // what loopd was doing, e.g. "fetch", "worktree add", "mkdir"
	Command string // the command as run, credentials masked
	Exit    int
	Stderr  string // last lines of stderr, credentials masked
	Class   Class
	// Reason is a short snake_case cause: git_failed, timeout, conflict,
	// mkdir_failed, bad_url.
	Reason string
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Op, e.Command)
	if e.Exit >= 0 {
		fmt.Fprintf(&b, ": exit %d", e.Exit)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, ": %s", strings.ReplaceAll(e.Stderr, "\n", " | "))
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns err's class: an *Error's own, Transient for a context
// deadline, Permanent for ErrConflict, Transient otherwise (an unknown
// failure is retried, bounded by the restart budget).
func ClassOf(err error) Class {
	var we *Error
	switch {
	case errors.As(err, &we):
		return we.Class
	case errors.Is(err, ErrConflict):
		return Permanent
	}
	return Transient
}

// stderrLines is how many of the last lines of git's stderr an Error keeps.
const stderrLines = 5

// tail returns the last stderrLines non-empty lines of b, masked.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var keep []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > stderrLines {
		keep = keep[len(keep)-stderrLines:]
	}
	return Mask(strings.Join(keep, "\n"))
}

// userinfo matches the credentials of a URL with a scheme
// (scheme://user[:password]@host).
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@`)

// Mask returns s with the user information of every URL in it replaced by
// "***": https://x-access-token:TOKEN@github.com/o/r becomes
// https://***@github.com/o/r. An scp-like address (git@github.com:o/r)
// holds no secret and stays.
func Mask(s string) string {
	return userinfo.ReplaceAllString(s, "${1}***@")
}

// Public returns raw without the credentials that must not be stored or
// shown: for http(s) the whole user information (a token may be the user
// name), for other schemes the password only (ssh://git@host needs its
// user). An scp-like address is returned as it is. It fails on a URL with
// a control character (a newline would end a config value).
func Public(raw string) (string, error) {
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("checkout url %q: control character", Mask(raw))
	}
	if !strings.Contains(raw, "://") {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("checkout url %q: %w", Mask(raw), errors.New("not a URL"))
	}
	if u.User == nil {
		return raw, nil
	}
	switch u.Scheme {
	case "http", "https":
		u.User = nil
	default:
		u.User = url.User(u.User.Username())
	}
	return u.String(), nil
}

// classify returns the class of a git failure from its stderr: the
// messages of git 2.39 and of GitHub's and OpenSSH's servers for a missing
// repository, refused authentication and an unknown ref are permanent;
// everything else (a network failure, a lock held by another process, a
// timeout, an unknown message) is transient.
func classify(stderr string) Class {
	s := strings.ToLower(stderr)
	for _, p := range permanentMessages {
		if strings.Contains(s, p) {
			return Permanent
		}
	}
	return Transient
}

// permanentMessages are lowercase fragments of git's stderr that no retry
// changes.
var permanentMessages = []string{
	"does not appear to be a git repository", // file://, ssh: no such repository
	"repository not found",                   // GitHub over https and ssh
	"not found",                              // "repository '…' not found", "remote branch … not found"
	"authentication failed",
	"could not read username", // GIT_TERMINAL_PROMPT=0 with no credential
	"could not read password",
	"terminal prompts disabled",
	"permission denied (publickey",
	"host key verification failed",
	"couldn't find remote ref",
	"invalid reference",
	"not a valid object name",
	"not a valid branch name",
	"is not a valid branch name",
	"already checked out at", // the branch is another worktree's
	"is already used by worktree",
	"already exists", // a path or a branch git will not overwrite
	"unsupported protocol",
	"protocol '", // "protocol 'x' is not supported"
}

// run runs git with args in dir under timeout, GIT_TERMINAL_PROMPT=0 and
// the extra environment env, and returns its stdout. A failure is an
// *Error for op, classified from stderr.
func (m *Manager) run(ctx context.Context, op, dir string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, m.git(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_TERMINAL_PROMPT=0",
		// A transfer that stalls (under 1 KB/s for a minute) fails long
		// before the timeout: git runs inside a pass, under the reconcile
		// lock, so a stalled remote must not hold every other item
		// (git(1), GIT_HTTP_LOW_SPEED_LIMIT and GIT_HTTP_LOW_SPEED_TIME).
		"GIT_HTTP_LOW_SPEED_LIMIT=1000", "GIT_HTTP_LOW_SPEED_TIME=60",
		// ssh: fail instead of asking for a password or a host key.
		"GIT_SSH_COMMAND="+sshCommand(),
		"LC_ALL=C", // the messages classify reads
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	e := &Error{Op: op, Command: Mask("git " + strings.Join(args, " ")), Exit: -1, Stderr: tail(stderr.Bytes()), Reason: "git_failed", Err: err}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		e.Class, e.Reason = Transient, "timeout"
		e.Err = fmt.Errorf("%w after %s", context.DeadlineExceeded, m.timeout())
	case errors.As(err, &exit):
		e.Exit = exit.ExitCode()
		e.Class = classify(e.Stderr)
		e.Err = errors.New("git failed")
	default:
		// git itself could not be started.
		e.Class = Permanent
	}
	return nil, e
}

// sshCommand is the ssh git runs: batch mode, so that a missing key or an
// unknown host key fails at once instead of prompting, and a connection
// that cannot be made in 30 s, or stops answering for a minute, fails too
// (ssh_config(5): ConnectTimeout, ServerAliveInterval, ServerAliveCountMax).
// A GIT_SSH_COMMAND of loopd's own environment is kept.
func sshCommand() string {
	if c := os.Getenv("GIT_SSH_COMMAND"); c != "" {
		return c
	}
	return "ssh -o BatchMode=yes -o ConnectTimeout=30 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
}
