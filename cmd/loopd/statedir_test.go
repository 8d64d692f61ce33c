package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// mode returns the permission bits of path.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(path)
	require.NoError(t, err)
	return st.Mode().Perm()
}

// TestStateDirMadeOrTightened: a new state dir is made 0700 with its store
// 0600; one that others could read (a dir made by hand, a store made before
// this rule) is tightened at the next open, each change said once, and a
// symlink in it is left alone.
func TestStateDirMadeOrTightened(t *testing.T) {
	ctx := context.Background()
	cfg := &schema.Config{StateDir: filepath.Join(t.TempDir(), "state")}
	var told []tightened
	st, err := openStore(ctx, cfg, func(c tightened) { told = append(told, c) })
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Equal(t, os.FileMode(0o700), mode(t, cfg.StateDir))
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(cfg.StateDir, storeFile)))
	assert.Empty(t, told)

	require.NoError(t, os.Chmod(cfg.StateDir, 0o755))
	require.NoError(t, os.Chmod(filepath.Join(cfg.StateDir, storeFile), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.StateDir, serveLockFile), nil, 0o666))
	require.NoError(t, os.Mkdir(filepath.Join(cfg.StateDir, mirrorsDir), 0o755))
	outside := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(outside, nil, 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(cfg.StateDir, "link")))

	st, err = openStore(ctx, cfg, func(c tightened) { told = append(told, c) })
	require.NoError(t, err)
	require.NoError(t, st.Close())
	assert.Equal(t, os.FileMode(0o700), mode(t, cfg.StateDir))
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(cfg.StateDir, storeFile)))
	assert.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(cfg.StateDir, serveLockFile)))
	assert.Equal(t, os.FileMode(0o700), mode(t, filepath.Join(cfg.StateDir, mirrorsDir)))
	assert.Equal(t, os.FileMode(0o644), mode(t, outside), "a symlink's target is not the state dir's")
	assert.Len(t, told, 4, "%v", told)

	// A command that does not log says it on stderr.
	dir := t.TempDir()
	config := writeConfig(t, dir)
	makeStore(t, dir)
	require.NoError(t, os.Chmod(filepath.Join(dir, "state"), 0o755))
	out, err := run(t, "", "get", "--config", config)
	require.NoError(t, err)
	assert.Contains(t, out, "warning: state dir: "+filepath.Join(dir, "state")+": mode 0755 tightened to 0700")
}
