package fakecli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendJSONLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "log")
	require.NoError(t, AppendJSONLine(file, map[string]int{"pid": 7}, 0o600))
	require.NoError(t, AppendJSONLine(file, 8, 0o600))
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "{\"pid\":7}\n8\n", string(data))
	info, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	assert.Error(t, AppendJSONLine(file, func() {}, 0o600), "not JSON")
}
