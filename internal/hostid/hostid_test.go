package hostid

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInstanceIsKeptInTheStateDir: the instance id is written once, mode
// 0600, and read back by every later command of the state dir; another
// state dir gets another; a garbled file is an error, not a new id.
func TestInstanceIsKeptInTheStateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	id, err := Instance(dir)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	fi, err := os.Stat(filepath.Join(dir, File))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	again, err := Instance(dir)
	require.NoError(t, err)
	assert.Equal(t, id, again, "a restart keeps its instance")
	other, err := Instance(t.TempDir())
	require.NoError(t, err)
	assert.NotEqual(t, id, other)

	require.NoError(t, os.WriteFile(filepath.Join(dir, File), []byte("not an id\n"), 0o600))
	_, err = Instance(dir)
	assert.ErrorContains(t, err, File)
}
