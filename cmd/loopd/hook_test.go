package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/channel"
)

// writeConfig writes a minimal valid config with its state in dir.
func writeConfig(t *testing.T, dir string) string {
	t.Helper()
	return writeConfigWith(t, dir, "", "")
}

// writeConfigWith writes writeConfig's config with the YAML lines top
// added at its top level and hook in webhooks.ghWebhook ("" for none;
// hook's lines indented as its keys are).
func writeConfigWith(t *testing.T, dir, top, hook string) string {
	t.Helper()
	path := filepath.Join(dir, "loopd.yaml")
	cfg := top + `stateDir: ` + filepath.Join(dir, "state") + `
harnesses:
  claude-code:
    command: claude
webhooks:
  ghWebhook:
` + hook + `    authorizedUsers: [octocat]
    routing:
      repos:
        "*": {harness: claude-code, workdir: "` + filepath.Join(dir, "w") + `/{{.Number}}"}
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

// run executes the loopd command line args with stdin in.
func run(t *testing.T, in string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(in))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// agentEnv makes the test process look like an agent's, as a sandbox
// shows it: its channel and token, no config anywhere it could find one
// ($LOOPD_CONFIG names a file that is not there, the cwd and $HOME are
// empty), and no state dir.
func agentEnv(t *testing.T, item string) (dir, token string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "channel")
	require.NoError(t, os.Mkdir(dir, 0o700))
	token, _, err := channel.NewToken()
	require.NoError(t, err)
	empty := t.TempDir()
	t.Chdir(empty)
	t.Setenv("HOME", empty)
	t.Setenv("XDG_CONFIG_HOME", empty)
	t.Setenv(configEnv, filepath.Join(empty, "no-such", "loopd.yaml"))
	t.Setenv(channel.EnvDir, dir)
	t.Setenv(channel.EnvToken, token)
	t.Setenv(channel.EnvWorkItem, item)
	return dir, token
}

// The hook runs where a sandboxed agent does: no config, no store. It
// drops the input into the item's channel with the spawn's token, prints
// nothing (Claude Code would add it to the conversation), and the report
// reads back as the pass reads it.
func TestHookSessionStartDropsTheReportInTheChannel(t *testing.T) {
	dir, token := agentEnv(t, "octo-org/api#3")
	input := `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`
	out, err := run(t, input, "hook", "session-start")
	require.NoError(t, err)
	assert.Empty(t, out, "a SessionStart hook's stdout would reach the conversation")

	reports, err := channel.ReadReports(dir, 16)
	require.NoError(t, err)
	require.Len(t, reports, 1)
	r := reports[0]
	assert.Equal(t, "octo-org/api#3", r.WorkItem)
	assert.Equal(t, channel.Digest(token), r.TokenDigest)
	assert.Equal(t, "8fb7b7f1-2c48-47de-8203-43547ba09c9d", r.SessionID)
	assert.Equal(t, "clear", r.Source)
	assert.Empty(t, r.Problem)
	assert.WithinDuration(t, time.Now(), r.ModTime, time.Minute)
}
