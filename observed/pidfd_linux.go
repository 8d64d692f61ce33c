package observed

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// pidfdOpen returns a pidfd of process pid (pidfd_open(2), Linux 5.3 and
// later) as a file registered with Go's netpoller (epoll), so that waiting
// for it to become readable holds no thread. It fails with ENOSYS where the
// kernel has no pidfd_open and ESRCH when no process pid exists.
func pidfdOpen(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid)), nil
}

// awaitExit waits until the process of pidfd f has exited: a pidfd polls
// readable from the process's exit on, whether or not its parent has
// reaped it (pidfd_open(2)). It returns an error once f is closed.
func awaitExit(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		return err == nil && n > 0
	})
}
