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

// KillServer kills the tmux server on socket, if one runs, waits up to
// paneExitWait for the processes of its panes and their descendants to
// exit (tmux hangs them up;
// the real CLIs save files as they go), and removes the socket file, which
// kill-server leaves behind (tmux 3.3a), with the files loopd keeps beside
// it, named after it (serve's lock, "<socket>.loopd-lock").
func KillServer(socket string) {
	var pids []int
	if out, err := exec.Command("tmux", "-L", socket, "list-panes", "-a", "-F", "#{pane_pid}").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	// The panes' processes with theirs: a CLI run as a job of its own
	// outlives its pane's shell by its hangup delay.
	pids = proc.Descendants(pids)
	// It fails when no server runs; the files may be there all the same.
	_ = exec.Command("tmux", "-L", socket, "kill-server").Run()
	deadline := time.Now().Add(paneExitWait)
	for _, pid := range pids {
		for proc.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
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
// beside them) that test processes no longer running left in tmux's socket
// directory (teardown.Stale), and those of this process's pid, which a
// dead process that had the same pid left when Sweep runs before this one
// made any. It returns the socket names it swept, sorted. SocketName calls
// it once per process.
func Sweep() ([]string, error) {
	names, err := socketNames(func(name string) bool { return teardown.Stale(name) || teardown.Own(name) })
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		KillServer(name)
	}
	return names, nil
}

// Leftovers returns, sorted, the names of the files in tmux's socket
// directory that this process made and has not removed: a socket or a
// file beside one whose KillServer never ran.
func Leftovers() ([]string, error) {
	return socketNames(teardown.Own)
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
// socket file of this process is left, naming and removing it. It returns
// the exit code. TestMain calls it: os.Exit(tmuxtest.Main(m.Run)).
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
		fmt.Fprintf(os.Stderr, "tmuxtest: the tests left %d tmux servers or socket files behind (now removed): %s\n",
			len(left), strings.Join(left, " "))
		killOwn()
		return max(code, 1)
	}
	return code
}

// killOwn kills every server of this process and removes its files.
func killOwn() {
	left, _ := Leftovers()
	for _, name := range left {
		KillServer(name)
	}
}
