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
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// start is where a new clone's branch begins.
type start struct {
	branch string
	from   string // a ref of the mirror
	// upstream, when set, is the branch's upstream config (remote, merge),
	// written in the clone's own config.
	upstream [2]string
	// pull, when set, is the mirror's ref of a fork's pull request head,
	// which the clone gets too (its commits count as pushed, Remove).
	pull string
	// push, when set, is the public URL of the fork's repository that the
	// branch's upstream is on (headRemote, Checkout.PushURL).
	push string
}

// startOf returns where c's branch begins in a new clone, from the mirror
// just fetched. A local branch of the mirror of that name is what an
// older loopd's worktree left (the clone is made of it when it holds
// commits the remote's lacks, so none is lost; otherwise the remote's):
//   - an issue: its branch from origin's branch of its name, which the
//     agent pushed from an earlier workdir, or else from the base (the
//     remote's default branch when empty); its upstream is origin's
//     branch of its name, so that a plain `git push` creates and then
//     updates it (git-push(1): push.default "simple" pushes to an upstream
//     of the same name and refuses a branch with none), except for a left
//     branch whose upstream someone set: theirs;
//   - a pull request of the same repository: its head branch, tracking
//     origin's; the remote must have it;
//   - a fork's: refs/pull/<PR>/head, fetched afresh each time into the
//     mirror's refs/remotes/origin/pull/<PR> (a force-pushed fork moves
//     it), as the local branch c.Branch, with no upstream; or, when the
//     fork takes the base's maintainers' pushes (c.PushURL), with the
//     fork's head branch c.PushBranch as its upstream on the remote
//     headRemote (the fork's URL), so a plain `git push` updates that
//     branch of the fork (push.default upstream, git-config(1)), and
//     never the base's branch of the same name.
func (m *Manager) startOf(ctx context.Context, mirror string, env []string, c Checkout) (start, error) {
	if badBranch(c.Branch) {
		return start{}, &Error{Op: "branch", Command: "-", Exit: -1, Class: Permanent, Reason: "git_failed",
			Err: fmt.Errorf("branch %q: not a valid branch name", c.Branch)}
	}
	has := func(ref string) bool { return m.has(ctx, mirror, ref) }
	local := "refs/heads/" + c.Branch
	s := start{branch: c.Branch, upstream: [2]string{"origin", "refs/heads/" + c.Branch}}
	// ahead reports whether the left local branch holds remote's commits
	// and may be more, so that starting from it loses nothing.
	ahead := func(remote string) bool { return has(local) && m.isAncestor(ctx, mirror, remote, local) }
	switch c.Mode {
	case ModePullRequest:
		s.from = "refs/remotes/origin/" + c.Branch
		if !has(s.from) {
			return s, &Error{Op: "branch", Command: "-", Exit: -1, Class: Permanent, Reason: "git_failed",
				Err: fmt.Errorf("the pull request's head branch %s is not on the remote", c.Branch)}
		}
		if ahead(s.from) {
			s.from = local
		}
	case ModeFork:
		s.pull, s.upstream = "refs/remotes/origin/pull/"+strconv.Itoa(c.PR), [2]string{}
		if c.PushURL != "" {
			if badBranch(c.PushBranch) {
				return start{}, &Error{Op: "branch", Command: "-", Exit: -1, Class: Permanent, Reason: "git_failed",
					Err: fmt.Errorf("the fork's head branch %q: not a valid branch name", c.PushBranch)}
			}
			pub, err := Public(c.PushURL)
			if err != nil {
				return start{}, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
			}
			s.push, s.upstream = pub, [2]string{headRemote, "refs/heads/" + c.PushBranch}
		}
		if _, err := m.run(ctx, "fetch", mirror, env, "fetch", "--quiet", "origin", "+refs/pull/"+strconv.Itoa(c.PR)+"/head:"+s.pull); err != nil {
			return s, err
		}
		s.from = s.pull
		if ahead(s.pull) {
			s.from = local
		}
	default:
		remote := "refs/remotes/origin/" + c.Branch
		if has(local) {
			if out, err := m.run(ctx, "config", mirror, nil, "config", "--get", "branch."+c.Branch+".merge"); err == nil {
				r, _ := m.run(ctx, "config", mirror, nil, "config", "--get", "branch."+c.Branch+".remote")
				s.upstream = [2]string{strings.TrimSpace(string(r)), strings.TrimSpace(string(out))}
			}
		}
		switch {
		case has(local) && has(remote) && m.isAncestor(ctx, mirror, local, remote):
			s.from = remote
		case has(local):
			s.from = local
		case has(remote):
			s.from = remote
		default:
			base, err := m.base(ctx, mirror, env, c.Base)
			if err != nil {
				return s, err
			}
			if !has(base) {
				return s, &Error{Op: "branch", Command: "-", Exit: -1, Class: Permanent, Reason: "git_failed",
					Err: fmt.Errorf("the base branch %s is not on the remote", strings.TrimPrefix(base, "refs/remotes/origin/"))}
			}
			s.from = base
		}
	}
	return s, nil
}

// badBranch reports whether name cannot be a branch loopd names to git:
// empty, or with a control character (the branch names come validated,
// schema.ValidBranch; this keeps any other out of a config file).
func badBranch(name string) bool {
	return name == "" || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// cloneRefspecs are what a clone fetches from its mirror: the remote's
// branches, without the pull request heads of forks the mirror fetched
// for other items, and its tags.
var cloneRefspecs = []string{"+refs/remotes/origin/*:refs/remotes/origin/*", "^refs/remotes/origin/pull/*", "+refs/tags/*:refs/tags/*"}

// makeClone makes c.Dir a clone of the mirror on s's branch. It is built
// whole in a temporary directory beside c.Dir, .<name>.loopd-new-*, and
// renamed onto c.Dir (which must be missing or empty) once done, so that
// c.Dir never holds half a clone: a loopd killed meanwhile leaves the
// temporary directory, which the next Prepare removes (sweep). The clone:
//   - borrows the mirror's objects (objects/info/alternates names the
//     mirror's physical objects dir), and writes the objects of its own
//     commits in its own objects dir;
//   - has origin, the repository's URL without credentials, so the
//     agent's push goes to the remote itself, with its credentials;
//   - has the mirror's remote-tracking branches and tags, fetched from
//     the mirror (nothing is copied: the objects are borrowed);
//   - has s's branch checked out, with its upstream in its own config:
//     setting up a clone writes no config any other workdir reads;
//   - is lent by the mirror (lend), so that Borrowed names its objects.
func (m *Manager) makeClone(ctx context.Context, mirror string, c Checkout, s start) error {
	fail := func(err error) error {
		return &Error{Op: "clone", Command: "-", Exit: -1, Class: fsClass(err), Reason: "clone_failed", Err: err}
	}
	pub, err := Public(c.URL)
	if err != nil {
		return &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	parent := filepath.Dir(c.Dir)
	if err := os.MkdirAll(parent, dirMode); err != nil {
		return mkdirError(parent, err)
	}
	physParent, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return fail(err)
	}
	physMirror, err := filepath.EvalSymlinks(mirror)
	if err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp(parent, tempPrefix(c.Dir)+"new-")
	if err != nil {
		return mkdirError(parent, err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	git := func(op string, args ...string) ([]byte, error) { return m.run(ctx, op, tmp, nil, args...) }
	if _, err := git("init", "init", "--quiet", "."); err != nil {
		return err
	}
	gitdir := filepath.Join(tmp, ".git")
	if err := os.WriteFile(filepath.Join(gitdir, "objects", "info", "alternates"), []byte(filepath.Join(physMirror, "objects")+"\n"), 0o644); err != nil {
		return fail(err)
	}
	// The clone is loopd's alone until it is renamed into place: its
	// config is written whole, as git-config(1) quotes it, without a git
	// for each key.
	conf := "[remote \"origin\"]\n\turl = " + configQuote(pub) + "\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n"
	if s.push != "" {
		// Only the head branch is fetched from the fork: the clone's
		// branches are the base's.
		conf += "[remote " + configQuote(headRemote) + "]\n\turl = " + configQuote(s.push) + "\n\tfetch = " +
			configQuote("+"+s.upstream[1]+":refs/remotes/"+headRemote+"/"+strings.TrimPrefix(s.upstream[1], "refs/heads/")) + "\n" +
			"[push]\n\tdefault = upstream\n"
	}
	if s.upstream[0] != "" {
		conf += "[branch " + configQuote(s.branch) + "]\n\tremote = " + configQuote(s.upstream[0]) + "\n\tmerge = " + configQuote(s.upstream[1]) + "\n"
	}
	if err := appendFile(filepath.Join(gitdir, "config"), conf); err != nil {
		return fail(err)
	}
	if _, err := git("fetch", append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", physMirror}, cloneRefspecs...)...); err != nil {
		return err
	}
	if err := m.copyRef(ctx, mirror, gitdir, s.pull, s.pull != ""); err != nil {
		return err
	}
	if s.push != "" {
		// The fork's head branch is where the pull request's head is:
		// its upstream is known before any fetch from the fork (git
		// status counts the agent's commits ahead of it).
		if err := m.copyRefAs(ctx, mirror, gitdir, s.pull, "refs/remotes/"+headRemote+"/"+strings.TrimPrefix(s.upstream[1], "refs/heads/")); err != nil {
			return err
		}
	}
	if err := m.originHead(ctx, mirror, gitdir); err != nil {
		return err
	}
	// One packed-refs file rather than a file per remote branch: Inspect
	// looks through the loose refs for a stale lock on every pass.
	if _, err := git("pack-refs", "pack-refs", "--all"); err != nil {
		return err
	}
	out, err := m.run(ctx, "rev-parse", mirror, nil, "rev-parse", "--verify", s.from+"^{commit}")
	if err != nil {
		return err
	}
	if _, err := git("checkout", "checkout", "--quiet", "--no-track", "-b", s.branch, strings.TrimSpace(string(out))); err != nil {
		return err
	}
	if err := lend(mirror, filepath.Join(physParent, filepath.Base(c.Dir))); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err)
	}
	// rename(2) replaces an empty directory (os.Rename refuses to).
	if err := unix.Rename(tmp, c.Dir); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("prepare %s: %w", c.Dir, ErrConflict) // filled meanwhile
		}
		return fail(err)
	}
	done = true
	return nil
}

// setUpstream makes origin's branch of the same name the upstream of
// branch in the git dir gitdir.
func setUpstream(ctx context.Context, m *Manager, gitdir, branch string) error {
	for _, kv := range [][2]string{{"branch." + branch + ".remote", "origin"}, {"branch." + branch + ".merge", "refs/heads/" + branch}} {
		if _, err := m.run(ctx, "config", gitdir, []string{"GIT_DIR=" + gitdir}, "config", "--replace-all", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// copyRef gives the git dir gitdir the mirror's ref, when want and the
// mirror has it.
func (m *Manager) copyRef(ctx context.Context, mirror, gitdir, ref string, want bool) error {
	if !want {
		return nil
	}
	return m.copyRefAs(ctx, mirror, gitdir, ref, ref)
}

// copyRefAs sets the git dir gitdir's ref as to the mirror's ref, when the
// mirror has it.
func (m *Manager) copyRefAs(ctx context.Context, mirror, gitdir, ref, as string) error {
	out, err := m.run(ctx, "rev-parse", mirror, nil, "rev-parse", "--verify", "--quiet", ref)
	if err != nil {
		return nil // not there: nothing to copy
	}
	_, err = m.run(ctx, "update-ref", gitdir, []string{"GIT_DIR=" + gitdir}, "update-ref", as, strings.TrimSpace(string(out)))
	return err
}

// originHead gives the git dir gitdir the mirror's refs/remotes/origin/HEAD
// (the remote's default branch, which the clone fetched too), when the
// mirror knows it.
func (m *Manager) originHead(ctx context.Context, mirror, gitdir string) error {
	out, err := m.run(ctx, "symbolic-ref", mirror, nil, "symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
	if err != nil {
		return nil
	}
	_, err = m.run(ctx, "symbolic-ref", gitdir, []string{"GIT_DIR=" + gitdir}, "symbolic-ref", "refs/remotes/origin/HEAD", strings.TrimSpace(string(out)))
	return err
}

// configQuote returns s as a quoted git-config(1) value or subsection
// name: in double quotes, with backslash and double quote escaped. s holds
// no control character (Public and startOf refuse them).
func configQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// appendFile appends text to the file path.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(text)
	return errors.Join(werr, f.Close())
}

// tempPrefix is the name prefix of the temporary directories beside the
// workdir dir that its clone, its removal and a migration use:
// .<name>.loopd-.
func tempPrefix(dir string) string { return "." + filepath.Base(dir) + ".loopd-" }

// sweep removes what an interrupted clone or removal of the workdir dir
// left beside it (tempPrefix): nothing else is touched.
func sweep(dir string, res *Result) error {
	parent, prefix := filepath.Dir(dir), tempPrefix(dir)
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return repairError("repair", "rm -r "+p, err)
		}
		res.Repairs = append(res.Repairs, "removed "+e.Name()+", left by an interrupted clone or removal")
	}
	return nil
}

// tidy removes from the clone dir what a killed git or loopd left in it:
// the lock files no git holds (staleLocks; git in dir would fail on each)
// and the parts of a migration cut short after its new .git was in place.
func tidy(dir string, res *Result) error {
	for _, name := range []string{migratedGitfile, migratingGit} {
		p := filepath.Join(dir, name)
		if !exists(p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return repairError("repair", "rm -r "+p, err)
		}
		res.Repairs = append(res.Repairs, "removed "+name+", left by an interrupted migration")
	}
	phys, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return repairError("repair", "-", err)
	}
	removed, err := removeStale(filepath.Join(phys, ".git"), phys, []string{phys})
	for _, r := range removed {
		res.Repairs = append(res.Repairs, "removed the stale "+r)
	}
	return err
}

// lendPath is the lending record of the physical workdir dir in mirror:
// <mirror>/clones/<hash of dir>.
func lendPath(mirror, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(mirror, "clones", hex.EncodeToString(sum[:16]))
}

// lend records in mirror that the clone at the physical path dir borrows
// its objects (Borrowed checks it): a file of the mirror's own that names
// dir, which no agent can write (the sandbox shows it the mirror's
// objects dir only, read-only).
func lend(mirror, dir string) error {
	p := lendPath(mirror, dir)
	if b, err := os.ReadFile(p); err == nil && string(b) == dir+"\n" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return writeAtomic(p, []byte(dir+"\n"))
}

// unlend removes the lending record of the physical workdir dir.
func unlend(mirror, dir string) error {
	if err := os.Remove(lendPath(mirror, dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Borrowed returns the object dirs the git repository of workdir borrows
// from loopd's mirrors, physical paths, for the sandbox to bind read-only
// at the same paths: git in the workdir reads every object of the mirror
// through them (objects/info/alternates) and writes none there. A workdir
// whose .git is not a directory, or that borrows nothing, returns nil.
//
// The alternates file is the agent's to write, so an entry counts only
// when the mirror it names (the entry's parent, ending in "/objects")
// lent its objects to this very workdir: the mirror's lending record
// (<mirror>/clones/<hash>, written by Prepare when it made or migrated the
// clone) names workdir. An entry that was not lent (the agent's, or an
// operator's own `git clone --reference` in a plain workdir) is left out:
// bind it with the route's sandbox.binds if it must be seen. The error is
// an alternates file that cannot be read.
func Borrowed(workdir string) ([]string, error) {
	dir, err := filepath.EvalSymlinks(workdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	gitdir := filepath.Join(dir, ".git")
	if info, err := os.Lstat(gitdir); err != nil || !info.IsDir() {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(gitdir, "objects", "info", "alternates"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("borrowed objects of %s: %w", workdir, err)
	}
	var out []string
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		entry := strings.TrimSpace(string(l))
		if entry == "" || !filepath.IsAbs(entry) {
			continue
		}
		objects, err := filepath.EvalSymlinks(entry)
		if err != nil || filepath.Base(objects) != "objects" {
			continue
		}
		rec, err := readSmall(lendPath(filepath.Dir(objects), dir))
		if err != nil || string(rec) != dir+"\n" {
			continue
		}
		out = append(out, objects)
	}
	return out, nil
}

// FetchHead makes commit, a pull request's new head (a synchronize's, a
// force-push's included), one the clones of rawURL's repository can read,
// before the agent is told of it: when the mirror lacks it, the mirror
// fetches origin's branches and the pull request's refs/pull/<pr>/head
// (into refs/remotes/origin/pull/<pr>, as startOf does), under the
// mirror's lock. A clone borrows the mirror's objects, so nothing in the
// clone is touched: the agent's branch, its commits not pushed, its index
// and files stay as they are. fetched reports whether a fetch ran. The
// error is an *Error: the fetch's, or Transient with reason head_missing
// when the remote does not have commit either (the head moved again).
func (m *Manager) FetchHead(ctx context.Context, rawURL string, pr int, commit string) (fetched bool, err error) {
	if !commitName.MatchString(commit) || pr <= 0 {
		return false, &Error{Op: "fetch", Command: "-", Exit: -1, Class: Permanent, Reason: "git_failed",
			Err: fmt.Errorf("head %q of pull request %d: not a commit id", commit, pr)}
	}
	mirror, err := Mirror(m.Root, rawURL)
	if err != nil {
		return false, &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	ctx, unlock, err := m.lock(ctx, mirror)
	if err != nil {
		return false, err
	}
	defer unlock()
	if m.has(ctx, mirror, commit) {
		return false, nil
	}
	var res Result
	env, _, err := m.ensureMirror(ctx, mirror, rawURL, &res)
	if err != nil {
		return false, err
	}
	pull := strconv.Itoa(pr)
	if _, err := m.run(ctx, "fetch", mirror, env, "fetch", "--quiet", "origin",
		"+refs/heads/*:refs/remotes/origin/*", "+refs/pull/"+pull+"/head:refs/remotes/origin/pull/"+pull); err != nil {
		return true, err
	}
	if !m.has(ctx, mirror, commit) {
		return true, &Error{Op: "fetch", Command: "-", Exit: -1, Class: Transient, Reason: "head_missing",
			Err: fmt.Errorf("commit %s of pull request %d is not on the remote", commit, pr)}
	}
	return true, nil
}
