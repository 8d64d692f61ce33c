package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// writeConfig writes a minimal valid config with its state in dir.
func writeConfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "loopd.yaml")
	cfg := `stateDir: ` + filepath.Join(dir, "state") + `
harnesses:
  claude-code:
    command: claude
webhooks:
  ghWebhook:
    authorizedUsers: [octocat]
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

func TestHookSessionStartRecordsTheReport(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	k := desired.Key{Owner: "octo-org", Repo: "api", Number: 3}
	store, err := desired.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	_, err = store.Ingest(context.Background(), desired.Ingest{DeliveryID: "d-1", Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
	require.NoError(t, err)
	require.NoError(t, store.Close())

	t.Setenv(workItemEnv, k.String())
	input := `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`
	out, err := run(t, input, "hook", "session-start", "--config", config)
	require.NoError(t, err)
	assert.Empty(t, out, "a SessionStart hook's stdout would reach the conversation")

	store, err = desired.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	defer store.Close()
	rec, err := store.Get(context.Background(), k)
	require.NoError(t, err)
	require.NotNil(t, rec.Report)
	assert.Equal(t, "8fb7b7f1-2c48-47de-8203-43547ba09c9d", rec.Report.SessionID)
	assert.Equal(t, "clear", rec.Report.Source)
	events, err := store.Events(context.Background(), desired.EventFilter{WorkItem: k.String()})
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, "session.reported", string(events[0].Name))
}

func TestHookSessionStartRefusesBadInput(t *testing.T) {
	config := writeConfig(t, t.TempDir())
	tests := []struct {
		name, item, input, want string
	}{
		{"no_work_item", "", `{"session_id":"a"}`, "LOOPD_WORK_ITEM"},
		{"not_json", "o/r#1", `not json`, "input"},
		{"flag_shaped_id", "o/r#1", `{"session_id":"--verbose"}`, "invalid session id"},
		{"unknown_item", "o/r#9", `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d"}`, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(workItemEnv, tt.item)
			_, err := run(t, tt.input, "hook", "session-start", "--config", config)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestSessionStartHookQuotesPaths(t *testing.T) {
	assert.Equal(t, `'it'\''s'`, shellQuote("it's"))
	hook, err := sessionStartHook("conf dir/loopd.yaml")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(hook, " hook session-start --config '"+filepath.Join(mustGetwd(t), "conf dir/loopd.yaml")+"'"), hook)
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}
