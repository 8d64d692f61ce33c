// Package fence ends a host's agents by themselves once the host can no
// longer prove it holds their leases, without relying on the daemon: a
// daemon frozen (SIGSTOP), swapped out or killed past its lease leaves its
// agents running in tmux, while another host of the store takes the items
// over and resumes the same conversations (docs/design.md, "Self-fencing
// agents").
//
// The daemon writes a stamp after each successful heartbeat (Stamp.Write):
// the instant its lease clock lapses, on this machine's CLOCK_BOOTTIME,
// which counts across a suspend and no wall-clock step moves. Each pane's
// launcher starts a watchdog (Start) in a session of its own before it
// replaces itself with the harness: a process that does not freeze with
// the daemon, that reads the stamp every schema.FencePoll and, once the instant has
// passed (or the stamp cannot be read), kills the harness with every
// process under it (Watch). It exits when the harness does.
package fence

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/proc"
)

// Command is the hidden loopd subcommand that runs a watchdog, StampFlag
// its flag naming the stamp, and PIDFlag the one naming the harness's pid.
const (
	Command   = "fence"
	StampFlag = "--stamp"
	PIDFlag   = "--pid"
)

// ErrStamp means the stamp could not be written: the agents of this host
// end at the instant of the last stamp written.
var ErrStamp = errors.New("fence stamp not written")

// Now reads CLOCK_BOOTTIME: the time since boot, suspends included, the
// clock of every stamp.
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39.
		panic(fmt.Sprintf("clock_gettime(CLOCK_BOOTTIME): %v", err))
	}
	return time.Duration(ts.Nano())
}

// Stamp is the file through which the daemon tells its agents' watchdogs
// until when they may run.
type Stamp struct {
	Path string
}

// Write records that the agents may run for valid from now (the lease
// clock's remaining time): it replaces the stamp with the instant on
// CLOCK_BOOTTIME (ns, decimal) through a temp file renamed into place, so
// that a watchdog never reads half a stamp. The error wraps ErrStamp.
func (s Stamp) Write(valid time.Duration) error {
	until := Now() + valid
	f, err := os.CreateTemp(filepath.Dir(s.Path), filepath.Base(s.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStamp, err)
	}
	_, err = f.WriteString(strconv.FormatInt(int64(until), 10) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.Path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("%w: %s: %w", ErrStamp, s.Path, err)
	}
	return nil
}

// Until reads the instant the stamp allows on CLOCK_BOOTTIME.
func (s Stamp) Until() (time.Duration, error) {
	b, err := os.ReadFile(s.Path)
	if err != nil {
		return 0, fmt.Errorf("read fence stamp: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read fence stamp %s: %w", s.Path, err)
	}
	return time.Duration(n), nil
}

// Lapsed reports whether the agents may no longer run: the stamp's
// instant has passed, or the stamp cannot be read (a watchdog that cannot
// tell stops its agent rather than risk a second one on its conversation).
func (s Stamp) Lapsed() bool {
	until, err := s.Until()
	return err != nil || Now() >= until
}

// Start starts the watchdog of the calling process, which is about to
// replace itself with a harness (launch.Exec): "exe fence --stamp PATH
// --pid PID", in a session of its own, so that no signal to the pane's
// process group or session reaches it, with no terminal. It does not wait
// for it.
func Start(exe, stamp string) error {
	cmd := exec.Command(exe, Command, StampFlag, stamp, PIDFlag, strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start fence watchdog: %w", err)
	}
	return cmd.Process.Release()
}

// Watch is the watchdog of the harness pid: it returns when that process
// exits (fenced false) or, once the stamp lapsed, after it stopped and
// killed it with every process under it (fenced true). It reads the stamp
// every poll. A pid already gone when it starts is a harness that exited
// (fenced false). An error means it could not watch pid (no pidfd: Linux
// before 5.3) or ctx ended.
func Watch(ctx context.Context, stamp Stamp, pid int, poll time.Duration) (fenced bool, err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("watch pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		if stamp.Lapsed() {
			Kill(pid)
			return true, nil
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(poll/time.Millisecond))
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return false, fmt.Errorf("watch pid %d: %w", pid, err)
		case n > 0:
			return false, nil // the harness exited
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
}

// Kill ends pid and every process under it but the caller: it stops them
// all first (SIGSTOP, listing again until no new one appears), so that
// none forks past the kill, then sends each SIGKILL, and pid's process
// group too (a pane's process leads one).
func Kill(pid int) {
	self := os.Getpid()
	stopped := map[int]bool{}
	for range 8 {
		grew := false
		for _, p := range proc.Descendants([]int{pid}) {
			if p != self && !stopped[p] {
				_ = syscall.Kill(p, syscall.SIGSTOP)
				stopped[p], grew = true, true
			}
		}
		if !grew {
			break
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for p := range stopped {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}
