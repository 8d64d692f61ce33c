package harness

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClaudeQuestion(t *testing.T) {
	c := claudeWithEnv(t, nil).(Asker)
	bash := strings.Join([]string{"⏺ I will run the tests.", strings.Repeat("─", 40), " Bash command", "", "   make test", "   Run the tests", "",
		" Do you want to proceed?", " ❯ 1. Yes", "   2. Yes, and don't ask again for make commands in /w", "   3. No, and tell Claude what to do differently (esc)", "",
		" Esc to cancel"}, "\n")
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
		{"edit_without_rule", strings.Join([]string{" Edit file", " Do you want to make this edit to main.go?", " ❯ 1. Yes", "   2. No"}, "\n"),
			Question{Context: []string{" Edit file"}, Title: "Do you want to make this edit to main.go?", Choices: []string{"Yes", "No"}}, true},
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
