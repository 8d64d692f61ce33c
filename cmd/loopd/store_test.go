package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store/sqlstore"
)

// TestMain fails the run when a test leaves a tmux server or socket
// behind (tmuxtest.Main), and stops the PostgreSQL cluster (pgtest.Main).
func TestMain(m *testing.M) {
	// A command that finds a secret in its environment re-executes itself
	// (scrubEnviron): here that would run the test binary again.
	execve = func(string, []string, []string) error { return nil }
	os.Exit(tmuxtest.Main(func() int { return withCLIs(func() int { return pgtest.Main(m) }) }))
}

// withCLIs runs run with a stub of each harness command the tests'
// configs name (claude, codex, gemini, cursor-agent: scripts that exit 0)
// first on PATH, as on a machine where they are installed: a route whose
// harness command is missing is refused (missingRouteHarnesses). A test
// that wants one missing sets its own PATH.
func withCLIs(run func() int) int {
	bin, err := os.MkdirTemp("", "loopd-test-clis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	for _, name := range []string{"claude", "codex", "gemini", "cursor-agent"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return run()
}

// TestOpenStoreSelectsTheBackend: an empty store.url opens the SQLite file
// in the state dir; a postgres:// URL opens that database, with the
// reconcile lock a file of the state dir.
func TestOpenStoreSelectsTheBackend(t *testing.T) {
	ctx := context.Background()
	cfg := &schema.Config{StateDir: filepath.Join(t.TempDir(), "state")}
	st, err := openStore(ctx, cfg, func(tightened) {})
	require.NoError(t, err)
	assert.IsType(t, &sqlstore.SQLite{}, st)
	assert.FileExists(t, filepath.Join(cfg.StateDir, storeFile))
	require.NoError(t, st.Close())

	cfg = &schema.Config{StateDir: filepath.Join(t.TempDir(), "state"), Store: schema.Store{URL: pgtest.URL(t)}}
	st, err = openStore(ctx, cfg, func(tightened) {})
	require.NoError(t, err)
	defer st.Close()
	assert.IsType(t, &sqlstore.Postgres{}, st)
	unlock, err := st.Lock(ctx)
	require.NoError(t, err)
	unlock()
	assert.FileExists(t, filepath.Join(cfg.StateDir, storeLock))
	assert.NoFileExists(t, filepath.Join(cfg.StateDir, storeFile), "no SQLite file")
}

// TestStoreURLPasswordNeverShown: when the store cannot be reached,
// openStore's error, and what the commands that open it (loopd get, loopd
// events) print and return, show the URL with its password redacted.
func TestStoreURLPasswordNeverShown(t *testing.T) {
	const pw = "s3cret-Pa55"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir := t.TempDir()
	config := filepath.Join(dir, "loopd.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil,
		"stateDir: ./state\nstore:\n  url: \"postgres://loopd:%s@127.0.0.1:%d/loopd?sslmode=disable&connect_timeout=2\"\n", pw, port), 0o600))

	cfg, err := schema.Load(config)
	require.NoError(t, err)
	_, err = openStore(context.Background(), cfg, func(tightened) {})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), pw)
	assert.Contains(t, err.Error(), "xxxxx")
	for _, args := range [][]string{{"get"}, {"events"}} {
		out, err := run(t, "", append([]string{"--config", config}, args...)...)
		require.Error(t, err, args)
		assert.NotContains(t, out+err.Error(), pw, args)
	}
}
