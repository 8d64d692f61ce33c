// Package fence ends a host's agents by themselves once the host can no
// longer prove it holds their leases, without relying on the daemon: a
// daemon frozen (SIGSTOP), swapped out or killed past its lease leaves its
// agents running in tmux, while another host of the store takes the items
// over and resumes the same conversations (docs/design.md, "Self-fencing
// agents").
//
// The daemon writes a stamp after each successful heartbeat (Stamp.Write):
// a Grant, the instant its lease clock lapses, on this machine's
// CLOCK_BOOTTIME, which counts across a suspend and no wall-clock step
// moves, and the clock's epoch, a fencing token that grows each time the
// clock is renewed after it lapsed. Each pane's launcher is given the
// epoch its spawn was drawn under; it refuses to start the harness unless
// the stamp holds for that epoch (Grant.Holds), and starts a watchdog
// (Start) in a session of its own before it replaces itself with the
// harness: a process that does not freeze with the daemon, that reads the
// stamp every schema.FencePoll and, once it no longer holds for its epoch
// (or cannot be read), kills the harness with every process under it
// (Watch). It exits when the harness does. A spawn drawn before a lapse
// and carried out after the renewal (a daemon frozen between its plan and
// its act) so never runs beside the agent another host resumed meanwhile.
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
// its flag naming the stamp, EpochFlag the one giving the epoch its
// harness was started under, and PIDFlag the one naming the harness's pid.
const (
	Command   = "fence"
	StampFlag = "--stamp"
	EpochFlag = "--epoch"
	PIDFlag   = "--pid"
)

// ErrStamp means the stamp could not be written: the agents of this host
// end at the instant of the last stamp written.
var ErrStamp = errors.New("fence stamp not written")

// ErrLapsed means the stamp does not hold for an epoch (Stamp.Check): it
// lapsed, names a later epoch, or cannot be read. A launcher refuses its
// harness with it.
var ErrLapsed = errors.New("fence stamp lapsed")

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

// Grant is what a stamp holds: until when the agents of one epoch of a
// host may run.
type Grant struct {
	// Until is the instant on CLOCK_BOOTTIME (Now) from which none runs.
	Until time.Duration
	// Epoch is the host's lease epoch (reconciler.LeaseClock): it grows
	// each time the host's lease clock is renewed after it lapsed, when
	// every agent of the epochs before had been fenced.
	Epoch uint64
}

// Holds reports whether the agents of epoch may run now under g.
func (g Grant) Holds(epoch uint64) bool { return g.Epoch == epoch && Now() < g.Until }

// Stamp is the file through which the daemon tells its agents' watchdogs
// until when, and under which epoch, they may run.
type Stamp struct {
	Path string
}

// Write replaces the stamp with g, "UNTIL EPOCH\n" (ns on CLOCK_BOOTTIME,
// and the epoch, both decimal), through a temp file renamed into place, so
// that a watchdog never reads half a stamp. The error wraps ErrStamp.
func (s Stamp) Write(g Grant) error {
	f, err := os.CreateTemp(filepath.Dir(s.Path), filepath.Base(s.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStamp, err)
	}
	_, err = fmt.Fprintf(f, "%d %d\n", int64(g.Until), g.Epoch)
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

// Read returns the grant the stamp holds.
func (s Stamp) Read() (Grant, error) {
	b, err := os.ReadFile(s.Path)
	if err != nil {
		return Grant{}, fmt.Errorf("read fence stamp: %w", err)
	}
	until, epoch, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.ParseInt(until, 10, 64)
	var e uint64
	if err == nil && ok {
		e, err = strconv.ParseUint(epoch, 10, 64)
	}
	if err == nil && !ok {
		err = errors.New("no epoch")
	}
	if err != nil {
		return Grant{}, fmt.Errorf("read fence stamp %s: %w", s.Path, err)
	}
	return Grant{Until: time.Duration(n), Epoch: e}, nil
}

// Check returns nil when the agents of epoch may run now, else an error
// wrapping ErrLapsed that says why (a watchdog that cannot tell stops its
// agent rather than risk a second one on its conversation).
func (s Stamp) Check(epoch uint64) error {
	g, err := s.Read()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrLapsed, err)
	case g.Epoch != epoch:
		return fmt.Errorf("%w: %s names epoch %d, not %d", ErrLapsed, s.Path, g.Epoch, epoch)
	case !g.Holds(epoch):
		return fmt.Errorf("%w: %s lapsed %s ago", ErrLapsed, s.Path, (Now() - g.Until).Round(time.Millisecond))
	}
	return nil
}

// Start starts the watchdog of the calling process, which is about to
// replace itself with a harness of epoch (launch.Exec): "exe fence --stamp
// PATH --epoch EPOCH --pid PID", in a session of its own, so that no
// signal to the pane's process group or session reaches it, with no
// terminal. It does not wait for it.
func Start(exe, stamp string, epoch uint64) error {
	cmd := exec.Command(exe, Command, StampFlag, stamp, EpochFlag, strconv.FormatUint(epoch, 10), PIDFlag, strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start fence watchdog: %w", err)
	}
	return cmd.Process.Release()
}

// Watch is the watchdog of the harness pid, started under epoch: it
// returns when that process exits (fenced false) or, once the stamp no
// longer holds for epoch (Check), after it stopped and killed it with
// every process under it (fenced true). It reads the stamp every poll. A pid already gone when it starts is a harness that exited
// (fenced false). An error means it could not watch pid (no pidfd: Linux
// before 5.3) or ctx ended.
func Watch(ctx context.Context, stamp Stamp, epoch uint64, pid int, poll time.Duration) (fenced bool, err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("watch pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	for {
		if stamp.Check(epoch) != nil {
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
