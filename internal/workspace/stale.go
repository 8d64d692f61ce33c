package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/internal/proc"
)

// lockFiles returns the lock files git left in the git dir gitdir: its
// own (index.lock, HEAD.lock, config.lock, packed-refs.lock, …) and those
// of its refs (refs/…/<name>.lock). git makes each with O_EXCL and renames
// it into place when done (git 2.39 lockfile.c), so one that is still
// there after its git died makes every later git that needs it fail
// ("File exists", "cannot lock ref"). Symlinks are not followed.
func lockFiles(gitdir string) []string {
	var out []string
	entries, _ := os.ReadDir(gitdir)
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".lock") {
			out = append(out, filepath.Join(gitdir, e.Name()))
		}
	}
	_ = filepath.WalkDir(filepath.Join(gitdir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(path, ".lock") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// isGit reports whether a command name is git's or one of its helpers'
// (git-remote-https, git-upload-pack, …).
func isGit(comm string) bool { return comm == "git" || strings.HasPrefix(comm, "git-") }

// staleLocks returns the lock files of gitdir (lockFiles) that no git
// holds: no process has one open, and no git process works in one of
// dirs (the work trees and git dirs that git may be running in: a git
// that closed a ref's lock before renaming it still works there). A
// process list that cannot be read holds every lock.
func staleLocks(gitdir string, dirs []string) []string {
	locks := lockFiles(gitdir)
	if len(locks) == 0 {
		return nil
	}
	if used, err := proc.Using(physical(dirs), physical(locks), isGit); err != nil || used {
		return nil
	}
	return locks
}

// removeStale removes the lock files of gitdir that no git holds
// (staleLocks) and returns what it removed, relative to base.
func removeStale(gitdir, base string, dirs []string) ([]string, error) {
	var removed []string
	for _, l := range staleLocks(gitdir, dirs) {
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, repairError("repair", "rm "+l, err)
		}
		rel, err := filepath.Rel(base, l)
		if err != nil {
			rel = l
		}
		removed = append(removed, rel)
	}
	return removed, nil
}

// repairError is the failure of a repair's file operation op (command
// says what it did), classed by the file system's error (fsClass).
func repairError(op, command string, err error) *Error {
	return &Error{Op: op, Command: command, Exit: -1, Class: fsClass(err), Reason: "repair_failed", Err: err}
}

// physical returns paths with their symlinks resolved where they exist.
func physical(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		out = append(out, p)
	}
	return out
}
