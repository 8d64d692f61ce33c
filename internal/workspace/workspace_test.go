package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

func newManager(t *testing.T) *workspace.Manager {
	t.Helper()
	return &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors")}
}

func TestMask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://x-access-token:ghs_SECRET@github.com/o/r.git", "https://***@github.com/o/r.git"},
		{"fatal: unable to access 'https://tok@github.com/o/r/': 403", "fatal: unable to access 'https://***@github.com/o/r/': 403"},
		{"ssh://git@github.com/o/r.git", "ssh://***@github.com/o/r.git"},
		{"git@github.com:o/r.git", "git@github.com:o/r.git"},
		{"no url here", "no url here"},
	} {
		if got := workspace.Mask(tc.in); got != tc.want {
			t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPublic(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://x-access-token:SECRET@github.com/o/r.git", "https://github.com/o/r.git"},
		{"https://SECRET@github.com/o/r.git", "https://github.com/o/r.git"},
		{"ssh://git@github.com/o/r.git", "ssh://git@github.com/o/r.git"},
		{"git@github.com:o/r.git", "git@github.com:o/r.git"},
		{"file:///srv/r.git", "file:///srv/r.git"},
	} {
		got, err := workspace.Public(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Public(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := workspace.Public("https://h/o/r\n[core]"); err == nil {
		t.Error("Public accepted a URL with a newline")
	}
	// ssh cannot use a password from the URL, and would show it in its
	// command line.
	for _, raw := range []string{"ssh://git:pw@github.com/o/r.git", "git:pw@github.com:o/r.git"} {
		if _, err := workspace.Public(raw); !errors.Is(err, workspace.ErrPasswordInURL) || strings.Contains(err.Error(), "pw") {
			t.Errorf("Public(%q) = %v, want ErrPasswordInURL without the password", raw, err)
		}
		_, err := newManager(t).Prepare(context.Background(), workspace.Checkout{URL: raw, Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeIssue, Branch: "b"})
		if workspace.ClassOf(err) != workspace.Permanent || !errors.Is(err, workspace.ErrPasswordInURL) {
			t.Errorf("Prepare(%q) = %v, want a permanent ErrPasswordInURL", raw, err)
		}
	}
	a, _ := workspace.Mirror("/m", "https://a:b@github.com/o/r.git")
	b, _ := workspace.Mirror("/m", "https://github.com/o/r.git")
	if a != b || strings.Contains(a, "b@") {
		t.Errorf("Mirror differs by credentials: %q vs %q", a, b)
	}
}

func TestCredentials(t *testing.T) {
	t.Setenv("GIT_CONFIG_COUNT", "1") // an entry of loopd's own environment stays
	env, err := workspace.Credentials("https://x-access-token:ghs_S%40CRET@github.com:8443/o/r.git")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_1=credential.https://github.com:8443.helper", "GIT_CONFIG_VALUE_1=",
		"GIT_CONFIG_KEY_2=credential.https://github.com:8443.helper",
		"LOOPD_GIT_USERNAME=x-access-token", "LOOPD_GIT_PASSWORD=ghs_S@CRET",
	}
	for _, w := range want {
		if !slices.Contains(env, w) {
			t.Errorf("env lacks %q: %q", w, env)
		}
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "GIT_CONFIG_VALUE_2=!") }) {
		t.Errorf("env lacks the helper: %q", env)
	}
	for _, kv := range env {
		if strings.Contains(kv, "://") && strings.Contains(kv, "@") {
			t.Errorf("env gives git a URL with credentials: %q", kv)
		}
	}
	for _, raw := range []string{"https://github.com/o/r.git", "ssh://git@github.com/o/r.git", "git@github.com:o/r.git", "file:///srv/r.git"} {
		if env, err := workspace.Credentials(raw); env != nil || err != nil {
			t.Errorf("Credentials(%q) = %q, %v, want nothing", raw, env, err)
		}
	}
	if _, err := workspace.Credentials("https://u:a%0Ab@h/o/r"); err == nil {
		t.Error("Credentials accepted a newline in the password (it would end the helper's answer)")
	}
}

// TestClassify runs git against real failures and checks their class.
func TestClassify(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		c    workspace.Checkout
		want workspace.Class
	}{
		{"missing_repository", workspace.Checkout{URL: "file://" + filepath.Join(dir, "nope.git"), Mode: workspace.ModeIssue, Branch: "b"}, workspace.Permanent},
		{"unknown_base", workspace.Checkout{URL: r.URL, Mode: workspace.ModeIssue, Branch: "b", Base: "no-such-branch"}, workspace.Permanent},
		{"unknown_pull_request", workspace.Checkout{URL: r.URL, Mode: workspace.ModeFork, Branch: "loopd/pr-9", PR: 9}, workspace.Permanent},
		{"connection_refused", workspace.Checkout{URL: "https://user:s3cret@127.0.0.1:1/o/r.git", Mode: workspace.ModeIssue, Branch: "b"}, workspace.Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t)
			tc.c.Dir = filepath.Join(t.TempDir(), "w")
			_, err := m.Prepare(context.Background(), tc.c)
			var we *workspace.Error
			if !errors.As(err, &we) {
				t.Fatalf("Prepare = %v, want a *workspace.Error", err)
			}
			if we.Class != tc.want {
				t.Errorf("class = %s, want %s (%v)", we.Class, tc.want, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
			if we.Command == "" || we.Exit == 0 {
				t.Errorf("error lacks the command or exit status: %+v", we)
			}
		})
	}
}

// isClone checks that dir is a clone of its own that borrows mirror's
// objects: a .git directory, alternates naming the mirror's objects, and
// no registration in the mirror.
func isClone(t *testing.T, dir, mirror string) {
	t.Helper()
	info, err := os.Lstat(filepath.Join(dir, ".git"))
	if err != nil || !info.IsDir() {
		t.Fatalf("%s/.git is not a directory: %v", dir, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ".git", "objects", "info", "alternates"))
	if err != nil || strings.TrimSpace(string(b)) != physical(t, mirror)+"/objects" {
		t.Errorf("alternates = %q, %v; want the mirror's objects", b, err)
	}
	if got := workspacetest.Git(t, mirror, "worktree", "list", "--porcelain"); strings.Contains(got, dir) {
		t.Errorf("%s is registered as a worktree of the mirror:\n%s", dir, got)
	}
	if f, err := workspace.Inspect(dir, mirror); err != nil || !f.Clone || f.Worktree {
		t.Errorf("Inspect = %+v, %v; want a clone", f, err)
	}
}

func physical(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPrepareIssuePullRequestFork(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	for _, tc := range []struct {
		c            workspace.Checkout
		branch, head string
	}{
		{workspace.Checkout{Mode: workspace.ModeIssue, Branch: "loopd/issue-7"}, "loopd/issue-7", r.DefaultHead},
		{workspace.Checkout{Mode: workspace.ModePullRequest, Branch: r.PRBranch}, r.PRBranch, r.PRHead},
		{workspace.Checkout{Mode: workspace.ModeFork, Branch: "loopd/pr-2", PR: r.ForkPR}, "loopd/pr-2", r.ForkHead},
	} {
		c := tc.c
		c.URL, c.Dir = r.URL, filepath.Join(base, c.Branch)
		res, err := m.Prepare(ctx, c)
		if err != nil {
			t.Fatalf("Prepare %s: %v", c.Mode, err)
		}
		if res.Branch != tc.branch || res.Commit != tc.head || res.Existing {
			t.Errorf("Prepare %s = %+v, want branch %s at %s", c.Mode, res, tc.branch, tc.head)
		}
		isClone(t, c.Dir, res.Mirror)
		if got := workspacetest.Git(t, c.Dir, "remote", "get-url", "origin"); got != r.URL {
			t.Errorf("%s: origin is %q, want the repository's URL", c.Mode, got)
		}
		if got := workspacetest.Git(t, c.Dir, "count-objects", "-v"); !strings.Contains(got, "count: 0\n") || !strings.Contains(got, "in-pack: 0\n") {
			t.Errorf("%s: the clone copied objects instead of borrowing them:\n%s", c.Mode, got)
		}
		if st := workspacetest.Git(t, c.Dir, "status", "--porcelain"); st != "" {
			t.Errorf("%s: status = %q, want clean", c.Mode, st)
		}
	}
	if got := workspacetest.Git(t, base, "-C", filepath.Join(base, r.PRBranch), "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/"+r.PRBranch {
		t.Errorf("pull request branch tracks %q", got)
	}
	mirrors, _ := filepath.Glob(filepath.Join(m.Root, "*.git"))
	if len(mirrors) != 1 {
		t.Errorf("%d mirrors for one repository, want 1", len(mirrors))
	}
	for _, kv := range [][2]string{{"extensions.preciousObjects", "true"}, {"core.repositoryformatversion", "1"}, {"gc.auto", "0"}} {
		if got := workspacetest.Git(t, base, "-C", mirrors[0], "config", kv[0]); got != kv[1] {
			t.Errorf("mirror %s = %q, want %q", kv[0], got, kv[1])
		}
	}
}

// cloned returns a remote, a Manager and the Checkout of an issue's clone
// on loopd/issue-1, made at a new workdir.
func cloned(t *testing.T) (*workspacetest.Remote, *workspace.Manager, workspace.Checkout) {
	t.Helper()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}
	if _, err := m.Prepare(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return r, m, c
}

func TestPrepareUsesAnExistingCloneAsItIs(t *testing.T) {
	_, m, c := cloned(t)
	ctx, dir := context.Background(), c.Dir
	os.WriteFile(filepath.Join(dir, "README"), []byte("changed by the agent\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644)
	workspacetest.Git(t, dir, "checkout", "--quiet", "-b", "elsewhere")
	res, err := m.Prepare(ctx, c)
	if err != nil || !res.Existing || res.Branch != "elsewhere" || res.Repaired {
		t.Fatalf("Prepare again = %+v, %v; want the clone used as it is", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "README")); string(b) != "changed by the agent\n" {
		t.Errorf("README = %q: the clone was reset", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Errorf("untracked file gone: %v", err)
	}
}

func TestPrepareNeverTouchesAConflictingDirectory(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644)
	_, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "b"})
	if !errors.Is(err, workspace.ErrConflict) || workspace.ClassOf(err) != workspace.Permanent {
		t.Fatalf("Prepare = %v, want ErrConflict (permanent)", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("conflicting dir changed: %v", entries)
	}
	// An empty directory is not a conflict: the clone goes in it.
	empty := t.TempDir()
	if res, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: empty, Mode: workspace.ModeIssue, Branch: "b"}); err != nil {
		t.Errorf("Prepare in an empty dir: %v", err)
	} else {
		isClone(t, empty, res.Mirror)
	}
	// A repository of its own is not the mirror's clone either.
	own := t.TempDir()
	workspacetest.Git(t, own, "init", "--quiet")
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: own, Mode: workspace.ModeIssue, Branch: "b"}); !errors.Is(err, workspace.ErrConflict) {
		t.Errorf("Prepare on a repository of its own = %v, want ErrConflict", err)
	}
}

// newLegacy returns a remote, a Manager and a worktree of the remote's
// mirror at a new workdir named name, on branch (legacyWorktree), and the
// mirror.
func newLegacy(t *testing.T, name, branch string) (*workspacetest.Remote, *workspace.Manager, string, string) {
	t.Helper()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	dir := filepath.Join(t.TempDir(), name)
	return r, m, dir, legacyWorktree(t, m, r, dir, branch)
}

// legacyWorktree makes dir what loopd made before clones: a git worktree
// of the repository's mirror on a new branch with its upstream in the
// mirror's config, and returns the mirror.
func legacyWorktree(t *testing.T, m *workspace.Manager, r *workspacetest.Remote, dir, branch string) string {
	t.Helper()
	// A clone elsewhere makes and fetches the mirror.
	res, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: filepath.Join(t.TempDir(), "seed"), Mode: workspace.ModeIssue, Branch: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	workspacetest.Git(t, res.Mirror, "worktree", "add", "--quiet", "--no-track", "-b", branch, dir, "refs/remotes/origin/"+r.Default)
	workspacetest.Git(t, res.Mirror, "config", "branch."+branch+".remote", "origin")
	workspacetest.Git(t, res.Mirror, "config", "branch."+branch+".merge", "refs/heads/"+branch)
	return res.Mirror
}

// TestPrepareMigratesAWorktreeToAClone: a worktree an older loopd made,
// with a staged change, an edit, an untracked file, a commit of its own
// and a second branch it checked out before, becomes a clone at the same
// path, with the same status, branches and upstream; its registration and
// its branches leave the mirror, whose objects it borrows.
func TestPrepareMigratesAWorktreeToAClone(t *testing.T) {
	r, m, dir, mirror := newLegacy(t, "w", "loopd/issue-5")
	ctx := context.Background()
	workspacetest.Git(t, dir, "checkout", "--quiet", "-b", "side")
	os.WriteFile(filepath.Join(dir, "side.txt"), []byte("side\n"), 0o644)
	workspacetest.Git(t, dir, "add", "side.txt")
	workspacetest.Git(t, dir, "commit", "--quiet", "-m", "side")
	side := workspacetest.Git(t, dir, "rev-parse", "HEAD")
	workspacetest.Git(t, dir, "checkout", "--quiet", "loopd/issue-5")
	os.WriteFile(filepath.Join(dir, "fix.txt"), []byte("fix\n"), 0o644)
	workspacetest.Git(t, dir, "add", "fix.txt")
	workspacetest.Git(t, dir, "commit", "--quiet", "-m", "fix")
	head := workspacetest.Git(t, dir, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(dir, "staged.txt"), []byte("staged\n"), 0o644)
	workspacetest.Git(t, dir, "add", "staged.txt")
	os.WriteFile(filepath.Join(dir, "README"), []byte("edited\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes\n"), 0o644)
	status := workspacetest.Git(t, dir, "status", "--porcelain")

	if f, _ := workspace.Inspect(dir, mirror); !f.Worktree || f.Clone {
		t.Fatalf("Inspect before = %+v, want a worktree", f)
	}
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-5"})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if !res.Migrated || res.Branch != "loopd/issue-5" || res.Commit != head {
		t.Errorf("Prepare = %+v, want migrated on loopd/issue-5 at %s", res, head)
	}
	isClone(t, dir, mirror)
	if got := workspacetest.Git(t, dir, "status", "--porcelain"); got != status {
		t.Errorf("status after migration:\n%s\nwant:\n%s", got, status)
	}
	if got := workspacetest.Git(t, dir, "rev-parse", "side"); got != side {
		t.Errorf("branch side = %q, want %s", got, side)
	}
	if got := workspacetest.Git(t, dir, "for-each-ref", "--format=%(upstream)", "refs/heads/loopd/issue-5"); got != "refs/remotes/origin/loopd/issue-5" {
		t.Errorf("upstream = %q", got)
	}
	if got := workspacetest.Git(t, dir, "rev-list", "--walk-reflogs", "HEAD"); !strings.Contains(got, side) {
		t.Errorf("HEAD's reflog lost the side branch's commit:\n%s", got)
	}
	if got := workspacetest.Git(t, mirror, "for-each-ref", "refs/heads/loopd/issue-5", "refs/heads/side"); got != "" {
		t.Errorf("the migrated branches are still the mirror's: %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(mirror, "worktrees")); len(entries) != 0 {
		t.Errorf("registrations left: %v", entries)
	}
	for _, name := range []string{".loopd-git-new", ".loopd-gitfile-old"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s left in the workdir", name)
		}
	}
	// The agent commits and pushes from the clone as before.
	workspacetest.Git(t, dir, "commit", "--quiet", "-m", "staged")
	workspacetest.Git(t, dir, "push", "--quiet")
	if got, want := workspacetest.Git(t, r.Dir, "rev-parse", "refs/heads/loopd/issue-5"), workspacetest.Git(t, dir, "rev-parse", "HEAD"); got != want {
		t.Errorf("the remote's branch is %s after a plain push, want %s", got, want)
	}
}

// TestPrepareFinishesAMigrationCutShort: a migration cut short between its
// two renames leaves no .git; one cut short after them leaves the old .git
// file beside the new .git. The next Prepare finishes both.
func TestPrepareFinishesAMigrationCutShort(t *testing.T) {
	r, m, dir, mirror := newLegacy(t, "w", "loopd/issue-6")
	ctx := context.Background()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes\n"), 0o644)
	// Between the renames: the .git file is aside, the new .git not in place.
	if err := os.Rename(filepath.Join(dir, ".git"), filepath.Join(dir, ".loopd-gitfile-old")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, ".loopd-git-new", "objects"), 0o755)
	if f, _ := workspace.Inspect(dir, mirror); !f.Worktree {
		t.Fatalf("Inspect = %+v, want the worktree being migrated", f)
	}
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-6"}
	if res, err := m.Prepare(ctx, c); err != nil || !res.Migrated || res.Branch != "loopd/issue-6" {
		t.Fatalf("Prepare = %+v, %v", res, err)
	}
	isClone(t, dir, mirror)
	if got := workspacetest.Git(t, dir, "status", "--porcelain"); got != "?? notes.txt" {
		t.Errorf("status = %q", got)
	}
	// After the renames: the old .git file is still there.
	os.WriteFile(filepath.Join(dir, ".loopd-gitfile-old"), []byte("gitdir: /nowhere\n"), 0o644)
	if f, _ := workspace.Inspect(dir, mirror); !f.Clone || !f.Leftover {
		t.Fatalf("Inspect = %+v, want a clone with a leftover", f)
	}
	res, err := m.Prepare(ctx, c)
	if err != nil || !res.Existing || !res.Repaired {
		t.Fatalf("Prepare = %+v, %v; want the leftover removed", res, err)
	}
	if got := workspacetest.Git(t, dir, "status", "--porcelain"); got != "?? notes.txt" {
		t.Errorf("status = %q", got)
	}
}

// TestPrepareRepairsAHalfMadeWorktree leaves what a daemon killed inside
// an older loopd's `git worktree add` leaves (the admin dir still locked
// "initializing", a stale index.lock, a checkout not done), plus a file
// written since, and checks that the next Prepare finishes it, keeps the
// file and makes it a clone.
func TestPrepareRepairsAHalfMadeWorktree(t *testing.T) {
	r, m, dir, mirror := newLegacy(t, "w", "loopd/issue-3")
	ctx := context.Background()
	Halve(t, dir)
	os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("mine\n"), 0o644)
	f, _ := workspace.Inspect(dir, mirror)
	if !f.Worktree || !f.Partial {
		t.Fatalf("Inspect = %+v, want a partial worktree", f)
	}
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-3"})
	if err != nil || !res.Repaired || !res.Migrated {
		t.Fatalf("Prepare = %+v, %v; want repaired and migrated", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "README")); err != nil || string(b) != "hello\n" {
		t.Errorf("README = %q, %v: checkout not finished", b, err)
	}
	if st := workspacetest.Git(t, dir, "status", "--porcelain"); st != "?? kept.txt" {
		t.Errorf("status after repair = %q", st)
	}
	isClone(t, dir, mirror)
}

// Halve turns the worktree at dir into what a `git worktree add` killed
// during its checkout leaves: tracked files missing, no index, a stale
// index.lock, and the admin dir locked "initializing".
func Halve(t *testing.T, dir string) {
	t.Helper()
	gitdir := workspacetest.Git(t, dir, "rev-parse", "--absolute-git-dir")
	os.Remove(filepath.Join(dir, "README"))
	os.Remove(filepath.Join(gitdir, "index"))
	os.WriteFile(filepath.Join(gitdir, "index.lock"), nil, 0o644)
	os.WriteFile(filepath.Join(gitdir, "locked"), []byte("initializing"), 0o644)
}

// TestPrepareUnlocksARegistrationLeftInitializing: an older loopd's `git
// worktree add` killed before it made the directory leaves the mirror a
// registration locked "initializing" with no directory, on which every
// later add at that path failed ("missing but locked worktree"), retried
// as transient until the budget was spent. Prepare unlocks and prunes it,
// and makes the clone there.
func TestPrepareUnlocksARegistrationLeftInitializing(t *testing.T) {
	r, m, dir, mirror := newLegacy(t, "w", "loopd/issue-8")
	gitdir := workspacetest.Git(t, dir, "rev-parse", "--absolute-git-dir")
	os.WriteFile(filepath.Join(gitdir, "locked"), []byte("initializing"), 0o644)
	os.RemoveAll(dir)
	res, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-8"})
	if err != nil || !res.Repaired || res.Branch != "loopd/issue-8" {
		t.Fatalf("Prepare = %+v, %v; want the registration pruned and the clone made", res, err)
	}
	isClone(t, dir, mirror)
	if _, err := os.Stat(gitdir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the registration is still there: %v", err)
	}
}

// TestPrepareRebuildsAVanishedWorkdir: a clone whose directory vanished is
// made again at the same path on its branch, from the pushed branch; a
// worktree of an older loopd whose directory vanished is made again as a
// clone from the branch it left in the mirror, its unpushed commit there.
func TestPrepareRebuildsAVanishedWorkdir(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "w")
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-4"}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	workspacetest.Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "pushed")
	workspacetest.Git(t, dir, "push", "--quiet")
	pushed := workspacetest.Git(t, dir, "rev-parse", "HEAD")
	os.RemoveAll(dir)
	res, err := m.Prepare(ctx, c)
	if err != nil || res.Branch != "loopd/issue-4" || res.Commit != pushed || res.Dir != physical(t, base)+"/w" {
		t.Fatalf("Prepare after the dir vanished = %+v, %v; want loopd/issue-4 at %s", res, err, pushed)
	}
	isClone(t, dir, res.Mirror)

	legacy := filepath.Join(base, "legacy")
	mirror := legacyWorktree(t, m, r, legacy, "loopd/issue-9")
	workspacetest.Git(t, legacy, "commit", "--quiet", "--allow-empty", "-m", "never pushed")
	unpushed := workspacetest.Git(t, legacy, "rev-parse", "HEAD")
	os.RemoveAll(legacy)
	res, err = m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: legacy, Mode: workspace.ModeIssue, Branch: "loopd/issue-9"})
	if err != nil || res.Commit != unpushed {
		t.Fatalf("Prepare of the vanished worktree = %+v, %v; want its branch at %s", res, err, unpushed)
	}
	isClone(t, legacy, mirror)
}

// TestPrepareRemovesAnInterruptedClone kills, with SIGKILL, a process whose
// Manager is checking a clone out (a smudge filter that waits, as a large
// checkout would): nothing is at the workdir's path, the half-made clone
// is beside it; the next Prepare removes it and makes the clone.
func TestPrepareRemovesAnInterruptedClone(t *testing.T) {
	prepareAsChild()
	r := workspacetest.NewRemote(t, workspacetest.Options{Filter: "slow"})
	m := newManager(t)
	mark := filepath.Join(t.TempDir(), "filter")
	dir := filepath.Join(t.TempDir(), "w")
	child := slowChild(t, "TestPrepareRemovesAnInterruptedClone", m.Root, r.URL, dir, mark)
	waitFor(t, mark+".started")
	child.Process.Kill()
	child.Wait()
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workdir's path holds something after the kill: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".w.loopd-new-*"))
	if len(left) != 1 {
		t.Fatalf("half-made clones beside the workdir: %v", left)
	}
	res, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "slow"})
	if err != nil || !res.Repaired {
		t.Fatalf("Prepare = %+v, %v; want the leftover removed", res, err)
	}
	isClone(t, dir, res.Mirror)
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".w.loopd-*")); len(left) != 0 {
		t.Errorf("left beside the workdir: %v", left)
	}
}

// prepareAsChild is what slowChild's process does, in place of its test:
// one Prepare, as a daemon would run it, then exit.
func prepareAsChild() {
	if os.Getenv("LOOPD_WS_CHILD_ROOT") == "" {
		return
	}
	m := &workspace.Manager{Root: os.Getenv("LOOPD_WS_CHILD_ROOT")}
	_, err := m.Prepare(context.Background(), workspace.Checkout{URL: os.Getenv("LOOPD_WS_CHILD_URL"),
		Dir: os.Getenv("LOOPD_WS_CHILD_DIR"), Mode: workspace.ModeIssue, Branch: "slow"})
	fmt.Println(err)
	os.Exit(0)
}

// slowChild starts this test binary as a daemon would run Prepare, with a
// global git config whose smudge filter "slow" writes mark.git (its git's
// pid), mark.started, sleeps 2 s, writes mark.done and copies its input.
func slowChild(t *testing.T, test, root, url, dir, mark string) *exec.Cmd {
	t.Helper()
	config := filepath.Join(t.TempDir(), "gitconfig")
	filter := "echo $PPID > " + mark + ".git; : > " + mark + ".started; sleep 2; : > " + mark + ".done; cat"
	if err := os.WriteFile(config, []byte("[filter \"slow\"]\n\tsmudge = \""+filter+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	child.Env = append(os.Environ(), "LOOPD_WS_CHILD_ROOT="+root, "LOOPD_WS_CHILD_URL="+url,
		"LOOPD_WS_CHILD_DIR="+dir, "GIT_CONFIG_GLOBAL="+config)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	return child
}

// TestPrepareRemovesStaleLocks: a git killed in the clone leaves its
// index.lock (and a ref's lock), and every later `git commit` there fails
// "File exists"; a fetch killed in the mirror leaves a ref's lock there.
// Inspect shows the clone's as a leftover, and Prepare removes them, but
// never one a process holds open or while a git runs in the clone.
func TestPrepareRemovesStaleLocks(t *testing.T) {
	r, m, c := cloned(t)
	ctx, dir := context.Background(), c.Dir
	mirror, _ := workspace.Mirror(m.Root, r.URL)
	index := filepath.Join(dir, ".git", "index.lock")
	ref := filepath.Join(dir, ".git", "refs", "heads", "loopd", "issue-1.lock")
	mirrorRef := filepath.Join(mirror, "refs", "remotes", "origin", r.Default+".lock")
	for _, p := range []string{index, ref, mirrorRef} {
		os.WriteFile(p, nil, 0o644)
	}
	if err := gitErr(dir, "commit", "--quiet", "--allow-empty", "-m", "x"); err == nil {
		t.Fatal("git commit with a stale index.lock succeeded: the test shows nothing")
	}

	// Held open by a process: not stale.
	held, err := os.Open(index)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "60")
	holder.ExtraFiles = []*os.File{held}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	held.Close()
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	if f, _ := workspace.Inspect(dir, mirror); f.Leftover {
		t.Errorf("Inspect = %+v: a lock held open is no leftover", f)
	}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(index); err != nil {
		t.Errorf("Prepare removed a lock a process holds: %v", err)
	}
	holder.Process.Kill()
	holder.Wait()

	// A git at work in the clone: not stale either.
	stdin, busy := blockedGit(t, dir)
	if f, _ := workspace.Inspect(dir, mirror); f.Leftover {
		t.Errorf("Inspect = %+v while a git runs in the clone", f)
	}
	stdin.Close()
	busy.Wait()

	f, _ := workspace.Inspect(dir, mirror)
	if !f.Clone || !f.Leftover {
		t.Fatalf("Inspect = %+v, want a clone with a leftover", f)
	}
	res, err := m.Prepare(ctx, c)
	if err != nil || !res.Existing || !res.Repaired {
		t.Fatalf("Prepare = %+v, %v; want the stale locks removed", res, err)
	}
	for _, p := range []string{index, ref, mirrorRef} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	workspacetest.Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "after the repair")
	workspacetest.Git(t, mirror, "fetch", "--quiet", "origin")
}

// blockedGit starts a git that works in dir until its stdin is closed.
func blockedGit(t *testing.T, dir string) (io.WriteCloser, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait until it is git that runs there (not the child before exec).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", cmd.Process.Pid)); cwd == physical(t, dir) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.TrimSpace(string(comm)) == "git" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("git never ran in the clone")
		}
	}
	return stdin, cmd
}

// TestPullRequestUpstreamSurvivesAFailedSetup: a same-repository pull
// request's setup that fails halfway (a lock file a concurrent git holds,
// after the branch's upstream is written) leaves nothing at the workdir,
// and the retry's clone tracks the head branch; a local branch of the
// mirror that an older loopd's `worktree add --track -b`, cut short by a
// config.lock, left without an upstream gets one too. Before, the retry
// checked that branch out without an upstream, and the agent's plain
// `git push` failed.
func TestPullRequestUpstreamSurvivesAFailedSetup(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	ctx := context.Background()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	once := filepath.Join(t.TempDir(), "failed")
	wrapper := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\ncase \"$*\" in *'checkout '*)\n  if [ ! -e " + once + " ]; then : > " + once +
		"; echo \"fatal: Unable to create '.git/index.lock': File exists.\" >&2; exit 128; fi;;\nesac\nexec " + gitPath + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m := &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors"), Git: wrapper}
	dir := filepath.Join(t.TempDir(), "pr")
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModePullRequest, Branch: r.PRBranch, PR: 3}
	_, err = m.Prepare(ctx, c)
	if workspace.ClassOf(err) != workspace.Transient || !strings.Contains(fmt.Sprint(err), "index.lock") {
		t.Fatalf("first Prepare = %v, want the transient lock failure", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed setup left something at the workdir: %v", err)
	}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := workspacetest.Git(t, dir, "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/"+r.PRBranch {
		t.Errorf("after the retry the branch tracks %q, want origin/%s", got, r.PRBranch)
	}

	// What the old retry left: the mirror's local branch, no upstream.
	m = newManager(t)
	seed := filepath.Join(t.TempDir(), "seed")
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: seed, Mode: workspace.ModeIssue, Branch: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	workspacetest.Git(t, res.Mirror, "branch", "--no-track", r.PRBranch, "refs/remotes/origin/"+r.PRBranch)
	dir = filepath.Join(t.TempDir(), "pr")
	c.Dir = dir
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := workspacetest.Git(t, dir, "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/"+r.PRBranch {
		t.Errorf("made from the branch the old retry left, it tracks %q", got)
	}
	workspacetest.Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "review fix")
	workspacetest.Git(t, dir, "push", "--quiet")
	if got, want := workspacetest.Git(t, r.Dir, "rev-parse", "refs/heads/"+r.PRBranch), workspacetest.Git(t, dir, "rev-parse", "HEAD"); got != want {
		t.Errorf("a plain git push left the head branch at %s, want %s", got, want)
	}
}

func TestRemove(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	prepare := func(name string) string {
		dir := filepath.Join(base, name)
		if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/" + name}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	commit := func(dir, name string) {
		os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644)
		workspacetest.Git(t, dir, "add", name)
		workspacetest.Git(t, dir, "commit", "--quiet", "-m", name)
	}
	clean := prepare("clean")
	pushed := prepare("pushed")
	commit(pushed, "p.txt")
	workspacetest.Git(t, pushed, "push", "--quiet")
	dirty := prepare("dirty")
	os.WriteFile(filepath.Join(dirty, "README"), []byte("edited\n"), 0o644)
	untracked := prepare("untracked")
	os.WriteFile(filepath.Join(untracked, "new.txt"), []byte("new\n"), 0o644)
	unpushed := prepare("unpushed")
	commit(unpushed, "c.txt")
	// A commit on another local branch of the clone goes with the clone.
	otherBranch := prepare("other-branch")
	workspacetest.Git(t, otherBranch, "checkout", "--quiet", "-b", "spike")
	commit(otherBranch, "spike.txt")
	workspacetest.Git(t, otherBranch, "checkout", "--quiet", "loopd/other-branch")
	stashed := prepare("stashed")
	os.WriteFile(filepath.Join(stashed, "README"), []byte("stash me\n"), 0o644)
	workspacetest.Git(t, stashed, "stash", "--quiet")
	ignored := prepare("ignored")
	os.WriteFile(filepath.Join(ignored, ".gitignore"), []byte("*.log\n"), 0o644)
	workspacetest.Git(t, ignored, "add", ".gitignore")
	workspacetest.Git(t, ignored, "commit", "--quiet", "-m", "ignore logs")
	workspacetest.Git(t, ignored, "push", "--quiet", "origin", "HEAD")
	os.WriteFile(filepath.Join(ignored, "build.log"), []byte("the agent's notes\n"), 0o644)
	reflogOnly := prepare("reflog")
	workspacetest.Git(t, reflogOnly, "checkout", "--quiet", "--detach")
	commit(reflogOnly, "d.txt")
	workspacetest.Git(t, reflogOnly, "checkout", "--quiet", "loopd/reflog")
	// Pushed from another workdir, and fetched by the mirror since.
	elsewhere := prepare("elsewhere")
	commit(elsewhere, "e.txt")
	other := filepath.Join(t.TempDir(), "other")
	workspacetest.Git(t, base, "clone", "--quiet", elsewhere, other)
	workspacetest.Git(t, other, "push", "--quiet", r.URL, "HEAD:refs/heads/loopd/elsewhere-copy")
	mirror, _ := workspace.Mirror(m.Root, r.URL)
	workspacetest.Git(t, mirror, "fetch", "--quiet", "origin")
	subs := prepare("submodules")
	os.MkdirAll(filepath.Join(subs, ".git", "modules", "lib"), 0o755)
	legacy := filepath.Join(base, "legacy")
	legacyWorktree(t, m, r, legacy, "loopd/legacy")
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "x"), nil, 0o644)
	for _, tc := range []struct{ dir, kept string }{
		{clean, ""}, {pushed, ""}, {elsewhere, ""}, {legacy, ""}, {dirty, workspace.KeptDirty}, {untracked, workspace.KeptUntracked},
		{unpushed, workspace.KeptUnpushed}, {otherBranch, workspace.KeptUnpushed}, {stashed, workspace.KeptUnpushed},
		{ignored, workspace.KeptIgnored}, {reflogOnly, workspace.KeptReflog}, {subs, workspace.KeptSubmodules},
		{plain, workspace.KeptNotOurs}, {filepath.Join(base, "gone"), ""},
	} {
		if kept, err := m.Kept(ctx, r.URL, tc.dir); err != nil || kept != tc.kept {
			t.Errorf("Kept %s = %q, %v; want %q", filepath.Base(tc.dir), kept, err, tc.kept)
		}
		kept, err := m.Remove(ctx, r.URL, tc.dir)
		if err != nil || kept != tc.kept {
			t.Errorf("Remove %s = %q, %v; want %q", filepath.Base(tc.dir), kept, err, tc.kept)
		}
		_, statErr := os.Stat(tc.dir)
		if gone := errors.Is(statErr, os.ErrNotExist); gone != (tc.kept == "") {
			t.Errorf("%s: gone=%v, want %v", filepath.Base(tc.dir), gone, tc.kept == "")
		}
		if tc.dir == legacy {
			// A worktree's branch is the mirror's: it goes with it.
			if out, err := exec.Command("git", "-C", mirror, "rev-parse", "--verify", "--quiet", "refs/heads/loopd/legacy").CombinedOutput(); err == nil {
				t.Errorf("the removed worktree's branch is still in the mirror: %s", out)
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(base, ".*.loopd-*")); len(left) != 0 {
		t.Errorf("left beside the workdirs: %v", left)
	}
	if b, err := workspace.Borrowed(clean); err != nil || b != nil {
		t.Errorf("Borrowed of a removed clone = %v, %v", b, err)
	}
	// A removed clone comes back on its branch.
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: pushed, Mode: workspace.ModeIssue, Branch: "loopd/pushed"})
	if err != nil || res.Branch != "loopd/pushed" || res.Commit != workspacetest.Git(t, r.Dir, "rev-parse", "refs/heads/loopd/pushed") {
		t.Errorf("Prepare after Remove = %+v, %v", res, err)
	}
}

// A workdir whose parent is a file can never be made: permanent, at once,
// not retried as a passing fault.
func TestPrepareUnderAFileIsPermanent(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: filepath.Join(file, "1"), Mode: workspace.ModeIssue, Branch: "loopd/issue-1"})
	if workspace.ClassOf(err) != workspace.Permanent {
		t.Errorf("Prepare under a file: %v, class %s; want permanent", err, workspace.ClassOf(err))
	}
}

// A pull request's clone is made at the PR's head, also after a
// force-push; a local branch of that name that an older loopd's worktree
// left in the mirror is used only when it holds the head (the agent's
// unpushed work on top), and is left alone otherwise.
func TestPreparePullRequestStartsAtItsHead(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	c := workspace.Checkout{URL: r.URL, Mode: workspace.ModePullRequest, Branch: r.PRBranch}
	prepare := func(dir string) workspace.Result {
		c.Dir = filepath.Join(base, dir)
		res, err := m.Prepare(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	old := prepare("first")

	// The PR is force-pushed: its head no longer holds the old commit.
	work := t.TempDir()
	workspacetest.Git(t, work, "clone", "--quiet", "--branch", r.PRBranch, r.URL, ".")
	workspacetest.Git(t, work, "commit", "--quiet", "--amend", "-m", "rewritten")
	workspacetest.Git(t, work, "push", "--quiet", "--force", "origin", r.PRBranch)
	rewritten := workspacetest.Git(t, work, "rev-parse", "HEAD")
	if res := prepare("second"); res.Commit != rewritten {
		t.Errorf("after a force-push the clone is at %s, want the PR's head %s", res.Commit, rewritten)
	}
	// The old commit, on no ref of the mirror's since the fetch moved the
	// head, is still there for the first clone: not even a gc that prunes
	// at once removes it (preciousObjects).
	workspacetest.Git(t, old.Mirror, "gc", "--quiet", "--prune=now")
	if err := gitErr(old.Dir, "cat-file", "-e", old.Commit+"^{commit}"); err != nil {
		t.Errorf("the first clone's commit is gone from the mirror after gc: %v", err)
	}

	// Left by an older loopd: a local branch behind the head, one beside
	// it (the old head), and one ahead of it (the agent's unpushed work).
	for _, tc := range []struct{ name, left, want string }{
		{"behind", r.DefaultHead, rewritten},
		{"beside", old.Commit, rewritten},
		{"ahead", "", ""},
	} {
		if tc.name == "ahead" {
			tmp := prepare("tmp").Dir
			tc.left = workspacetest.Git(t, tmp, "commit-tree", "-p", rewritten, "-m", "the agent's", rewritten+"^{tree}")
			workspacetest.Git(t, tmp, "push", "--quiet", old.Mirror, tc.left+":refs/heads/ahead-tmp")
			tc.want = tc.left
		}
		workspacetest.Git(t, old.Mirror, "branch", "--force", r.PRBranch, tc.left)
		if res := prepare(tc.name); res.Commit != tc.want {
			t.Errorf("with a left branch %s the head the clone is at %s, want %s", tc.name, res.Commit, tc.want)
		}
		if got := workspacetest.Git(t, old.Mirror, "rev-parse", "refs/heads/"+r.PRBranch); got != tc.left {
			t.Errorf("the left branch %s moved to %s", tc.name, got)
		}
	}
}

// TestPreparePullRequestFromTheIssueBranch is the agent's own pull
// request: the issue's clone has loopd/issue-1 checked out, the agent
// pushed it and opened a pull request whose head is that branch. The pull
// request gets a clone of its own on the head branch, whose plain `git
// pull` and `git push` go to it; the issue's clone is never moved, and its
// own push still goes to its branch.
func TestPreparePullRequestFromTheIssueBranch(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	issueDir, prDir := filepath.Join(base, "issue-1"), filepath.Join(base, "pr-5")
	if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: issueDir, Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(issueDir, "fix.txt"), []byte("fix\n"), 0o644)
	workspacetest.Git(t, issueDir, "add", "fix.txt")
	workspacetest.Git(t, issueDir, "commit", "--quiet", "-m", "fix")
	workspacetest.Git(t, issueDir, "push", "--quiet", "origin", "loopd/issue-1")
	os.WriteFile(filepath.Join(issueDir, "draft.txt"), []byte("the agent's draft\n"), 0o644)
	pushed := workspacetest.Git(t, issueDir, "rev-parse", "HEAD")

	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: prDir, Mode: workspace.ModePullRequest, Branch: "loopd/issue-1", PR: 5})
	if err != nil {
		t.Fatalf("Prepare the pull request from the issue's branch: %v", err)
	}
	if res.Branch != "loopd/issue-1" || res.Commit != pushed || res.Existing {
		t.Errorf("Prepare = %+v, want loopd/issue-1 at the pushed head %s", res, pushed)
	}
	if got := workspacetest.Git(t, prDir, "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/loopd/issue-1" {
		t.Errorf("the pull request's branch tracks %q, want origin/loopd/issue-1", got)
	}
	if got := workspacetest.Git(t, issueDir, "rev-parse", "--abbrev-ref", "HEAD"); got != "loopd/issue-1" {
		t.Errorf("the issue's clone is on %q now", got)
	}
	if b, err := os.ReadFile(filepath.Join(issueDir, "draft.txt")); err != nil || string(b) != "the agent's draft\n" {
		t.Errorf("the issue's untracked draft: %q, %v", b, err)
	}

	// A plain push from the pull request's clone updates the head branch
	// on the remote, and creates no branch of its own there.
	os.WriteFile(filepath.Join(prDir, "review.txt"), []byte("review fix\n"), 0o644)
	workspacetest.Git(t, prDir, "add", "review.txt")
	workspacetest.Git(t, prDir, "commit", "--quiet", "-m", "review fix")
	workspacetest.Git(t, prDir, "push", "--quiet")
	prCommit := workspacetest.Git(t, prDir, "rev-parse", "HEAD")
	if got := workspacetest.Git(t, base, "-C", r.Dir, "rev-parse", "refs/heads/loopd/issue-1"); got != prCommit {
		t.Errorf("the remote's loopd/issue-1 is at %s after git push, want %s", got, prCommit)
	}
	if got := workspacetest.Git(t, base, "-C", r.Dir, "branch", "--list", "loopd/pr-*"); got != "" {
		t.Errorf("git push made a branch on the remote: %q", got)
	}

	// The issue's clone, behind now, is refused a push that would drop
	// the pull request's commit (git's own fast-forward rule), pulls it,
	// and pushes on top; the pull request's clone pulls that in.
	if err := gitErr(issueDir, "push", "--quiet", "origin", "loopd/issue-1"); err == nil {
		t.Error("a push from the issue's clone, behind, was not refused")
	}
	workspacetest.Git(t, issueDir, "pull", "--quiet", "--no-rebase")
	workspacetest.Git(t, issueDir, "commit", "--quiet", "--allow-empty", "-m", "more")
	workspacetest.Git(t, issueDir, "push", "--quiet")
	workspacetest.Git(t, prDir, "pull", "--quiet", "--no-rebase")
	if got, want := workspacetest.Git(t, prDir, "rev-parse", "HEAD"), workspacetest.Git(t, issueDir, "rev-parse", "HEAD"); got != want {
		t.Errorf("git pull in the pull request's clone is at %s, want %s", got, want)
	}

	// Prepared again (a restart), the clone is used as it is.
	if res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: prDir, Mode: workspace.ModePullRequest, Branch: "loopd/issue-1", PR: 5}); err != nil || !res.Existing {
		t.Errorf("Prepare again = %+v, %v", res, err)
	}
}

// TestIssueBranchPushesPlainly: the issue's new branch has origin's branch
// of the same name as its upstream, so a plain `git push` (git's default
// push.default, simple) creates it on the remote and then updates it, and
// a plain `git pull` pulls it. Made again from the pushed branch, or from
// a branch an older loopd left in the mirror without an upstream, it
// tracks the same; an upstream someone set on such a branch is kept. No
// Prepare writes the mirror's config once it is set.
func TestIssueBranchPushesPlainly(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "issue-7")
	issue := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-7"}
	res, err := m.Prepare(ctx, issue)
	if err != nil {
		t.Fatal(err)
	}
	mirrorConfig := func() string {
		b, err := os.ReadFile(filepath.Join(res.Mirror, "config"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	config := mirrorConfig()
	// upstream is the branch's upstream as git reads it from the config
	// (for-each-ref shows it before the remote has the branch, which
	// @{upstream} does not).
	upstream := func() string {
		return workspacetest.Git(t, dir, "for-each-ref", "--format=%(upstream)", "refs/heads/loopd/issue-7")
	}
	if got := upstream(); got != "refs/remotes/origin/loopd/issue-7" {
		t.Errorf("the issue's branch tracks %q, want origin/loopd/issue-7", got)
	}
	remoteHead := func() string {
		return workspacetest.Git(t, base, "-C", r.Dir, "rev-parse", "--verify", "--quiet", "refs/heads/loopd/issue-7^{commit}")
	}
	commit := func(name string) string {
		os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644)
		workspacetest.Git(t, dir, "add", name)
		workspacetest.Git(t, dir, "commit", "--quiet", "-m", name)
		return workspacetest.Git(t, dir, "rev-parse", "HEAD")
	}
	first := commit("fix.txt")
	workspacetest.Git(t, dir, "push", "--quiet")
	if got := remoteHead(); got != first {
		t.Errorf("plain git push: the remote's loopd/issue-7 is %q, want %s", got, first)
	}
	second := commit("more.txt")
	workspacetest.Git(t, dir, "push", "--quiet")
	if got := remoteHead(); got != second {
		t.Errorf("second plain git push: the remote's loopd/issue-7 is %q, want %s", got, second)
	}
	// Someone else pushes to the branch; a plain pull brings it in.
	other := filepath.Join(base, "other")
	workspacetest.Git(t, base, "clone", "--quiet", "--branch", "loopd/issue-7", r.Dir, other)
	workspacetest.Git(t, other, "commit", "--quiet", "--allow-empty", "-m", "review")
	workspacetest.Git(t, other, "push", "--quiet")
	theirs := workspacetest.Git(t, other, "rev-parse", "HEAD")
	workspacetest.Git(t, dir, "pull", "--quiet", "--no-rebase")
	if got := workspacetest.Git(t, dir, "rev-parse", "HEAD"); got != theirs {
		t.Errorf("plain git pull is at %s, want %s", got, theirs)
	}

	// Made again from the pushed branch, it still tracks it.
	if kept, err := m.Remove(ctx, r.URL, dir); err != nil || kept != "" {
		t.Fatalf("Remove = %q, %v", kept, err)
	}
	if _, err := m.Prepare(ctx, issue); err != nil {
		t.Fatal(err)
	}
	if got := upstream(); got != "refs/remotes/origin/loopd/issue-7" {
		t.Errorf("made again from the remote branch, it tracks %q", got)
	}
	if got := mirrorConfig(); got != config {
		t.Errorf("Prepare wrote the mirror's config:\n%s\nwas:\n%s", got, config)
	}

	// A branch an older loopd left in the mirror with no upstream gets
	// it; one someone set to another branch keeps theirs.
	for _, tc := range []struct{ merge, want string }{
		{"", "refs/remotes/origin/loopd/issue-7"},
		{"refs/heads/" + r.Default, "refs/remotes/origin/" + r.Default},
	} {
		if kept, err := m.Remove(ctx, r.URL, dir); err != nil || kept != "" {
			t.Fatalf("Remove = %q, %v", kept, err)
		}
		workspacetest.Git(t, base, "-C", res.Mirror, "branch", "--quiet", "--force", "--no-track", "loopd/issue-7", theirs)
		if tc.merge != "" {
			workspacetest.Git(t, base, "-C", res.Mirror, "config", "branch.loopd/issue-7.remote", "origin")
			workspacetest.Git(t, base, "-C", res.Mirror, "config", "branch.loopd/issue-7.merge", tc.merge)
		}
		if _, err := m.Prepare(ctx, issue); err != nil {
			t.Fatal(err)
		}
		if got := upstream(); got != tc.want {
			t.Errorf("left branch with upstream %q tracks %q, want %q", tc.merge, got, tc.want)
		}
		workspacetest.Git(t, base, "-C", res.Mirror, "branch", "--quiet", "-D", "loopd/issue-7")
	}
}

// gitErr runs git in dir like workspacetest.Git and returns its failure.
func gitErr(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd.Run()
}

// stallingGit returns a "git" that never answers, as git does on a remote
// that stalls, and the file it writes its pid to.
func stallingGit(t *testing.T) (git, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	git, pidFile = filepath.Join(dir, "git"), filepath.Join(dir, "pid")
	if err := os.WriteFile(git, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return git, pidFile
}

// TestCancelIsNotATimeout: git killed because the caller's context ended
// (loopd stopping) is Cancelled, not a timeout; git that runs past the
// Manager's Timeout is a transient timeout. Before, both were "timeout".
func TestCancelIsNotATimeout(t *testing.T) {
	git, pidFile := stallingGit(t)
	c := workspace.Checkout{URL: "file:///nowhere/repo.git", Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}

	m := &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors"), Git: git, Timeout: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(pidFile); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := m.Prepare(ctx, c)
	var we *workspace.Error
	if !errors.As(err, &we) || we.Reason != workspace.ReasonCancelled || !workspace.Cancelled(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("Prepare cancelled = %v (%+v), want reason %s wrapping context.Canceled", err, we, workspace.ReasonCancelled)
	}

	m = &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors"), Git: git, Timeout: 100 * time.Millisecond}
	_, err = m.Prepare(context.Background(), c)
	if !errors.As(err, &we) || we.Reason != "timeout" || we.Class != workspace.Transient || workspace.Cancelled(err) {
		t.Errorf("Prepare past the timeout = %v (%+v), want a transient timeout", err, we)
	}
}

// TestBusyWhileAPrepareRuns: the mirror's lock shows a preparation in
// flight to an observer (Inspect's Busy), and is free once it ends.
func TestBusyWhileAPrepareRuns(t *testing.T) {
	git, pidFile := stallingGit(t)
	m := &workspace.Manager{Root: filepath.Join(t.TempDir(), "mirrors"), Git: git}
	c := workspace.Checkout{URL: "file:///nowhere/repo.git", Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}
	mirror, err := workspace.Mirror(m.Root, c.URL)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := workspace.Inspect(c.Dir, mirror); f.Busy {
		t.Fatal("busy before any operation")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := m.Prepare(ctx, c); done <- err }()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f, _ := workspace.Inspect(c.Dir, mirror); !f.Busy {
		t.Error("not busy while git runs")
	}
	cancel()
	<-done
	if workspace.Busy(mirror) {
		t.Error("busy after the operation ended")
	}
}

// TestCloneConfigQuotesTheBranch: a branch name git allows with a double
// quote in it (a pull request's head may have one) is written into the
// clone's config quoted: it tracks its remote branch.
func TestCloneConfigQuotesTheBranch(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	dir := filepath.Join(t.TempDir(), "w")
	const branch = `agent/"quoted"-1`
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: branch}); err != nil {
		t.Fatal(err)
	}
	if got := workspacetest.Git(t, dir, "for-each-ref", "--format=%(upstream)", "refs/heads/"+branch); got != "refs/remotes/origin/"+branch {
		t.Errorf("upstream = %q", got)
	}
	if got := workspacetest.Git(t, dir, "config", "remote.origin.url"); got != r.URL {
		t.Errorf("origin = %q", got)
	}
}

// TestMigratedPullRequestWorktreeStillPushesToItsHead: the worktree an
// older loopd made for the agent's own pull request is on loopd/pr-<n>,
// whose push remote sends it to the head branch (worktrees could not share
// the head branch). Migrated, its plain `git push` still updates the head.
func TestMigratedPullRequestWorktreeStillPushesToItsHead(t *testing.T) {
	r, m, dir, mirror := newLegacy(t, "pr-5", "loopd/pr-5")
	workspacetest.Git(t, mirror, "config", "--replace-all", "branch.loopd/pr-5.merge", "refs/heads/"+r.PRBranch)
	workspacetest.Git(t, mirror, "config", "branch.loopd/pr-5.pushRemote", "loopd-pr-5")
	workspacetest.Git(t, mirror, "config", "remote.loopd-pr-5.url", r.URL)
	workspacetest.Git(t, mirror, "config", "remote.loopd-pr-5.push", "refs/heads/loopd/pr-5:refs/heads/"+r.PRBranch)
	workspacetest.Git(t, dir, "reset", "--quiet", "--hard", r.PRHead)
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModePullRequest, Branch: r.PRBranch, PR: 5}); err != nil {
		t.Fatal(err)
	}
	isClone(t, dir, mirror)
	workspacetest.Git(t, dir, "commit", "--quiet", "--allow-empty", "-m", "review fix")
	workspacetest.Git(t, dir, "push", "--quiet")
	if got, want := workspacetest.Git(t, r.Dir, "rev-parse", "refs/heads/"+r.PRBranch), workspacetest.Git(t, dir, "rev-parse", "HEAD"); got != want {
		t.Errorf("the head branch is at %s after a plain push, want %s", got, want)
	}
}

// TestForkCloneThatTakesPushes: a fork's pull request that lets the base's
// maintainers push gets a clone whose plain `git push` updates the fork's
// head branch, and nothing in the base repository, not even its branch of
// the same name; an explicit push to origin is refused by git. Without
// PushURL, the clone has no upstream and `git push` pushes nothing.
func TestForkCloneThatTakesPushes(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	// The fork: a copy of the base whose pull request's head is its
	// branch of the same name as a branch of the base.
	fork := filepath.Join(t.TempDir(), "fork.git")
	workspacetest.Git(t, r.Dir, "clone", "--quiet", "--mirror", r.Dir, fork)
	workspacetest.Git(t, fork, "update-ref", "refs/heads/"+r.PRBranch, r.ForkHead)
	m := newManager(t)
	ctx := context.Background()
	c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeFork, Branch: "loopd/pr-2", PR: r.ForkPR,
		PushURL: "file://" + fork, PushBranch: r.PRBranch}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := workspacetest.Git(t, c.Dir, "rev-parse", "--abbrev-ref", "@{upstream}"); got != "head/"+r.PRBranch {
		t.Errorf("upstream = %q, want the fork's head branch", got)
	}
	baseBefore := workspacetest.Git(t, r.Dir, "for-each-ref")
	os.WriteFile(filepath.Join(c.Dir, "fix.txt"), []byte("the agent's fix\n"), 0o644)
	workspacetest.Git(t, c.Dir, "add", "fix.txt")
	workspacetest.Git(t, c.Dir, "commit", "--quiet", "-m", "fix")
	mine := workspacetest.Git(t, c.Dir, "rev-parse", "HEAD")
	workspacetest.Git(t, c.Dir, "push", "--quiet")
	if got := workspacetest.Git(t, fork, "rev-parse", "refs/heads/"+r.PRBranch); got != mine {
		t.Errorf("the fork's head branch is at %s, want the agent's commit %s", got, mine)
	}
	if got := workspacetest.Git(t, r.Dir, "for-each-ref"); got != baseBefore {
		t.Errorf("the base repository changed:\n%s\nwas\n%s", got, baseBefore)
	}
	cmd := exec.Command("git", "push", "origin")
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("git push origin went through:\n%s", out)
	}
	if got := workspacetest.Git(t, r.Dir, "for-each-ref"); got != baseBefore {
		t.Errorf("the base repository changed after git push origin:\n%s", got)
	}

	plain := c
	plain.Dir, plain.PushURL, plain.PushBranch = filepath.Join(t.TempDir(), "w"), "", ""
	if _, err := m.Prepare(ctx, plain); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("git", "rev-parse", "--abbrev-ref", "@{upstream}")
	cmd.Dir = plain.Dir
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("a fork that takes no pushes has an upstream: %s", out)
	}
}

// TestFetchHeadAfterAForcePush: after the fork force-pushed its pull
// request's head, FetchHead brings the new commit into the mirror, which
// the clone reads through its borrowed objects (git cat-file -e), and the
// agent's own commit, not pushed, is still its branch's head; a head
// already there fetches nothing; a head the remote lacks is head_missing.
func TestFetchHeadAfterAForcePush(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeFork, Branch: "loopd/pr-2", PR: r.ForkPR}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(c.Dir, "wip.txt"), []byte("not pushed yet\n"), 0o644)
	workspacetest.Git(t, c.Dir, "add", "wip.txt")
	workspacetest.Git(t, c.Dir, "commit", "--quiet", "-m", "wip")
	mine := workspacetest.Git(t, c.Dir, "rev-parse", "HEAD")

	// The force-push: a new head that does not descend from the old one.
	other := t.TempDir()
	workspacetest.Git(t, other, "clone", "--quiet", r.Dir, ".")
	workspacetest.Git(t, other, "checkout", "--quiet", "--detach", r.DefaultHead)
	os.WriteFile(filepath.Join(other, "rewritten.txt"), []byte("rewritten\n"), 0o644)
	workspacetest.Git(t, other, "add", "rewritten.txt")
	workspacetest.Git(t, other, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "rewritten")
	head := workspacetest.Git(t, other, "rev-parse", "HEAD")
	workspacetest.Git(t, other, "push", "--quiet", "--force", r.Dir, "HEAD:refs/pull/2/head")

	fetched, err := m.FetchHead(ctx, r.URL, r.ForkPR, head)
	if err != nil || !fetched {
		t.Fatalf("FetchHead = %v, %v; want a fetch", fetched, err)
	}
	workspacetest.Git(t, c.Dir, "cat-file", "-e", head+"^{commit}")
	if got := workspacetest.Git(t, c.Dir, "rev-parse", "HEAD"); got != mine {
		t.Errorf("HEAD = %s, want the agent's commit %s kept", got, mine)
	}
	if st := workspacetest.Git(t, c.Dir, "status", "--porcelain"); st != "" {
		t.Errorf("status = %q, want the clone untouched", st)
	}
	if fetched, err := m.FetchHead(ctx, r.URL, r.ForkPR, head); err != nil || fetched {
		t.Errorf("FetchHead again = %v, %v; want nothing to fetch", fetched, err)
	}
	_, err = m.FetchHead(ctx, r.URL, r.ForkPR, strings.Repeat("ab", 20))
	var e *workspace.Error
	if !errors.As(err, &e) || e.Reason != "head_missing" {
		t.Errorf("FetchHead of a commit nowhere = %v, want head_missing", err)
	}
}
