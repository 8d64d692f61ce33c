package main

import (
	"os"
	"path/filepath"
	"strconv"
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

// TestConfigValidateRefusesAProcessRouteWithoutAHeadlessForm: a route that
// runs its agents as processes with a harness that has no headless form
// (cursor) is refused by validate, naming the route, as the planner would
// block each of its items (harness_not_headless); the same route on tmux,
// and claude-code under the process runner, pass.
func TestConfigValidateRefusesAProcessRouteWithoutAHeadlessForm(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	write := func(route string) {
		cfg := strings.Replace(string(data), "    command: claude\n", "    command: claude\n  cur:\n    adapter: cursor\n    command: cursor-agent\n", 1)
		cfg = strings.Replace(cfg, `{harness: claude-code, `, route, 1)
		require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	}

	write(`{harness: cur, runner: process, `)
	_, err = run(t, "", "config", "validate", path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `routing.repos.*: runner process needs a harness with a headless form`)
	assert.Contains(t, err.Error(), `"cur" has none`)

	// Codex's exec refuses some flags its TUI takes.
	cfg := strings.Replace(string(data), "    command: claude\n", "    command: claude\n  codex:\n    command: codex\n    extraArgs: [-a, never]\n", 1)
	cfg = strings.Replace(cfg, `{harness: claude-code, `, `{harness: codex, runner: process, `, 1)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	_, err = run(t, "", "config", "validate", path)
	require.ErrorIs(t, err, harness.ErrBadConfig)
	assert.Contains(t, err.Error(), `routing.repos.*: runner process: harness codex: extraArgs: "-a" is a flag of the TUI`)

	for _, ok := range []string{`{harness: cur, `, `{harness: claude-code, runner: process, `} {
		write(ok)
		out, err := run(t, "", "config", "validate", path)
		require.NoError(t, err, ok)
		assert.Contains(t, out, ": ok", ok)
	}
}

// TestServeRefusesARouteItsHarnessCannotServe: serve checks the routes
// as validate does, before it listens or touches tmux.
func TestServeRefusesARouteItsHarnessCannotServe(t *testing.T) {
	t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cr3t")
	dir := t.TempDir()
	path := writeConfig(t, dir)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	cfg := strings.Replace(string(data), "    command: claude\n", "    command: claude\n  cur:\n    adapter: cursor\n    command: cursor-agent\n", 1)
	cfg = strings.Replace(cfg, `{harness: claude-code, `, `{harness: cur, runner: process, `, 1)
	cfg = strings.Replace(cfg, "webhooks:\n", "tmux: {socket: loopd-serve-refuses-"+strconv.Itoa(os.Getpid())+"}\nwebhooks:\n", 1)
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	_, err = run(t, "", "serve", "--config", path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `routing.repos.*: runner process needs a harness with a headless form; "cur" has none`)
}
