package observed

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// pidfdOpen returns a pidfd of process pid (pidfd_open(2), Linux 5.3 and
// later), a raw file descriptor the caller closes. It fails with ENOSYS
// where the kernel has no pidfd_open and ESRCH when no process pid exists.
func pidfdOpen(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return fd, nil
}

// closeFd closes the raw file descriptor fd.
func closeFd(fd int) { _ = unix.Close(fd) }

// exited reports whether the process of pidfd fd has exited: a pidfd polls
// readable from the process's exit on, whether or not its parent has
// reaped it (pidfd_open(2)).
func exited(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, 0)
	return err == nil && n > 0 && p[0].Revents&unix.POLLIN != 0
}

// exitWait is one wait on the pidfds of many processes: an epoll(7)
// instance that holds each of them, keyed by its pid, and an eventfd that
// ends the wait. One goroutine (run) waits on it for them all, so a
// watched process costs a descriptor and an epoll entry, not a goroutine.
type exitWait struct {
	ep, stop int
}

// newExitWait makes the epoll instance and its eventfd.
func newExitWait() (*exitWait, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	// The eventfd is keyed 0, which no watched pid is.
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, stop, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 0}); err != nil {
		unix.Close(ep)
		unix.Close(stop)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return &exitWait{ep: ep, stop: stop}, nil
}

// add waits on fd, the pidfd of pid (> 0), too.
func (x *exitWait) add(pid, fd int) error {
	if err := unix.EpollCtl(x.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(pid)}); err != nil {
		return fmt.Errorf("epoll_ctl add %d: %w", pid, err)
	}
	return nil
}

// remove stops waiting on fd; an event of it already taken may still
// reach died, which checks the pidfd it holds (exited).
func (x *exitWait) remove(fd int) { _ = unix.EpollCtl(x.ep, unix.EPOLL_CTL_DEL, fd, nil) }

// run calls died with the pid of each pidfd that polls readable, until
// close; then it closes the epoll instance and the eventfd. died must stop
// waiting on the pidfd (remove, or close it), or it is called again.
func (x *exitWait) run(died func(pid int)) {
	defer unix.Close(x.stop)
	defer unix.Close(x.ep)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(x.ep, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			if ev.Fd == 0 {
				return
			}
			died(int(ev.Fd))
		}
	}
}

// close ends run's wait; without a run, it closes the descriptors itself.
func (x *exitWait) close(running bool) {
	if !running {
		unix.Close(x.ep)
		unix.Close(x.stop)
		return
	}
	var one [8]byte
	one[0] = 1 // the eventfd counts in host order; any non-zero wakes it
	_, _ = unix.Write(x.stop, one[:])
}
