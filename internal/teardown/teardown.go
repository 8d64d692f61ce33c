// Package teardown is the test support that lets loopd's tests clean up
// after themselves even when they are interrupted. Everything a test
// process leaves outside its own memory (a tmux socket, a lock file, a
// temporary directory) is named with Prefix and the process's pid (Name),
// so that the next test process can tell what a dead one left (Stale) and
// remove it. OnInterrupt runs cleanups on SIGINT, SIGTERM or SIGHUP of the
// test binary, which would otherwise end it without running t.Cleanup or
// the rest of TestMain. Main gives a test binary a temporary directory of
// its own, which holds every t.TempDir and is removed even on an
// interrupt. Only tests import it.
package teardown

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/loopd/loopd/internal/proc"
)

// Prefix begins the name of everything a loopd test process leaves outside
// itself; the process's pid follows (Name).
const Prefix = "loopd-test-"

// Name returns Prefix, the pid of this process, "-" and label: the name of
// a thing this test process makes and must remove.
func Name(label string) string {
	return Prefix + strconv.Itoa(os.Getpid()) + "-" + label
}

// Owner returns the pid in a name that Name made, and whether name is one.
func Owner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// Own reports whether name is one that Name made in this process.
func Own(name string) bool {
	pid, ok := Owner(name)
	return ok && pid == os.Getpid()
}

// Stale reports whether name is one that Name made in a process that no
// longer runs. A pid reused since by another process keeps the name
// looking live, which errs on the safe side.
func Stale(name string) bool {
	pid, ok := Owner(name)
	return ok && !proc.Alive(pid)
}

// the cleanups OnInterrupt registered, run last-in first-out.
var (
	mu       sync.Mutex
	cleanups []func()
	watching bool
)

// interruptSignals are the signals on which OnInterrupt's cleanups run: a
// terminal's ^C, make's or systemd's stop, a closed terminal.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// OnInterrupt registers f to run when this process gets SIGINT, SIGTERM or
// SIGHUP. On the first such signal the default handling is restored (so a
// second ^C ends the process at once), the cleanups run last-in first-out,
// as deferred calls do, and the signal is raised again, so that the
// process ends as the signal would have ended it.
func OnInterrupt(f func()) {
	mu.Lock()
	defer mu.Unlock()
	cleanups = append(cleanups, f)
	if watching {
		return
	}
	watching = true
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, interruptSignals...)
	go func() {
		sig := <-sigs
		signal.Reset(interruptSignals...)
		mu.Lock()
		fs := cleanups
		cleanups = nil
		mu.Unlock()
		for i := len(fs) - 1; i >= 0; i-- {
			fs[i]()
		}
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}

// killIn kills (SIGKILL) every process of this user that lives in dir, a
// dead test process's temporary directory: its TMPDIR is dir, or its
// executable is under it (a binary the test built there). A process whose
// /proc entries cannot be read (another user's) is left alone.
func killIn(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if tmpdirOf(pid) == dir || strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// tmpdirOf returns the TMPDIR in process pid's environment, "" when it
// has none or it cannot be read.
func tmpdirOf(pid int) string {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	for _, kv := range strings.Split(string(raw), "\x00") {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			return v
		}
	}
	return ""
}

// Main runs run with a temporary directory of this process's own as
// TMPDIR (Name("tmp") in the system's), so that every t.TempDir and
// os.MkdirTemp of the tests lands in it, and removes it afterwards and on
// an interrupt. It first removes the directories of that name that dead
// test processes left (Stale), and kills the processes still running in
// them (killIn). It returns run's code, or 1 when the directory
// cannot be made.
func Main(run func() int) int {
	base := os.TempDir()
	if entries, err := os.ReadDir(base); err == nil {
		for _, e := range entries {
			if e.IsDir() && Stale(e.Name()) {
				stale := filepath.Join(base, e.Name())
				// A dead test process that could not clean up (go
				// test's timeout panic runs no cleanup) leaves what it
				// started running: its daemons and their agents.
				killIn(stale)
				_ = os.RemoveAll(stale)
			}
		}
	}
	dir := filepath.Join(base, Name("tmp"))
	// One of this name can only be a dead process's that had this pid.
	_ = os.RemoveAll(dir)
	// 0755: a server run as another user (pgtest's postgres, as root)
	// keeps its files in a directory under it; t.TempDir's are 0700.
	if err := os.Mkdir(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "teardown: temp dir: %v\n", err)
		return 1
	}
	remove := func() { _ = os.RemoveAll(dir) }
	OnInterrupt(remove)
	old, had := os.LookupEnv("TMPDIR")
	_ = os.Setenv("TMPDIR", dir)
	defer func() {
		if had {
			_ = os.Setenv("TMPDIR", old)
		} else {
			_ = os.Unsetenv("TMPDIR")
		}
		remove()
	}()
	return run()
}
