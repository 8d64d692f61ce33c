package harness

import (
	"strconv"
	"strings"
)

// Question is a question a CLI's screen asks a person, with its choices,
// as its adapter reads it (Asker): a tool's permission prompt. Every text
// is the screen's own, untrusted: the agent chose the command a prompt
// quotes.
type Question struct {
	// Context is what the prompt shows above its title (the tool and
	// its command, "Bash command", "   make test"), trailing spaces
	// trimmed, empty lines dropped.
	Context []string
	// Title is the question itself: "Do you want to proceed?".
	Title string
	// Choices are the choices' labels in their order: choice n is
	// Choices[n-1].
	Choices []string
	// Differently is the choice after which the CLI takes the person's
	// own words (Claude Code 2.1.197's "No", which asks "What should
	// Claude do instead?"), 0 when none does.
	Differently int
}

// Lines returns what the screen must still show for q to be the question
// on it: its title and each choice as the CLI draws it, "N. Label" (the
// cursor's mark left out, as it moves): the guard of an answer
// (tmux.Guard.Shows).
func (q Question) Lines() []string {
	out := []string{q.Title}
	for i, c := range q.Choices {
		out = append(out, strconv.Itoa(i+1)+". "+c)
	}
	return out
}

// Asker is implemented by adapters that can read a question off their
// CLI's screen and answer it with keys.
type Asker interface {
	// Question returns the question the screen text asks, and false when
	// it asks none loopd can read: a dialog other than a question, or one
	// with no choices seen.
	Question(text string) (Question, bool)
	// AnswerKeys returns the tmux keys that pick choice (1-based) of q;
	// nil for a choice q does not have.
	AnswerKeys(q Question, choice int) []string
}

// maxQuestionContext bounds the lines of context a Question keeps: a
// prompt that quotes a long command or diff is quoted in part.
const maxQuestionContext = 12

// claudeQuestionTitles start the title line of Claude Code's tool
// permission prompts (claudeDialogs' BlockPermission markers).
var claudeQuestionTitles = []string{"Do you want to proceed?", "Do you want to make this edit to", "Do you want to create"}

// claudeDifferently starts the label of the choice of Claude Code's
// permission prompt that rejects the tool and returns to the input box for
// the person's words, as older versions and the fake CLI draw it.
const claudeDifferently = "No, and tell Claude what to do differently"

// claudeNo is that choice's whole label on 2.1.197 (measured: it rejects
// the tool, shows "Interrupted · What should Claude do instead?" and
// returns to the input box; the next prompt goes to the model with the
// tool's rejection, an is_error tool_result).
const claudeNo = "No"

// Question reads Claude Code's tool permission prompt (Blocked
// BlockPermission):
//
//	──────────────────────────
//	 Bash command
//
//	   touch x-054df4de
//	   Create the marker file
//
//	 Do you want to proceed?
//	 ❯ 1. Yes
//	   2. Yes, and always allow access to acme-api/ from this project
//	   3. No
//
//	 Esc to cancel · Tab to amend · ctrl+e to explain
//
// The context is the lines between the rule above the title and the
// title; the choices are the numbered lines right after it, numbered 1, 2,
// … in order; the choice "No" (claudeNo, or claudeDifferently's) is
// Differently. A screen with no such prompt, or with no choice after its
// title, asks nothing. Measured on 2.1.197: the captures
// testdata/claude-2.1.197/blocked-permission-*.txt.
func (c *claudeCode) Question(text string) (Question, bool) {
	if c.Blocked(text) != BlockPermission {
		return Question{}, false
	}
	lines := strings.Split(text, "\n")
	title := -1
	for i := len(lines) - 1; i >= 0 && title < 0; i-- {
		t := strings.TrimSpace(lines[i])
		for _, p := range claudeQuestionTitles {
			if strings.HasPrefix(t, p) {
				title = i
				break
			}
		}
	}
	if title < 0 {
		return Question{}, false
	}
	q := Question{Title: strings.TrimSpace(lines[title])}
	for _, line := range lines[title+1:] {
		m := claudeMenuOption.FindStringSubmatch(line)
		if m == nil {
			if strings.TrimSpace(line) == "" && len(q.Choices) == 0 {
				continue
			}
			break
		}
		if m[2] != strconv.Itoa(len(q.Choices)+1) {
			break
		}
		label := m[3]
		if label == claudeNo || strings.HasPrefix(label, claudeDifferently) {
			q.Differently = len(q.Choices) + 1
		}
		q.Choices = append(q.Choices, label)
	}
	if len(q.Choices) == 0 {
		return Question{}, false
	}
	start := title
	for start > 0 && !strings.HasPrefix(strings.TrimSpace(lines[start-1]), "─") {
		start--
	}
	for _, line := range lines[start:title] {
		if l := strings.TrimRight(line, " \t\u00a0"); strings.TrimSpace(l) != "" {
			q.Context = append(q.Context, l)
		}
	}
	if len(q.Context) > maxQuestionContext {
		q.Context = q.Context[len(q.Context)-maxQuestionContext:]
	}
	return q, true
}

// AnswerKeys picks choice by its number, which Claude Code's select
// dialogs take as the choice itself (no Enter after it: an Enter would
// reach whatever the CLI shows next, another prompt's default included).
// Measured on 2.1.197: the digit alone closes the permission prompt, "1"
// runs the tool and "3" ("No") rejects it.
func (c *claudeCode) AnswerKeys(q Question, choice int) []string {
	if choice < 1 || choice > len(q.Choices) || choice > 9 {
		return nil
	}
	return []string{strconv.Itoa(choice)}
}
