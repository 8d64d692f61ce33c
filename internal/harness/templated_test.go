package harness

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

func TestCustomArgv(t *testing.T) {
	cfg := schema.Harness{
		Command:    "agent",
		ExtraArgs:  []string{"--quiet"},
		FreshArgs:  []string{"--new", "{{.SessionID}}", "--", "{{.Prompt}}"},
		ResumeArgs: []string{"resume", "--id={{.SessionID}}", "{{.Prompt}}"},
	}
	tests := []struct {
		name       string
		id, prompt string
		wantFresh  []string
		wantResume []string
	}{
		{
			name: "rendered", id: "abc-1", prompt: "fix it",
			wantFresh:  []string{"agent", "--quiet", "--new", "abc-1", "--", "fix it"},
			wantResume: []string{"agent", "--quiet", "resume", "--id=abc-1", "fix it"},
		},
		{
			name: "prompt_with_dash_and_braces_not_reinterpreted", id: "abc-1", prompt: "-x {{.SessionID}}",
			wantFresh:  []string{"agent", "--quiet", "--new", "abc-1", "--", "-x {{.SessionID}}"},
			wantResume: []string{"agent", "--quiet", "resume", "--id=abc-1", "-x {{.SessionID}}"},
		},
		{
			name: "empty_prompt_dropped", id: "abc-1",
			wantFresh:  []string{"agent", "--quiet", "--new", "abc-1", "--"},
			wantResume: []string{"agent", "--quiet", "resume", "--id=abc-1"},
		},
	}
	a, err := New("mine", schema.Harness{Adapter: AdapterCustom, Command: cfg.Command, ExtraArgs: cfg.ExtraArgs, FreshArgs: cfg.FreshArgs, ResumeArgs: cfg.ResumeArgs})
	require.NoError(t, err)
	require.True(t, a.SupportsResume())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantFresh, a.FreshArgv(tt.id, tt.prompt))
			assert.Equal(t, tt.wantResume, a.ResumeArgv(tt.id, tt.prompt))
		})
	}
}

func TestCustomWithoutResume(t *testing.T) {
	t.Setenv("AGENT_KEY", "k")
	t.Setenv("OTHER_TOKEN", "x")
	t.Setenv("CLAUDE_CONFIG_DIR", "/c")
	a, err := New("custom", schema.Harness{Command: "agent", FreshArgs: []string{"{{.Prompt}}"}, Env: map[string]string{"K": "v"},
		PassEnv: []string{"AGENT_KEY"}})
	require.NoError(t, err)

	assert.False(t, a.SupportsResume())
	assert.Nil(t, a.ResumeArgv("id", "p"))
	assert.Equal(t, map[string]string{"K": "v", "AGENT_KEY": "k"}, a.Env(), "passEnv only; CLAUDE_CONFIG_DIR is claude-code's")
	tr, err := a.Transcript(t.TempDir(), "id")
	require.NoError(t, err)
	assert.Equal(t, Transcript{}, tr)
}

func TestCustomTemplateFailsForOnePrompt(t *testing.T) {
	a, err := New("custom", schema.Harness{Command: "agent", FreshArgs: []string{`{{slice .Prompt 0 5}}`}})
	require.NoError(t, err)

	assert.Equal(t, []string{"agent", "long "}, a.FreshArgv("id", "long prompt"))
	assert.Nil(t, a.FreshArgv("id", "abc"))
}

func TestTemplatedValidSessionID(t *testing.T) {
	for _, adapter := range []string{AdapterCustom, AdapterCursor} {
		a, err := New("h", schema.Harness{Adapter: adapter, Command: "agent", FreshArgs: freshFor(adapter)})
		require.NoError(t, err)
		assert.True(t, a.ValidSessionID("chat_42.v1"), adapter)
		assert.False(t, a.ValidSessionID("-x"), adapter)
		assert.False(t, a.ValidSessionID("a/b"), adapter)
		assert.False(t, a.ValidSessionID(""), adapter)
	}
}

// freshFor gives the custom adapter the freshArgs it needs; cursor takes
// none.
func freshFor(adapter string) []string {
	if adapter == AdapterCustom {
		return []string{"{{.Prompt}}"}
	}
	return nil
}

func TestCursor(t *testing.T) {
	a, err := New("cursor", schema.Harness{Command: "cursor-agent", ExtraArgs: []string{"--model", "gpt-5"}})
	require.NoError(t, err)

	assert.False(t, a.SupportsResume())
	assert.Equal(t, []string{"cursor-agent", "--model", "gpt-5", "refactor auth"}, a.FreshArgv(testID, "refactor auth"))
	assert.Equal(t, []string{"cursor-agent", "--model", "gpt-5"}, a.FreshArgv(testID, ""))
	assert.Nil(t, a.ResumeArgv(testID, "x"))
	tr, err := a.Transcript(t.TempDir(), testID)
	require.NoError(t, err)
	assert.False(t, tr.Known)
}

func TestTemplatedScreen(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		text    string
		want    Screen
	}{
		{name: "default_blank_is_busy", text: " \n\n  \n", want: ScreenBusy},
		{name: "default_any_text_is_ready", text: "\n> \n", want: ScreenReady},
		{name: "pattern_matches", pattern: `(?m)^> $`, text: "hello\n> \n", want: ScreenReady},
		{name: "pattern_misses", pattern: `(?m)^> $`, text: "working…\n", want: ScreenBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New("custom", schema.Harness{Command: "agent", FreshArgs: []string{"x"}, ReadyPattern: tt.pattern})
			require.NoError(t, err)
			got, reason := a.Screen(tt.text)
			assert.Equal(t, tt.want, got)
			assert.Empty(t, reason)
		})
	}
}
