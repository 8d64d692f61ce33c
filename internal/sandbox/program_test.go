package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// write makes an executable file at path with content, and its dirs.
func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o755))
}

func link(t *testing.T, target, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.Symlink(target, path))
}

// TestResolve: the executable is found on the harness's PATH and through
// its links; an npm package shows its whole node_modules tree (Codex's
// launcher starts a native binary from a sibling package), a script its
// interpreter, env's program included; what the system holds is not
// shown again.
func TestResolve(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	prefix := filepath.Join(root, "npm")
	nodeModules := filepath.Join(prefix, "node_modules")
	write(t, filepath.Join(nodeModules, "@openai/codex/bin/codex.js"), "#!/usr/bin/env node\n")
	write(t, filepath.Join(nodeModules, "@openai/codex-linux-x64/vendor/codex"), "\x7fELF")
	link(t, "../@openai/codex/bin/codex.js", filepath.Join(nodeModules, ".bin/codex"))
	bin := filepath.Join(root, "bin")
	link(t, filepath.Join(nodeModules, ".bin/codex"), filepath.Join(bin, "codex"))
	nodeDir := filepath.Join(root, "nvm/versions/node/v20/bin")
	write(t, filepath.Join(nodeDir, "node"), "\x7fELF")
	write(t, filepath.Join(root, "tools/wrapper"), "#!/bin/sh\nexec codex \"$@\"\n")
	write(t, filepath.Join(root, "tools/native"), "\x7fELF")
	path := bin + ":" + nodeDir + "::relative:/usr/bin"
	h := Host{System: []Entry{{Path: "/usr"}, {Path: "/bin", Link: "usr/bin"}}}

	t.Run("npm_package_on_path_with_env_node", func(t *testing.T) {
		p, err := h.Resolve("codex", path)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(nodeModules, "@openai/codex/bin/codex.js"), p.Path, "links resolved")
		assert.Equal(t, []string{nodeModules, filepath.Join(nodeDir, "node")}, p.ReadOnly,
			"the node_modules tree and the node env finds; /usr/bin/env is the system's")
	})
	t.Run("script_whose_interpreter_is_the_systems", func(t *testing.T) {
		p, err := h.Resolve(filepath.Join(root, "tools/wrapper"), path)
		require.NoError(t, err)
		assert.Equal(t, []string{filepath.Join(root, "tools/wrapper")}, p.ReadOnly, "only the file: its dir may hold anything")
	})
	t.Run("binary_by_path", func(t *testing.T) {
		p, err := h.Resolve(filepath.Join(root, "tools/native"), "")
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(root, "tools/native"), p.Path)
		assert.Equal(t, []string{filepath.Join(root, "tools/native")}, p.ReadOnly)
	})
	t.Run("system_program", func(t *testing.T) {
		p, err := h.Resolve("sh", "/usr/bin")
		require.NoError(t, err)
		assert.Empty(t, p.ReadOnly)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := h.Resolve("no-such-cli", path)
		require.ErrorIs(t, err, ErrNoProgram)
		assert.Contains(t, err.Error(), path)
		_, err = h.Resolve(filepath.Join(root, "tools/absent"), path)
		require.ErrorIs(t, err, ErrNoProgram)
	})
	t.Run("interpreter_missing", func(t *testing.T) {
		write(t, filepath.Join(root, "tools/orphan"), "#!/usr/bin/env no-such-interpreter\n")
		_, err := h.Resolve(filepath.Join(root, "tools/orphan"), "/usr/bin")
		require.ErrorIs(t, err, ErrNoProgram)
	})
}

func TestLayout(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib64"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "run/systemd/resolve"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "run/systemd/resolve/stub-resolv.conf"), nil, 0o644))
	require.NoError(t, os.Symlink("../run/systemd/resolve/stub-resolv.conf", filepath.Join(root, "etc/resolv.conf")))
	system, extra, err := Layout(root)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{Path: "/usr"}, {Path: "/bin", Link: "usr/bin"}, {Path: "/lib64"}, {Path: "/etc"}}, system)
	assert.Equal(t, []string{"/run/systemd/resolve/stub-resolv.conf"}, extra)

	require.NoError(t, os.Remove(filepath.Join(root, "etc/resolv.conf")))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/resolv.conf"), nil, 0o644))
	_, extra, err = Layout(root)
	require.NoError(t, err)
	assert.Empty(t, extra, "a plain file in /etc is shown with /etc")
}
