package proc

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// child starts argv as a process group leader, as a tmux pane's process
// is, and reaps it in the background.
func child(t *testing.T, argv ...string) Process {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	p, err := Lookup(cmd.Process.Pid)
	require.NoError(t, err)
	return p
}

func TestLookupAndRunning(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	p := child(t, "sleep", "30")
	assert.Positive(t, p.Start)
	assert.True(t, p.Running())
	// Another start time is another process that had the pid: not p.
	assert.False(t, Process{PID: p.PID, Start: p.Start + 1}.Running())
	assert.False(t, Process{}.Running())

	_, err := Lookup(1 << 30)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

// TestEndWaitsForAnExit: a process that exits within the grace is not
// killed.
func TestEndWaitsForAnExit(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	p := child(t, "sleep", "0.2")
	killed, err := p.End(t.Context(), 5*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, killed)
	assert.False(t, p.Running())
}

// TestEndKillsTheGroup: a process that outlives the grace is killed with
// its process group (a child it started goes too).
func TestEndKillsTheGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	file := t.TempDir() + "/pid"
	p := child(t, "sh", "-c", "sleep 30 & echo $! >\"$0.tmp\"; mv \"$0.tmp\" \"$0\"; wait", file)
	var sleeper Process
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(file)
		require.NoError(c, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(c, err)
		sleeper, err = Lookup(pid)
		require.NoError(c, err)
	}, 5*time.Second, 5*time.Millisecond)
	require.True(t, sleeper.Running())
	killed, err := p.End(t.Context(), 50*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, killed)
	assert.False(t, p.Running())
	assert.Eventually(t, func() bool { return !sleeper.Running() }, 5*time.Second, 5*time.Millisecond,
		"the child in the group is killed too")
}

// groupChild starts script under sh as a process group leader; the script
// writes the pid of a member it starts to "$0", which groupChild returns.
func groupChild(t *testing.T, script string) (leader, member Process) {
	t.Helper()
	file := t.TempDir() + "/pid"
	leader = child(t, "sh", "-c", script, file)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(file)
		require.NoError(c, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		require.NoError(c, err)
		member, err = Lookup(pid)
		require.NoError(c, err)
	}, 5*time.Second, 5*time.Millisecond)
	t.Cleanup(func() {
		if member.Running() { // never a later process that got its pid
			_ = syscall.Kill(member.PID, syscall.SIGKILL)
		}
	})
	return leader, member
}

// TestEndGroupHangup: a group that ends on SIGHUP is not killed.
func TestEndGroupHangup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if signal.Ignored(syscall.SIGHUP) {
		// Under nohup the children inherit the ignored SIGHUP, and no
		// shell can take it back: no group of theirs ends on it.
		t.Skip("SIGHUP is ignored in this process (nohup)")
	}
	leader, member := groupChild(t, `sleep 30 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait`)
	killed, err := leader.EndGroup(t.Context(), syscall.SIGHUP, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, killed)
	assert.False(t, member.Running())
	assert.False(t, GroupRunning(leader.PID))
}

// TestEndGroupIgnoringHangup: a group whose processes ignore SIGHUP, as
// Gemini's do, is killed, every member with it.
func TestEndGroupIgnoringHangup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	leader, member := groupChild(t, `trap "" HUP; sleep 30 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait`)
	killed, err := leader.EndGroup(t.Context(), syscall.SIGHUP, 100*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, killed)
	assert.False(t, member.Running())
	assert.False(t, GroupRunning(leader.PID))
}

// TestEndGroupFirstSignal: the first signal is the caller's. A group
// that ignores SIGHUP but ends at SIGTERM, as a run at its timeout is
// sent, is not killed; sent SIGHUP, it is.
func TestEndGroupFirstSignal(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	script := `trap "" HUP; sleep 30 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait`
	leader, member := groupChild(t, script)
	killed, err := leader.EndGroup(t.Context(), syscall.SIGTERM, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, killed, "SIGTERM ends the group")
	assert.False(t, member.Running())

	leader, member = groupChild(t, script)
	killed, err = leader.EndGroup(t.Context(), syscall.SIGHUP, 100*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, killed, "SIGHUP is ignored: SIGKILL ends the group")
	assert.False(t, member.Running())
}

// TestGroupOfZombiesIsNotRunning: a group whose only member left is a
// zombie has ended, whoever reaps it (PID 1 in a container may not): its
// end is not waited for, and not killed.
func TestGroupOfZombiesIsNotRunning(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Not reaped until the test ends: a zombie meanwhile.
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Wait() })
	p, err := Lookup(cmd.Process.Pid)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, state, err := stat(p.PID)
		return err == nil && state == 'Z'
	}, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, syscall.Kill(-p.PID, 0), "the zombie is still in its group")
	assert.False(t, GroupRunning(p.PID))
	killed, err := p.EndGroup(t.Context(), syscall.SIGTERM, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, killed)
	assert.False(t, GroupRunning(0), "no group 0")
}

// TestEndGroupAfterItsLeader: the members a dead leader left behind are
// ended too, its start time unknown.
func TestEndGroupAfterItsLeader(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	leader, member := groupChild(t, `trap "" HUP; sleep 30 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait`)
	require.NoError(t, syscall.Kill(leader.PID, syscall.SIGKILL))
	require.Eventually(t, func() bool { return !leader.Running() }, 5*time.Second, 5*time.Millisecond)
	require.True(t, GroupRunning(leader.PID), "the member outlives its leader")
	killed, err := Process{PID: leader.PID}.EndGroup(t.Context(), syscall.SIGHUP, 100*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, killed)
	assert.False(t, member.Running())
}

// TestEndGroupOfAnotherProcess: a pid that names a later process than the
// leader is left alone, with its group.
func TestEndGroupOfAnotherProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	leader, member := groupChild(t, `sleep 30 & echo $! >"$0.tmp"; mv "$0.tmp" "$0"; wait`)
	killed, err := Process{PID: leader.PID, Start: leader.Start + 1}.EndGroup(t.Context(), syscall.SIGHUP, 50*time.Millisecond, 5*time.Millisecond)
	require.NoError(t, err)
	assert.False(t, killed)
	assert.True(t, leader.Running())
	assert.True(t, member.Running())
}

// Descendants finds a process's children by their parent pid, whatever
// their process group.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		for _, pid := range Descendants([]int{cmd.Process.Pid}) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Wait()
	})
	var found []int
	require.Eventually(t, func() bool {
		found = Descendants([]int{cmd.Process.Pid})
		return len(found) == 2 // the shell and its job
	}, 5*time.Second, 10*time.Millisecond, "found %v", found)
	assert.Equal(t, cmd.Process.Pid, found[0])
}

// Alive tells a running process from a zombie and from no process.
func TestAlive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	assert.True(t, Alive(pid), "a running process")
	require.NoError(t, cmd.Process.Kill())
	// Not reaped yet: a zombie until Wait.
	require.Eventually(t, func() bool { return !Alive(pid) }, 5*time.Second, 10*time.Millisecond, "the zombie %d", pid)
	require.Error(t, cmd.Wait())
	assert.False(t, Alive(pid), "a reaped process")
	assert.False(t, Alive(0))
}
