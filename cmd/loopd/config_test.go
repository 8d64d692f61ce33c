package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness"
)

// TestConfigValidateNamesTheHarnessOnce: a harness the adapter refuses (a
// shell as its process name) is named once in the error, by the layer
// that checks it (harness.New), not again by the command.
func TestConfigValidateNamesTheHarnessOnce(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	bad := strings.Replace(string(data), "    command: claude\n", "    command: claude\n    processName: sh\n", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "loopd.yaml"), []byte(bad), 0o644))

	_, err = run(t, "", "config", "validate", path)
	require.ErrorIs(t, err, harness.ErrBadConfig)
	assert.Equal(t, 1, strings.Count(err.Error(), "harness claude-code"), "%v", err)
}
