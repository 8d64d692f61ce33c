package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store/sqlstore"
)

// TestReadOnlyVerbsReadAnInvalidConfigsStore: get, events and hosts work
// with a warning when the config no longer validates, from the state dir
// the file still names; a write (hold) is refused; a file that is not YAML
// leaves nothing to read and fails them too.
func TestReadOnlyVerbsReadAnInvalidConfigsStore(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	makeStore(t, dir)
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	// A harness the routes name is gone, and an unknown key came in.
	broken := strings.Replace(string(data), "  claude-code:\n    command: claude\n", "  other:\n    command: claude\n", 1) + "bogus: 1\n"
	require.NoError(t, os.WriteFile(config, []byte(broken), 0o644))
	_, err = schema.Load(config)
	require.ErrorIs(t, err, schema.ErrInvalid, "precondition: the config is invalid")

	for _, verb := range []string{"get", "events", "hosts"} {
		out, err := run(t, "", "--config", config, verb)
		require.NoError(t, err, verb)
		assert.Contains(t, out, "warning: config "+config+" is invalid: ", verb)
		assert.Contains(t, out, "bogus", verb)
		assert.Contains(t, out, "reading the state dir "+filepath.Join(dir, "state"), verb)
	}
	_, err = run(t, "", "--config", config, "hold", "octo-org/api#1")
	require.ErrorIs(t, err, schema.ErrInvalid, "a write needs a valid config")

	require.NoError(t, os.WriteFile(config, []byte("stateDir: [unclosed\n"), 0o644))
	for _, verb := range []string{"get", "events", "hosts"} {
		_, err := run(t, "", "--config", config, verb)
		require.ErrorIs(t, err, schema.ErrInvalid, verb)
	}
}

// makeStore makes the store of the config writeConfig wrote in dir, as a
// first serve or reconcile --once does.
func makeStore(t *testing.T, dir string) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

// TestVerbsNeverMakeAStore: an operator's verb on a state dir that holds
// no store (a mistyped stateDir, a state dir removed) says so, and makes
// neither the dir nor an empty store that would answer "No work items
// found." for a fleet that has items.
func TestVerbsNeverMakeAStore(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	for _, args := range [][]string{{"get"}, {"describe", "octo-org/api#1"}, {"events"}, {"hosts"},
		{"hold", "octo-org/api#1"}, {"release", "octo-org/api#1"}, {"forget", "octo-org/api#1"}} {
		_, err := run(t, "", append([]string{"--config", config}, args...)...)
		require.ErrorIs(t, err, errNoStore, "%v", args)
		assert.Contains(t, err.Error(), filepath.Join(dir, "state", storeFile), "the error names where it looked")
		assert.NoDirExists(t, filepath.Join(dir, "state"), "%v made nothing", args)
	}
}
