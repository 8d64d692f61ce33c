package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shipped unit passes systemd-analyze verify with no warning (an
// unknown or misspelled key is only a warning), with ExecStart pointed at
// the loopd just built, and keeps the settings that let agents survive a
// restart and tmux work (README.md, "Run under systemd"). systemd is not
// needed to run: verify works offline.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile(filepath.Join("..", "contrib", "systemd", "loopd.service"))
	require.NoError(t, err)
	text := string(unit)

	for _, want := range []string{
		"KillMode=process",
		"Restart=on-failure",
		"LoadCredential=webhook-secret:",
		"ExecStart=/usr/local/bin/loopd serve ",
	} {
		assert.Regexp(t, "(?m)^"+regexp.QuoteMeta(want), text)
	}
	for _, breaksTmux := range []string{"PrivateTmp", "PrivateDevices", "MemoryDenyWriteExecute", "RestrictNamespaces"} {
		assert.NotRegexp(t, "(?m)^"+breaksTmux+"=", text)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "loopd.service")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(text, "/usr/local/bin/loopd", loopdBin)), 0o644))
	cmd := exec.Command(analyze, "verify", path)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "%s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warned")
}
