package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
)

// TestConfigInitWritesAConfigThatValidatesOnceEdited: the starter config
// names the claude found on PATH and a Claude config dir under the state
// dir; config validate refuses it for its authorizedUsers placeholder
// alone, and accepts it once that is replaced.
func TestConfigInitWritesAConfigThatValidatesOnceEdited(t *testing.T) {
	bin := t.TempDir()
	claude := filepath.Join(bin, "claude")
	require.NoError(t, os.WriteFile(claude, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", bin+":"+bwrapDir(t))
	dir := t.TempDir()
	path := filepath.Join(dir, "with space", "loopd", "loopd.yaml") // its directory made, as $XDG_CONFIG_HOME/loopd on a new machine

	out, err := run(t, "", "config", "init", path)
	require.NoError(t, err)
	assert.Contains(t, out, "wrote "+path)
	assert.Contains(t, out, "replace "+schema.PlaceholderLogin)

	_, err = run(t, "", "config", "validate", path)
	require.ErrorIs(t, err, schema.ErrInvalid)
	assert.Contains(t, err.Error(), "authorizedUsers[0]: replace the placeholder "+schema.PlaceholderLogin)
	assert.Equal(t, 1, strings.Count(err.Error(), "\n")+1, "the placeholder is the only problem: %v", err)

	edit(t, path, schema.PlaceholderLogin, "octocat")
	out, err = run(t, "", "config", "validate", path)
	require.NoError(t, err, out)
	assert.Contains(t, out, "ok")
	cfg, err := schema.Load(path)
	require.NoError(t, err)
	state := filepath.Join(filepath.Dir(path), "state")
	assert.Equal(t, state, cfg.StateDir)
	h := cfg.Harnesses["claude-code"]
	assert.Equal(t, claude, h.Command, "the claude found on PATH")
	assert.Equal(t, filepath.Join(state, "claude"), h.Env["CLAUDE_CONFIG_DIR"], "a config dir under the state dir")
	route, ok := cfg.Webhooks.GHWebhook.Routing.Route("octo-org", "api")
	require.True(t, ok)
	assert.NotEmpty(t, route.Instructions, "a default for the standing instructions")
	wd, err := route.RenderWorkdir("octo-org", "api", 7, "issue")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(state, "agents", "octo-org", "api", "7"), wd)
}

// TestConfigInitPromisesOnlyWhatItsRouteDoes: the route config init
// writes is a plain directory with no credential, and its instructions
// ask for no push and no pull request; the checkout it offers, commented,
// validates once uncommented.
func TestConfigInitPromisesOnlyWhatItsRouteDoes(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", bin+":"+bwrapDir(t))
	path := filepath.Join(t.TempDir(), "loopd.yaml")
	_, err := run(t, "", "config", "init", path)
	require.NoError(t, err)
	edit(t, path, schema.PlaceholderLogin, "octocat")
	cfg, err := schema.Load(path)
	require.NoError(t, err)
	route, ok := cfg.Webhooks.GHWebhook.Routing.Route("octo-org", "api")
	require.True(t, ok)
	assert.Nil(t, route.Checkout, "a plain directory: an item starts offline")
	assert.Equal(t, schema.AgentCredentialsNone, route.Credentials(cfg.GitHub))
	for _, promise := range []string{"push", "open", "commit", "branch", "reply"} {
		assert.NotContains(t, strings.ToLower(route.Instructions), promise, "the agent has no clone and no credential")
	}

	edit(t, path, "          # checkout:\n          #   url:", "          checkout:\n            url:")
	cfg, err = schema.Load(path)
	require.NoError(t, err)
	route, _ = cfg.Webhooks.GHWebhook.Routing.Route("octo-org", "api")
	require.NotNil(t, route.Checkout)
	u, err := route.Checkout.RenderURL("octo-org", "api")
	require.NoError(t, err)
	assert.Equal(t, "https://github.com/octo-org/api.git", u)
}

// TestConfigInitWithoutClaude: with no claude on PATH the command is the
// bare name and a comment says it was not found; with its placeholder
// replaced the file validates once claude is installed, and until then
// validate names the missing command.
func TestConfigInitWithoutClaude(t *testing.T) {
	bin := t.TempDir()
	// bwrap stays: the config's agents run sandboxed.
	t.Setenv("PATH", bin+":"+bwrapDir(t))
	path := filepath.Join(t.TempDir(), "loopd.yaml")
	out, err := run(t, "", "config", "init", path, "--state-dir", "/var/lib/loopd")
	require.NoError(t, err)
	assert.Contains(t, out, "claude is not on PATH")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "# claude was not found on PATH when this file was written")
	assert.Contains(t, string(b), "    command: claude\n")
	assert.Contains(t, string(b), "CLAUDE_CONFIG_DIR: /var/lib/loopd/claude\n")

	edit(t, path, schema.PlaceholderLogin, "octocat")
	_, err = run(t, "", "config", "validate", path)
	require.ErrorIs(t, err, harness.ErrCommandNotFound)
	assert.ErrorContains(t, err, `harness claude-code: command "claude" not on PATH "`+os.Getenv("PATH")+`"`)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\n"), 0o755))
	_, err = run(t, "", "config", "validate", path)
	require.NoError(t, err)
}

// TestConfigInitKeepsAnExistingFile: a file already there is kept unless
// --force, which replaces it.
func TestConfigInitKeepsAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.yaml")
	require.NoError(t, os.WriteFile(path, []byte("mine: true\n"), 0o600))
	_, err := run(t, "", "config", "init", path)
	require.ErrorIs(t, err, fs.ErrExist)
	assert.Contains(t, err.Error(), "--force")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "mine: true\n", string(b))

	_, err = run(t, "", "config", "init", "--force", path)
	require.NoError(t, err)
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "authorizedUsers: ["+schema.PlaceholderLogin+"]")
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

// edit replaces old with new in the file at path.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(b), old, new)), 0o600))
}
