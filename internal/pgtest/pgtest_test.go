package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// childEnv makes this binary the child of TestClusterDiesWithItsTests: it
// starts a cluster, writes "<dir> <pid>" to the file the variable names,
// and waits to be signalled.
const childEnv = "PGTEST_CHILD_REPORT"

func TestChild(t *testing.T) {
	report := os.Getenv(childEnv)
	if report == "" {
		t.Skip("only as the child of TestClusterDiesWithItsTests")
	}
	URL(t)
	mu.Lock()
	line := fmt.Sprintf("%s %d", current.dir, current.proc.Pid)
	mu.Unlock()
	require.NoError(t, os.WriteFile(report, []byte(line), 0o600))
	time.Sleep(time.Minute)
}

// TestURLGivesAFreshDatabase: each URL is its own empty database, which
// takes connections, and is gone after its test.
func TestURLGivesAFreshDatabase(t *testing.T) {
	var first string
	t.Run("a", func(t *testing.T) {
		first = URL(t)
		conn, err := pgx.Connect(context.Background(), first)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), `CREATE TABLE x (a int)`)
		require.NoError(t, err)
	})
	second := URL(t)
	assert.NotEqual(t, first, second)
	_, err := pgx.Connect(context.Background(), first)
	assert.Error(t, err, "the first test's database was dropped")
}

// TestClusterDiesWithItsTests: a test binary interrupted (SIGINT,
// SIGTERM) stops its cluster and removes its files; one killed outright
// (SIGKILL) takes its server with it (Pdeathsig).
func TestClusterDiesWithItsTests(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "report")
			cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+report)
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			var dir string
			var pid int
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(report)
				if err != nil || len(b) == 0 {
					return false
				}
				f := strings.Fields(string(b))
				dir, pid = f[0], atoi(t, f[1])
				return true
			}, 60*time.Second, 20*time.Millisecond, "the child started its cluster")
			t.Cleanup(func() { os.RemoveAll(dir) })
			require.NoError(t, cmd.Process.Signal(sig))
			cmd.Wait()
			require.Eventually(t, func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH }, 10*time.Second, 20*time.Millisecond,
				"the server %d is gone", pid)
			if sig != syscall.SIGKILL {
				assert.NoDirExists(t, dir)
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
