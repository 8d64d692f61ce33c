// Package flock takes advisory locks on files: an exclusive flock(2) that
// the kernel releases when its holder's file description is closed or its
// process dies. The store's reconcile lock, serve's state-dir lock, the
// tmux socket's lock and the outbox worker's lock are each one.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrLocked means another holder kept the lock until the caller's ctx
// ended.
var ErrLocked = errors.New("lock held by another process")

// lockPoll is how often Lock retries a held lock, in wall time.
const lockPoll = 50 * time.Millisecond

// Lock takes an exclusive flock(2) on the file at path, creating it
// (mode 0600) when missing, and retries every lockPoll until ctx ends; the
// error then wraps ErrLocked and ctx's cause. A free lock is taken even when
// ctx has already ended.
//
// Each call opens its own file description, and flock(2) locks belong to the
// open file description (flock(2), "NOTES"), so a second caller in the same
// process is excluded exactly like another process. Closing the descriptor
// releases the lock, and the kernel does it when the process dies, so a
// killed daemon never leaves a stale lock. The file itself is never removed:
// removing it would let two holders lock two different inodes.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			var once sync.Once
			return func() { once.Do(func() { f.Close() }) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w: %w", ErrLocked, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
