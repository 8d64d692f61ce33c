package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds what loopd still does with the git worktrees of a
// mirror that loopd versions before clones made: it recognizes them
// (worktreeAdmin), finishes one a killed `git worktree add` left half-made
// (repair), turns each into a clone in place (migrate), and prunes the
// mirror's registrations that are left (pruneRegistrations).

// adminDir returns the admin dir the .git file of dir names, or, while a
// migration is cut short between its two renames (no .git, the old file
// put aside), the one the put-aside file names.
func adminDir(dir string) (string, bool) {
	b, err := readSmall(filepath.Join(dir, ".git"))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = readSmall(filepath.Join(dir, migratedGitfile))
	}
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

// worktreeAdmin returns the admin dir of dir when dir is a worktree of
// mirror: its .git file names <mirror>/worktrees/<name>, whose commondir
// is the mirror. An admin dir anywhere else is not loopd's to touch.
func worktreeAdmin(dir, mirror string) (string, bool) {
	admin, ok := adminDir(dir)
	if !ok || !samePath(filepath.Dir(admin), filepath.Join(mirror, "worktrees")) {
		return "", false
	}
	common, err := readSmall(filepath.Join(admin, "commondir"))
	if err != nil {
		return "", false
	}
	c := strings.TrimSpace(string(common))
	if !filepath.IsAbs(c) {
		c = filepath.Join(admin, c)
	}
	return admin, samePath(c, mirror)
}

// initializing reports whether admin is locked "initializing", which `git
// worktree add` writes first and removes once its checkout is done (git
// 2.39 builtin/worktree.c, add_worktree).
func initializing(admin string) bool {
	b, err := os.ReadFile(filepath.Join(admin, "locked"))
	return err == nil && strings.TrimSpace(string(b)) == "initializing"
}

// repair finishes a worktree whose `git worktree add` was killed: a stale
// index.lock goes (no git runs in a worktree that was never handed to an
// agent), the checkout git started is completed with `git reset --hard`
// (as add itself runs it: tracked files only, every untracked file stays),
// and the "initializing" lock is removed. A worktree killed before its HEAD
// was written holds nothing but its .git file: it is removed and pruned,
// and made again, as a clone, by the caller's next attempt.
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

// registration is one entry of a mirror's worktrees dir: its admin dir and
// the worktree's .git path its gitdir file names ("" when unreadable).
type registration struct{ admin, gitfile string }

// registrations lists the worktree registrations of mirror.
func registrations(mirror string) []registration {
	entries, _ := os.ReadDir(filepath.Join(mirror, "worktrees"))
	var out []registration
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r := registration{admin: filepath.Join(mirror, "worktrees", e.Name())}
		if b, err := readSmall(filepath.Join(r.admin, "gitdir")); err == nil {
			r.gitfile = strings.TrimSpace(string(b))
		}
		out = append(out, r)
	}
	return out
}

// mirrorDirs returns where a git that may hold one of mirror's lock files
// runs: the mirror and the work trees of its worktrees (an agent's git in
// a worktree writes the mirror's refs).
func (m *Manager) mirrorDirs(mirror string) []string {
	dirs := []string{mirror}
	for _, r := range registrations(mirror) {
		if r.gitfile != "" {
			dirs = append(dirs, filepath.Dir(r.gitfile))
		}
	}
	return dirs
}

// pruneRegistrations removes the registrations of mirror's worktrees that
// no longer name a worktree: one whose .git is a directory now (a
// migration replaced the worktree by a clone), and one whose directory is
// gone, which `git worktree prune` removes unless it is locked; git's own
// "initializing" lock on one whose directory is gone (an add killed before
// it made the directory) is taken off first, since every later add at that
// path fails ("missing but locked worktree"). A lock with any other reason
// is someone's on purpose and stays.
func (m *Manager) pruneRegistrations(ctx context.Context, mirror string, res *Result) error {
	regs := registrations(mirror)
	if len(regs) == 0 {
		return nil
	}
	for _, r := range regs {
		if r.gitfile == "" {
			continue
		}
		// A migration cut short between its renames: the worktree's .git
		// file goes back, or git's prune would take its registration.
		aside := filepath.Join(filepath.Dir(r.gitfile), migratedGitfile)
		if !exists(r.gitfile) && exists(aside) {
			if err := os.Rename(aside, r.gitfile); err != nil {
				return repairError("prune", "-", err)
			}
		}
		info, err := os.Lstat(r.gitfile)
		switch {
		case err == nil && info.IsDir():
			if err := os.RemoveAll(r.admin); err != nil {
				return repairError("prune", "rm -r "+r.admin, err)
			}
			res.Repairs = append(res.Repairs, "removed the registration of migrated worktree "+filepath.Dir(r.gitfile))
		case errors.Is(err, fs.ErrNotExist) && !exists(filepath.Dir(r.gitfile)) && initializing(r.admin):
			if err := os.Remove(filepath.Join(r.admin, "locked")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return repairError("prune", "git worktree unlock", err)
			}
			res.Repairs = append(res.Repairs, "unlocked the registration of interrupted worktree "+filepath.Dir(r.gitfile))
		}
	}
	_, err := m.run(ctx, "worktree prune", mirror, nil, "worktree", "prune")
	return err
}

// checkoutMove matches a HEAD reflog entry of a checkout, whose message
// names the branches it moved from and to.
var checkoutMove = regexp.MustCompile(`\tcheckout: moving from (\S+) to (\S+)$`)

// migrate turns the worktree c.Dir of mirror into a clone that borrows the
// mirror's objects, in place: the same path (the conversation's key), the
// same work tree, untouched. Its new .git, made beside it as
// .loopd-git-new, gets:
//   - the worktree's own state from its admin dir: HEAD, the index (so
//     what was staged stays staged), HEAD's reflog, ORIG_HEAD, a merge or
//     rebase in progress, its per-worktree refs; every file but the
//     registration's own (gitdir, commondir, locked) and the lock files;
//   - origin, the repository's URL without credentials, and the mirror's
//     remote-tracking branches and tags, fetched from the mirror (objects
//     borrowed: nothing is copied);
//   - the local branches that worktree used, HEAD's and every one its HEAD
//     reflog checked out, with their reflogs and config (upstream, push
//     remote and that remote's keys); the branch c names gets origin's
//     branch of its name as upstream when it has none (one made by a
//     `worktree add --track` that a config.lock cut short has none, and a
//     plain `git push` then fails).
//
// It then replaces the .git file with it (two renames; a migration cut
// short between them is undone before the next, pruneRegistrations, and
// meanwhile adminDir reads the file put aside) and removes the registration and the migrated branches from the
// mirror, unless another worktree has one checked out. A stash, kept in the
// mirror for every worktree at once, stays there.
func (m *Manager) migrate(ctx context.Context, mirror string, c Checkout) error {
	dir := c.Dir
	gitfile, aside, staged := filepath.Join(dir, ".git"), filepath.Join(dir, migratedGitfile), filepath.Join(dir, migratingGit)
	fail := func(op string, err error) error {
		return &Error{Op: op, Command: "-", Exit: -1, Class: fsClass(err), Reason: "migrate_failed", Err: err}
	}
	if err := os.RemoveAll(staged); err != nil {
		return fail("migrate", err)
	}
	admin, ok := worktreeAdmin(dir, mirror)
	if !ok {
		return fmt.Errorf("migrate %s: %w", dir, ErrConflict)
	}
	phys, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fail("migrate", err)
	}
	physMirror, err := filepath.EvalSymlinks(mirror)
	if err != nil {
		return fail("migrate", err)
	}
	pub, err := Public(c.URL)
	if err != nil {
		return &Error{Op: "url", Command: "-", Exit: -1, Class: Permanent, Reason: "bad_url", Err: err}
	}
	branches := m.usedBranches(ctx, mirror, admin)

	if _, err := m.run(ctx, "init", m.Root, nil, "init", "--quiet", "--bare", staged); err != nil {
		return err
	}
	git := func(op string, args ...string) ([]byte, error) {
		return m.run(ctx, op, dir, []string{"GIT_DIR=" + staged}, args...)
	}
	if err := copyTree(admin, staged, func(rel string) bool {
		return rel != "gitdir" && rel != "commondir" && rel != "locked" && !strings.HasSuffix(rel, ".lock")
	}); err != nil {
		return fail("migrate", err)
	}
	if err := os.WriteFile(filepath.Join(staged, "objects", "info", "alternates"), []byte(filepath.Join(physMirror, "objects")+"\n"), 0o644); err != nil {
		return fail("migrate", err)
	}
	for _, kv := range [][2]string{
		{"core.bare", "false"}, {"core.logAllRefUpdates", "true"},
		{"remote.origin.url", pub}, {"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"},
	} {
		if _, err := git("config", "config", "--replace-all", kv[0], kv[1]); err != nil {
			return err
		}
	}
	specs := cloneRefspecs
	for _, b := range branches {
		specs = append(specs, "+refs/heads/"+b+":refs/heads/"+b)
	}
	if _, err := git("fetch", append([]string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--update-head-ok", physMirror}, specs...)...); err != nil {
		return err
	}
	if err := m.copyRef(ctx, mirror, staged, "refs/remotes/origin/pull/"+strconv.Itoa(c.PR), c.Mode == ModeFork); err != nil {
		return err
	}
	if err := m.originHead(ctx, mirror, staged); err != nil {
		return err
	}
	if _, err := git("pack-refs", "pack-refs", "--all"); err != nil {
		return err
	}
	for _, b := range branches {
		if err := copyFile(filepath.Join(mirror, "logs", "refs", "heads", b), filepath.Join(staged, "logs", "refs", "heads", b)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail("migrate", err)
		}
		if err := m.copyBranchConfig(ctx, mirror, staged, b, b == c.Branch && c.Mode != ModeFork); err != nil {
			return err
		}
	}
	if err := lend(mirror, phys); err != nil {
		return fail("lend", err)
	}
	if err := os.Rename(gitfile, aside); err != nil {
		return fail("migrate", err)
	}
	if err := os.Rename(staged, gitfile); err != nil {
		return fail("migrate", err)
	}
	_ = os.Remove(aside)
	if err := os.RemoveAll(admin); err != nil {
		return fail("migrate", err)
	}
	checkedOut := map[string]bool{}
	for _, r := range registrations(mirror) {
		if b, err := readSmall(filepath.Join(r.admin, "HEAD")); err == nil {
			checkedOut[strings.TrimPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")] = true
		}
	}
	for _, b := range branches {
		if !checkedOut[b] {
			// Its objects stay (preciousObjects); the clone has the branch.
			_, _ = m.run(ctx, "migrate", mirror, nil, "update-ref", "-d", "refs/heads/"+b)
		}
	}
	return nil
}

// usedBranches returns the local branches of mirror that the worktree of
// admin used: the one its HEAD names and every one its HEAD reflog checked
// out, in that order, each once.
func (m *Manager) usedBranches(ctx context.Context, mirror, admin string) []string {
	var names []string
	if b, err := readSmall(filepath.Join(admin, "HEAD")); err == nil {
		if name, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/"); ok {
			names = append(names, name)
		}
	}
	if f, err := os.Open(filepath.Join(admin, "logs", "HEAD")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if g := checkoutMove.FindStringSubmatch(sc.Text()); g != nil {
				names = append(names, g[1], g[2])
			}
		}
		f.Close()
	}
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) && commitName.FindString(n) != n && m.has(ctx, mirror, "refs/heads/"+n) {
			out = append(out, n)
		}
	}
	return out
}

// copyBranchConfig copies the config of branch from mirror to the git dir
// gitdir (branch.<b>.*, and remote.<r>.* of a push remote r other than
// origin). With upstream, a branch left with no upstream gets origin's
// branch of its name.
func (m *Manager) copyBranchConfig(ctx context.Context, mirror, gitdir, branch string, upstream bool) error {
	keys := func(prefix string) [][2]string {
		out, _ := m.run(ctx, "config", mirror, nil, "config", "--null", "--get-regexp", "^"+regexp.QuoteMeta(prefix))
		var kvs [][2]string
		for _, e := range bytes.Split(out, []byte{0}) {
			if k, v, ok := bytes.Cut(e, []byte{'\n'}); ok {
				kvs = append(kvs, [2]string{string(k), string(v)})
			}
		}
		return kvs
	}
	kvs := keys("branch." + branch + ".")
	for _, kv := range kvs {
		if strings.HasSuffix(kv[0], ".pushremote") && kv[1] != "origin" {
			kvs = append(kvs, keys("remote."+kv[1]+".")...)
		}
	}
	merge := false
	for _, kv := range kvs {
		merge = merge || strings.HasSuffix(kv[0], ".merge")
		if _, err := m.run(ctx, "config", mirror, []string{"GIT_DIR=" + gitdir}, "config", "--add", kv[0], kv[1]); err != nil {
			return err
		}
	}
	if upstream && !merge {
		return setUpstream(ctx, m, gitdir, branch)
	}
	return nil
}

// copyTree copies the regular files and directories under src to dst
// whose path relative to src keep accepts; symlinks and other files are
// left out.
func copyTree(src, dst string, keep func(rel string) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case !keep(rel):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case d.Type().IsRegular():
			return copyFile(path, filepath.Join(dst, rel))
		}
		return nil
	})
}

// copyFile copies the regular file src to dst (made with its parents),
// mode 0644.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(out, in)
	return errors.Join(cerr, out.Close())
}
