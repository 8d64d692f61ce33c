package tmux

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The names are what tmux 3.3a showed as pane_current_command for these
// argv[0] (docs/design.md, "Which process is the harness").
func TestCommandName(t *testing.T) {
	for _, tc := range []struct{ argv0, want string }{
		{"/usr/local/bin/fakeclaude", "fakeclaude"},
		{"claude", "claude"},
		{"/srv/.tools/node_modules/.bin/claude", "claude"},
		{"/srv/claude-code/bin/claude.exe", "claude.exe"},
		{"./fakeclaude", "./fakeclaude"},
		{"-bash", "bash"},
		{"exec sh", "sh"},
		{"node /srv/cli.js", "node"},
		{`"quoted" rest`, "quoted"},
		{"", ""},
	} {
		assert.Equal(t, tc.want, CommandName(tc.argv0), "argv[0] %q", tc.argv0)
	}
}

func TestNewOwner(t *testing.T) {
	a, b := NewOwner("/srv/a"), NewOwner("/srv/b")
	assert.Regexp(t, `^[0-9a-f]{16}$`, a.ID)
	assert.NotEqual(t, a.ID, b.ID)
	assert.Equal(t, a, NewOwner("/srv/a"), "the same state dir is the same owner")
	assert.Equal(t, "/srv/a", a.StateDir)
}

// A relative state dir names the owner of its absolute path.
func TestOwnerOf(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	rel, err := OwnerOf("state")
	require.NoError(t, err)
	assert.Equal(t, NewOwner(filepath.Join(dir, "state")), rel)
}

func TestSocketPath(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMUX_TMPDIR", tmp)
	path, err := SocketPath("loopd")
	require.NoError(t, err)
	dir := filepath.Join(tmp, fmt.Sprintf("tmux-%d", os.Getuid()))
	assert.Equal(t, filepath.Join(dir, "loopd"), path)
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "created as tmux would")

	t.Setenv("TMUX_TMPDIR", "")
	path, err = SocketPath("loopd")
	require.NoError(t, err)
	assert.Equal(t, "/tmp", filepath.Dir(filepath.Dir(path)))

	_, err = SocketPath("a/b")
	assert.Error(t, err)
}
