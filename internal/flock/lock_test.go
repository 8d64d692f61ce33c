package flock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock file removed by its holder (File.Remove) leaves a locker
// that was waiting on it holding the lock of the path's new file, never of
// the removed one: a third locker is kept out.
func TestLockRemovedUnderAWaitingLocker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	first, err := Take(t.Context(), path)
	require.NoError(t, err)

	type taken struct {
		l   *File
		err error
	}
	second := make(chan taken, 1)
	go func() {
		l, err := Take(t.Context(), path)
		second <- taken{l, err}
	}()
	// The second locker waits on the file once it has it open.
	require.Eventually(t, func() bool { return openDescriptors(t, path) == 2 }, 10*time.Second, time.Millisecond,
		"the second locker never opened the file")
	require.NoError(t, first.Remove())
	got := <-second
	require.NoError(t, got.err)
	defer got.l.Unlock()
	require.FileExists(t, path, "the second locker holds a new file at the path")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = Take(ctx, path)
	assert.ErrorIs(t, err, ErrLocked, "a third locker is kept out")
}

// Remove removes the file the lock is held on, and releases the lock;
// Unlock leaves the file. Either second call does nothing.
func TestLockRemoveAndUnlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Take(t.Context(), path)
	require.NoError(t, err)
	l.Unlock()
	require.NoError(t, l.Remove(), "a released lock removes nothing")
	assert.FileExists(t, path)
	l, err = Take(t.Context(), path)
	require.NoError(t, err)
	require.NoError(t, l.Remove())
	assert.NoFileExists(t, path)
	l.Unlock()
	l, err = Take(t.Context(), path)
	require.NoError(t, err, "the lock is free")
	l.Unlock()
}

// openDescriptors counts this process's descriptors open on path
// (/proc/self/fd).
func openDescriptors(t *testing.T, path string) int {
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.TrimSuffix(link, " (deleted)") == path {
			n++
		}
	}
	return n
}
