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
)

// viewConfig is the whole configuration of a view (Manager.view): no
// hook, filter, fsmonitor, helper or remote of the workdir's own, and the
// untracked cache off (its index extension is the agent's to write).
const viewConfig = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tuntrackedCache = false\n"

// headRef is what a view takes from a workdir's HEAD: a symbolic ref to a
// branch or a commit id, nothing else (its text may reach an error).
var headRef = regexp.MustCompile(`^(ref: refs/[^\x00-\x20\x7f]+|[0-9a-f]{40}|[0-9a-f]{64})\n?$`)

// inWorkdir runs git with args in the workdir dir as loopd's own reader
// of it (Holds, Remove's checks, a Result's HEAD): through a view of the
// repository when dir is a repository of its own (its .git a directory,
// as every clone is), with git as it is otherwise (a worktree made by an
// older loopd, whose configuration is the mirror's; a plain workdir). It
// writes nothing in dir (no optional lock, GIT_OPTIONAL_LOCKS=0).
func (m *Manager) inWorkdir(ctx context.Context, op, dir string, stdin []byte, args ...string) ([]byte, error) {
	env, err := m.view(dir)
	if err != nil {
		return nil, &Error{Op: op, Command: "-", Exit: -1, Class: Transient, Reason: "inspect_failed", Err: err}
	}
	return m.runInput(ctx, op, dir, env, stdin, args...)
}

// view returns the environment that shows git the repository of the
// workdir dir without its configuration and hooks, or nil when dir/.git
// is not a directory. The agent writes its workdir's .git/config and
// .git/hooks, and git runs what they name (core.fsmonitor, a filter's
// clean command, a promisor's lazy fetch, the reference-transaction hook)
// as whoever runs git there: loopd, outside the sandbox (measured with git
// 2.39: `git status` ran core.fsmonitor and a clean filter the workdir's
// config named; through the view it ran neither). The view is a git dir
// of loopd's own under Root (views/<hash of dir>), whose config is
// viewConfig and whose objects, refs, logs, packed-refs and info/exclude
// are symlinks into dir/.git, with a copy of its HEAD (git takes a
// symlinked HEAD for no repository); the index is dir/.git/index
// (GIT_INDEX_FILE), the work tree dir, and replace refs are ignored. It
// refuses a workdir whose .git parts are symlinks (a reader loopd quotes
// in an error must not be pointed at another file) or whose HEAD is not a
// ref or a commit id.
func (m *Manager) view(dir string) ([]string, error) {
	gitdir := filepath.Join(dir, ".git")
	if info, err := os.Lstat(gitdir); err != nil || !info.IsDir() {
		return nil, nil
	}
	v := m.viewDir(dir)
	if err := os.MkdirAll(filepath.Join(v, "info"), 0o700); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		name string
		dir  bool
	}{{"objects", true}, {"refs", true}, {"logs", true}, {"packed-refs", false}, {"shallow", false}, {"info/exclude", false}, {"objects/info/alternates", false}} {
		target := filepath.Join(gitdir, p.name)
		info, err := os.Lstat(target)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		case info.Mode()&fs.ModeSymlink != 0 || info.IsDir() != p.dir:
			return nil, fmt.Errorf("view of %s: .git/%s is not a plain %s", dir, p.name, map[bool]string{true: "directory", false: "file"}[p.dir])
		}
		if p.name == "objects/info/alternates" {
			continue // checked only: it is read through the objects link
		}
		if err := link(target, filepath.Join(v, p.name)); err != nil {
			return nil, err
		}
	}
	head, err := readSmall(filepath.Join(gitdir, "HEAD"))
	if err != nil {
		return nil, err
	}
	if !headRef.Match(head) {
		return nil, fmt.Errorf("view of %s: .git/HEAD is not a ref", dir)
	}
	for name, want := range map[string][]byte{"HEAD": head, "config": []byte(viewConfig)} {
		if b, err := os.ReadFile(filepath.Join(v, name)); err == nil && bytes.Equal(b, want) {
			continue
		}
		if err := writeAtomic(filepath.Join(v, name), want); err != nil {
			return nil, err
		}
	}
	return []string{"GIT_DIR=" + v, "GIT_WORK_TREE=" + dir, "GIT_INDEX_FILE=" + filepath.Join(gitdir, "index"),
		"GIT_OPTIONAL_LOCKS=0", "GIT_NO_REPLACE_OBJECTS=1"}, nil
}

// viewDir is the view of the workdir dir: <Root>/views/<hash of dir>.
func (m *Manager) viewDir(dir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(dir)))
	return filepath.Join(m.Root, "views", hex.EncodeToString(sum[:8]))
}

// link makes name a symlink to target, unless it already is one.
func link(target, name string) error {
	if cur, err := os.Readlink(name); err == nil && cur == target {
		return nil
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Symlink(target, name); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// maxSmall bounds what readSmall reads: a HEAD, a gitfile, a lending record.
const maxSmall = 4096

// readSmall reads the regular file path (a symlink is refused) of at most
// maxSmall bytes.
func readSmall(path string) ([]byte, error) {
	info, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() || info.Size() > maxSmall {
		return nil, fmt.Errorf("%s: not a small regular file", path)
	}
	return os.ReadFile(path)
}

// writeAtomic writes b to path through a temporary file renamed over it,
// mode 0600, so that a reader sees the old content or the new.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
