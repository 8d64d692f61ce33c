package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Why a workdir is kept at close (workspace.kept reason=…).
const (
	KeptDirty     = "uncommitted_changes"
	KeptUntracked = "untracked_files"
	KeptUnpushed  = "unpushed_commits"
	KeptNotOurs   = "not_a_worktree"
	// KeptIgnored: files git ignores (build output, logs, notes) are the
	// agent's work too, and removing the workdir would delete them.
	KeptIgnored = "ignored_files"
	// KeptReflog: a commit only the workdir's HEAD reflog still holds
	// (made on a detached HEAD, say) would become unreachable with it.
	KeptReflog = "unreachable_commits"
	// KeptSubmodules: a clone with submodules checked out keeps their
	// repositories in .git/modules, whose work loopd does not look at:
	// git run there would run what their config names (inWorkdir).
	KeptSubmodules = "submodules"
)

// maxReflog bounds the HEAD reflog entries Remove looks through.
const maxReflog = 1000

// Remove removes the clone dir of rawURL's mirror (its branches go with
// it), or a worktree of it an older loopd made (with `git worktree
// remove`, and then the mirror's branch it had checked out), only when it
// is clean: no
// uncommitted change, no untracked or ignored file, no submodule checked
// out (a clone), and no commit that no remote branch holds, neither the
// workdir's own remote-tracking branches (an agent's push moves them)
// nor the mirror's (fetched since: another workdir's push), in HEAD, in
// any other ref of a clone (its local branches, tags and stash go with
// it), or in the HEAD reflog (at most maxReflog entries), which goes with
// it too. The checks run through a view of the clone (inWorkdir). A clone
// is renamed aside (tempPrefix) before it is deleted, so that a removal
// cut short leaves no half a clone at dir. It returns the reason it kept
// it instead ("" when removed, or when dir is gone).
func (m *Manager) Remove(ctx context.Context, rawURL, dir string) (kept string, err error) {
	return m.remove(ctx, rawURL, dir, true)
}

// Kept returns the reason Remove would keep the workdir dir of rawURL's
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
	case !f.Clone && !f.Worktree:
		return KeptNotOurs, nil
	}
	if kept, err := m.kept(ctx, mirror, f.Physical, f.Clone); kept != "" || err != nil || !do {
		return kept, err
	}
	if f.Worktree {
		// Its branch is the mirror's: it goes too, as a clone's goes
		// with the clone. What it holds is pushed (kept).
		branch := ""
		if admin, ok := worktreeAdmin(f.Physical, mirror); ok {
			if b, err := readSmall(filepath.Join(admin, "HEAD")); err == nil {
				if name, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/"); ok {
					branch = name // none for a detached HEAD
				}
			}
		}
		if _, err := m.run(ctx, "worktree remove", mirror, nil, "worktree", "remove", f.Physical); err != nil {
			return "", err
		}
		if branch != "" {
			_, err := m.run(ctx, "worktree remove", mirror, nil, "update-ref", "-d", "refs/heads/"+branch)
			return "", err
		}
		return "", nil
	}
	fail := func(err error) error {
		return &Error{Op: "remove", Command: "rm -r " + f.Physical, Exit: -1, Class: fsClass(err), Reason: "remove_failed", Err: err}
	}
	aside, err := os.MkdirTemp(filepath.Dir(f.Physical), tempPrefix(f.Physical)+"old-")
	if err != nil {
		return "", fail(err)
	}
	if err := unix.Rename(f.Physical, aside); err != nil { // onto the empty aside
		os.Remove(aside)
		return "", fail(err)
	}
	if err := os.RemoveAll(aside); err != nil {
		return "", fail(err) // out of the way; the next Prepare sweeps it
	}
	if err := errors.Join(unlend(mirror, f.Physical), os.RemoveAll(m.viewDir(f.Physical))); err != nil {
		return "", fail(err)
	}
	return "", nil
}

// kept returns why the workdir dir (physical) of mirror must be kept, ""
// when it is clean (Remove's checks); clone says whether it is a clone
// (all its refs go with it) or a worktree (only its HEAD does).
func (m *Manager) kept(ctx context.Context, mirror, dir string, clone bool) (string, error) {
	if clone {
		if mods, err := os.ReadDir(filepath.Join(dir, ".git", "modules")); err == nil && len(mods) > 0 {
			return KeptSubmodules, nil
		}
	}
	args := []string{"status", "--porcelain", "--untracked-files=all", "--ignored"}
	if clone {
		args = append(args, "--ignore-submodules=all")
	}
	out, err := m.inWorkdir(ctx, "status", dir, nil, args...)
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
	// What the mirror's remote branches hold counts as pushed too: one
	// "^<commit>" per branch on rev-list's standard input.
	tips, err := m.run(ctx, "for-each-ref", mirror, nil, "for-each-ref", "--format=^%(objectname)", "refs/remotes")
	if err != nil {
		return "", err
	}
	positive := []string{"HEAD"}
	if clone {
		positive = append(positive, "--all")
	}
	out, err = m.inWorkdir(ctx, "rev-list", dir, tips, append(append([]string{"rev-list", "--max-count=1", "--stdin"}, positive...), "--not", "--remotes")...)
	if err != nil {
		return "", err
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return KeptUnpushed, nil
	}
	logged, err := m.inWorkdir(ctx, "reflog", dir, nil, "rev-list", "--walk-reflogs", "--max-count="+strconv.Itoa(maxReflog), "HEAD")
	if err != nil {
		return "", err
	}
	if commits := strings.Fields(string(logged)); len(commits) > 0 {
		in := append([]byte(strings.Join(commits, "\n")+"\n"), tips...)
		out, err = m.inWorkdir(ctx, "rev-list", dir, in, "rev-list", "--max-count=1", "--stdin", "--not", "--remotes")
		if err != nil {
			return "", err
		}
		if len(bytes.TrimSpace(out)) > 0 {
			return KeptReflog, nil
		}
	}
	return "", nil
}
