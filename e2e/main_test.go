package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/internal/teardown"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// Binaries built once by TestMain.
var (
	loopdBin      string
	fakeClaudeBin string
	fakeCodexBin  string
	fakeGeminiBin string
)

// Timeouts of the waits. They bound how long a broken build takes to fail;
// a passing run waits only as long as the condition takes.
const (
	waitShort = 10 * time.Second
	waitLong  = 30 * time.Second
	// waitRuns bounds a wait for several runs of a real CLI, each of which
	// takes 10 s and more to start beside busy processes.
	waitRuns = 2 * time.Minute
	tick     = 50 * time.Millisecond
)

// The work items of the fixtures: every payload is for Codertocat/Hello-World,
// issue 1 and pull request 2, sent by Codertocat.
var (
	keyIssue = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 1}
	keyPR    = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 2}
)

// uuidPattern is a canonical UUID, as minted for --session-id.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if _, err := exec.LookPath("tmux"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tmux not found; skipping the end-to-end tests")
		return 0
	}
	// tmuxtest.Main sweeps what killed runs left, puts the run's temp dirs
	// (the binaries' too) in one removed even on an interrupt, and fails
	// the run when a tmux server or socket is left.
	return tmuxtest.Main(func() int {
		teardown.OnInterrupt(stopDaemons)
		if err := buildBinaries(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		return pgtest.Main(m)
	})
}

// binDirEnv names a directory that holds the binaries already built, for a
// test binary that another one started (TestInterruptStopsEverything).
const binDirEnv = "LOOPD_E2E_BIN_DIR"

// buildBinaries builds loopd and the fake CLIs into a new temp dir, or
// takes them from $LOOPD_E2E_BIN_DIR, and sets the paths.
func buildBinaries() error {
	dir := os.Getenv(binDirEnv)
	build := dir == ""
	if build {
		var err error
		if dir, err = os.MkdirTemp("", "loopd-e2e-bin-"); err != nil {
			return err
		}
	}
	loopdBin = filepath.Join(dir, "loopd")
	fakeClaudeBin = filepath.Join(dir, "fakeclaude")
	fakeCodexBin = filepath.Join(dir, "fakecodex")
	fakeGeminiBin = filepath.Join(dir, "fakegemini")
	if !build {
		return nil
	}
	for out, pkg := range map[string]string{loopdBin: "./cmd/loopd", fakeClaudeBin: "./testdata/fakeclaude",
		fakeCodexBin: "./testdata/fakecodex", fakeGeminiBin: "./testdata/fakegemini"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return nil
}
