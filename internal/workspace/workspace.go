// Package workspace makes and removes the git workdirs work items run in,
// with the real git CLI: one bare mirror per repository under the state
// dir, fetched before each workdir is made from it, and per item a clone
// of its own that borrows the mirror's objects (objects/info/alternates)
// and has its own refs, index, config and objects for its own commits, so
// that an agent in one can move no other item's branch (Prepare,
// Borrowed). Worktrees of the mirror, which older versions made, are
// migrated to clones in place. Every git command runs with
// GIT_TERMINAL_PROMPT=0 (a missing credential fails at once), ssh in
// batch mode, a timeout, and one operation at a time per mirror (a lock
// file beside it). loopd's own git in a workdir reads it through a view
// that leaves out the workdir's config and hooks, which are the agent's
// (inWorkdir). Failures are *Error values that carry the command and the
// tail of its stderr with every URL's credentials masked, classified
// Transient or Permanent.
//
// Credentials are git's own (ssh-agent, credential helpers). A URL that
// carries them is never stored in the mirror's or a clone's config nor
// put on git's command line, nor given to git at all: the remotes hold
// the URL without them (Public), and loopd's own fetch hands an http(s)
// URL's user name and password to git through a credential helper that
// reads them from that git's environment (Credentials), which other users
// cannot read. A password in any other URL (ssh) is refused
// (ErrPasswordInURL).
package workspace

import (
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
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrConflict means the workdir exists, is neither a clone nor a worktree
// of the routed repository, and holds files: it is never touched.
var ErrConflict = errors.New("workdir exists and is not a clone of the repository")

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

// Mode is how a clone gets its branch.
type Mode string

// The modes of a checkout.
const (
	// ModeIssue: a new branch Branch from Base (the remote's default
	// branch when empty), or from the remote's Branch when it exists.
	ModeIssue Mode = "issue"
	// ModePullRequest: the pull request's head branch Branch, in the same
	// repository, tracking the remote branch; also when it is another
	// item's issue branch (the agent's own pull request): each clone has
	// its branches to itself.
	ModePullRequest Mode = "pull_request"
	// ModeFork: refs/pull/<PR>/head fetched into the local branch Branch
	// (loopd/pr-<PR>), for a fork, or a pull request whose head is not
	// known.
	ModeFork Mode = "fork"
)

// Checkout is one workdir to make.
type Checkout struct {
	URL    string // the remote, as configured (may carry credentials)
	Dir    string // the workdir
	Mode   Mode
	Branch string
	Base   string // ModeIssue only; "" is the remote's default branch
	PR     int    // ModeFork and ModePullRequest: the pull request's number
	// PushURL and PushBranch, ModeFork only, are the fork's repository
	// (as configured, may carry credentials) and its pull request's head
	// branch, when the fork lets the base's maintainers push to it
	// (maintainer_can_modify): a plain `git push` in the clone then goes
	// to that branch of the fork, and nowhere else (makeClone). "" for
	// none: the fork's clone has no upstream.
	PushURL, PushBranch string
}

// headRemote is the name of the remote of a fork's repository in its
// pull request's clone (Checkout.PushURL).
const headRemote = "head"

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
	// Clone is true when the workdir is a clone of the mirror asked about:
	// its .git is a directory (not a symlink) whose
	// objects/info/alternates names the mirror's objects dir.
	Clone bool
	// Worktree is true when the workdir is a git worktree of the mirror
	// asked about, as loopd made them before clones (its .git file names
	// an admin dir <mirror>/worktrees/<name> whose common dir is the
	// mirror); Prepare migrates it to a clone. A migration cut short
	// before its new .git was in place shows as a Worktree too.
	Worktree bool
	// Partial is true for such a worktree whose `git worktree add` never
	// finished (its admin dir is still locked "initializing"): a daemon
	// killed halfway.
	Partial bool
	// Leftover is true for a clone that holds what a killed git or
	// loopd left in it: a git lock file (index.lock, HEAD.lock, a ref's)
	// that no git process holds (staleLocks), or the parts of a
	// migration cut short after its new .git was in place. Prepare
	// removes them.
	Leftover bool
	// Physical is the workdir with every symlink resolved, when it exists.
	Physical string
	// Busy is true when a workspace operation holds the mirror's lock now
	// (Manager.lock), in this process or another, or a git a killed daemon
	// started still runs in it: a preparation is in flight.
	Busy bool
}

// The names a migration (Manager.migrate) gives, inside the workdir, to
// the clone's .git it is making and to the worktree's .git file while the
// first replaces the second.
const (
	migratingGit    = ".loopd-git-new"
	migratedGitfile = ".loopd-gitfile-old"
)

// Inspect returns the Fact of dir, as a clone or a worktree of mirror (""
// for a plain workdir). An error means dir could not be read.
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
	gitdir := filepath.Join(dir, ".git")
	if info, err := os.Lstat(gitdir); err == nil && info.IsDir() {
		if !borrows(gitdir, filepath.Join(mirror, "objects")) {
			return f, nil
		}
		f.Clone = true
		f.Leftover = len(staleLocks(gitdir, []string{f.Physical})) > 0 ||
			exists(filepath.Join(dir, migratedGitfile)) || exists(filepath.Join(dir, migratingGit))
		return f, nil
	}
	admin, ok := worktreeAdmin(dir, mirror)
	if !ok {
		return f, nil
	}
	f.Worktree = true
	f.Partial = initializing(admin)
	return f, nil
}

// borrows reports whether the git dir gitdir borrows the objects dir
// objects (a line of its objects/info/alternates names it).
func borrows(gitdir, objects string) bool {
	b, err := os.ReadFile(filepath.Join(gitdir, "objects", "info", "alternates"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && filepath.IsAbs(l) && samePath(l, objects) {
			return true
		}
	}
	return false
}

// exists reports whether path names anything (a symlink included).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
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
	Commit string // HEAD of the workdir
	// Existing is true when the workdir already was a clone of the
	// repository and was used as it is.
	Existing bool
	// Migrated is true when the workdir was a worktree of the mirror
	// (an older loopd's) and is a clone now.
	Migrated bool
	// Repaired is true when Prepare removed or finished what a killed
	// git or loopd had left (Repairs says what).
	Repaired bool
	// Repairs says what was repaired, one short text each: a lock file
	// removed, a half-made clone or worktree removed or finished, a
	// worktree registration pruned.
	Repairs []string
}

// Prepare makes c.Dir a clone of c.URL's repository that borrows the
// objects of the repository's mirror (objects/info/alternates), on the
// branch c asks for (makeClone): the mirror is made when missing and
// fetched first. A workdir that already is such a clone is used as it
// is, whatever its branch or state; a git worktree of the mirror, as
// older loopd versions made them, is migrated to a clone in place,
// keeping its branch, index, untracked files and per-worktree state
// (migrate), after one left half-made by a killed `git worktree add` is
// finished (repair). A workdir that exists with files in it and is
// neither fails with ErrConflict, untouched.
//
// It repairs what a killed git or loopd left, under the mirror's lock
// and only in what is loopd's: lock files no git holds in the mirror and
// in the clone (staleLocks), the mirror's worktree registrations whose
// directory is gone (unlocked when git's interrupted add left them locked
// "initializing", then pruned) or that a migration replaced, and the
// temporary dirs of an interrupted clone, removal or migration of
// c.Dir. Errors are *Error, or wrap ErrConflict.
func (m *Manager) Prepare(ctx context.Context, c Checkout) (Result, error) {
	mirror, err := Mirror(m.Root, c.URL)
	if err != nil {
		return Result{}, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	res := Result{Mirror: mirror, Branch: c.Branch}
	ctx, unlock, err := m.lock(ctx, mirror)
	if err != nil {
		return res, err
	}
	defer unlock()
	f, err := Inspect(c.Dir, mirror)
	if err != nil {
		return res, &Error{Op: "inspect", Command: "-", Exit: -1, Class: fsClass(err), Reason: "inspect_failed", Err: err}
	}
	if f.Exists && !f.Empty && !f.Clone && !f.Worktree {
		return res, fmt.Errorf("prepare %s: %w", c.Dir, ErrConflict)
	}
	env, made, err := m.ensureMirror(ctx, mirror, c.URL, &res)
	if err != nil {
		return res, err
	}
	if err := m.pruneRegistrations(ctx, mirror, &res); err != nil {
		return res, err
	}
	if err := sweep(c.Dir, &res); err != nil {
		return res, err
	}
	fetch := func() error {
		_, err := m.run(ctx, "fetch", mirror, env, "fetch", "--quiet", "--prune", "origin")
		return err
	}
	switch {
	case f.Clone:
		res.Existing = true
		if made {
			// The clone outlived its mirror: its objects come back
			// with the fetch.
			if err := fetch(); err != nil {
				return res, err
			}
		}
		if err := tidy(c.Dir, &res); err != nil {
			return res, err
		}
		if err := lend(mirror, f.Physical); err != nil {
			return res, &Error{Op: "lend", Command: "-", Exit: -1, Class: fsClass(err), Reason: "clone_failed", Err: err}
		}
		return m.finish(ctx, res, c.Dir)
	case f.Worktree:
		if f.Partial {
			if err := m.repair(ctx, c.Dir); err != nil {
				return res, err
			}
			res.Repairs = append(res.Repairs, "finished the checkout of an interrupted git worktree add")
		}
		if err := m.migrate(ctx, mirror, c); err != nil {
			return res, err
		}
		res.Migrated = true
		return m.finish(ctx, res, c.Dir)
	}
	if err := fetch(); err != nil {
		return res, err
	}
	s, err := m.startOf(ctx, mirror, env, c)
	if err != nil {
		return res, err
	}
	if err := m.makeClone(ctx, mirror, c, s); err != nil {
		return res, err
	}
	return m.finish(ctx, res, c.Dir)
}

// finish fills res from the clone at dir.
func (m *Manager) finish(ctx context.Context, res Result, dir string) (Result, error) {
	res.Repaired = len(res.Repairs) > 0
	phys, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return res, &Error{Op: "resolve", Command: "-", Exit: -1, Class: fsClass(err), Reason: "inspect_failed", Err: err}
	}
	res.Dir = phys
	// HEAD's commit, then its branch ("HEAD" when detached).
	if out, err := m.inWorkdir(ctx, "rev-parse", phys, nil, "rev-parse", "HEAD", "--abbrev-ref", "HEAD"); err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			res.Commit = f[0]
			if f[1] != "HEAD" {
				res.Branch = f[1]
			}
		}
	}
	return res, nil
}

// mirrorConfig is what ensureMirror keeps in every mirror's config besides
// its origin: repository format 1 with extensions.preciousObjects, under
// which git refuses to delete any object (git-config(1); measured with
// git 2.39: `git prune` and `git repack -d` die, and `git gc` skips both),
// since the clones borrow the mirror's objects and git cannot see their
// refs; and no automatic gc or maintenance after a fetch. loopd itself
// never runs gc on a mirror.
var mirrorConfig = [][2]string{
	{"core.repositoryformatversion", "1"},
	{"extensions.preciousobjects", "true"},
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
}

// ensureMirror makes the bare mirror of rawURL when missing (made reports
// it), removes the lock files no git holds in it (staleLocks: a fetch
// killed with the daemon leaves a ref's), and writes the config it must
// have (mirrorConfig, its origin fetching the URL without credentials)
// where it differs, so that a Prepare writes no config once the mirror is
// set. It returns the environment that gives loopd's own fetch the URL's
// credentials (Credentials).
func (m *Manager) ensureMirror(ctx context.Context, mirror, rawURL string, res *Result) (env []string, made bool, err error) {
	pub, err := Public(rawURL)
	if err != nil {
		return nil, false, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	if _, err := os.Stat(filepath.Join(mirror, "HEAD")); err != nil {
		if err := os.MkdirAll(m.Root, 0o700); err != nil {
			return nil, false, mkdirError(m.Root, err)
		}
		tmp, err := os.MkdirTemp(m.Root, ".new-")
		if err != nil {
			return nil, false, mkdirError(m.Root, err)
		}
		defer os.RemoveAll(tmp)
		if _, err := m.run(ctx, "init", tmp, nil, "init", "--quiet", "--bare", "."); err != nil {
			return nil, false, err
		}
		if err := os.Rename(tmp, mirror); err != nil {
			return nil, false, &Error{Op: "init", Command: "-", Exit: -1, Class: Transient, Reason: "mirror_failed", Err: err}
		}
		made = true
	}
	removed, err := removeStale(mirror, mirror, m.mirrorDirs(mirror))
	for _, r := range removed {
		res.Repairs = append(res.Repairs, "removed the mirror's stale "+r)
	}
	if err != nil {
		return nil, made, err
	}
	out, err := m.run(ctx, "config", mirror, nil, "config", "--local", "--list")
	if err != nil {
		return nil, made, err
	}
	have := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			have[k] = append(have[k], v)
		}
	}
	want := append(slices.Clone(mirrorConfig),
		[2]string{"remote.origin.url", pub},
		[2]string{"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"})
	for _, kv := range want {
		if slices.Equal(have[kv[0]], []string{kv[1]}) {
			continue
		}
		if _, err := m.run(ctx, "config", mirror, nil, "config", "--replace-all", kv[0], kv[1]); err != nil {
			return nil, made, err
		}
	}
	env, err = Credentials(rawURL)
	if err != nil {
		return nil, made, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	return env, made, nil
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

// dirMode is the mode of the directories loopd makes for workdirs: an
// agent's workdir and what holds it are its own, and one under the state
// dir (as config init puts them) is as private as the rest of it.
const dirMode = 0o700

// MakeDir creates a plain workdir (no checkout) and its parents, mode 0700
// (dirMode).
// Its failure is an *Error: a permission, a read-only file system or a file
// in the way is Permanent, anything else (no space, I/O) Transient.
func MakeDir(dir string) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
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
// in its HEAD's history (git merge-base --is-ancestor commit HEAD, run
// through a view of the repository, inWorkdir): true
// when HEAD is commit or descends from it. A commit git does not know
// (another's push, not fetched there) is not held. The error is a git
// failure other than that, or a commit that is not hex.
func (m *Manager) Holds(ctx context.Context, dir, commit string) (bool, error) {
	if !commitName.MatchString(commit) {
		return false, fmt.Errorf("holds %s in %s: not a commit id", commit, dir)
	}
	_, err := m.inWorkdir(ctx, "merge-base", dir, nil, "merge-base", "--is-ancestor", commit, "HEAD")
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
