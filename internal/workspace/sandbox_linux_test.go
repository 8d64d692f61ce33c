package workspace_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// sandboxed runs script with sh in dir under bubblewrap, as an agent's
// sandbox shows the disk: the system read-only, dir read-write, ro
// read-only, and nothing else of the host (no /tmp, /root, state dir or
// other workdir). It returns the combined output.
func sandboxed(t *testing.T, dir string, ro []string, script string) string {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")
	}
	args := []string{"--die-with-parent", "--unshare-pid", "--cap-drop", "ALL", "--clearenv",
		"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
	if os.Geteuid() != 0 {
		args = append(args, "--unshare-user")
	}
	for _, p := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if target, err := os.Readlink(p); err == nil {
			args = append(args, "--symlink", target, p)
		} else if _, err := os.Stat(p); err == nil {
			args = append(args, "--ro-bind", p, p)
		}
	}
	args = append(args, "--bind", dir, dir)
	for _, p := range ro {
		args = append(args, "--ro-bind", p, p)
	}
	for _, kv := range []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com"} {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--chdir", dir, "sh", "-c", script)
	out, err := exec.Command(bwrap, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap: %v\n%s", err, out)
	}
	return string(out)
}

// treeDigest returns a digest of every name, mode and content under dir.
func treeDigest(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h.Write([]byte(path + "\x00" + info.Mode().String() + "\x00"))
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestAgentInItsCloneMovesNoOtherRef runs an agent's git in its clone under
// bubblewrap, with only its workdir read-write and the objects dirs its
// clone borrows (workspace.Borrowed) read-only: it commits, moves branches
// (one named as another item's), runs gc, and tries to reach the other
// item's clone and the mirror. Its work is in its own clone; no ref of
// the other item's and nothing of the mirror changed, and the attempts
// failed. In a worktree of the shared mirror, as before, the same agent
// moved the other item's branch.
func TestAgentInItsCloneMovesNoOtherRef(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	mine, theirs := filepath.Join(base, "1"), filepath.Join(base, "2")
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: mine, Mode: workspace.ModeIssue, Branch: "loopd/issue-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: theirs, Mode: workspace.ModeIssue, Branch: "loopd/issue-2"}); err != nil {
		t.Fatal(err)
	}
	borrowed, err := workspace.Borrowed(mine)
	if err != nil || !slices.Equal(borrowed, []string{physical(t, res.Mirror) + "/objects"}) {
		t.Fatalf("Borrowed = %v, %v; want the mirror's objects", borrowed, err)
	}
	theirRefs := workspacetest.Git(t, theirs, "for-each-ref")
	mirrorBefore := treeDigest(t, res.Mirror)

	script := `
echo agent > agent.txt && git add agent.txt && git commit --quiet -m agent || echo FAIL commit
git branch --force loopd/issue-2 HEAD || echo FAIL branch
git update-ref refs/remotes/origin/loopd/issue-2 HEAD || echo FAIL update-ref
git gc --quiet || echo FAIL gc
git -C ` + theirs + ` commit --quiet --allow-empty -m theirs 2>/dev/null && echo REACHED their_clone
git --git-dir=` + res.Mirror + ` update-ref refs/heads/evil HEAD 2>/dev/null && echo REACHED mirror_refs
touch ` + res.Mirror + `/objects/evil 2>/dev/null && echo WROTE mirror_objects
ls ` + res.Mirror + `/config 2>/dev/null && echo SAW mirror_config
git rev-parse HEAD
`
	out := sandboxed(t, physical(t, mine), borrowed, script)
	for _, bad := range []string{"FAIL", "REACHED", "WROTE", "SAW"} {
		if strings.Contains(out, bad) {
			t.Errorf("inside the sandbox:\n%s", out)
			break
		}
	}
	head := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if got := workspacetest.Git(t, mine, "rev-parse", "HEAD"); got != head || workspacetest.Git(t, mine, "rev-parse", "loopd/issue-2") != head {
		t.Errorf("the agent's commit and branch are not in its clone: HEAD %s, inside %s", got, head)
	}
	if got := workspacetest.Git(t, theirs, "for-each-ref"); got != theirRefs {
		t.Errorf("the other item's refs changed:\n%s\nwas:\n%s", got, theirRefs)
	}
	if got := treeDigest(t, res.Mirror); got != mirrorBefore {
		t.Error("the mirror changed")
	}
	if err := gitErr(mine, "cat-file", "-e", r.DefaultHead+"^{commit}"); err != nil {
		t.Errorf("the clone no longer reads the mirror's objects: %v", err)
	}

	// Before: two worktrees of one mirror share its refs.
	legacy := filepath.Join(base, "legacy")
	legacyWorktree(t, m, r, legacy, "loopd/issue-3")
	workspacetest.Git(t, res.Mirror, "branch", "loopd/issue-4", r.DefaultHead)
	workspacetest.Git(t, legacy, "commit", "--quiet", "--allow-empty", "-m", "agent")
	workspacetest.Git(t, legacy, "update-ref", "refs/heads/loopd/issue-4", "HEAD")
	if got := workspacetest.Git(t, res.Mirror, "rev-parse", "refs/heads/loopd/issue-4"); got == r.DefaultHead {
		t.Error("an agent in a worktree could not move another item's branch: the contrast shows nothing")
	}
}

// TestLoopdGitRunsNothingTheWorkdirConfigures: the agent writes its
// clone's config (an fsmonitor, a clean filter for every file, a promisor
// remote whose URL runs a command) and a reference-transaction hook;
// loopd's own git there (Prepare, Kept, Remove's checks, Holds) runs none
// of them. Plain git in the same clone runs them: the test can fail.
func TestLoopdGitRunsNothingTheWorkdirConfigures(t *testing.T) {
	r, m, c := cloned(t)
	ctx, dir := context.Background(), c.Dir
	marks := t.TempDir()
	mark := func(name string) string { return "touch " + filepath.Join(marks, name) }
	workspacetest.Git(t, dir, "config", "core.fsmonitor", mark("fsmonitor")+"; false")
	workspacetest.Git(t, dir, "config", "filter.evil.clean", mark("filter")+"; cat")
	workspacetest.Git(t, dir, "config", "protocol.allow", "always")
	promisor := filepath.Join(t.TempDir(), "promisor.sh")
	os.WriteFile(promisor, []byte("#!/bin/sh\n"+mark("promisor")+"\n"), 0o755)
	workspacetest.Git(t, dir, "config", "remote.evil.url", "ext::"+promisor)
	workspacetest.Git(t, dir, "config", "remote.evil.promisor", "true")
	workspacetest.Git(t, dir, "config", "extensions.partialClone", "evil")
	workspacetest.Git(t, dir, "config", "core.repositoryformatversion", "1")
	hook := filepath.Join(dir, ".git", "hooks", "reference-transaction")
	os.MkdirAll(filepath.Dir(hook), 0o755)
	os.WriteFile(hook, []byte("#!/bin/sh\n"+mark("hook")+"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("* filter=evil\n"), 0o644)
	workspacetest.Git(t, dir, "add", ".gitattributes")
	workspacetest.Git(t, dir, "commit", "--quiet", "-m", "attributes")
	os.RemoveAll(marks)
	os.MkdirAll(marks, 0o755)
	// A file whose stat no longer matches the index: status compares its
	// content, through the clean filter.
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644)

	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kept(ctx, r.URL, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Holds(ctx, dir, strings.Repeat("a", 40)); err != nil {
		t.Fatal(err)
	}
	if ran, _ := os.ReadDir(marks); len(ran) > 0 {
		t.Errorf("loopd's git ran what the workdir configures: %v", ran)
	}
	_ = gitErr(dir, "status")
	_ = gitErr(dir, "cat-file", "-e", strings.Repeat("a", 40))
	_ = gitErr(dir, "update-ref", "refs/heads/x", "HEAD")
	for _, name := range []string{"fsmonitor", "filter", "promisor", "hook"} {
		if _, err := os.Stat(filepath.Join(marks, name)); err != nil {
			t.Errorf("plain git did not run the workdir's %s: the test shows nothing of it", name)
		}
	}
}

// TestBorrowed: a clone borrows its mirror's objects; an alternates entry
// the agent adds (another mirror's objects, a dir of the host) is no loan
// and is left out; a plain workdir, a worktree and a missing one borrow
// nothing.
func TestBorrowed(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	other := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "w")
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "b"})
	if err != nil {
		t.Fatal(err)
	}
	otherRes, err := m.Prepare(ctx, workspace.Checkout{URL: other.URL, Dir: filepath.Join(base, "o"), Mode: workspace.ModeIssue, Branch: "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{physical(t, res.Mirror) + "/objects"}
	// Through a symlinked path too.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	for _, p := range []string{dir, link} {
		if got, err := workspace.Borrowed(p); err != nil || !slices.Equal(got, want) {
			t.Errorf("Borrowed(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
	alternates := filepath.Join(dir, ".git", "objects", "info", "alternates")
	b, _ := os.ReadFile(alternates)
	os.WriteFile(alternates, append(b, []byte(otherRes.Mirror+"/objects\n/etc\nrelative/objects\n"+t.TempDir()+"/objects\n")...), 0o644)
	if got, err := workspace.Borrowed(dir); err != nil || !slices.Equal(got, want) {
		t.Errorf("Borrowed with the agent's entries = %v, %v; want only %v", got, err, want)
	}
	legacy := filepath.Join(base, "legacy")
	legacyWorktree(t, m, r, legacy, "loopd/legacy")
	plain := t.TempDir()
	for _, p := range []string{plain, legacy, filepath.Join(base, "gone")} {
		if got, err := workspace.Borrowed(p); err != nil || got != nil {
			t.Errorf("Borrowed(%s) = %v, %v; want nothing", p, got, err)
		}
	}
}
