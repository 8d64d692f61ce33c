package harness

import (
	"bytes"
	"encoding/json"

	"github.com/loopd/loopd/schema"
)

// HeadlessArgv is [command -p --session-id id [--setting-sources user
// --strict-mcp-config] extraArgs... --output-format json -- prompt] for a
// new conversation, and the same with --resume id for one that goes on
// (Claude Code 2.1.197, docs/reference/harness-cli-facts.md "Headless
// turns": both turns go into the one transcript <id>.jsonl). The
// workdir's own settings are off as for the TUI (claudeOwnSettings): -p
// skips the workspace trust dialog, so without the flags it would run
// them in any workdir (measured). The SessionStart hook is left out: a
// headless turn is judged by its transcript when it ends. --output-format json comes after extraArgs, so
// that its result object, which names the conversation the turn went into,
// is what the run's log holds (HeadlessSessionID). A prompt over
// schema.DefaultMaxBootPrompt bytes goes on stdin instead of argv, where
// claude -p reads it when no prompt argument is given.
func (c *claudeCode) HeadlessArgv(id, prompt string, resume bool) ([]string, []byte) {
	flag := "--session-id"
	if resume {
		flag = "--resume"
	}
	argv := append([]string{c.command, "-p", flag, id}, c.ownSettings()...)
	argv = append(argv, c.extra...)
	argv = append(argv, "--output-format", "json")
	if len(prompt) > schema.DefaultMaxBootPrompt {
		return argv, []byte(prompt)
	}
	return append(argv, "--", prompt), nil
}

// HeadlessSessionID returns the session_id of the last result object in
// output (claude -p --output-format json prints one {"type":"result", …,
// "session_id": …} line on stdout), "" when there is none. Public reports
// of older versions say that -p --resume wrote each turn under a new id:
// the result names the one the turn went into.
// CheckHeadlessArgs is nil: the headless form takes the TUI's flags.
func (c *claudeCode) CheckHeadlessArgs() error { return nil }

func (c *claudeCode) HeadlessSessionID(output []byte) string {
	lines := bytes.Split(output, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r struct {
			Type      string `json:"type"`
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(line, &r) == nil && r.Type == "result" && r.SessionID != "" {
			return r.SessionID
		}
	}
	return ""
}
