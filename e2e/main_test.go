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
	tick      = 50 * time.Millisecond
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
	dir, err := os.MkdirTemp("", "loopd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	loopdBin = filepath.Join(dir, "loopd")
	fakeClaudeBin = filepath.Join(dir, "fakeclaude")
	fakeCodexBin = filepath.Join(dir, "fakecodex")
	fakeGeminiBin = filepath.Join(dir, "fakegemini")
	for out, pkg := range map[string]string{loopdBin: "./cmd/loopd", fakeClaudeBin: "./testdata/fakeclaude",
		fakeCodexBin: "./testdata/fakecodex", fakeGeminiBin: "./testdata/fakegemini"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	return pgtest.Main(m)
}
