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

// lockPoll is how often Lock and Take retry a held lock, in wall time.
const lockPoll = 50 * time.Millisecond

// Lock takes an exclusive flock(2) on the file at path, creating it
// (mode 0600) when missing, and retries every lockPoll until ctx ends; the
// error then wraps ErrLocked and ctx's cause. A free lock is taken even when
// ctx has already ended. unlock releases it and leaves the file (Take
// returns a lock that can remove it).
//
// Each call opens its own file description, and flock(2) locks belong to the
// open file description (flock(2), "NOTES"), so a second caller in the same
// process is excluded exactly like another process. Closing the descriptor
// releases the lock, and the kernel does it when the process dies, so a
// killed daemon never leaves a stale lock.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	l, err := Take(ctx, path)
	if err != nil {
		return nil, err
	}
	return l.Unlock, nil
}

// File is an exclusive flock(2) held on the file at a path (Take).
type File struct {
	f    *os.File
	path string
	once sync.Once
}

// Take takes the lock as Lock does and returns it held. A lock
// file may be removed by its holder (Remove): a locker that was waiting on
// the removed file finds, once it holds the lock, that the path no longer
// names the file it locked, and starts over on the path, so that two
// holders never lock two files of one path. It returns what Lock
// returns.
func Take(ctx context.Context, path string) (*File, error) {
	tick := time.NewTicker(lockPoll)
	defer tick.Stop()
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		held, err := flockOrWait(ctx, f, tick.C)
		if err != nil {
			f.Close()
			return nil, err
		}
		if held && sameFile(f, path) {
			return &File{f: f, path: path}, nil
		}
		// Its holder removed it while this one waited: the path names
		// another file, or none.
		f.Close()
	}
}

// flockOrWait takes the flock on f, retrying on each tick until ctx ends:
// the error then wraps ErrLocked and ctx's cause. It reports true once held.
func flockOrWait(ctx context.Context, f *os.File, tick <-chan time.Time) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("flock: %w", err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", ErrLocked, context.Cause(ctx))
		case <-tick:
		}
	}
}

// sameFile reports whether path names the file f has open (its device
// and inode).
func sameFile(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(path)
	return err == nil && os.SameFile(open, named)
}

// Held reports whether another holder holds the lock on the file at path
// now, without waiting and without creating the file: false when it is
// missing. It takes the lock for an instant when it is free, so a Lock
// racing it waits one lockPoll more.
func Held(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return false, nil // closing f releases it
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	}
	return false, fmt.Errorf("flock: %w", err)
}

// Unlock releases the lock and leaves the file. A second call does nothing.
func (l *File) Unlock() { l.once.Do(func() { l.f.Close() }) }

// Remove removes the lock file, while the lock is still held, and then
// releases it: lockers waiting on it start over on a new file (Take).
// It removes nothing when the path names another file than the one locked
// or the lock was released already; the error is the removal's.
func (l *File) Remove() error {
	var err error
	l.once.Do(func() {
		defer l.f.Close()
		if sameFile(l.f, l.path) {
			if err = os.Remove(l.path); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		}
	})
	return err
}
