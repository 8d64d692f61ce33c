package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gofmtCheck runs make check's formatting step, scripts/gofmt-check.sh,
// on dir and returns its output and exit code.
func gofmtCheck(t *testing.T, dir string) (string, int) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "scripts", "gofmt-check.sh"))
	require.NoError(t, err)
	cmd := exec.Command(script, dir)
	cmd.Stdin = bytes.NewReader(nil)
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return string(out), exitErr.ExitCode()
	}
	require.NoError(t, err, "%s", out)
	return string(out), 0
}

// make check's gofmt step reads the files, not git's index: in a tree with
// no .git it still finds a badly formatted file (the old step, gofmt -l
// over git ls-files, passed there with gofmt reading an empty stdin), and
// it leaves out .tools, where npm installs the real CLIs.
func TestGofmtCheckWorksWithoutGit(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, rel), []byte(text), 0o644))
	}
	write("good.go", "package x\n\nfunc F() {}\n")
	write("sub/bad.go", "package sub\nfunc  G( ) {}\n")
	write(".tools/claude-code/node_modules/m/bad.go", "package m\nfunc  H( ) {}\n")
	out, code := gofmtCheck(t, dir)
	assert.Equal(t, 1, code, "%s", out)
	assert.Equal(t, "gofmt needed:\n./sub/bad.go\n", out)

	write("sub/bad.go", "package sub\n\nfunc G() {}\n")
	out, code = gofmtCheck(t, dir)
	assert.Zero(t, code, "%s", out)
	assert.Empty(t, out)
}

// The step passes on the repository as a tarball gives it: git archive of
// HEAD unpacked into a directory with no .git.
func TestGofmtCheckPassesOnATarballOfHead(t *testing.T) {
	if err := exec.Command("git", "-C", "..", "rev-parse", "--verify", "HEAD").Run(); err != nil {
		t.Skip("not a git checkout; nothing to archive")
	}
	dir := t.TempDir()
	archive := exec.Command("git", "-C", "..", "archive", "--format=tar", "HEAD")
	unpack := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	require.NoError(t, err)
	unpack.Stdin = pipe
	require.NoError(t, archive.Start())
	out, err := unpack.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, archive.Wait())
	require.FileExists(t, filepath.Join(dir, "go.mod"))
	require.NoDirExists(t, filepath.Join(dir, ".git"))

	got, code := gofmtCheck(t, dir)
	assert.Zero(t, code, "%s", got)
}
