package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// benchFiles is the size of the repository the workspace benchmarks check
// out (docs/performance.md).
const benchFiles = 5000

// BenchmarkPrepareWorkspace measures Prepare of an issue's worktree in a
// repository of benchFiles files once its mirror exists: the lock, the
// fetch, the prune, the ref checks, the remote's default branch and the
// `git worktree add`. Compare with BenchmarkPlainWorktreeAdd.
func BenchmarkPrepareWorkspace(b *testing.B) {
	r := workspacetest.NewRemote(b, workspacetest.Options{Files: benchFiles})
	m := &workspace.Manager{Root: filepath.Join(b.TempDir(), "mirrors")}
	ctx := context.Background()
	base := b.TempDir()
	if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, "warm"), Mode: workspace.ModeIssue, Branch: "warm"}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, fmt.Sprint(i)), Mode: workspace.ModeIssue, Branch: fmt.Sprintf("loopd/issue-%d", i)}
		if _, err := m.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainWorktreeAdd is the floor BenchmarkPrepareWorkspace is
// measured against: `git worktree add -b` alone, from the same mirror.
func BenchmarkPlainWorktreeAdd(b *testing.B) {
	r := workspacetest.NewRemote(b, workspacetest.Options{Files: benchFiles})
	m := &workspace.Manager{Root: filepath.Join(b.TempDir(), "mirrors")}
	base := b.TempDir()
	if _, err := m.Prepare(context.Background(), workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, "warm"), Mode: workspace.ModeIssue, Branch: "warm"}); err != nil {
		b.Fatal(err)
	}
	mirror, err := workspace.Mirror(m.Root, r.URL)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		workspacetest.Git(b, mirror, "worktree", "add", "--quiet", "-b", fmt.Sprintf("plain-%d", i), filepath.Join(base, fmt.Sprint(i)), "refs/remotes/origin/"+r.Default)
	}
}
