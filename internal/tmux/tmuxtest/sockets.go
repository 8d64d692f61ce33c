package tmuxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/teardown"
	"github.com/loopd/loopd/internal/tmux"
)

// paneExitWait bounds how long KillServer waits for the processes of the
// server's panes to exit after kill-server hung them up.
const paneExitWait = 10 * time.Second

var (
	socketSeq atomic.Int64
	sweepOnce sync.Once
)

// SocketName returns the name of a new private tmux socket (tmux -L) for
// this test process: teardown.Name of label and a sequence number, such as
// "loopd-test-4242-e2e-7". The first call in a process sweeps first
// (Sweep), so that what a killed test run left is gone before this run
// adds its own. Whoever starts a server on it removes it with KillServer;
// Socket does both.
func SocketName(label string) string {
	sweepFirst()
	return teardown.Name(label + "-" + strconv.FormatInt(socketSeq.Add(1), 10))
}

// sweepFirst runs Sweep the first time it is called in this process, and
// says on stderr what it removed.
func sweepFirst() {
	sweepOnce.Do(func() {
		if swept, err := Sweep(); err != nil {
			fmt.Fprintf(os.Stderr, "tmuxtest: sweep: %v\n", err)
		} else if len(swept) > 0 {
			fmt.Fprintf(os.Stderr, "tmuxtest: removed %d tmux servers and sockets of dead test processes: %s\n",
				len(swept), strings.Join(swept, " "))
		}
	})
}

// Socket returns SocketName(label) and has t's cleanup kill the server on
// it and remove its files (KillServer). It skips t when tmux is not
// installed.
func Socket(t testing.TB, label string) string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed; real-tmux tests need it (apt-get install tmux)")
	}
	socket := SocketName(label)
	t.Cleanup(func() { KillServer(socket) })
	return socket
}

// KillServer kills the tmux servers on socket, found by process as well
// as by socket file (servers): kill-server for one its socket file
// reaches, SIGTERM for one whose file is gone (tmux then ends as
// kill-server ends it), SIGKILL for one still running after paneExitWait.
// It waits up to paneExitWait for the servers and the processes of their
// panes with their descendants to exit (tmux hangs them up; the real CLIs
// save files as they go), and removes the socket file, which kill-server
// leaves behind (tmux 3.3a), with the files loopd keeps beside it, named
// after it (serve's lock, "<socket>.loopd-lock").
func KillServer(socket string) {
	running := serversOn(socket)
	var pids []int
	for _, s := range running {
		pids = append(pids, s.PID)
	}
	// The servers' processes with theirs: the panes, and a CLI run as a
	// job of its own, which outlives its pane's shell by its hangup delay.
	pids = proc.Descendants(pids)
	// It fails when no server runs; the files may be there all the same.
	_ = exec.Command("tmux", "-L", socket, "kill-server").Run()
	for _, s := range running {
		if s.fileGone() && s.Running() {
			_ = syscall.Kill(s.PID, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(paneExitWait)
	for _, pid := range pids {
		for proc.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, s := range running {
		if s.Running() {
			_ = syscall.Kill(s.PID, syscall.SIGKILL)
		}
	}
	path, err := tmux.SocketPath(socket)
	if err != nil {
		return
	}
	_ = os.Remove(path)
	beside, _ := filepath.Glob(path + ".*")
	for _, p := range beside {
		_ = os.Remove(p)
	}
}

// Sweep kills the servers and removes the socket files (and the files
// beside them) that test processes no longer running left (teardown.Stale),
// and those of this process's pid, which a dead process that had the same
// pid left when Sweep runs before this one made any: the files in tmux's
// socket directory, and the live servers found by process (servers), whose
// socket file may be gone, by their socket's name or their TMPDIR. It
// returns the socket names it swept, sorted. SocketName calls it once per
// process.
func Sweep() ([]string, error) {
	match := func(name string) bool { return teardown.Stale(name) || teardown.Own(name) }
	names, err := socketNames(match)
	if err != nil {
		return nil, err
	}
	// A TMPDIR of this pid may be this process's own by now.
	names = union(names, serverNames(match, teardown.Stale))
	for _, name := range names {
		KillServer(name)
	}
	return names, nil
}

// Leftovers returns, sorted, the socket names of what this process made
// and has not removed: a socket or a file beside one in tmux's socket
// directory whose KillServer never ran, and a live server found by process
// (servers) whose socket is of this process's names or whose TMPDIR is
// this process's own (teardown.Main), its socket file deleted or not.
func Leftovers() ([]string, error) {
	names, err := socketNames(teardown.Own)
	if err != nil {
		return nil, err
	}
	return union(names, serverNames(teardown.Own, teardown.Own)), nil
}

// union returns the names of a and b, each once, sorted.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// socketNames returns, sorted, the names of the sockets in tmux's socket
// directory that match, a file beside a socket counting as its socket.
func socketNames(match func(name string) bool) ([]string, error) {
	probe, err := tmux.SocketPath(teardown.Prefix + "probe")
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Dir(probe))
	if err != nil {
		return nil, fmt.Errorf("tmux socket dir: %w", err)
	}
	var names []string
	for _, e := range entries {
		name, _, _ := strings.Cut(e.Name(), ".")
		if match(name) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Main runs a test binary's tests, run (m.Run, or a function that calls
// it), for packages that start tmux servers: it sweeps first (Sweep), puts
// every temporary directory of the run in one that is removed at the end
// and on an interrupt (teardown.Main), kills this process's servers on an
// interrupt, and, at the end, fails the run (code 1) when a server or
// socket file of this process is left (Leftovers: a server found by
// process counts, its socket file deleted or not), naming and removing
// it. It returns the exit code. TestMain calls it:
// os.Exit(tmuxtest.Main(m.Run)).
func Main(run func() int) int {
	sweepFirst()
	code := teardown.Main(func() int {
		// Registered after teardown.Main's removal of the temp dirs, so
		// that it runs before: no agent writes into a directory being
		// removed.
		teardown.OnInterrupt(killOwn)
		return run()
	})
	left, err := Leftovers()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tmuxtest: %v\n", err)
		return max(code, 1)
	}
	if len(left) > 0 {
		shown := make([]string, len(left))
		for i, name := range left {
			shown[i] = describe(name)
		}
		fmt.Fprintf(os.Stderr, "tmuxtest: the tests left %d tmux servers or socket files behind (now removed): %s\n",
			len(left), strings.Join(shown, " "))
		killOwn()
		return max(code, 1)
	}
	return code
}

// describe returns the socket name with what runs on it: "name (server
// 1234)", "name (server 1234, socket file deleted)", or the name alone
// for files with no server.
func describe(name string) string {
	var parts []string
	for _, s := range serversOn(name) {
		part := "server " + strconv.Itoa(s.PID)
		if s.fileGone() {
			part += ", socket file deleted"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return name
	}
	return name + " (" + strings.Join(parts, "; ") + ")"
}

// killOwn kills every server of this process and removes its files.
func killOwn() {
	left, _ := Leftovers()
	for _, name := range left {
		KillServer(name)
	}
}
