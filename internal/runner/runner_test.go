package runner

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/proc"
)

// TestMain makes the test binary the wrapper when it is started as one,
// as loopd is (cmd/loopd's run-harness).
func TestMain(m *testing.M) {
	if len(os.Args) > 6 && os.Args[1] == Command && os.Args[2] == DirFlag && os.Args[4] == IDFlag && os.Args[6] == "--" {
		if err := Exec(os.Args[3], os.Args[5], os.Args[7:]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newRunner(t *testing.T) Runner {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return Runner{Exe: exe, Dir: filepath.Join(t.TempDir(), "runs")}
}

// waitEnded polls Read until the run has ended.
func waitEnded(t *testing.T, r Runner, item, id string) Fact {
	t.Helper()
	var f Fact
	require.Eventually(t, func() bool {
		var err error
		f, err = r.Read(item, id)
		require.NoError(t, err)
		return f.Ended()
	}, 10*time.Second, 5*time.Millisecond)
	return f
}

func TestRunRecordsItsExit(t *testing.T) {
	r := newRunner(t)
	cwd := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "RUN_VALUE=from-env"}
	require.NoError(t, r.Start(context.Background(), Spec{Item: "loop-a-b-1", ID: "r1", Cwd: cwd, Env: env, Stdin: []byte("from stdin"),
		Argv: []string{"sh", "-c", `pwd; echo "$RUN_VALUE"; cat; echo " err" >&2; exit 3`}}))
	f := waitEnded(t, r, "loop-a-b-1", "r1")
	assert.True(t, f.StatusKnown)
	assert.Equal(t, 3, f.ExitStatus)
	assert.Zero(t, f.Signal)
	assert.False(t, f.EndedAt.Before(f.StartedAt))
	phys, err := filepath.EvalSymlinks(cwd)
	require.NoError(t, err)
	assert.Equal(t, phys+"\nfrom-env\nfrom stdin err\n", string(f.Output))
	// The stdin file is gone once the run has it open; the log is private.
	_, err = os.Stat(filepath.Join(r.ItemDir("loop-a-b-1"), "r1.in"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	info, err := os.Stat(f.Log)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestRunIsDetached(t *testing.T) {
	r := newRunner(t)
	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "r1", Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Argv: []string{"sleep", "30"}}))
	f, err := r.Read("it", "r1")
	require.NoError(t, err)
	require.True(t, f.Running)
	t.Cleanup(func() { _ = syscall.Kill(-f.Group, syscall.SIGKILL) })
	// Its own session and process group, led by the wrapper; the harness
	// in that group.
	sid, err := unix.Getsid(f.Group)
	require.NoError(t, err)
	assert.Equal(t, f.Group, sid)
	pgid, err := syscall.Getpgid(f.PID)
	require.NoError(t, err)
	assert.Equal(t, f.Group, pgid)
	mine, err := syscall.Getpgid(0)
	require.NoError(t, err)
	assert.NotEqual(t, mine, pgid)
}

func TestRunKilledBySignalAndUnstartable(t *testing.T) {
	r := newRunner(t)
	env := []string{"PATH=" + os.Getenv("PATH")}
	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "sig", Cwd: t.TempDir(), Env: env, Argv: []string{"sh", "-c", "kill -TERM $$"}}))
	f := waitEnded(t, r, "it", "sig")
	assert.True(t, f.StatusKnown)
	assert.Equal(t, -1, f.ExitStatus)
	assert.Equal(t, int(syscall.SIGTERM), f.Signal)

	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "missing", Cwd: t.TempDir(), Env: env, Argv: []string{"no-such-command-here"}}))
	f = waitEnded(t, r, "it", "missing")
	assert.Equal(t, 127, f.ExitStatus)
	assert.Contains(t, string(f.Output), "no-such-command-here")
	// The earlier run's pid and exit files went with the new start.
	_, err := os.Stat(filepath.Join(r.ItemDir("it"), "sig.pid"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestRunStartRefusesABadCwd(t *testing.T) {
	r := newRunner(t)
	err := r.Start(context.Background(), Spec{Item: "it", ID: "r1", Cwd: filepath.Join(t.TempDir(), "gone"), Argv: []string{"true"}})
	require.Error(t, err)
	f, err := r.Read("it", "r1")
	require.NoError(t, err)
	assert.False(t, f.Started)
}

func TestStopEndsTheRunsGroup(t *testing.T) {
	r := newRunner(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// A harness that ignores SIGTERM and leaves a child in its group.
	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "r1", Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Argv: []string{"sh", "-c", `trap '' TERM; sleep 60 & echo $! > ` + pidFile + `; wait; wait`}}))
	testStop(t, r, pidFile, true)
}

// TestStopEndsWhatTheHarnessLeft: a harness that ends at SIGTERM leaves a
// tool that ignores it; the tool goes with the group's SIGKILL. The tool
// writes its pid once it ignores SIGTERM, so the stop never comes first.
func TestStopEndsWhatTheHarnessLeft(t *testing.T) {
	r := newRunner(t)
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "r1", Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Argv: []string{"sh", "-c", `sh -c 'trap "" TERM; echo $$ > ` + pidFile + `; exec sleep 60' & wait`}}))
	testStop(t, r, pidFile, true)
}

// testStop stops run r1 of "it", whose harness wrote the pid of its child
// to pidFile, and checks that the group is gone.
func testStop(t *testing.T, r Runner, pidFile string, wantKilled bool) {
	t.Helper()
	var child proc.Process
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		child, err = proc.Lookup(pid)
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	f, err := r.Read("it", "r1")
	require.NoError(t, err)
	require.True(t, f.Running)
	killed, err := r.Stop(context.Background(), "it", f, 200*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, wantKilled, killed, "what ignores SIGTERM takes SIGKILL")
	assert.False(t, child.Running(), "the harness's child went with its group")
	f, err = r.Read("it", "r1")
	require.NoError(t, err)
	assert.True(t, f.Ended())

	// A run that ended is left alone.
	killed, err = r.Stop(context.Background(), "it", f, time.Millisecond, time.Millisecond)
	assert.NoError(t, err)
	assert.False(t, killed)
}

// TestRunEndsWhatTheHarnessLeftBehind: a harness that exits on its own
// leaves two tools running in its group, one that ends at SIGTERM and one
// that ignores it; the run ends only once both are gone, and its exit
// status is the harness's.
func TestRunEndsWhatTheHarnessLeftBehind(t *testing.T) {
	r := newRunner(t)
	dir := t.TempDir()
	polite, stubborn := filepath.Join(dir, "polite.pid"), filepath.Join(dir, "stubborn.pid")
	require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: "r1", Cwd: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Argv: []string{"sh", "-c", `sleep 60 & echo $! > ` + polite + `
sh -c 'trap "" TERM; echo $$ > ` + stubborn + `.tmp; mv ` + stubborn + `.tmp ` + stubborn + `; exec sleep 60' &
while [ ! -s ` + stubborn + ` ]; do sleep 0.01; done
exit 4`}}))
	f := waitEnded(t, r, "it", "r1")
	assert.True(t, f.StatusKnown)
	assert.Equal(t, 4, f.ExitStatus)
	for _, file := range []string{polite, stubborn} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(t, err)
		_, state, err := procState(pid)
		assert.True(t, err != nil || state == 'Z', "%s: pid %d still runs after its run ended", filepath.Base(file), pid)
	}
	// The wrapper itself exits right after it wrote the exit file.
	assert.Eventually(t, func() bool { return !proc.GroupRunning(f.Group) }, 5*time.Second, 5*time.Millisecond, "nothing of the run's group is left")
}

// procState reads the state of pid from /proc/<pid>/stat.
func procState(pid int) (string, byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return s, s[i+2], nil
}

func TestPruneKeepsTheNewestLogs(t *testing.T) {
	r := newRunner(t)
	env := []string{"PATH=" + os.Getenv("PATH")}
	for i := range KeepLogs + 2 {
		id := "r" + strconv.Itoa(i)
		require.NoError(t, r.Start(context.Background(), Spec{Item: "it", ID: id, Cwd: t.TempDir(), Env: env, Argv: []string{"true"}}))
		waitEnded(t, r, "it", id)
	}
	logs, err := filepath.Glob(filepath.Join(r.ItemDir("it"), "*.log"))
	require.NoError(t, err)
	assert.Len(t, logs, KeepLogs)
	assert.NotContains(t, logs, filepath.Join(r.ItemDir("it"), "r0.log"))
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{"20260101T120000.000000000Z": true, "loop-a-b-1": true, "": false, ".x": false,
		"a/b": false, "a b": false, strings.Repeat("a", 65): false} {
		assert.Equal(t, want, ValidID(id), id)
	}
}
