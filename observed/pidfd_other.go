//go:build !linux

package observed

import (
	"errors"
	"fmt"
	"os"
)

// pidfdOpen fails: pidfds are Linux's.
func pidfdOpen(pid int) (*os.File, error) {
	return nil, fmt.Errorf("pidfd_open %d: %w", pid, errors.ErrUnsupported)
}

// awaitExit is never called without a pidfd.
func awaitExit(f *os.File) error {
	return errors.ErrUnsupported
}
