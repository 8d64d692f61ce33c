//go:build !linux

package observed

import (
	"errors"
	"fmt"
)

// pidfdOpen fails: pidfds are Linux's.
func pidfdOpen(pid int) (int, error) {
	return -1, fmt.Errorf("pidfd_open %d: %w", pid, errors.ErrUnsupported)
}

// closeFd is never called without a pidfd.
func closeFd(int) {}

// exited is never called without a pidfd.
func exited(int) bool { return false }

// exitWait is never made without a pidfd.
type exitWait struct{}

func newExitWait() (*exitWait, error)     { return nil, errors.ErrUnsupported }
func (x *exitWait) add(pid, fd int) error { return errors.ErrUnsupported }
func (x *exitWait) remove(int)            {}
func (x *exitWait) run(func(int))         {}
func (x *exitWait) close(bool)            {}
