package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
)

// The socket's lock file goes with its server: released while no server
// runs on the socket, the lock removes it; while one runs, it stays, and
// once that server has stopped, the next release removes it.
func TestSocketLockFileGoesWithItsServer(t *testing.T) {
	ex := tmuxtest.NewExec(t)
	ctx := t.Context()
	cfg := &schema.Config{Tmux: schema.Tmux{Socket: ex.Socket()}}
	owner := tmux.NewOwner(t.TempDir())
	socket, err := tmux.SocketPath(ex.Socket())
	require.NoError(t, err)
	lock := socket + socketLockSuffix
	cycle := func() {
		t.Helper()
		unlock, _, err := lockSocket(ctx, cfg, owner, 0)
		require.NoError(t, err)
		require.FileExists(t, lock, "held")
		unlock()
	}

	cycle()
	assert.NoFileExists(t, lock, "no server: the file goes")
	require.NoError(t, ex.EnsureServer(ctx, tmux.ServerOptions{Owner: owner}))
	cycle()
	assert.FileExists(t, lock, "a server runs: the file stays")
	stopped, err := ex.StopEmptyServer(ctx, owner)
	require.NoError(t, err)
	require.True(t, stopped)
	cycle()
	assert.NoFileExists(t, lock, "the server stopped: the file goes")
}
