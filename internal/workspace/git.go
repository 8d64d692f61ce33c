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
	"strconv"
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
	Op      string // what loopd was doing, e.g. "fetch", "clone", "mkdir"
	Command string // the command as run, credentials masked
	Exit    int
	Stderr  string // last lines of stderr, credentials masked
	Class   Class
	// Reason is a short snake_case cause: git_failed, timeout, bad_url,
	// mkdir_failed, clone_failed, migrate_failed, repair_failed,
	// remove_failed, inspect_failed, lock_failed, head_missing (FetchHead),
	// or ReasonCancelled.
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

// ReasonCancelled is the Reason of an operation cut short because its
// caller's context ended (the daemon is stopping), not because git failed
// or ran past its timeout: no failure of the workspace (Cancelled).
const ReasonCancelled = "cancelled"

// cancelled returns the *Error of op cut short by the end of ctx.
func cancelled(ctx context.Context, op, command string) *Error {
	return &Error{Op: op, Command: command, Exit: -1, Class: Transient, Reason: ReasonCancelled, Err: context.Cause(ctx)}
}

// Cancelled reports whether err is an operation cut short by the end of
// its caller's context (Reason ReasonCancelled), which says nothing of the
// workspace: the next attempt may run at once.
func Cancelled(err error) bool {
	var we *Error
	return errors.As(err, &we) && we.Reason == ReasonCancelled
}

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

// ErrPasswordInURL means a checkout URL that is not http(s) carries a
// password: ssh cannot take one from the URL (it asks for it itself, and
// loopd runs it in batch mode), and the URL would reach ssh's command line,
// which every local user can read (ps). A key (ssh-agent) is the way.
var ErrPasswordInURL = errors.New("a password in a non-http(s) url cannot be used: use an ssh key")

// scpPassword matches an scp-like address with a password,
// user:password@host:path.
var scpPassword = regexp.MustCompile(`^[^@/]*:[^@/]*@[^/:]*:`)

// Public returns raw without the credentials that must not be stored or
// shown: for http(s) the whole user information (a token may be the user
// name; Credentials hands it to git), for other schemes nothing, since
// such a URL may not carry a password (ErrPasswordInURL; ssh://git@host
// keeps its user). An scp-like address is returned as it is. It fails on a
// URL with a control character (a newline would end a config value).
func Public(raw string) (string, error) {
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("checkout url %q: control character", Mask(raw))
	}
	if !strings.Contains(raw, "://") {
		if scpPassword.MatchString(raw) {
			return "", fmt.Errorf("checkout url: %w", ErrPasswordInURL)
		}
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("checkout url %q: %w", Mask(raw), errors.New("not a URL"))
	}
	if u.User == nil {
		return raw, nil
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if _, ok := u.User.Password(); ok {
			return "", fmt.Errorf("checkout url %q: %w", Mask(raw), ErrPasswordInURL)
		}
		return raw, nil
	}
	u.User = nil
	return u.String(), nil
}

// credentialHelper is the credential helper (gitcredentials(7), a "!"
// shell snippet) that answers git's "get" with the user name and password
// in its own environment, and ignores "store" and "erase".
const credentialHelper = `!f() { test "$1" = get && printf 'username=%s\npassword=%s\n' "$LOOPD_GIT_USERNAME" "$LOOPD_GIT_PASSWORD"; }; f`

// Credentials returns the environment that gives one git process the
// user name and password of an http(s) URL raw, or nil when raw carries
// none. git never sees them in a URL, which would reach its remote
// helper's command line (git-remote-https <remote> <url>), readable by
// every local user; a process's environment is readable by its user only.
// The helper is scoped to the URL's scheme and host
// (credential.<scheme>://<host>.helper) and comes after an empty entry,
// which resets the helper list for that host (gitcredentials(7)): the
// URL's credentials win over the user's helpers, as they did in the URL,
// and never reach the user's credential store. Other hosts (a redirect)
// keep the user's helpers. GIT_CONFIG_* entries of loopd's own
// environment are kept (git-config(1), GIT_CONFIG_COUNT).
func Credentials(raw string) ([]string, error) {
	if !strings.Contains(raw, "://") {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, nil
	}
	user := u.User.Username()
	pass, _ := u.User.Password()
	if strings.ContainsFunc(user+pass, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("checkout url %q: control character in the credentials", Mask(raw))
	}
	n, _ := strconv.Atoi(os.Getenv("GIT_CONFIG_COUNT"))
	n = max(n, 0)
	key := "credential." + u.Scheme + "://" + u.Host + ".helper"
	return []string{
		"GIT_CONFIG_COUNT=" + strconv.Itoa(n+2),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=", n),
		fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n+1, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n+1, credentialHelper),
		"LOOPD_GIT_USERNAME=" + user, "LOOPD_GIT_PASSWORD=" + pass,
	}, nil
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
// the extra environment env, and returns its stdout. git runs in its own
// process group (killed whole at the timeout), holds the mirror's lock
// file of ctx when there is one (inherited, as are its children), and is
// killed when loopd dies (sysProcAttr). A failure is an
// *Error for op, classified from stderr.
func (m *Manager) run(ctx context.Context, op, dir string, env []string, args ...string) ([]byte, error) {
	return m.runInput(ctx, op, dir, env, nil, args...)
}

// runInput is run with stdin as git's standard input (nil: none).
func (m *Manager) runInput(ctx context.Context, op, dir string, env []string, stdin []byte, args ...string) ([]byte, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, m.timeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, m.git(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_TERMINAL_PROMPT=0",
		// A transfer that stalls (under 1 KB/s for a minute) fails long
		// before the timeout, and the item's retry with it (git(1),
		// GIT_HTTP_LOW_SPEED_LIMIT and GIT_HTTP_LOW_SPEED_TIME).
		"GIT_HTTP_LOW_SPEED_LIMIT=1000", "GIT_HTTP_LOW_SPEED_TIME=60",
		// ssh: fail instead of asking for a password or a host key.
		"GIT_SSH_COMMAND="+sshCommand(),
		"LC_ALL=C", // the messages classify reads
	)
	cmd.Env = append(cmd.Env, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = sysProcAttr()
	if f := lockFile(ctx); f != nil {
		// The mirror's lock outlives loopd while this git runs.
		cmd.ExtraFiles = []*os.File{f}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	e := &Error{Op: op, Command: Mask("git " + strings.Join(args, " ")), Exit: -1, Stderr: tail(stderr.Bytes()), Reason: "git_failed", Err: err}
	var exit *exec.ExitError
	switch {
	case parent.Err() != nil:
		// The caller's context ended (loopd is stopping): git was killed,
		// it did not fail, nor run out of time.
		e.Class, e.Reason, e.Err = Transient, ReasonCancelled, context.Cause(parent)
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
