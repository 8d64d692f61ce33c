package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// geminiAPI stands in for the Gemini API (GOOGLE_GEMINI_BASE_URL) as much
// as a headless turn of Gemini 0.61.0 asks of it: the model router's
// generateContent gets a JSON choice, and the turn's streamGenerateContent
// a tool call (list_directory) when the prompt says TOOLNOW and no tool
// result came back yet, else a text answer, each with its usageMetadata.
func geminiAPI(t *testing.T) *httptest.Server {
	usage := func(prompt, out, cached, thoughts, tool int) map[string]int {
		return map[string]int{"promptTokenCount": prompt, "candidatesTokenCount": out, "cachedContentTokenCount": cached,
			"thoughtsTokenCount": thoughts, "toolUsePromptTokenCount": tool, "totalTokenCount": prompt + out + thoughts + tool}
	}
	answer := func(parts []map[string]any, u map[string]int) []byte {
		b, _ := json.Marshal(map[string]any{"candidates": []map[string]any{{"content": map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP", "index": 0}}, "usageMetadata": u})
		return b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			choice, _ := json.Marshal(map[string]any{"complexity_reasoning": "simple", "complexity_score": 10})
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer([]map[string]any{{"text": string(choice)}}, usage(50, 10, 0, 0, 0)))
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			msg := answer([]map[string]any{{"text": "Hello there."}}, usage(1200, 30, 800, 45, 5))
			if strings.Contains(string(body), "TOOLNOW") && !strings.Contains(string(body), `"functionResponse":`) {
				msg = answer([]map[string]any{{"functionCall": map[string]any{"name": "list_directory", "args": map[string]string{"dir_path": "."}}}},
					usage(900, 12, 0, 7, 0))
			}
			_, _ = fmt.Fprintf(w, "data: %s\r\n\r\n", msg)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestGeminiUsageCLI runs one headless turn of Gemini, with a tool call,
// and reads its usage from the chat file the adapter finds: each message
// counted once by its id, though the CLI writes the tool call's message
// twice. It runs on the fake in testdata/fakegemini (its FAKEGEMINI_USAGE),
// and on the real CLI when LOOPD_REAL_GEMINI names its binary (0.61.0 was
// measured), against a local stand-in of the API (geminiAPI).
func TestGeminiUsageCLI(t *testing.T) {
	realOrFake(t, "fakegemini", "LOOPD_REAL_GEMINI", testGeminiUsageCLI)
}

func testGeminiUsageCLI(t *testing.T, bin string, real bool) {
	home := t.TempDir()
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600))
	a, err := New("gemini", schema.Harness{Command: bin, Env: map[string]string{"GEMINI_CLI_HOME": home}})
	require.NoError(t, err)
	id := uuid.NewString()
	cmd := exec.Command(bin, "-p", "TOOLNOW", "--session-id", id, "--output-format", "json")
	cmd.Dir = work
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GEMINI_CLI_HOME=" + home, "TERM=xterm", "LANG=C.UTF-8",
		"GEMINI_API_KEY=offline-dummy", "GOOGLE_GEMINI_BASE_URL=" + geminiAPI(t).URL, "GEMINI_CLI_TRUST_WORKSPACE=true",
		"FAKEGEMINI_AUTH=1", "FAKEGEMINI_USAGE=900,12,0,7,0"}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	tr, err := a.Transcript(work, id)
	require.NoError(t, err)
	require.True(t, tr.Exists, "no chat file of %s", id)
	read, err := a.(UsageReader).ReadUsage(tr, 0)
	require.NoError(t, err)
	ids := map[string]int{}
	for _, m := range read.Messages {
		ids[m.ID]++
	}
	st, _ := desired.BudgetState{}.Count(read, desired.Weights{Input: 1, Output: 1, CacheRead: 1}, 24*time.Hour, time.Now())
	tool := desired.Tokens{Input: 900, Output: 19}
	want := tool
	if real {
		// The tool call's message, then the answer once the tool ran;
		// the router's request is not in the chat file.
		want = tool.Add(desired.Tokens{Input: 1200 - 800 + 5, Output: 30 + 45, CacheRead: 800})
		assert.Len(t, ids, 2, "%v", ids)
	} else {
		assert.Len(t, ids, 1, "%v", ids)
	}
	assert.Contains(t, ids, read.Messages[0].ID)
	assert.Equal(t, 2, ids[read.Messages[0].ID], "the tool call's message is written twice")
	assert.Equal(t, want, st.UsageTotal, "each message once")
}
