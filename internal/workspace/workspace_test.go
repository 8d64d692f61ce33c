package workspace_test

import (
	"context"
	"errors"
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
	}
	if got := workspacetest.Git(t, base, "-C", filepath.Join(base, r.PRBranch), "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/"+r.PRBranch {
		t.Errorf("pull request branch tracks %q", got)
	}
	mirrors, _ := os.ReadDir(m.Root)
	n := 0
	for _, e := range mirrors {
		if e.IsDir() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d mirrors for one repository, want 1", n)
	}
}

func TestPrepareUsesAnExistingWorktreeAsItIs(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "w")
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "README"), []byte("changed by the agent\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644)
	workspacetest.Git(t, dir, "checkout", "--quiet", "-b", "elsewhere")
	res, err := m.Prepare(ctx, c)
	if err != nil || !res.Existing || res.Branch != "elsewhere" {
		t.Fatalf("Prepare again = %+v, %v; want the worktree used as it is", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "README")); string(b) != "changed by the agent\n" {
		t.Errorf("README = %q: the worktree was reset", b)
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
	// An empty directory is not a conflict: the worktree goes in it.
	empty := t.TempDir()
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: empty, Mode: workspace.ModeIssue, Branch: "b"}); err != nil {
		t.Errorf("Prepare in an empty dir: %v", err)
	}
}

// TestPrepareRepairsAHalfMadeWorktree leaves what a daemon killed inside
// `git worktree add` leaves (the admin dir still locked "initializing", a
// stale index.lock, a checkout not done), plus a file written since, and
// checks that the next Prepare finishes it and keeps the file.
func TestPrepareRepairsAHalfMadeWorktree(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "w")
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-3"}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	Halve(t, dir)
	os.WriteFile(filepath.Join(dir, "kept.txt"), []byte("mine\n"), 0o644)
	f, _ := workspace.Inspect(dir, mustMirror(t, m, r.URL))
	if !f.Worktree || !f.Partial {
		t.Fatalf("Inspect = %+v, want a partial worktree", f)
	}
	res, err := m.Prepare(ctx, c)
	if err != nil || !res.Repaired {
		t.Fatalf("Prepare = %+v, %v; want repaired", res, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "README")); err != nil || string(b) != "hello\n" {
		t.Errorf("README = %q, %v: checkout not finished", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "kept.txt")); err != nil {
		t.Errorf("the repair lost a file: %v", err)
	}
	if st := workspacetest.Git(t, dir, "status", "--porcelain"); st != "?? kept.txt" {
		t.Errorf("status after repair = %q", st)
	}
	if f, _ := workspace.Inspect(dir, mustMirror(t, m, r.URL)); f.Partial {
		t.Error("still partial after repair")
	}
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

func mustMirror(t *testing.T, m *workspace.Manager, url string) string {
	t.Helper()
	p, err := workspace.Mirror(m.Root, url)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPreparePrunesAWorktreeWhoseDirectoryIsGone(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "w")
	c := workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-4"}
	if _, err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	res, err := m.Prepare(ctx, c)
	if err != nil || res.Branch != "loopd/issue-4" {
		t.Fatalf("Prepare after the dir was removed = %+v, %v", res, err)
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
	clean := prepare("clean")
	dirty := prepare("dirty")
	os.WriteFile(filepath.Join(dirty, "README"), []byte("edited\n"), 0o644)
	untracked := prepare("untracked")
	os.WriteFile(filepath.Join(untracked, "new.txt"), []byte("new\n"), 0o644)
	unpushed := prepare("unpushed")
	os.WriteFile(filepath.Join(unpushed, "c.txt"), []byte("c\n"), 0o644)
	workspacetest.Git(t, unpushed, "add", "c.txt")
	workspacetest.Git(t, unpushed, "commit", "--quiet", "-m", "local")
	ignored := prepare("ignored")
	os.WriteFile(filepath.Join(ignored, ".gitignore"), []byte("*.log\n"), 0o644)
	workspacetest.Git(t, ignored, "add", ".gitignore")
	workspacetest.Git(t, ignored, "commit", "--quiet", "-m", "ignore logs")
	workspacetest.Git(t, ignored, "push", "--quiet", "origin", "HEAD")
	os.WriteFile(filepath.Join(ignored, "build.log"), []byte("the agent's notes\n"), 0o644)
	reflogOnly := prepare("reflog")
	workspacetest.Git(t, reflogOnly, "checkout", "--quiet", "--detach")
	os.WriteFile(filepath.Join(reflogOnly, "d.txt"), []byte("d\n"), 0o644)
	workspacetest.Git(t, reflogOnly, "add", "d.txt")
	workspacetest.Git(t, reflogOnly, "commit", "--quiet", "-m", "detached")
	workspacetest.Git(t, reflogOnly, "checkout", "--quiet", "loopd/reflog")
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "x"), nil, 0o644)
	for _, tc := range []struct{ dir, kept string }{
		{clean, ""}, {dirty, workspace.KeptDirty}, {untracked, workspace.KeptUntracked},
		{unpushed, workspace.KeptUnpushed}, {ignored, workspace.KeptIgnored}, {reflogOnly, workspace.KeptReflog},
		{plain, workspace.KeptNotOurs}, {filepath.Join(base, "gone"), ""},
	} {
		kept, err := m.Remove(ctx, r.URL, tc.dir)
		if err != nil || kept != tc.kept {
			t.Errorf("Remove %s = %q, %v; want %q", filepath.Base(tc.dir), kept, err, tc.kept)
		}
		_, statErr := os.Stat(tc.dir)
		if gone := errors.Is(statErr, os.ErrNotExist); gone != (tc.kept == "") {
			t.Errorf("%s: gone=%v, want %v", filepath.Base(tc.dir), gone, tc.kept == "")
		}
	}
	// A removed worktree comes back on its branch.
	res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: clean, Mode: workspace.ModeIssue, Branch: "loopd/clean"})
	if err != nil || res.Branch != "loopd/clean" {
		t.Errorf("Prepare after Remove = %+v, %v", res, err)
	}
}

func TestMakeDirClassifiesPermissionAsPermanent(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may create anything")
	}
	ro := t.TempDir()
	os.Chmod(ro, 0o555)
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	err := workspace.MakeDir(filepath.Join(ro, "a", "b"))
	if workspace.ClassOf(err) != workspace.Permanent {
		t.Errorf("MakeDir under a read-only dir: %v, class %s", err, workspace.ClassOf(err))
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

// A pull request's worktree is made at the PR's head even when a local
// branch of that name was left behind by an earlier, removed worktree: one
// behind the head moves to it; one the PR's force-push left aside is kept
// under another name, nothing lost.
func TestPreparePullRequestCatchesUpWithItsHead(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	ctx := context.Background()
	base := t.TempDir()
	c := workspace.Checkout{URL: r.URL, Mode: workspace.ModePullRequest, Branch: r.PRBranch}
	prepareAndRemove := func(dir string) workspace.Result {
		c.Dir = filepath.Join(base, dir)
		res, err := m.Prepare(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if kept, err := m.Remove(ctx, r.URL, c.Dir); err != nil || kept != "" {
			t.Fatalf("Remove = %q, %v", kept, err)
		}
		return res
	}
	old := prepareAndRemove("first").Commit

	// The PR is force-pushed: its head no longer holds the old commit.
	work := t.TempDir()
	workspacetest.Git(t, work, "clone", "--quiet", "--branch", r.PRBranch, r.URL, ".")
	workspacetest.Git(t, work, "commit", "--quiet", "--amend", "-m", "rewritten")
	workspacetest.Git(t, work, "push", "--quiet", "--force", "origin", r.PRBranch)
	rewritten := workspacetest.Git(t, work, "rev-parse", "HEAD")

	res := prepareAndRemove("second")
	if res.Commit != rewritten {
		t.Errorf("after a force-push the worktree is at %s, want the PR's head %s", res.Commit, rewritten)
	}
	mirror, err := workspace.Mirror(m.Root, r.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := workspacetest.Git(t, base, "-C", mirror, "for-each-ref", "--format=%(objectname)", "refs/heads/"+r.PRBranch+".loopd-*"); got == "" {
		t.Error("the old local branch was not kept")
	} else if !strings.HasPrefix(got, old[:8]) && got != old {
		t.Errorf("kept branch at %s, want %s", got, old)
	}

	// A plain push on top: the local branch, behind, moves to the head.
	workspacetest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "more")
	workspacetest.Git(t, work, "push", "--quiet", "origin", r.PRBranch)
	if res := prepareAndRemove("third"); res.Commit != workspacetest.Git(t, work, "rev-parse", "HEAD") {
		t.Errorf("after a push the worktree is at %s, want the PR's head", res.Commit)
	}
}

// TestPreparePullRequestFromTheIssueBranch is the agent's own pull
// request: the issue's worktree has loopd/issue-1 checked out, the agent
// pushed it and opened a pull request whose head is that branch. The pull
// request gets a worktree of its own at the head, on loopd/pr-<n>, whose
// plain `git pull` and `git push` go to the head branch; the issue's
// worktree is never moved, and its own push still goes to its branch.
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
	if res.Branch != "loopd/pr-5" || res.Commit != pushed || res.Existing {
		t.Errorf("Prepare = %+v, want loopd/pr-5 at the pushed head %s", res, pushed)
	}
	if got := workspacetest.Git(t, prDir, "rev-parse", "--abbrev-ref", "@{upstream}"); got != "origin/loopd/issue-1" {
		t.Errorf("the pull request's branch tracks %q, want origin/loopd/issue-1", got)
	}
	if got := workspacetest.Git(t, issueDir, "rev-parse", "--abbrev-ref", "HEAD"); got != "loopd/issue-1" {
		t.Errorf("the issue's worktree is on %q now", got)
	}
	if b, err := os.ReadFile(filepath.Join(issueDir, "draft.txt")); err != nil || string(b) != "the agent's draft\n" {
		t.Errorf("the issue's untracked draft: %q, %v", b, err)
	}

	// A plain push from the pull request's worktree updates the head branch
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

	// The issue's worktree, behind now, is refused a push that would drop
	// the pull request's commit (git's own fast-forward rule), pulls it,
	// and pushes on top; the pull request's worktree pulls that in.
	if err := gitErr(issueDir, "push", "--quiet", "origin", "loopd/issue-1"); err == nil {
		t.Error("a push from the issue's worktree, behind, was not refused")
	}
	workspacetest.Git(t, issueDir, "pull", "--quiet", "--no-rebase", "origin", "loopd/issue-1")
	workspacetest.Git(t, issueDir, "commit", "--quiet", "--allow-empty", "-m", "more")
	workspacetest.Git(t, issueDir, "push", "--quiet", "origin", "loopd/issue-1")
	workspacetest.Git(t, prDir, "pull", "--quiet", "--no-rebase")
	if got, want := workspacetest.Git(t, prDir, "rev-parse", "HEAD"), workspacetest.Git(t, issueDir, "rev-parse", "HEAD"); got != want {
		t.Errorf("git pull in the pull request's worktree is at %s, want %s", got, want)
	}

	// Prepared again (a restart), the worktree is used as it is.
	if res, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: prDir, Mode: workspace.ModePullRequest, Branch: "loopd/issue-1", PR: 5}); err != nil || !res.Existing {
		t.Errorf("Prepare again = %+v, %v", res, err)
	}
}

// TestIssueBranchPushesPlainly: the issue's new branch has origin's branch
// of the same name as its upstream, so a plain `git push` (git's default
// push.default, simple) creates it on the remote and then updates it, and
// a plain `git pull` pulls it. Made again from the pushed branch, or from
// a local branch made before the upstream was set, it tracks the same;
// an upstream someone else set is kept, and no other branch's keys move.
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
	// Another branch's keys, which the issue's Prepare must leave alone.
	workspacetest.Git(t, base, "-C", res.Mirror, "config", "branch.other.merge", "refs/heads/elsewhere")
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

	// Made again from the pushed branch (the local one deleted), it still
	// tracks it.
	if kept, err := m.Remove(ctx, r.URL, dir); err != nil || kept != "" {
		t.Fatalf("Remove = %q, %v", kept, err)
	}
	workspacetest.Git(t, base, "-C", res.Mirror, "branch", "--quiet", "-D", "loopd/issue-7")
	if _, err := m.Prepare(ctx, issue); err != nil {
		t.Fatal(err)
	}
	if got := upstream(); got != "refs/remotes/origin/loopd/issue-7" {
		t.Errorf("made again from the remote branch, it tracks %q", got)
	}

	// A local branch with no upstream (made before loopd set one) gets it;
	// one someone set to another branch keeps theirs.
	for _, tc := range []struct{ merge, want string }{
		{"", "refs/remotes/origin/loopd/issue-7"},
		{"refs/heads/" + r.Default, "refs/remotes/origin/" + r.Default},
	} {
		if kept, err := m.Remove(ctx, r.URL, dir); err != nil || kept != "" {
			t.Fatalf("Remove = %q, %v", kept, err)
		}
		workspacetest.Git(t, base, "-C", res.Mirror, "config", "--remove-section", "branch.loopd/issue-7")
		if tc.merge != "" {
			workspacetest.Git(t, base, "-C", res.Mirror, "config", "branch.loopd/issue-7.remote", "origin")
			workspacetest.Git(t, base, "-C", res.Mirror, "config", "branch.loopd/issue-7.merge", tc.merge)
		}
		if _, err := m.Prepare(ctx, issue); err != nil {
			t.Fatal(err)
		}
		if got := upstream(); got != tc.want {
			t.Errorf("existing branch with upstream %q tracks %q, want %q", tc.merge, got, tc.want)
		}
	}
	if got := workspacetest.Git(t, base, "-C", res.Mirror, "config", "--get-all", "branch.other.merge"); got != "refs/heads/elsewhere" {
		t.Errorf("another branch's upstream is %q now", got)
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

// TestSharedGitDir: a worktree shares its mirror, which git in it needs
// whole; a plain directory shares nothing.
func TestSharedGitDir(t *testing.T) {
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	m := newManager(t)
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-1"}); err != nil {
		t.Fatal(err)
	}
	mirror, err := filepath.EvalSymlinks(mustMirror(t, m, r.URL))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := workspace.SharedGitDir(dir); err != nil || got != mirror {
		t.Errorf("SharedGitDir(worktree) = %q, %v; want the mirror %q", got, err, mirror)
	}
	if got, err := workspace.SharedGitDir(t.TempDir()); err != nil || got != "" {
		t.Errorf("SharedGitDir(plain dir) = %q, %v; want none", got, err)
	}
}
