package flock_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/flock"
)

// TestLockExcludesASecondHolder: a second Lock on the same path, in the same
// process, waits until its ctx ends and then fails with ErrLocked and the
// ctx's cause; once the first unlocks (twice is harmless), it is taken.
func TestLockExcludesASecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := flock.Lock(context.Background(), path)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = flock.Lock(short, path)
	assert.ErrorIs(t, err, flock.ErrLocked)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	unlock()
	unlock()
	again, err := flock.Lock(context.Background(), path)
	require.NoError(t, err)
	again()

	info, err := os.Stat(path)
	require.NoError(t, err, "unlock leaves the file")
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

// TestLockTakesAFreeLockWithAnEndedContext: a lock nobody holds is taken
// even when ctx has already ended (one try), as serve's start-up relies on.
func TestLockTakesAFreeLockWithAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	unlock, err := flock.Lock(ctx, filepath.Join(t.TempDir(), "x.lock"))
	require.NoError(t, err)
	unlock()
}

// TestLockWaitsForTheHolder: a Lock with time to wait is taken once the
// holder unlocks.
func TestLockWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := flock.Lock(context.Background(), path)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		u, err := flock.Lock(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second Lock returned while the first was held: %v", err)
	default:
	}
	unlock()
	require.NoError(t, <-got)
}

// TestHeld: Held says whether another holder has the lock, creates no
// file, and leaves a free lock free.
func TestHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	held, err := flock.Held(path)
	require.NoError(t, err)
	assert.False(t, held, "no file, no holder")
	assert.NoFileExists(t, path)

	unlock, err := flock.Lock(context.Background(), path)
	require.NoError(t, err)
	held, err = flock.Held(path)
	require.NoError(t, err)
	assert.True(t, held)

	unlock()
	held, err = flock.Held(path)
	require.NoError(t, err)
	assert.False(t, held)
	again, err := flock.Lock(context.Background(), path)
	require.NoError(t, err, "Held left the lock free")
	again()
}
