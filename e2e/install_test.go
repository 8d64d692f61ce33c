package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make install puts a loopd that runs and says its version where the
// README says: $(PREFIX)/bin with PREFIX, else $(GOBIN) (go install). Its
// build directory is the test's, so the checkout's bin/ is left alone.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		vars []string
		bin  string
	}{
		{"prefix", []string{"PREFIX=" + filepath.Join(dir, "usr"), "BIN=" + filepath.Join(dir, "build")}, filepath.Join(dir, "usr", "bin", "loopd")},
		{"gobin", []string{"GOBIN=" + filepath.Join(dir, "gobin")}, filepath.Join(dir, "gobin", "loopd")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("make", append([]string{"-s", "-C", root, "install"}, tc.vars...)...).CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Contains(t, string(out), "installed "+tc.bin)
			version, err := exec.Command(tc.bin, "version").CombinedOutput()
			require.NoError(t, err, "%s", version)
			assert.Regexp(t, `^loopd \S+ \(commit \S+, go1\.\S+\)\n$`, string(version))
		})
	}
}
