package harness

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTranscript is the one reading of a transcript file for the
// adapters' Transcript: a missing file is known and absent, a file is
// stat'ed and its content judged by the adapter, and a failed judgement
// names the file.
func TestReadTranscript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	called := false
	judge := func(r io.Reader) (bool, error) {
		called = true
		b, err := io.ReadAll(r)
		return string(b) == "turn\n", err
	}

	got, err := readTranscript(Transcript{Known: true, Path: path}, judge)
	require.NoError(t, err)
	assert.Equal(t, Transcript{Known: true, Path: path}, got, "missing: known, not there")
	assert.False(t, called, "nothing to judge")

	require.NoError(t, os.WriteFile(path, []byte("turn\n"), 0o600))
	at := time.Date(2026, 11, 30, 22, 7, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(path, at, at))
	got, err = readTranscript(Transcript{Known: true, Path: path}, judge)
	require.NoError(t, err)
	assert.Equal(t, Transcript{Known: true, Exists: true, Path: path, Size: 5}, Transcript{Known: got.Known, Exists: got.Exists, Path: got.Path, Size: got.Size})
	assert.True(t, at.Equal(got.ModTime))

	bad := errors.New("torn")
	_, err = readTranscript(Transcript{Known: true, Path: path}, func(io.Reader) (bool, error) { return false, bad })
	require.ErrorIs(t, err, bad)
	assert.EqualError(t, err, "read "+path+": torn")

	_, err = readTranscript(Transcript{Known: true, Path: filepath.Join(path, "under-a-file")}, judge)
	assert.Error(t, err, "a path that cannot be opened, but exists in part, is an error, not absent")
}
