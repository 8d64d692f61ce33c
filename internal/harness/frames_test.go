package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// transcriptLine is one line as Claude Code 2.1.197 writes it (the fields
// that matter, in its order): a user turn's content is a string when typed
// or pasted, an array of parts otherwise.
func transcriptLine(t *testing.T, kind string, content any, meta bool) string {
	t.Helper()
	l := map[string]any{"parentUuid": nil, "isSidechain": false, "type": kind,
		"message": map[string]any{"role": kind, "content": content}, "uuid": "eb7e31f6-e78f-47b3-86ae-d8319e5ab23b",
		"timestamp": "2026-11-30T15:45:40.251Z", "userType": "external", "entrypoint": "cli", "sessionId": "d28467e7-e192-4cb0-ae5e-1d2643e803ab"}
	if meta {
		l["isMeta"] = true
	}
	b, err := json.Marshal(l)
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestTranscriptFrames(t *testing.T) {
	body := "body:\nline\twith tab  \n漢字 😀\n"
	frame := func(id string) string { return desired.FrameBegin(id) + body + desired.FrameEnd(id, body) }
	prompt := func(id string) string {
		return "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n" + frame(id)
	}
	pasted := func(id string) string { return strings.ReplaceAll(prompt(id), "\t", "    ") }
	frames := []desired.Frame{}
	for _, id := range []string{"whole", "parts", "mangled", "twice-mangled", "tool", "meta", "assistant", "absent"} {
		frames = append(frames, desired.FrameOf(desired.Delivery{ID: id, Prompt: prompt(id)}))
	}
	lines := []string{
		`{"type":"mode","mode":"normal","sessionId":"d28467e7-e192-4cb0-ae5e-1d2643e803ab"}` + "\n",
		transcriptLine(t, "user", pasted("whole"), false),
		transcriptLine(t, "user", []map[string]string{{"type": "text", "text": prompt("parts")}}, false),
		transcriptLine(t, "user", strings.Replace(pasted("mangled"), "😀", "", 1), false),
		transcriptLine(t, "user", strings.Replace(pasted("twice-mangled"), "  \n", "\n", 1), false),
		transcriptLine(t, "user", strings.Replace(pasted("twice-mangled"), "  \n", "\n", 1), false),
		// An agent's command output and its own words never count.
		transcriptLine(t, "user", []map[string]any{{"type": "tool_result", "tool_use_id": "x", "content": prompt("tool")}}, false),
		transcriptLine(t, "user", prompt("meta"), true),
		transcriptLine(t, "assistant", []map[string]string{{"type": "text", "text": prompt("assistant")}}, false),
		`{"type":"user","message":{"role":"user","content":"torn`,
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))

	got, err := (&claudeCode{}).TranscriptFrames(Transcript{Known: true, Exists: true, Path: path}, frames)
	require.NoError(t, err)
	assert.Equal(t, Found{Whole: true}, got["whole"])
	assert.Equal(t, Found{Whole: true}, got["parts"])
	assert.Equal(t, Found{Mangled: 1}, got["mangled"])
	assert.Equal(t, Found{Mangled: 2}, got["twice-mangled"])
	for _, id := range []string{"tool", "meta", "assistant", "absent"} {
		assert.Equal(t, Found{}, got[id], id)
	}

	_, err = (&claudeCode{}).TranscriptFrames(Transcript{Known: true, Path: filepath.Join(t.TempDir(), "missing.jsonl")}, frames)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
