package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
)

// TestStateDirIsPrivate: a real daemon that finds its state dir made by
// hand (0755) with a store that others can read (a store made before this
// rule: 0644) tightens both and says so, and after a delivery has spawned
// an agent, nothing it wrote in the state dir, at any depth, is open to
// its group or to others: the store with its -wal and -shm, the locks, the
// host id, the launcher's and the runs' directories.
func TestStateDirIsPrivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	require.NoError(t, os.MkdirAll(e.stateDir, 0o755))
	require.NoError(t, os.Chmod(e.stateDir, 0o755))
	store := filepath.Join(e.stateDir, "loopd.db")
	require.NoError(t, os.WriteFile(store, nil, 0o644))
	require.NoError(t, os.Chmod(store, 0o644))
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	e.waitEvent(t, journal.SessionSpawned, keyIssue, 1, waitLong)

	lines := e.daemonLines(t, journal.StateDirTightened)
	require.Len(t, lines, 2, "the dir and the store")
	assert.Contains(t, strings.Join(lines, "\n"), "path="+store+" mode_was=0644 mode_now=0600")
	var seen []string
	require.NoError(t, filepath.WalkDir(e.stateDir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := d.Info()
		require.NoError(t, err)
		rel, _ := filepath.Rel(e.stateDir, path)
		seen = append(seen, rel)
		if d.Type()&fs.ModeSymlink == 0 {
			assert.Zero(t, info.Mode().Perm()&0o077, "%s: mode %04o", rel, info.Mode().Perm())
		}
		return nil
	}))
	for _, f := range []string{".", "loopd.db", "loopd.db-wal", "loopd.db-shm", "loopd.db.lock", "serve.lock"} {
		assert.Contains(t, seen, f)
	}
}

// TestWorkdirsUnderTheStateDirAreMadePrivate: with the workdirs under the
// state dir, as config init puts them, what loopd makes for them is 0700,
// so the next command has nothing to tighten and no warning to give.
func TestWorkdirsUnderTheStateDirAreMadePrivate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	routes := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)
	routes["*"].(map[string]any)["workdir"] = filepath.Join(e.stateDir, "agents", "{{.Owner}}", "{{.Repo}}", "{{.Number}}")
	e.writeConfig(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	e.waitEvent(t, journal.SessionSpawned, keyIssue, 1, waitLong)
	for _, dir := range []string{"agents", filepath.Join("agents", "Codertocat"), filepath.Join("agents", "Codertocat", "Hello-World")} {
		info, err := os.Stat(filepath.Join(e.stateDir, dir))
		require.NoError(t, err)
		assert.Equal(t, fs.FileMode(0o700), info.Mode().Perm(), dir)
	}
	_, errOut, code := e.run(t, "get")
	require.Zero(t, code, errOut)
	assert.NotContains(t, errOut, "tightened", "nothing for a read command to change")
}
