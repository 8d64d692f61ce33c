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

// TestGeminiUsageCountsEachMessageLineByItsID reads a chat file as Gemini
// 0.61.0 wrote it (measured against a local stand-in of the API): a
// message with its tokens, one written again whole with its tool calls,
// and the lines that carry none.
func TestGeminiUsageCountsEachMessageLineByItsID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "session-2026-12-03T06-45-11111111.jsonl")
	lines := `{"sessionId":"11111111-2222-4333-8444-555555555555","projectHash":"456e","startTime":"2026-12-03T06:45:57.211Z","lastUpdated":"2026-12-03T06:45:57.211Z","kind":"main"}
{"id":"41cd15ae-96f1-4dcc-8f10-c7de7e131ebb","timestamp":"2026-12-03T06:45:57.381Z","type":"user","content":[{"text":"say \"tokens\":{\"input\":9}"}]}
{"$set":{"lastUpdated":"2026-12-03T06:45:57.382Z"}}
{"id":"085c0acc-a9c6-4a55-a67b-05c2c84e1232","timestamp":"2026-12-03T06:45:57.520Z","type":"gemini","content":"Hello there.","thoughts":[],"tokens":{"input":1200,"output":30,"cached":800,"thoughts":45,"tool":5,"total":1280},"model":"gemini-3.8-flash"}
{"id":"a0","timestamp":"2026-12-03T06:45:58.000Z","type":"gemini","content":"","thoughts":[],"tokens":null,"model":"gemini-3.8-flash"}
{"id":"dd2f5b55-e093-4dd4-9e7b-b5383ab46e34","timestamp":"2026-12-03T06:47:12.587Z","type":"gemini","content":"","thoughts":[],"tokens":{"input":900,"output":12,"cached":0,"thoughts":7,"tool":0,"total":919},"model":"gemini-3.8-flash"}
{"id":"dd2f5b55-e093-4dd4-9e7b-b5383ab46e34","timestamp":"2026-12-03T06:47:12.587Z","type":"gemini","content":"","thoughts":[],"tokens":{"input":900,"output":12,"cached":0,"thoughts":7,"tool":0,"total":919},"model":"gemini-3.8-flash","toolCalls":[{"id":"list_directory_0","name":"list_directory","args":{"dir_path":"."},"status":"success"}]}
{"$set":{"messages":[{"id":"085c0acc-a9c6-4a55-a67b-05c2c84e1232","timestamp":"2026-12-03T06:45:57.520Z","type":"gemini","content":"Hello there.","tokens":{"input":1200,"output":30,"cached":800,"thoughts":45,"tool":5,"total":1280}}]}}
`
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o600))
	read, err := (&gemini{}).ReadUsage(Transcript{Path: path}, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(len(lines)), read.To)
	first := desired.UsageMessage{ID: "085c0acc-a9c6-4a55-a67b-05c2c84e1232", At: time.Date(2026, 12, 3, 6, 45, 57, 520e6, time.UTC),
		Tokens: desired.Tokens{Input: 405, Output: 75, CacheRead: 800}}
	tool := desired.UsageMessage{ID: "dd2f5b55-e093-4dd4-9e7b-b5383ab46e34", At: time.Date(2026, 12, 3, 6, 47, 12, 587e6, time.UTC),
		Tokens: desired.Tokens{Input: 900, Output: 19}}
	assert.Equal(t, []desired.UsageMessage{first, tool, tool}, read.Messages,
		"no user text, no message without tokens, no message a $set lists again")

	st, _ := desired.BudgetState{}.Count(read, desired.Weights{Input: 1, Output: 8, CacheRead: 0.25}, 24*time.Hour, tool.At)
	assert.Equal(t, desired.Tokens{Input: 1305, Output: 94, CacheRead: 800}, st.UsageTotal, "the message written twice counts once")
	again, _ := st.Count(read, desired.Weights{Input: 1, Output: 8, CacheRead: 0.25}, 24*time.Hour, tool.At)
	assert.Equal(t, st.UsageTotal, again.UsageTotal, "a re-read from the start counts nothing")
}
