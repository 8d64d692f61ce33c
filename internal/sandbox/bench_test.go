package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkSpawnCost measures what the sandbox adds to a spawn: the time
// from the exec of a harness to the harness running (its first line on
// stdout), without a sandbox and in one made as a spawn's is (a workdir,
// an install dir, a per-item view under a shared dir, a hidden state dir,
// a private home), the two taken in turn in the same run so that the load
// of the machine weighs on both alike. It reports the median and the 95th
// percentile of each, in milliseconds (docs/performance.md).
func BenchmarkSpawnCost(b *testing.B) {
	h := benchHost(b)
	root := b.TempDir()
	for _, d := range []string{"agents/1", "state", "home", "claude/loopd-items/1", "claude/projects/-agents-1", "tools/node_modules"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	sh, err := h.Resolve("sh", os.Getenv("PATH"))
	if err != nil {
		b.Fatal(err)
	}
	spec := Spec{
		Workdir: filepath.Join(root, "agents/1"), Program: sh.Path,
		ReadOnly: []string{filepath.Join(root, "tools/node_modules")},
		Binds: []Bind{
			{Source: filepath.Join(root, "claude/loopd-items/1"), Target: filepath.Join(root, "claude"), Write: true},
			{Source: filepath.Join(root, "claude/projects/-agents-1"), Write: true},
		},
		Private: []string{filepath.Join(root, "home")},
		Hide:    []string{filepath.Join(root, "state")},
	}
	wrap, err := h.Wrap(spec)
	if err != nil {
		b.Fatal(err)
	}
	harness := []string{sh.Path, "-c", "echo running; exec sleep 60"}
	var plain, boxed []time.Duration
	b.ResetTimer()
	for range b.N {
		plain = append(plain, spawnUntilRunning(b, harness))
		boxed = append(boxed, spawnUntilRunning(b, append(slices.Clone(wrap), harness...)))
	}
	b.StopTimer()
	report(b, "unsandboxed", plain)
	report(b, "bubblewrap", boxed)
}

// benchHost is the Host Check finds, or skips the benchmark.
func benchHost(b *testing.B) Host {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	h, err := Check(b.Context(), exe, os.Getenv("PATH"))
	if err != nil {
		b.Skipf("bubblewrap: %v", err)
	}
	return h
}

// spawnUntilRunning starts argv and returns how long it took until its
// first line came out; it then kills it (the sandbox with it) and reaps it.
func spawnUntilRunning(b *testing.B, argv []string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	_ = cmd.Process.Kill() // bwrap's --die-with-parent takes the sandbox with it
	_ = cmd.Wait()
	return took
}

// report adds the median and the 95th percentile of ds, in ms, named
// after what.
func report(b *testing.B, what string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(at(0.5), what+"_p50_ms")
	b.ReportMetric(at(0.95), what+"_p95_ms")
}
