package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// benchFiles is the size of the repository BenchmarkPrepareWorkspace
// checks out (docs/performance.md).
const benchFiles = 5000

// BenchmarkPrepareWorkspace measures Prepare of an issue's clone in a
// repository of benchFiles files once its mirror exists (the lock, the
// mirror's config check and fetch, the ref checks, the remote's default
// branch, and the clone: init, a fetch from the mirror that copies no
// object, its branch, config and checkout, the rename into place) against
// two plain git commands that make a checkout of the same commit from the
// same mirror: `git worktree add -b`, which Prepare did before, and `git
// clone --shared` with a checkout, the plain form of a clone that borrows
// the mirror's objects. The three alternate in every iteration, so a
// machine whose load changes during the run slows them alike; it reports
// prepare-ns/op, worktree-ns/op and clone-ns/op, and the median over the
// iterations of each iteration's ratio of Prepare to each, which a load
// spike in a few iterations does not move (the goal is at most 1.2
// against the worktree).
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
	var prepare, worktree, clone time.Duration
	var toWorktree, toClone []float64
	i := 0
	for b.Loop() {
		i++
		p, w, c0 := prepare, worktree, clone
		start := time.Now()
		c := workspace.Checkout{URL: r.URL, Dir: filepath.Join(base, fmt.Sprint("p", i)), Mode: workspace.ModeIssue, Branch: fmt.Sprintf("loopd/issue-%d", i)}
		if _, err := m.Prepare(ctx, c); err != nil {
			b.Fatal(err)
		}
		prepare += time.Since(start)
		start = time.Now()
		workspacetest.Git(b, mirror, "worktree", "add", "--quiet", "-b", fmt.Sprintf("plain-%d", i), filepath.Join(base, fmt.Sprint("w", i)), "refs/remotes/origin/"+r.Default)
		worktree += time.Since(start)
		start = time.Now()
		dir := filepath.Join(base, fmt.Sprint("c", i))
		workspacetest.Git(b, base, "clone", "--quiet", "--shared", "--no-checkout", mirror, dir)
		workspacetest.Git(b, dir, "checkout", "--quiet", "-b", "plain", r.DefaultHead)
		clone += time.Since(start)
		toWorktree = append(toWorktree, float64(prepare-p)/float64(worktree-w))
		toClone = append(toClone, float64(prepare-p)/float64(clone-c0))
	}
	b.ReportMetric(float64(prepare.Nanoseconds())/float64(i), "prepare-ns/op")
	b.ReportMetric(float64(worktree.Nanoseconds())/float64(i), "worktree-ns/op")
	b.ReportMetric(float64(clone.Nanoseconds())/float64(i), "clone-ns/op")
	b.ReportMetric(median(toWorktree), "ratio-worktree")
	b.ReportMetric(median(toClone), "ratio-clone")
}

// median returns the middle value of xs (the mean of the two middle ones
// for an even count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
