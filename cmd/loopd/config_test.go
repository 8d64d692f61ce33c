package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/schema"
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

// TestConfigValidateNamesEveryProblemInOneRun: a file with a schema
// problem and a route whose harness command is missing gets both in one
// run, not the second only after the first is fixed; so do a missing
// command and a process route its harness cannot serve, which are found
// after the file is read.
func TestConfigValidateNamesEveryProblemInOneRun(t *testing.T) {
	dir := t.TempDir()
	path := writeConfigWith(t, dir, "capacity: {maxLiveSessions: -1}\n", "")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	missing := strings.Replace(string(data), "    command: claude\n", "    command: "+filepath.Join(dir, "no-such-claude")+"\n", 1)
	require.NoError(t, os.WriteFile(path, []byte(missing), 0o644))

	_, err = run(t, "", "config", "validate", path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "capacity.maxLiveSessions: -1 is less than the minimum")
	assert.Contains(t, err.Error(), `harness claude-code: command "`+filepath.Join(dir, "no-such-claude")+`"`)
	assert.ErrorIs(t, err, harness.ErrCommandNotFound)

	// Read, with no schema problem: the missing command of route a/b and
	// the process route "*" its harness cannot serve.
	cfg := `stateDir: ` + filepath.Join(dir, "state") + `
harnesses:
  claude-code:
    command: ` + filepath.Join(dir, "no-such-claude") + `
  cur:
    adapter: cursor
    command: cursor-agent
webhooks:
  ghWebhook:
    authorizedUsers: [octocat]
    routing:
      repos:
        "*": {harness: cur, runner: process, workdir: "/w/{{.Number}}"}
        "a/b": {harness: claude-code, workdir: "/w/{{.Number}}"}
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	_, err = run(t, "", "config", "validate", path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"cur" has none`)
	assert.ErrorIs(t, err, harness.ErrCommandNotFound, "the missing command of the route a/b too")
}

// TestConfigValidateNamesTheModeWithTheOtherProblems: a config file other
// users can write, with a schema problem and a cross-field one, gets all
// three in one run, each with its line where it has one; with its text
// fixed, the mode and a missing harness command still come together.
func TestConfigValidateNamesTheModeWithTheOtherProblems(t *testing.T) {
	dir := t.TempDir()
	path := writeConfigWith(t, dir, "capacity: {maxLiveSessions: -1}\n", "")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	// validate writes text as a file all users can write and validates it.
	validate := func(text string) error {
		require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
		require.NoError(t, os.Chmod(path, 0o666))
		_, err := run(t, "", "config", "validate", path)
		require.Error(t, err)
		assert.ErrorIs(t, err, perm.ErrUnsafe)
		return err
	}

	err = validate(string(data) + `        "a/b": {harness: nope, workdir: "/w/{{.Number}}"}` + "\n")
	assert.ErrorIs(t, err, schema.ErrInvalid)
	assert.Contains(t, err.Error(), path+": mode 0666 lets other users write it")
	assert.Contains(t, err.Error(), path+":1:29: capacity.maxLiveSessions: -1 is less than the minimum")
	assert.Contains(t, err.Error(), path+`:12:`)
	assert.Contains(t, err.Error(), `repos["a/b"].harness: unknown harness "nope"`)

	missing := strings.Replace(string(data), "capacity: {maxLiveSessions: -1}\n", "", 1)
	missing = strings.Replace(missing, "    command: claude\n", "    command: "+filepath.Join(dir, "no-such-claude")+"\n", 1)
	err = validate(missing)
	assert.NotErrorIs(t, err, schema.ErrInvalid)
	assert.ErrorIs(t, err, harness.ErrCommandNotFound)
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

// bwrapDir is the directory of bwrap, for a test that narrows PATH and
// validates a config whose agents run sandboxed; it skips the test (fails
// it under CI) without bubblewrap.
func bwrapDir(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is not installed (apt-get install bubblewrap)")
		}
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	return filepath.Dir(p)
}

// TestConfigValidateNeedsBubblewrap: where bwrap is missing, a config whose
// agents run sandboxed (the default) is refused with the package to
// install; one whose every route says sandbox none is not.
func TestConfigValidateNeedsBubblewrap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "loopd.yaml")
	config := "harnesses:\n  claude-code:\n    command: /bin/true\nwebhooks:\n  ghWebhook:\n    authorizedUsers: [octocat]\n    routing:\n      repos:\n        \"*\":\n          harness: claude-code\n          workdir: /srv/{{.Number}}\n"
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	t.Setenv("PATH", t.TempDir())
	_, err := run(t, "", "config", "validate", path)
	require.ErrorIs(t, err, sandbox.ErrMissing)
	assert.Contains(t, err.Error(), "apt-get install bubblewrap")
	assert.Contains(t, err.Error(), "sandbox.mode: none")

	require.NoError(t, os.WriteFile(path, []byte("sandbox: {mode: none}\n"+config), 0o600))
	out, err := run(t, "", "config", "validate", path)
	require.NoError(t, err)
	assert.Contains(t, out, "ok")
}
