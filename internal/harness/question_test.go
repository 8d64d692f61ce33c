package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClaudeQuestion(t *testing.T) {
	c := claudeWithEnv(t, nil).(Asker)
	bash := strings.Join([]string{"⏺ I will run the tests.", strings.Repeat("─", 40), " Bash command", "", "   make test", "   Run the tests", "",
		" Do you want to proceed?", " ❯ 1. Yes", "   2. Yes, and don't ask again for make commands in /w", "   3. No, and tell Claude what to do differently (esc)", "",
		" Esc to cancel"}, "\n")
	captured := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "claude-2.1.197", "blocked-permission-"+name+".txt"))
		require.NoError(t, err)
		return string(b)
	}
	dashes := strings.Repeat("╌", 100)
	for _, tc := range []struct {
		name string
		text string
		want Question
		ok   bool
	}{
		{"bash_permission", bash, Question{Context: []string{" Bash command", "   make test", "   Run the tests"}, Title: "Do you want to proceed?",
			Choices: []string{"Yes", "Yes, and don't ask again for make commands in /w", "No, and tell Claude what to do differently (esc)"}, Differently: 3}, true},
		{"cursor_moved", strings.Replace(strings.Replace(bash, " ❯ 1.", "   1.", 1), "   2. Yes", " ❯ 2. Yes", 1),
			Question{Context: []string{" Bash command", "   make test", "   Run the tests"}, Title: "Do you want to proceed?",
				Choices: []string{"Yes", "Yes, and don't ask again for make commands in /w", "No, and tell Claude what to do differently (esc)"}, Differently: 3}, true},
		// The real CLI's prompts (2.1.197): its "No" returns to the
		// input box for the person's words.
		{"captured_bash", captured("bash"), Question{Context: []string{" Bash command", "   touch x-054df4de-6964-4129-be2c-a8acdf40bd19", "   Create the marker file"},
			Title: "Do you want to proceed?", Choices: []string{"Yes", "Yes, and always allow access to acme-api/ from this project", "No"}, Differently: 3}, true},
		{"captured_write", captured("write"), Question{Context: []string{" Create file", " x-ee0778a7-117d-431b-81ea-2bc1022726dd", dashes, "  1 hello", dashes},
			Title: "Do you want to create x-ee0778a7-117d-431b-81ea-2bc1022726dd?", Choices: []string{"Yes", "Yes, allow all edits during this session (shift+tab)", "No"}, Differently: 3}, true},
		{"edit_without_rule", strings.Join([]string{" Edit file", " Do you want to make this edit to main.go?", " ❯ 1. Yes", "   2. No"}, "\n"),
			Question{Context: []string{" Edit file"}, Title: "Do you want to make this edit to main.go?", Choices: []string{"Yes", "No"}, Differently: 2}, true},
		{"limit_menu_is_no_question", menuScreen(1), Question{}, false},
		{"chat_is_no_question", chatScreen("❯ what does the permission dialog say?", "  ⎿  It says: Do you want to proceed? 1. Yes"), Question{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.Question(tc.text)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
	q, _ := c.Question(bash)
	assert.Equal(t, []string{"Do you want to proceed?", "1. Yes", "2. Yes, and don't ask again for make commands in /w",
		"3. No, and tell Claude what to do differently (esc)"}, q.Lines())
	assert.Equal(t, []string{"2"}, c.AnswerKeys(q, 2))
	assert.Nil(t, c.AnswerKeys(q, 4))
	assert.Nil(t, c.AnswerKeys(q, 0))
}
