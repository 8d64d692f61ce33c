package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// benchFiles is the size of the repository BenchmarkPrepareWorkspace
// checks out (docs/performance.md).
const benchFiles = 5000

// BenchmarkPrepareWorkspace measures Prepare of an issue's worktree in a
// repository of benchFiles files once its mirror exists (the lock, the
// fetch, the prune, the ref checks, the remote's default branch and the
// `git worktree add`) against a plain `git worktree add -b` of the same
// commit from the same mirror. The two alternate in every iteration, so a
// machine whose load changes during the run slows both alike; it reports
// prepare-ns/op, plain-ns/op and their ratio (the goal is at most 1.2).
func BenchmarkPrepareWorkspace(b *testing.B) {
	r := workspacetest.NewRemote(b, workspacetest.Options{Files: benchFiles})
	m := &workspace.Manager{Root: filepath.Join(b.TempDir(), "mirrors")}
	ctx := context.Background()
	base := b.TempDir()
	if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, "warm"), Mode: workspace.ModeIssue, Branch: "warm"}); err != nil {
		b.Fatal(err)
	}
	mirror, err := workspace.Mirror(m.Root, r.URL)
	if err != nil {
		b.Fatal(err)
	}
	var prepare, plain time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, fmt.Sprint("p", i)), Mode: workspace.ModeIssue, Branch: fmt.Sprintf("loopd/issue-%d", i)}
		if _, err := m.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
		prepare += time.Since(start)
		start = time.Now()
		workspacetest.Git(b, mirror, "worktree", "add", "--quiet", "-b", fmt.Sprintf("plain-%d", i), filepath.Join(base, fmt.Sprint("w", i)), "refs/remotes/origin/"+r.Default)
		plain += time.Since(start)
	}
	b.ReportMetric(float64(prepare.Nanoseconds())/float64(i), "prepare-ns/op")
	b.ReportMetric(float64(plain.Nanoseconds())/float64(i), "plain-ns/op")
	b.ReportMetric(float64(prepare)/float64(plain), "ratio")
}
