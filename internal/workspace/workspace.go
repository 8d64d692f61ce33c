// Package workspace makes and removes the git worktrees work items run in,
// with the real git CLI: one bare mirror per repository under the state
// dir, fetched before each worktree is made from it with `git worktree
// add`. Every git command runs with GIT_TERMINAL_PROMPT=0 (a missing
// credential fails at once), ssh in batch mode, a timeout, and one
// operation at a time per mirror (a lock file beside it). Failures are
// *Error values that carry the command and the tail of its stderr with
// every URL's credentials masked, classified Transient or Permanent.
//
// Credentials are git's own (ssh-agent, credential helpers). A URL that
// carries them is never stored in the mirror's config nor put on git's
// command line, nor given to git at all: the mirror's remote holds the URL
// without them (Public), and loopd's own fetch hands an http(s) URL's user
// name and password to git through a credential helper that reads them
// from that git's environment (Credentials), which other users cannot
// read. A password in any other URL (ssh) is refused (ErrPasswordInURL).
package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrConflict means the workdir exists, is not a worktree of the routed
// repository, and holds files: it is never touched.
var ErrConflict = errors.New("workdir exists and is not a worktree of the repository")

// DefaultTimeout bounds every git command.
const DefaultTimeout = 5 * time.Minute

// Manager runs workspace operations. Its zero value is not usable: Root
// must be set.
type Manager struct {
	// Root holds the mirrors (<stateDir>/mirrors).
	Root string
	// Git is the git binary; default "git".
	Git string
	// Timeout bounds each git command; default DefaultTimeout.
	Timeout time.Duration

	mu sync.Mutex
	// locks holds one token per mirror: taken from the channel, given
	// back when done, so that a wait can end with its context.
	locks map[string]chan struct{}
}

func (m *Manager) git() string {
	if m.Git == "" {
		return "git"
	}
	return m.Git
}

func (m *Manager) timeout() time.Duration {
	if m.Timeout <= 0 {
		return DefaultTimeout
	}
	return m.Timeout
}

// Mode is how a worktree gets its branch.
type Mode string

// The modes of a checkout.
const (
	// ModeIssue: a new branch Branch from Base (the remote's default
	// branch when empty), or Branch itself when it already exists.
	ModeIssue Mode = "issue"
	// ModePullRequest: the pull request's head branch Branch, in the same
	// repository, tracking the remote branch; when another worktree has
	// Branch checked out (the agent's own issue branch), the local branch
	// loopd/pr-<PR> instead, whose plain pull and push go to Branch
	// (Manager.sharedHead).
	ModePullRequest Mode = "pull_request"
	// ModeFork: refs/pull/<PR>/head fetched into the local branch Branch
	// (loopd/pr-<PR>), for a fork, or a pull request whose head is not
	// known.
	ModeFork Mode = "fork"
)

// Checkout is one worktree to make.
type Checkout struct {
	URL    string // the remote, as configured (may carry credentials)
	Dir    string // the workdir
	Mode   Mode
	Branch string
	Base   string // ModeIssue only; "" is the remote's default branch
	PR     int    // ModeFork and ModePullRequest: the pull request's number
}

// Mirror returns the path of the bare mirror of the repository at rawURL
// under root: one per repository, whatever credentials the URL carries.
func Mirror(root, rawURL string) (string, error) {
	pub, err := Public(rawURL)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(pub))
	base := strings.TrimSuffix(filepath.Base(strings.TrimRight(pub, "/")), ".git")
	base = strings.Trim(unsafeName.ReplaceAllString(base, "-"), "-")
	if base == "" {
		base = "repo"
	}
	return filepath.Join(root, base+"-"+hex.EncodeToString(sum[:8])+".git"), nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Fact is what the disk shows of a workdir, read without running git.
type Fact struct {
	Exists bool
	// Empty is true for a directory with nothing in it.
	Empty bool
	// Worktree is true when the workdir is a worktree of the mirror asked
	// about (its .git file names an admin dir whose common dir is the
	// mirror).
	Worktree bool
	// Partial is true for such a worktree whose `git worktree add` never
	// finished (its admin dir is still locked "initializing"): a daemon
	// killed halfway.
	Partial bool
	// Physical is the workdir with every symlink resolved, when it exists.
	Physical string
	// Busy is true when a workspace operation holds the mirror's lock now
	// (Manager.lock), in this process or another, or a git a killed daemon
	// started still runs in it: a preparation is in flight.
	Busy bool
}

// Inspect returns the Fact of dir, as a worktree of mirror ("" for a plain
// workdir). An error means dir could not be read.
func Inspect(dir, mirror string) (Fact, error) {
	f := Fact{Busy: mirror != "" && Busy(mirror)}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return f, err
	case !info.IsDir():
		f.Exists = true
		return f, nil
	}
	f.Exists = true
	if f.Physical, err = filepath.EvalSymlinks(dir); err != nil {
		return f, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return f, err
	}
	names, err := d.Readdirnames(1)
	d.Close()
	if len(names) == 0 && err != nil {
		f.Empty = true
		return f, nil
	}
	if mirror == "" {
		return f, nil
	}
	admin, ok := adminDir(dir)
	if !ok {
		return f, nil
	}
	c, ok := commonDir(admin)
	if !ok || !samePath(c, mirror) {
		return f, nil
	}
	f.Worktree = true
	f.Partial = initializing(admin)
	return f, nil
}

// SharedGitDir returns the repository the worktree at dir shares (the
// common dir of the admin dir its .git file names: its mirror), with every
// symlink resolved, which git run in the worktree needs whole: a sandbox
// shows it. It returns "" for a workdir that is no worktree (a plain
// directory, a repository of its own) and an error when the common dir
// cannot be resolved.
func SharedGitDir(dir string) (string, error) {
	admin, ok := adminDir(dir)
	if !ok {
		return "", nil
	}
	c, ok := commonDir(admin)
	if !ok {
		return "", nil
	}
	real, err := filepath.EvalSymlinks(c)
	if err != nil {
		return "", fmt.Errorf("git dir of %s: %w", dir, err)
	}
	return real, nil
}

// commonDir returns the repository a worktree's admin dir belongs to, as
// its commondir file names it.
func commonDir(admin string) (string, bool) {
	common, err := os.ReadFile(filepath.Join(admin, "commondir"))
	if err != nil {
		return "", false
	}
	c := strings.TrimSpace(string(common))
	if !filepath.IsAbs(c) {
		c = filepath.Join(admin, c)
	}
	return filepath.Clean(c), true
}

// Busy reports whether mirror's lock (<mirror>.lock, Manager.lock) is
// held: it tries a shared flock(2) without waiting and lets go at once.
// A mirror never locked is not busy.
func Busy(mirror string) bool {
	f, err := os.Open(mirror + ".lock")
	if err != nil {
		return false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return errors.Is(err, unix.EWOULDBLOCK)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// adminDir returns the admin dir (<mirror>/worktrees/<name>) the .git file
// of dir names.
func adminDir(dir string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", false
	}
	g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", false
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(dir, g)
	}
	return g, true
}

// initializing reports whether admin is locked "initializing", which `git
// worktree add` writes first and removes once its checkout is done (git
// 2.39 builtin/worktree.c, add_worktree).
func initializing(admin string) bool {
	b, err := os.ReadFile(filepath.Join(admin, "locked"))
	return err == nil && strings.TrimSpace(string(b)) == "initializing"
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// Result is a prepared workspace.
type Result struct {
	Dir    string // the physical path of the workdir
	Mirror string
	Branch string
	Commit string // HEAD of the worktree
	// Existing is true when the workdir already was a worktree of the
	// repository and was used as it is.
	Existing bool
	// Repaired is true when a half-made worktree was finished.
	Repaired bool
}

// Prepare makes c.Dir a worktree of c.URL's repository: the mirror is made
// when missing and fetched, stale worktree entries are pruned, and the
// worktree is added on the branch c asks for. A workdir that already is a
// worktree of the repository is used as it is, whatever its branch or
// state; one left half-made by a killed `git worktree add` is finished
// (stale index.lock removed, its checkout completed, which keeps every
// untracked file). A workdir that exists with files in it and is not such
// a worktree fails with ErrConflict, untouched. Errors are *Error, or wrap
// ErrConflict.
func (m *Manager) Prepare(ctx context.Context, c Checkout) (Result, error) {
	mirror, err := Mirror(m.Root, c.URL)
	if err != nil {
		return Result{}, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	res := Result{Mirror: mirror, Branch: c.Branch}
	f, err := Inspect(c.Dir, mirror)
	if err != nil {
		return res, &Error{Op: "inspect", Command: "-", Exit: -1, Class: fsClass(err), Reason: "inspect_failed", Err: err}
	}
	if f.Exists && !f.Empty && !f.Worktree {
		return res, fmt.Errorf("prepare %s: %w", c.Dir, ErrConflict)
	}
	ctx, unlock, err := m.lock(ctx, mirror)
	if err != nil {
		return res, err
	}
	defer unlock()
	if f.Worktree && !f.Partial {
		res.Existing = true
		return m.finish(ctx, res, c.Dir)
	}
	if f.Partial {
		if err := m.repair(ctx, c.Dir); err != nil {
			return res, err
		}
		res.Repaired = true
		return m.finish(ctx, res, c.Dir)
	}
	env, err := m.ensureMirror(ctx, mirror, c.URL)
	if err != nil {
		return res, err
	}
	if _, err := m.run(ctx, "fetch", mirror, env, "fetch", "--quiet", "--prune", "origin"); err != nil {
		return res, err
	}
	// A worktree whose directory is gone (a daemon killed before git made
	// it, or removed by hand) still holds its branch: prune its entry.
	if _, err := m.run(ctx, "worktree prune", mirror, nil, "worktree", "prune"); err != nil {
		return res, err
	}
	if err := os.MkdirAll(filepath.Dir(c.Dir), 0o755); err != nil {
		return res, mkdirError(filepath.Dir(c.Dir), err)
	}
	args, err := m.addArgs(ctx, mirror, env, c)
	if err != nil {
		return res, err
	}
	if _, err := m.run(ctx, "worktree add", mirror, nil, args...); err != nil {
		return res, err
	}
	return m.finish(ctx, res, c.Dir)
}

// finish fills res from the worktree at dir.
func (m *Manager) finish(ctx context.Context, res Result, dir string) (Result, error) {
	phys, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return res, &Error{Op: "resolve", Command: "-", Exit: -1, Class: fsClass(err), Reason: "inspect_failed", Err: err}
	}
	res.Dir = phys
	out, err := m.run(ctx, "rev-parse", phys, nil, "rev-parse", "HEAD")
	if err == nil {
		res.Commit = strings.TrimSpace(string(out))
	}
	if out, err := m.run(ctx, "branch", phys, nil, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		res.Branch = strings.TrimSpace(string(out))
	}
	return res, nil
}

// repair finishes a worktree whose `git worktree add` was killed: a stale
// index.lock goes (no git runs in a worktree that was never handed to an
// agent), the checkout git started is completed with `git reset --hard`
// (as add itself runs it: tracked files only, every untracked file stays),
// and the "initializing" lock is removed. A worktree killed before its HEAD
// was written holds nothing but its .git file: it is removed and pruned,
// and made again by the caller's next attempt.
func (m *Manager) repair(ctx context.Context, dir string) error {
	admin, _ := adminDir(dir)
	_ = os.Remove(filepath.Join(admin, "index.lock"))
	if _, err := m.run(ctx, "repair", dir, nil, "rev-parse", "--verify", "--quiet", "HEAD"); err != nil {
		entries, _ := os.ReadDir(dir)
		if len(entries) == 1 && entries[0].Name() == ".git" {
			os.Remove(filepath.Join(dir, ".git"))
			os.RemoveAll(admin)
		}
		return err
	}
	if _, err := m.run(ctx, "repair", dir, nil, "reset", "--quiet", "--hard", "--no-recurse-submodules"); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(admin, "locked")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &Error{Op: "repair", Command: "-", Exit: -1, Class: Transient, Reason: "repair_failed", Err: err}
	}
	return nil
}

// ensureMirror makes the bare mirror of rawURL when missing and points its
// origin at the URL without credentials; it returns the environment that
// gives loopd's own fetch the URL's credentials (Credentials).
func (m *Manager) ensureMirror(ctx context.Context, mirror, rawURL string) ([]string, error) {
	pub, err := Public(rawURL)
	if err != nil {
		return nil, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	if _, err := os.Stat(filepath.Join(mirror, "HEAD")); err != nil {
		if err := os.MkdirAll(m.Root, 0o700); err != nil {
			return nil, mkdirError(m.Root, err)
		}
		tmp, err := os.MkdirTemp(m.Root, ".new-")
		if err != nil {
			return nil, mkdirError(m.Root, err)
		}
		defer os.RemoveAll(tmp)
		if _, err := m.run(ctx, "init", tmp, nil, "init", "--quiet", "--bare", "."); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, mirror); err != nil {
			return nil, &Error{Op: "init", Command: "-", Exit: -1, Class: Transient, Reason: "mirror_failed", Err: err}
		}
	}
	for _, kv := range [][2]string{
		{"remote.origin.url", pub},
		{"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"},
	} {
		if _, err := m.run(ctx, "config", mirror, nil, "config", "--replace-all", kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	env, err := Credentials(rawURL)
	if err != nil {
		return nil, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	return env, nil
}

// addArgs returns the `git worktree add` arguments for c, fetching a fork's
// pull request head first.
func (m *Manager) addArgs(ctx context.Context, mirror string, env []string, c Checkout) ([]string, error) {
	has := func(ref string) bool { return m.has(ctx, mirror, ref) }
	switch c.Mode {
	case ModePullRequest:
		local, remote := "refs/heads/"+c.Branch, "refs/remotes/origin/"+c.Branch
		shared, err := m.checkedOut(ctx, mirror, local)
		if err != nil {
			return nil, err
		}
		if shared {
			return m.sharedHead(ctx, mirror, c)
		}
		if has(local) && has(remote) && !m.isAncestor(ctx, mirror, remote, local) {
			if err := m.catchUp(ctx, mirror, c.Branch, local, remote); err != nil {
				return nil, err
			}
		}
		if has(local) {
			return []string{"worktree", "add", "--quiet", c.Dir, c.Branch}, nil
		}
		return []string{"worktree", "add", "--quiet", "--track", "-b", c.Branch, c.Dir, remote}, nil
	case ModeFork:
		// The fork's head, fetched afresh each time into a ref of the
		// mirror's own (a force-pushed fork moves it), then as for a
		// pull request of the same repository.
		local, remote := "refs/heads/"+c.Branch, "refs/remotes/origin/pull/"+strconv.Itoa(c.PR)
		if _, err := m.run(ctx, "fetch", mirror, env, "fetch", "--quiet", "origin", "+refs/pull/"+strconv.Itoa(c.PR)+"/head:"+remote); err != nil {
			return nil, err
		}
		if has(local) && !m.isAncestor(ctx, mirror, remote, local) {
			if err := m.catchUp(ctx, mirror, c.Branch, local, remote); err != nil {
				return nil, err
			}
		}
		if has(local) {
			return []string{"worktree", "add", "--quiet", c.Dir, c.Branch}, nil
		}
		return []string{"worktree", "add", "--quiet", "--no-track", "-b", c.Branch, c.Dir, remote}, nil
	default:
		switch {
		case has("refs/heads/" + c.Branch):
			if err := m.upstream(ctx, mirror, c.Branch, false); err != nil {
				return nil, err
			}
			return []string{"worktree", "add", "--quiet", c.Dir, c.Branch}, nil
		case has("refs/remotes/origin/" + c.Branch):
			// The agent pushed the branch from an earlier worktree.
			return []string{"worktree", "add", "--quiet", "--track", "-b", c.Branch, c.Dir, "refs/remotes/origin/" + c.Branch}, nil
		}
		base, err := m.base(ctx, mirror, env, c.Base)
		if err != nil {
			return nil, err
		}
		if err := m.upstream(ctx, mirror, c.Branch, true); err != nil {
			return nil, err
		}
		return []string{"worktree", "add", "--quiet", "--no-track", "-b", c.Branch, c.Dir, base}, nil
	}
}

// upstream makes origin's branch of the same name the upstream of an
// issue's local branch (branch.<b>.remote origin, branch.<b>.merge
// refs/heads/<b>), so that a plain `git push` in its worktree creates or
// updates that branch on the remote (git-push(1): push.default "simple",
// git's default, pushes to an upstream of the same name and refuses a
// branch with none), and a plain `git pull` pulls it once it is there. A
// new branch gets it always: written before the worktree is added, as
// `--no-track` leaves a branch's config alone, so a daemon killed between
// the two leaves a worktree that pushes right. An existing branch gets it
// only when it has no upstream (one made before loopd set it): one set
// by someone else is theirs. Only the branch's own keys are written.
func (m *Manager) upstream(ctx context.Context, mirror, branch string, replace bool) error {
	if !replace {
		_, err := m.run(ctx, "config", mirror, nil, "config", "--get-all", "branch."+branch+".merge")
		var e *Error
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &e) || e.Exit != 1:
			return err // exit 1 is "no such key" (git-config(1))
		}
	}
	for _, kv := range [][2]string{
		{"branch." + branch + ".remote", "origin"},
		{"branch." + branch + ".merge", "refs/heads/" + branch},
	} {
		if _, err := m.run(ctx, "config", mirror, nil, "config", "--replace-all", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// has reports whether ref names a commit in mirror.
func (m *Manager) has(ctx context.Context, mirror, ref string) bool {
	_, err := m.run(ctx, "rev-parse", mirror, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return err == nil
}

// isAncestor reports whether commit a is an ancestor of b (or b itself)
// in mirror; false when git cannot tell.
func (m *Manager) isAncestor(ctx context.Context, mirror, a, b string) bool {
	_, err := m.run(ctx, "merge-base", mirror, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// catchUp brings the local branch of a pull request, which does not hold
// the PR's head (remote), to that head before a worktree is made of it:
// the PR's head is what the agent must work on, not a branch an earlier,
// removed worktree left behind. A local branch behind the head moves to it;
// one with commits the head lacks (the PR was force-pushed) is kept under
// <branch>.loopd-<its commit>, so nothing is lost, and the branch is made
// again from the head. A branch checked out in another worktree is left
// alone: git refuses both.
func (m *Manager) catchUp(ctx context.Context, mirror, branch, local, remote string) error {
	if shared, err := m.checkedOut(ctx, mirror, local); err != nil || shared {
		return err // another worktree's: the add reports it
	}
	if m.isAncestor(ctx, mirror, local, remote) {
		_, err := m.run(ctx, "branch", mirror, nil, "branch", "--force", branch, remote)
		return err
	}
	out, err := m.run(ctx, "rev-parse", mirror, nil, "rev-parse", "--short=8", local)
	if err != nil {
		return err
	}
	if _, err := m.run(ctx, "branch", mirror, nil, "branch", "--move", branch, branch+".loopd-"+strings.TrimSpace(string(out))); err != nil {
		return err
	}
	return nil
}

// checkedOut reports whether a worktree of mirror has the local branch ref
// (refs/heads/…) checked out; git refuses to check it out in a second one.
func (m *Manager) checkedOut(ctx context.Context, mirror, ref string) (bool, error) {
	list, err := m.run(ctx, "worktree list", mirror, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return false, err
	}
	return slices.Contains(strings.Split(string(list), "\n"), "branch "+ref), nil
}

// sharedHead returns the `git worktree add` arguments for a pull request
// whose head branch c.Branch another worktree has checked out: the agent
// pushed its issue branch and opened a pull request from it. git checks a
// branch out in one worktree only, and the issue's worktree is never moved,
// so the pull request gets a branch of its own, loopd/pr-<c.PR>, at the
// head (caught up like any pull request branch, catchUp), set up so that a
// plain `git pull` and `git push` in it go to the head branch:
//   - its upstream is origin/<c.Branch> (branch.<b>.remote and .merge:
//     pull, status and @{upstream});
//   - it pushes to a remote of its own, loopd-pr-<c.PR>, with the public
//     URL and the push refspec refs/heads/loopd/pr-<n>:refs/heads/<c.Branch>
//     (branch.<b>.pushRemote; git-push(1): a remote's push refspecs win over
//     push.default, whose "simple" refuses a branch whose upstream has
//     another name). Origin's config is left alone: the issue's worktree
//     pushes as before. The remote has no fetch refspec, since two remotes
//     that map to one tracking ref make git's tracking ambiguous; so its
//     push leaves origin/<c.Branch> behind until the next fetch.
//
// Both worktrees push to one remote branch without force, so git's
// fast-forward rule refuses the push of the one that is behind until it
// pulls the other's commits. The config is written before the worktree is
// added, so a daemon killed between the two leaves a worktree that pushes
// right when it is used as it is.
func (m *Manager) sharedHead(ctx context.Context, mirror string, c Checkout) ([]string, error) {
	pub, err := Public(c.URL)
	if err != nil {
		return nil, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	n := strconv.Itoa(c.PR)
	own, pushRemote := "loopd/pr-"+n, "loopd-pr-"+n
	local, remote := "refs/heads/"+own, "refs/remotes/origin/"+c.Branch
	for _, kv := range [][2]string{
		{"remote." + pushRemote + ".url", pub},
		{"remote." + pushRemote + ".push", local + ":refs/heads/" + c.Branch},
		{"branch." + own + ".remote", "origin"},
		{"branch." + own + ".merge", "refs/heads/" + c.Branch},
		{"branch." + own + ".pushRemote", pushRemote},
	} {
		if _, err := m.run(ctx, "config", mirror, nil, "config", "--replace-all", kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if m.has(ctx, mirror, local) && !m.isAncestor(ctx, mirror, remote, local) {
		// Left by an earlier, removed worktree of the pull request.
		if err := m.catchUp(ctx, mirror, own, local, remote); err != nil {
			return nil, err
		}
	}
	if m.has(ctx, mirror, local) {
		return []string{"worktree", "add", "--quiet", c.Dir, own}, nil
	}
	return []string{"worktree", "add", "--quiet", "--no-track", "-b", own, c.Dir, remote}, nil
}

// base returns the ref an issue branch starts from: origin's branch base,
// or the remote's default branch (asked of the remote, `git remote
// set-head --auto`).
func (m *Manager) base(ctx context.Context, mirror string, env []string, base string) (string, error) {
	if base != "" {
		return "refs/remotes/origin/" + base, nil
	}
	if _, err := m.run(ctx, "set-head", mirror, env, "remote", "set-head", "origin", "--auto"); err != nil {
		return "", err
	}
	out, err := m.run(ctx, "set-head", mirror, nil, "symbolic-ref", "refs/remotes/origin/HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Why a worktree is kept at close (workspace.kept reason=…).
const (
	KeptDirty     = "uncommitted_changes"
	KeptUntracked = "untracked_files"
	KeptUnpushed  = "unpushed_commits"
	KeptNotOurs   = "not_a_worktree"
	// KeptIgnored: files git ignores (build output, logs, notes) are the
	// agent's work too, and `git worktree remove` would delete them.
	KeptIgnored = "ignored_files"
	// KeptReflog: a commit only the worktree's HEAD reflog still holds
	// (made on a detached HEAD, say) would become unreachable with it.
	KeptReflog = "unreachable_commits"
)

// maxReflog bounds the HEAD reflog entries Remove looks through.
const maxReflog = 1000

// Remove removes the worktree dir of rawURL's mirror with `git worktree
// remove`, only when it is clean: no uncommitted change, no untracked or
// ignored file, no commit that no remote branch of the mirror holds, in
// HEAD or in the worktree's HEAD reflog (at most maxReflog entries), which
// goes with the worktree. It returns the reason it kept it instead (""
// when removed, or when dir is gone).
func (m *Manager) Remove(ctx context.Context, rawURL, dir string) (kept string, err error) {
	return m.remove(ctx, rawURL, dir, true)
}

// Kept returns the reason Remove would keep the worktree dir of rawURL's
// mirror ("" when it would remove it, or when dir is gone), from the same
// checks under the same lock, and removes nothing.
func (m *Manager) Kept(ctx context.Context, rawURL, dir string) (string, error) {
	return m.remove(ctx, rawURL, dir, false)
}

// remove is Remove, and Kept when do is false.
func (m *Manager) remove(ctx context.Context, rawURL, dir string, do bool) (kept string, err error) {
	mirror, err := Mirror(m.Root, rawURL)
	if err != nil {
		return "", &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	ctx, unlock, err := m.lock(ctx, mirror)
	if err != nil {
		return "", err
	}
	defer unlock()
	f, err := Inspect(dir, mirror)
	switch {
	case err != nil:
		return "", &Error{Op: "inspect", Command: "-", Exit: -1, Class: fsClass(err), Reason: "inspect_failed", Err: err}
	case !f.Exists:
		return "", nil
	case !f.Worktree:
		return KeptNotOurs, nil
	}
	out, err := m.run(ctx, "status", dir, nil, "status", "--porcelain", "--untracked-files=all", "--ignored")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "??"):
			return KeptUntracked, nil
		case strings.HasPrefix(l, "!!"):
			return KeptIgnored, nil
		case l != "":
			return KeptDirty, nil
		}
	}
	out, err = m.run(ctx, "rev-list", dir, nil, "rev-list", "--max-count=1", "HEAD", "--not", "--remotes")
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return KeptUnpushed, nil
	}
	logged, err := m.run(ctx, "reflog", dir, nil, "rev-list", "--walk-reflogs", "--max-count="+strconv.Itoa(maxReflog), "HEAD")
	if err != nil {
		return "", err
	}
	if commits := strings.Fields(string(logged)); len(commits) > 0 {
		out, err = m.run(ctx, "rev-list", dir, nil, append(append([]string{"rev-list", "--max-count=1"}, commits...), "--not", "--remotes")...)
		if err != nil {
			return "", err
		}
		if len(bytes.TrimSpace(out)) > 0 {
			return KeptReflog, nil
		}
	}
	if !do {
		return "", nil
	}
	if _, err := m.run(ctx, "worktree remove", mirror, nil, "worktree", "remove", f.Physical); err != nil {
		return "", err
	}
	return "", nil
}

// lock takes the mirror's lock: one operation at a time per mirror, in
// this process (a mutex) and across processes (flock on <mirror>.lock,
// waited for until ctx ends). The returned context carries the lock file:
// run hands it to every git it starts (lockFile), so the flock, held by
// the open file (flock(2)), stays held while a git or a child of it runs,
// even when loopd is killed and another loopd takes over the mirror.
func (m *Manager) lock(ctx context.Context, mirror string) (context.Context, func(), error) {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[string]chan struct{}{}
	}
	token := m.locks[mirror]
	if token == nil {
		token = make(chan struct{}, 1)
		token <- struct{}{}
		m.locks[mirror] = token
	}
	m.mu.Unlock()
	select {
	case <-token:
	case <-ctx.Done():
		return ctx, nil, cancelled(ctx, "lock", "-")
	}
	release := func() { token <- struct{}{} }
	if err := os.MkdirAll(filepath.Dir(mirror), 0o700); err != nil {
		release()
		return ctx, nil, mkdirError(filepath.Dir(mirror), err)
	}
	f, err := os.OpenFile(mirror+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		release()
		return ctx, nil, &Error{Op: "lock", Command: "-", Exit: -1, Class: Transient, Reason: "lock_failed", Err: err}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || ctx.Err() != nil {
			f.Close()
			release()
			if ctx.Err() != nil {
				return ctx, nil, cancelled(ctx, "lock", "-")
			}
			return ctx, nil, &Error{Op: "lock", Command: "-", Exit: -1, Class: Transient, Reason: "lock_held", Err: err}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return context.WithValue(ctx, lockKey{}, f), func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
		release()
	}, nil
}

// lockKey is the context key of the mirror's lock file.
type lockKey struct{}

// lockFile returns the lock file lock put in ctx, or nil.
func lockFile(ctx context.Context) *os.File {
	f, _ := ctx.Value(lockKey{}).(*os.File)
	return f
}

// MakeDir creates a plain workdir (no checkout) and its parents, mode 0755.
// Its failure is an *Error: a permission, a read-only file system or a file
// in the way is Permanent, anything else (no space, I/O) Transient.
func MakeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mkdirError(dir, err)
	}
	return nil
}

func mkdirError(dir string, err error) error {
	return &Error{Op: "mkdir", Command: "mkdir -p " + dir, Exit: -1, Class: fsClass(err), Reason: "mkdir_failed", Err: err}
}

// fsClass classes a file system error on the workdir: no permission, a
// read-only file system, a path through a file, a name too long or a
// symlink loop stay until an operator acts (Permanent); anything else,
// such as a full disk, may pass (Transient).
func fsClass(err error) Class {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOTDIR,
		syscall.EEXIST, syscall.ENAMETOOLONG, syscall.ELOOP} {
		if errors.Is(err, errno) {
			return Permanent
		}
	}
	return Transient
}

// commitName is the shape of a commit id loopd asks git about: hex, as
// GitHub's payloads give it (never an option or a revision expression).
var commitName = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// Holds reports whether the git repository or worktree at dir holds commit
// in its HEAD's history (git merge-base --is-ancestor commit HEAD): true
// when HEAD is commit or descends from it. A commit git does not know
// (another's push, not fetched there) is not held. The error is a git
// failure other than that, or a commit that is not hex.
func (m *Manager) Holds(ctx context.Context, dir, commit string) (bool, error) {
	if !commitName.MatchString(commit) {
		return false, fmt.Errorf("holds %s in %s: not a commit id", commit, dir)
	}
	_, err := m.run(ctx, "merge-base", dir, nil, "merge-base", "--is-ancestor", commit, "HEAD")
	var e *Error
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &e) && e.Exit == 1:
		return false, nil // not an ancestor
	case errors.As(err, &e) && e.Exit == 128 && strings.Contains(e.Stderr, commit):
		return false, nil // a commit this repository has never seen
	}
	return false, err
}
