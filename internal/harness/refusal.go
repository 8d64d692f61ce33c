package harness

import "strings"

// Refusal is a CLI's own word that it will not resume a conversation: the
// only proof loopd takes that a conversation cannot be resumed
// (docs/design.md, "Choosing resume or fresh"). A death that says nothing
// of the kind (a signal, an OOM kill, a crash, a lost server, a timeout)
// is a crash of the same conversation, which is resumed again.
type Refusal string

// The refusals.
const (
	// RefusalNotResumable: the CLI cannot find or load the conversation
	// (Claude Code's "No conversation found with session ID: <id>",
	// Codex's "No saved session found with ID <id>", Gemini's exit 42 and
	// "Error resuming session: …"). A new conversation replaces it.
	RefusalNotResumable Refusal = "not_resumable"
	// RefusalInUse: the conversation runs elsewhere (Claude Code's
	// "Session <id> is currently running as a background agent"). It is
	// not lost and must not be replaced: the item waits for a human.
	RefusalInUse Refusal = "conversation_in_use"
)

// ResumeRefuser is implemented by adapters that know how their CLI
// refuses a resume.
type ResumeRefuser interface {
	// ResumeRefusal returns what text, the screen or output of a resume
	// of conversation id, says of it: its last words after it exited with
	// status, or its live screen (status -1); "" when it refuses nothing.
	ResumeRefusal(text string, status int, id string) Refusal
}

// ResumeRefusal is a's ResumeRefuser answer, "" for an adapter that knows
// no refusal: nothing it shows abandons a conversation.
func ResumeRefusal(a Adapter, text string, status int, id string) Refusal {
	if r, ok := a.(ResumeRefuser); ok && id != "" {
		return r.ResumeRefusal(text, status, id)
	}
	return ""
}

// refusalText is one line of an adapter's refusal table: the text that
// identifies it, where "{id}" stands for the conversation id.
type refusalText struct {
	text    string
	refusal Refusal
}

// refusedIn returns the refusal of the first line of table that text
// holds, for conversation id.
func refusedIn(table []refusalText, text, id string) Refusal {
	for _, r := range table {
		if strings.Contains(text, strings.ReplaceAll(r.text, "{id}", id)) {
			return r.refusal
		}
	}
	return ""
}

// claudeRefusals are Claude Code 2.1.197's refusals of a resume, from the
// CLI's own strings: a missing conversation (measured, exit 1 in 0.6 s),
// and a conversation that runs as a background agent (interactive and
// print mode; the interactive picker says it without the id).
var claudeRefusals = []refusalText{
	{"No conversation found with session ID: {id}", RefusalNotResumable},
	{"Session {id} is currently running as a background agent", RefusalInUse},
	{"That session is still running as a background agent.", RefusalInUse},
}

// ResumeRefusal reads Claude Code's refusals (claudeRefusals).
func (c *claudeCode) ResumeRefusal(text string, _ int, id string) Refusal {
	return refusedIn(claudeRefusals, text, id)
}

// codexRefusals are Codex 0.171.0's refusals of a resume (its strings;
// measured with the credential-free provider): the TUI's missing session
// (exit 1), exec's missing rollout, and a thread made under another model
// provider, which this config can never resume.
var codexRefusals = []refusalText{
	{"No saved session found with ID {id}", RefusalNotResumable},
	{"no rollout found for thread id {id}", RefusalNotResumable},
	{"Cannot change this thread's model provider from", RefusalNotResumable},
}

// ResumeRefusal reads Codex's refusals (codexRefusals).
func (c *codex) ResumeRefusal(text string, _ int, id string) Refusal {
	return refusedIn(codexRefusals, text, id)
}

// geminiRefusals are Gemini 0.61.0's refusals of a resume (its source):
// a project with no sessions, and an id it does not know. The first is
// also what a CLI printing it in a loop shows (gemini-cli#14941).
var geminiRefusals = []refusalText{
	{"No previous sessions found for this project.", RefusalNotResumable},
	{`Invalid session identifier "{id}"`, RefusalNotResumable},
	{"Error resuming session:", RefusalNotResumable},
}

// ResumeRefusal reads Gemini's refusals (geminiRefusals), and its exit
// status 42 after a resume: the conversation could not be resumed
// (CauseSessionError).
func (g *gemini) ResumeRefusal(text string, status int, id string) Refusal {
	if status == GeminiExitInputError {
		return RefusalNotResumable
	}
	return refusedIn(geminiRefusals, text, id)
}
