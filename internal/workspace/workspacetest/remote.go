// Package workspacetest builds git repositories on local disk for tests:
// a bare "remote" reachable by a file:// URL, with a default branch, a
// same-repository pull request branch and a fork's refs/pull/<n>/head. It
// runs the real git CLI and needs no network.
package workspacetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Remote is a bare repository built by NewRemote.
type Remote struct {
	// Dir is the bare repository; URL is file://Dir.
	Dir string
	URL string
	// Default is the default branch ("trunk", so that no test passes by
	// assuming "main") and DefaultHead its commit.
	Default     string
	DefaultHead string
	// PRBranch is a same-repository pull request's head branch and
	// PRHead its commit (one commit past the default branch).
	PRBranch string
	PRHead   string
	// ForkPR is the number of a fork's pull request, whose head is only
	// at refs/pull/<ForkPR>/head, and ForkHead its commit.
	ForkPR   int
	ForkHead string
}

// Options shapes NewRemote's repository.
type Options struct {
	// Files is how many files the default branch holds besides README
	// (for benchmarks); 0 means none.
	Files int
	// Filter, when set, names a git filter driver every file of the
	// default branch goes through at checkout (.gitattributes
	// "* filter=<Filter>"); a git without that driver configured checks
	// the files out as they are.
	Filter string
}

// NewRemote builds a bare repository under t.TempDir().
func NewRemote(t testing.TB, opts Options) *Remote {
	t.Helper()
	root := t.TempDir()
	r := &Remote{Dir: filepath.Join(root, "remote.git"), Default: "trunk", PRBranch: "feature/login", ForkPR: 2}
	r.URL = "file://" + r.Dir
	work := filepath.Join(root, "work")
	Git(t, root, "init", "--quiet", "--bare", "--initial-branch="+r.Default, r.Dir)
	Git(t, root, "init", "--quiet", "--initial-branch="+r.Default, work)
	write(t, filepath.Join(work, "README"), "hello\n")
	if opts.Filter != "" {
		write(t, filepath.Join(work, ".gitattributes"), "* filter="+opts.Filter+"\n")
	}
	for i := range opts.Files {
		write(t, filepath.Join(work, "src", fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i)), fmt.Sprintf("file %d\n", i))
	}
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "--quiet", "-m", "initial")
	r.DefaultHead = Git(t, work, "rev-parse", "HEAD")
	Git(t, work, "checkout", "--quiet", "-b", r.PRBranch)
	write(t, filepath.Join(work, "login.txt"), "login\n")
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "--quiet", "-m", "login")
	r.PRHead = Git(t, work, "rev-parse", "HEAD")
	Git(t, work, "checkout", "--quiet", "--detach", r.DefaultHead)
	write(t, filepath.Join(work, "fork.txt"), "fork\n")
	Git(t, work, "add", "-A")
	Git(t, work, "commit", "--quiet", "-m", "from a fork")
	r.ForkHead = Git(t, work, "rev-parse", "HEAD")
	Git(t, work, "push", "--quiet", r.Dir, r.Default, r.PRBranch, fmt.Sprintf("%s:refs/pull/%d/head", r.ForkHead, r.ForkPR))
	return r
}

// Git runs git with args in dir with a fixed identity and returns its
// trimmed stdout; a failure fails t.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
