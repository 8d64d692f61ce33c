package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// transcriptReader is one adapter's transcript reader under fuzzing, with
// how its CLI writes a user's message as one line of its transcript. A new
// adapter's reader is one more entry of transcriptReaders.
type transcriptReader struct {
	name    string
	adapter Adapter
	// userLine returns the transcript line, newline included, that holds
	// text as a message the user typed or pasted.
	userLine func(text string) []byte
}

var transcriptReaders = []transcriptReader{
	{AdapterClaudeCode, &claudeCode{}, func(text string) []byte {
		// Claude Code 2.1.197's user line (frames_test.go, transcriptLine).
		b, _ := json.Marshal(map[string]any{"parentUuid": nil, "isSidechain": false, "type": "user",
			"message": map[string]any{"role": "user", "content": text}, "uuid": "eb7e31f6-e78f-47b3-86ae-d8319e5ab23b",
			"timestamp": "2026-11-30T15:45:40.251Z", "userType": "external", "sessionId": "d28467e7-e192-4cb0-ae5e-1d2643e803ab"})
		return append(b, '\n')
	}},
	{AdapterCodex, &codex{}, func(text string) []byte {
		// Codex 0.171.0's user message event (codex_test.go, userEvent).
		b, _ := json.Marshal(map[string]any{"timestamp": "2026-11-30T22:09:00.000Z", "type": "event_msg",
			"payload": map[string]any{"type": "item_completed", "item": map[string]any{"type": "UserMessage",
				"content": []map[string]any{{"type": "text", "text": text, "text_elements": []any{}}}}}})
		return append(b, '\n')
	}},
	{AdapterGemini, &gemini{}, func(text string) []byte {
		// Gemini CLI 0.61.0's user record (gemini_test.go, geminiUser).
		b, _ := json.Marshal(map[string]any{"id": "3c1d6f0e-2b7a-4f7e-9a51-0d6f3e0b9c11", "timestamp": "2026-11-30T22:09:03.369Z",
			"type": "user", "content": []map[string]string{{"text": text}}})
		return append(b, '\n')
	}},
}

// fuzzDeliveryID is the shape of a delivery id (the webhook's
// deliveryIDPattern).
var fuzzDeliveryID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// FuzzTranscriptReaders feeds each adapter's transcript readers
// (TranscriptFrames and TranscriptLimit) any bytes, with a torn last
// line and a long first one (its length read from huge, up to 2 MiB): they never panic and never fail on a readable file, and a user
// message holding a delivery's whole frame is found whole wherever it
// stands between them, before a torn last line.
func FuzzTranscriptReaders(f *testing.F) {
	for _, r := range transcriptReaders {
		line := string(r.userLine("hello"))
		f.Add([]byte(line), []byte(line[:len(line)/2]), "d-1", "body:\nsome text\twith a tab\n", uint32(0))
		f.Add([]byte(line), []byte(line), "d-2", strings.Repeat("long body ", 2000)+"\n", uint32(1<<20<<3|7))
		f.Add([]byte{}, []byte{}, "d-2", "", uint32(70<<10<<3|7))
	}
	f.Add([]byte(`{"type":"assistant","isApiErrorMessage":true,"timestamp":"2026-11-30T15:45:40.251Z","message":{"content":[{"type":"text","text":"Claude AI usage limit reached|1796055234"}]}}`+"\n"),
		[]byte(`{"type":"user"`), "d-3", "x", uint32(0))
	f.Add([]byte(`{"type":"assistant","error":"rate_limit","timestamp":"2026-11-30T15:45:40Z","message":{"content":"5-hour limit reached ∙ resets 3pm"}}`+"\n"),
		[]byte{}, "d-4", "", uint32(64<<10<<3|7))
	f.Add([]byte("\x00\xff\n\n{}\n[1,2]\nnull\n"), []byte(`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"`), "a", "<<<github-data", uint32(5<<3))

	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, prefix, torn []byte, id, body string, huge uint32) {
		if !fuzzDeliveryID.MatchString(id) || !utf8.ValidString(body) || strings.Contains(body, desired.DeliveryMarker(id)) {
			t.Skip("not a delivery Render could frame")
		}
		torn = bytes.ReplaceAll(torn, []byte("\n"), nil) // a torn last line has no newline
		n := int(huge>>3) % (8 << 10)
		if huge&7 == 7 {
			// One input in eight: up to 2 MiB, past any buffer and the
			// 64 KiB that TranscriptLimit reads.
			n = int(huge>>3) % (2 << 20)
		}
		if n > 0 {
			// A long line first, which is no JSON.
			prefix = append([]byte(`{"type":"user","message":{"role":"user","content":"`+strings.Repeat("x", n)+"\n"), prefix...)
		}
		frame := desired.Frame{ID: id, Digest: desired.BodyDigest(body)}
		prompt := "[loopd] issue_comment.created on o/r#1 by u (delivery " + id + ")\n" + desired.FrameBegin(id) + body + desired.FrameEnd(id, body)
		path := filepath.Join(dir, "t.jsonl")
		for _, r := range transcriptReaders {
			tr := Transcript{Known: true, Exists: true, Path: path}

			// The bytes alone, torn last line included.
			require.NoError(t, os.WriteFile(path, append(append([]byte{}, prefix...), torn...), 0o600))
			_, err := r.adapter.TranscriptFrames(tr, []desired.Frame{frame})
			require.NoError(t, err, r.name)
			lim, _, err := r.adapter.TranscriptLimit(tr)
			require.NoError(t, err, r.name)
			require.True(t, utf8.ValidString(lim.Text) && len(lim.Text) <= maxLimitText, "%s: limit text %q", r.name, lim.Text)

			// The message between them.
			var b bytes.Buffer
			b.Write(prefix)
			if len(prefix) > 0 && prefix[len(prefix)-1] != '\n' {
				b.WriteByte('\n')
			}
			b.Write(r.userLine(prompt))
			b.Write(torn)
			require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
			found, err := r.adapter.TranscriptFrames(tr, []desired.Frame{frame})
			require.NoError(t, err, r.name)
			require.True(t, found[id].Whole, "%s: the frame of %s is not found whole", r.name, id)
			_, _, err = r.adapter.TranscriptLimit(tr)
			require.NoError(t, err, r.name)
		}
	})
}
