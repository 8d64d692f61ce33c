package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

func TestReadUsageReadsWholeLinesFromTheOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	lines := `{"type":"user","message":{"role":"user","content":"hi"},"timestamp":"2026-01-01T00:00:00.000Z"}
{"type":"assistant","timestamp":"2026-01-01T00:00:01.000Z","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000}}}
{"type":"assistant","timestamp":"2026-01-01T00:00:02.000Z","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":40,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000}}}
`
	torn := `{"type":"assistant","timestamp":"2026-01-01T00:00:03.000Z","message":{"id":"msg_2","usage":{"input_tokens":5`
	require.NoError(t, os.WriteFile(path, []byte(lines+torn), 0o600))
	c := &claudeCode{}
	read, err := c.ReadUsage(Transcript{Path: path}, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(len(lines)), read.To, "the torn line is left for the next read")
	require.Len(t, read.Messages, 2)
	assert.Equal(t, desired.UsageMessage{ID: "msg_1", At: time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC),
		Tokens: desired.Tokens{Input: 3, Output: 40, CacheWrite: 100, CacheRead: 2000}}, read.Messages[1])

	rest := `,"output_tokens":7}}}` + "\n"
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(rest)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	next, err := c.ReadUsage(Transcript{Path: path}, read.To)
	require.NoError(t, err)
	require.Len(t, next.Messages, 1, "only what follows the offset is read")
	assert.Equal(t, "msg_2", next.Messages[0].ID)
	assert.Equal(t, int64(len(lines)+len(torn)+len(rest)), next.To)

	again, err := c.ReadUsage(Transcript{Path: path}, next.To+100)
	require.NoError(t, err)
	assert.Equal(t, int64(0), again.From, "a file shorter than the offset is read from its start")
	assert.Len(t, again.Messages, 3)

	missing, err := c.ReadUsage(Transcript{Path: path + ".gone"}, 10)
	require.NoError(t, err)
	assert.Equal(t, desired.UsageRead{Path: path + ".gone"}, missing)
}

func TestCodexUsageCountsLastTokenUsageNamedByItsTotal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.jsonl")
	lines := `{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}
{"timestamp":"2026-01-01T00:00:02.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50,"reasoning_output_tokens":10,"total_tokens":1050},"last_token_usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50,"reasoning_output_tokens":10,"total_tokens":1050}}}}
`
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	read, err := (&codex{}).ReadUsage(Transcript{Path: path}, 0)
	require.NoError(t, err)
	require.Len(t, read.Messages, 1, "a token count without info is a rate-limit update")
	assert.Equal(t, desired.UsageMessage{ID: "total:1050", At: time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC),
		Tokens: desired.Tokens{Input: 200, Output: 50, CacheRead: 800}}, read.Messages[0])
}
