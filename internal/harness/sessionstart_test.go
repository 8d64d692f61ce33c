package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/schema"
)

// A hook that loopd did not start (no channel in its environment) fails
// and writes nothing; one whose input is too long still reports, for the
// pass to refuse; a good one reports its input with the spawn's token.
func TestReportSessionStart(t *testing.T) {
	token, _, err := channel.NewToken()
	require.NoError(t, err)
	tests := []struct {
		name    string
		token   string
		input   string
		noChan  bool
		problem string
	}{
		{name: "reported", token: token, input: `{"session_id":"8fb7b7f1-2c48-47de-8203-43547ba09c9d","source":"clear"}`},
		{name: "no_token", input: `{"session_id":"x","source":"startup"}`, noChan: true},
		{name: "too_large", token: token, input: strings.Repeat(" ", 2*channel.MaxInput), problem: channel.ProblemTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "channel")
			require.NoError(t, os.Mkdir(dir, 0o700))
			env := map[string]string{channel.EnvDir: dir, channel.EnvToken: tt.token, channel.EnvWorkItem: "octo-org/api#3"}
			getenv := func(name string) string { return env[name] }
			err := ReportSessionStart(getenv, strings.NewReader(tt.input), time.Now())
			reports, rerr := channel.ReadReports(dir, 16)
			require.NoError(t, rerr)
			if tt.noChan {
				require.ErrorIs(t, err, channel.ErrNoChannel)
				assert.Empty(t, reports)
				return
			}
			require.NoError(t, err)
			require.Len(t, reports, 1)
			assert.Equal(t, "octo-org/api#3", reports[0].WorkItem)
			assert.Equal(t, channel.Digest(token), reports[0].TokenDigest)
			assert.Equal(t, tt.problem, reports[0].Problem)
		})
	}
}

func TestSessionStartCommandNamesNoConfig(t *testing.T) {
	hook := SessionStartCommand("/opt/loop d/loopd")
	assert.Equal(t, `'/opt/loop d/loopd' hook session-start`, hook)
	assert.NotContains(t, hook, "--config", "an agent reads its argv: the config path is no business of it")
}

// Only an adapter whose CLI can report gets the hook.
func TestWithSessionStart(t *testing.T) {
	for _, name := range []string{"claude-code", "codex"} {
		ad, err := New(name, schema.Harness{Command: name})
		require.NoError(t, err)
		got := WithSessionStart(ad, "/bin/loopd")
		_, reports := ad.(SessionStartReporter)
		if reports {
			assert.NotSame(t, ad, got, "%s: a copy with the hook", name)
		} else {
			assert.Same(t, ad, got, "%s: unchanged", name)
		}
	}
}
