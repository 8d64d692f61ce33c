package schema

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadUnchecked: the store's location is read from a file that does
// not validate, a value of the wrong type taking its default; text that
// is not YAML is still an error.
func TestLoadUnchecked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yaml     string
		stateDir string // relative to the file's directory
		url      string
		invalid  bool
	}{
		{name: "unknown_key_and_missing_harness", yaml: "stateDir: ./st\nbogus: 1\nwebhooks: {ghWebhook: {routing: {repos: {\"*\": {harness: nope}}}}}\n", stateDir: "st"},
		{name: "store_url_kept", yaml: "store: {url: \"postgres://h/db\"}\nreconcile: {intervalSeconds: -3}\n", stateDir: "state", url: "postgres://h/db"},
		{name: "state_dir_of_wrong_type", yaml: "stateDir: [a, b]\n", stateDir: "state"},
		{name: "empty_file", yaml: "", stateDir: "state"},
		{name: "not_yaml", yaml: "stateDir: [unclosed\n", invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "loopd.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o644))
			cfg, err := LoadUnchecked(path)
			if tc.invalid {
				require.ErrorIs(t, err, ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(dir, tc.stateDir), cfg.StateDir)
			assert.Equal(t, tc.url, cfg.Store.URL)
			assert.Equal(t, defaultTmuxSocket, cfg.Tmux.Socket)
		})
	}
	_, err := LoadUnchecked(filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
