package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
)

// messagesAPI stands in for the Anthropic Messages API (ANTHROPIC_BASE_URL)
// as much as a turn of Claude Code 2.1.197 asks of it. A streamed request
// that offers tool and holds no tool result yet gets one call of tool with
// input; every other request gets a text answer. It keeps a line for each
// request (method, path, model, tools and messages), every tool result the
// CLI sends back and the text of every user message. Measured: a start
// and one turn ask for HEAD /, then POST /v1/messages three times (one
// without tools, the conversation's title; the turn; the turn again with
// the tool's result); nothing else (no count_tokens).
type messagesAPI struct {
	*httptest.Server
	tool  string
	input map[string]string

	mu       sync.Mutex
	requests []string
	results  []toolResult
	prompts  []string
}

// toolResult is a tool_result block of a request.
type toolResult struct {
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
	Content   any    `json:"content"`
}

func newMessagesAPI(t *testing.T, tool string, input map[string]string) *messagesAPI {
	api := &messagesAPI{tool: tool, input: input}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.Close)
	return api
}

func (api *messagesAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string                  `json:"model"`
		Stream   bool                    `json:"stream"`
		Tools    []struct{ Name string } `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var results []toolResult
	var prompts []string
	for _, m := range req.Messages {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
			toolResult
		}
		var text string
		if json.Unmarshal(m.Content, &text) == nil && m.Role == "user" {
			prompts = append(prompts, text)
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				switch {
				case b.Type == "tool_result":
					results = append(results, b.toolResult)
				case b.Type == "text" && m.Role == "user":
					prompts = append(prompts, b.Text)
				}
			}
		}
	}
	offered := false
	for _, tool := range req.Tools {
		offered = offered || tool.Name == api.tool
	}
	api.mu.Lock()
	api.requests = append(api.requests, fmt.Sprintf("%s %s model=%s stream=%v tools=%d messages=%d", r.Method, r.URL.Path, req.Model, req.Stream, len(req.Tools), len(req.Messages)))
	if len(results) > 0 {
		api.results = results
	}
	api.prompts = append(api.prompts, prompts...)
	api.mu.Unlock()
	switch {
	case r.Method == http.MethodHead && r.URL.Path == "/":
		return // the CLI's connectivity check
	case r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages"):
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"input_tokens":10}`)
		return
	}
	tool := offered && req.Stream && len(results) == 0
	text := "Done."
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"id": "msg_" + uuid.NewString(), "type": "message", "role": "assistant", "model": req.Model,
			"content": []map[string]any{{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 10, "output_tokens": 2}})
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"message": map[string]any{"id": "msg_" + uuid.NewString(), "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if tool {
		input, _ := json.Marshal(api.input)
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "toolu_" + strings.ReplaceAll(uuid.NewString(), "-", ""), "name": api.tool, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		stop = "tool_use"
	} else {
		event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	event("message_stop", map[string]any{})
}

// seen returns the requests' lines, the tool results of the last request
// that had any, and every user message's text so far.
func (api *messagesAPI) seen() (requests []string, results []toolResult, prompts []string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return slices.Clone(api.requests), slices.Clone(api.results), slices.Clone(api.prompts)
}

// questionCLIWait bounds each wait: on two busy cores the real CLI takes
// several seconds to start.
const questionCLIWait, questionCLITick = 90 * time.Second, 200 * time.Millisecond

// TestClaudeQuestionCLI walks Claude Code's tool permission prompt on the
// real CLI when LOOPD_REAL_CLAUDE names its binary (2.1.197 was
// measured), its model a local stand-in of the Messages API
// (messagesAPI) that asks for one tool call, started as loopd starts it
// (FreshArgv, Provision, a session of loopd's tmux client on a private
// server), permissions not skipped: the prompt is shown, read
// (Asker.Question), its answer's keys (Asker.AnswerKeys) are sent behind
// the guard that the screen still shows it (tmux.Guard.Shows, tmux's
// #{C:…}), and the choice takes effect: "Yes" runs the tool (the API gets
// its result, not an error), "No" rejects it and returns to the input
// box, where the person's words go to the model with the rejection.
func TestClaudeQuestionCLI(t *testing.T) {
	bin := os.Getenv("LOOPD_REAL_CLAUDE")
	if bin == "" {
		t.Skip("LOOPD_REAL_CLAUDE is not set")
	}
	marker := "x-" + uuid.NewString()
	for _, tc := range []struct {
		name   string
		tool   string
		input  map[string]string
		title  string
		choice int
	}{
		{"bash_yes_runs_the_tool", "Bash", map[string]string{"command": "touch " + marker, "description": "Create the marker file"}, "Do you want to proceed?", 1},
		{"write_yes_creates_the_file", "Write", map[string]string{"file_path": marker, "content": "hello\n"}, "Do you want to create " + marker + "?", 1},
		{"bash_no_takes_words", "Bash", map[string]string{"command": "touch " + marker, "description": "Create the marker file"}, "Do you want to proceed?", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := startAtQuestion(t, bin, tc.tool, tc.input)
			c := q.adapter.(Asker)
			question, ok := c.Question(q.screen(t))
			require.True(t, ok, "no question read on:\n%s", q.screen(t))
			assert.Equal(t, tc.title, question.Title)
			require.Len(t, question.Choices, 3)
			assert.Equal(t, "Yes", question.Choices[0])
			assert.Equal(t, "No", question.Choices[2])
			assert.Equal(t, 3, question.Differently, "No returns to the input box for words")

			// The guard: a line the screen does not show refuses the
			// keys, the question's own lines let them through.
			g := q.guard
			g.Shows = append(question.Lines(), "4. Maybe")
			assert.ErrorIs(t, q.tmux.SendKeys(t.Context(), q.target, g, c.AnswerKeys(question, tc.choice)...), tmux.ErrScreenChanged)
			g.Shows = question.Lines()
			require.NoError(t, q.tmux.SendKeys(t.Context(), q.target, g, c.AnswerKeys(question, tc.choice)...))
			// The prompt is gone with that one key, so the same
			// answer again is refused.
			require.Eventually(t, func() bool {
				_, asks := c.Question(q.screen(t))
				return !asks
			}, questionCLIWait, questionCLITick, "the prompt stays after the key:\n%s", q.screen(t))
			assert.ErrorIs(t, q.tmux.SendKeys(t.Context(), q.target, g, c.AnswerKeys(question, tc.choice)...), tmux.ErrScreenChanged)

			path := filepath.Join(q.work, marker)
			if tc.choice == question.Differently {
				q.noThenWords(t, path)
				return
			}
			q.waitResult(t, false)
			_, err := os.Stat(path)
			assert.NoError(t, err, "the tool ran")
		})
	}
}

// questionRun is one real CLI started at a permission prompt.
type questionRun struct {
	api     *messagesAPI
	adapter Adapter
	tmux    *tmux.Exec
	guard   tmux.Guard
	target  string
	work    string
}

// startAtQuestion starts bin as loopd does, its model asking for one call
// of tool with input, and waits until its screen is blocked at the
// permission prompt.
func startAtQuestion(t *testing.T, bin, tool string, input map[string]string) *questionRun {
	t.Helper()
	home := t.TempDir()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(root, "acme-api")
	require.NoError(t, os.Mkdir(work, 0o700))
	api := newMessagesAPI(t, tool, input)
	key := "sk-ant-test-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	a, err := New("claude-code", schema.Harness{Command: bin, Env: map[string]string{
		"CLAUDE_CONFIG_DIR": filepath.Join(home, "config"),
		// Else the first start clones the official plugin marketplace
		// into the config dir, in the background.
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
		"ANTHROPIC_BASE_URL": api.URL,
		"ANTHROPIC_API_KEY":  key,
	}})
	require.NoError(t, err)
	require.NoError(t, Provision(a, work))
	// The key's approval ("Do you want to use this API key?" answered
	// Yes): the CLI keeps the last 20 characters of approved keys. A
	// person's config has it once they answered; loopd never writes it.
	global, _, err := a.(*claudeCode).claudeConfigFiles(work)
	require.NoError(t, err)
	require.NoError(t, mergeSettings(global, true, setting{[]string{"customApiKeyResponses", "approved"}, []string{key[len(key)-20:]}}))

	x := tmux.NewExec(tmuxtest.Socket(t, "question"), slog.New(slog.DiscardHandler))
	x.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"}
	for k, v := range a.Env() {
		x.Env = append(x.Env, k+"="+v)
	}
	owner := tmux.NewOwner(home)
	require.NoError(t, x.EnsureServer(t.Context(), tmux.ServerOptions{Owner: owner}))
	pane, _, err := x.NewSession(t.Context(), tmux.NewSession{Name: "loop-q", Dir: work, Argv: a.FreshArgv(uuid.NewString(), "make the marker file"),
		Width: 100, Height: 30, Owner: owner.ID})
	require.NoError(t, err)
	q := &questionRun{api: api, adapter: a, tmux: x, guard: tmux.Guard{Owner: owner.ID, Commands: a.ProcessNames()}, target: pane, work: work}
	t.Cleanup(func() {
		requests, _, _ := api.seen()
		t.Logf("requests:\n%s", strings.Join(requests, "\n"))
	})
	require.Eventually(t, func() bool {
		s := q.screen(t)
		screen, reason := a.Screen(s)
		return screen == ScreenBlocked && reason == BlockPermission
	}, questionCLIWait, questionCLITick, "no permission prompt:\n%s", q.screen(t))
	return q
}

// screen is the pane's visible screen as loopd captures it.
func (q *questionRun) screen(t *testing.T) string {
	s, err := q.tmux.CapturePane(t.Context(), q.target, false)
	require.NoError(t, err)
	return s
}

// waitResult waits until the API got the tool's result, and checks its
// is_error.
func (q *questionRun) waitResult(t *testing.T, isError bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, results, _ := q.api.seen()
		return len(results) > 0
	}, questionCLIWait, questionCLITick, "no tool result:\n%s", q.screen(t))
	_, results, _ := q.api.seen()
	require.Len(t, results, 1)
	assert.Equal(t, isError, results[0].IsError, "%v", results[0].Content)
}

// noThenWords checks the effect of "No": the tool did not run, the input
// box is back, and words pasted there as loopd pastes an event go to the
// model with the tool's rejection.
func (q *questionRun) noThenWords(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		screen, _ := q.adapter.Screen(q.screen(t))
		return screen == ScreenReady
	}, questionCLIWait, questionCLITick, "no input box after No:\n%s", q.screen(t))
	assert.Contains(t, q.screen(t), "What should Claude do instead?")
	words := "use the name y-" + uuid.NewString()
	require.NoError(t, q.tmux.Paste(t.Context(), q.target, q.guard, words))
	require.Eventually(t, func() bool {
		screen, _ := q.adapter.Screen(q.screen(t))
		return screen == ScreenDraft
	}, questionCLIWait, questionCLITick, "the words do not show:\n%s", q.screen(t))
	require.NoError(t, q.tmux.SendKeys(t.Context(), q.target, q.guard, "Enter"))
	q.waitResult(t, true)
	_, _, prompts := q.api.seen()
	assert.Contains(t, prompts, words)
	_, err := os.Stat(path)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the tool did not run")
}
