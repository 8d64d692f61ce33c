package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
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
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	_, err = st.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	t.Setenv(workItemEnv, k.String())
	input := `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"clear"}`
	out, err := run(t, input, "hook", "session-start", "--config", config)
	require.NoError(t, err)
	assert.Empty(t, out, "a SessionStart hook's stdout would reach the conversation")

	st, err = sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	defer st.Close()
	rec, err := st.Get(context.Background(), k)
	require.NoError(t, err)
	require.NotNil(t, rec.Report)
	assert.Equal(t, "8fb7b7f1-2c48-47de-8203-43547ba09c9d", rec.Report.SessionID)
	assert.Equal(t, "clear", rec.Report.Source)
	events, err := st.Events(context.Background(), store.EventFilter{WorkItem: k.String()})
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, "session.reported", string(events[0].Name))
}

// TestHookSessionStartRejectsBadReports: a report that fails a check is
// journaled as session.report_rejected with its reason and never replaces
// the conversation id already recorded.
func TestHookSessionStartRejectsBadReports(t *testing.T) {
	const good = "8fb7b7f1-2c48-47de-8203-43547ba09c9d"
	report := func(id, source string) string {
		return `{"session_id":"` + id + `","transcript_path":"/x.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"` + source + `"}`
	}
	k := desired.Key{Owner: "octo-org", Repo: "api", Number: 3}
	tests := []struct {
		name, item, input, reason string
	}{
		{"not_a_uuid", k.String(), report("not-a-uuid", "startup"), reasonInvalidSession},
		{"uppercase_uuid", k.String(), report(strings.ToUpper(good), "startup"), reasonInvalidSession},
		{"nil_uuid", k.String(), report("00000000-0000-0000-0000-000000000000", "startup"), reasonInvalidSession},
		{"uuid_of_another_variant", k.String(), report("11111111-2222-3333-4444-555555555555", "compact"), reasonInvalidSession},
		{"item_not_in_canonical_form", "octo-org/api#03", report(good, "startup"), reasonBadWorkItem},
		{"uuid_without_dashes", k.String(), report(strings.ReplaceAll(good, "-", ""), "startup"), reasonInvalidSession},
		{"flag_shaped_id", k.String(), report("--verbose", "startup"), reasonInvalidSession},
		{"empty_id", k.String(), report("", "startup"), reasonInvalidSession},
		{"no_id", k.String(), `{"source":"startup"}`, reasonInvalidSession},
		{"huge_id", k.String(), report(strings.Repeat("a", 60<<10), "startup"), reasonInvalidSession},
		{"huge_input", k.String(), report(good, "startup") + strings.Repeat(" ", 64<<10), reasonInputTooLarge},
		{"wrong_source", k.String(), report(good, "evil"), reasonUnknownSource},
		{"no_source", k.String(), `{"session_id":"` + good + `"}`, reasonUnknownSource},
		{"wrong_hook_event", k.String(), `{"session_id":"` + good + `","source":"startup","hook_event_name":"Stop"}`, reasonWrongHookEvent},
		{"not_json", k.String(), `not json`, reasonMalformedInput},
		{"not_an_object", k.String(), `["` + good + `"]`, reasonMalformedInput},
		{"second_object_after_it", k.String(), report(good, "startup") + `{"session_id":"x"}`, reasonMalformedInput},
		{"unknown_item", "octo-org/api#9", report(good, "startup"), reasonUnknownWorkItem},
		{"no_work_item", "", report(good, "startup"), reasonBadWorkItem},
		{"malformed_work_item", "octo-org/api#3; rm -rf", report(good, "startup"), reasonBadWorkItem},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			config := writeConfig(t, dir)
			const recorded = "0d1c2b3a-4f5e-4d6c-8b7a-9f8e7d6c5b4a"
			st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
			require.NoError(t, err)
			_, err = st.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
			require.NoError(t, err)
			require.NoError(t, st.ReportSession(context.Background(), k, desired.SessionReport{SessionID: recorded, Source: "startup"}))
			require.NoError(t, st.Close())
			t.Setenv(workItemEnv, tt.item)

			_, err = run(t, tt.input, "hook", "session-start", "--config", config)

			require.ErrorIs(t, err, errReportRejected)
			assert.Contains(t, err.Error(), tt.reason)
			st, err = sqlstore.OpenSQLite(context.Background(), filepath.Join(dir, "state", storeFile))
			require.NoError(t, err)
			defer st.Close()
			rec, err := st.Get(context.Background(), k)
			require.NoError(t, err)
			require.NotNil(t, rec.Report)
			assert.Equal(t, recorded, rec.Report.SessionID, "the recorded id is kept")
			events, err := st.Events(context.Background(), store.EventFilter{})
			require.NoError(t, err)
			require.Len(t, events, 1)
			assert.Equal(t, journal.SessionReportRejected, events[0].Name)
			assert.Equal(t, tt.reason, events[0].Attrs["reason"])
			assert.LessOrEqual(t, len(events[0].Attrs["attempted_session_id"]), maxShownValue+len("…"))
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

// TestHookSessionStartInASandbox: with $LOOPD_CHANNEL set (a sandboxed
// harness, which has no config or store) the hook leaves its report in the
// channel dir and needs no config; the pass records it for the item whose
// channel holds it, whatever item the report's environment named, checks
// it as the hook does (a bad one is journaled and not recorded), and
// removes it.
func TestHookSessionStartInASandbox(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	cfg, err := schema.Load(config)
	require.NoError(t, err)
	ctx := context.Background()
	mine, other := desired.Key{Owner: "octo-org", Repo: "api", Number: 3}, desired.Key{Owner: "octo-org", Repo: "api", Number: 4}
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "state", storeFile))
	require.NoError(t, err)
	defer st.Close()
	for _, k := range []desired.Key{mine, other} {
		_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-" + k.String(), Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
		require.NoError(t, err)
	}
	channels := filepath.Join(dir, "state", channelsDir)
	channel := filepath.Join(channels, desired.SessionName(mine))
	require.NoError(t, os.MkdirAll(channel, 0o700))

	t.Setenv(actions.ChannelEnv, channel)
	t.Setenv(workItemEnv, other.String()) // the agent's to set: not believed
	input := `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d","hook_event_name":"SessionStart","source":"startup"}`
	out, err := run(t, input, "hook", "session-start", "--config", filepath.Join(dir, "no-such-config.yaml"))
	require.NoError(t, err, "no config needed")
	assert.Empty(t, out)
	_, err = run(t, `{"session_id":"../../etc/passwd","source":"startup"}`, "hook", "session-start")
	require.NoError(t, err, "checked by the pass, not here")
	files, err := filepath.Glob(filepath.Join(channel, reportPattern))
	require.NoError(t, err)
	require.Len(t, files, 2)

	rec := journal.NewRecorder(slog.New(slog.DiscardHandler), st, time.Now)
	require.NoError(t, ingestReports(ctx, cfg, st, rec, channels))
	r, err := st.Get(ctx, mine)
	require.NoError(t, err)
	require.NotNil(t, r.Report, "recorded for the channel's item")
	assert.Equal(t, "8fb7b7f1-2c48-47de-8203-43547ba09c9d", r.Report.SessionID)
	r, err = st.Get(ctx, other)
	require.NoError(t, err)
	assert.Nil(t, r.Report, "never for the item the environment named")
	events, err := st.Events(ctx, store.EventFilter{WorkItem: mine.String()})
	require.NoError(t, err)
	var names []string
	for _, ev := range events {
		names = append(names, string(ev.Name))
	}
	assert.ElementsMatch(t, []string{"session.reported", "session.report_rejected"}, names)
	files, err = filepath.Glob(filepath.Join(channel, reportPattern))
	require.NoError(t, err)
	assert.Empty(t, files, "each report is taken once")
}
