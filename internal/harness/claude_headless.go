package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
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

// CheckHeadlessArgs is nil: the headless form takes the TUI's flags.
func (c *claudeCode) CheckHeadlessArgs() error { return nil }

// HeadlessSessionID returns the session_id of the last JSON line of output
// that names one: the result object claude -p --output-format json prints
// at the end ({"type":"result", …, "session_id": …}), or, of a run cut
// short, the newest line of its partial output that names one (the
// stream-json form's lines do); "" when there is none. Public reports of
// older versions say that -p --resume wrote each turn under a new id: the
// output names the one the turn went into.
func (c *claudeCode) HeadlessSessionID(output []byte) string {
	lines := bytes.Split(output, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(line, &r) == nil && r.SessionID != "" {
			return r.SessionID
		}
	}
	return ""
}

// TurnConversation returns the conversation of the physical cwd whose
// transcript, written at or after since, holds boot in a user line, the
// newest of them: the conversation a headless turn went into when its
// output names none (a run stopped at its timeout, of a CLI that writes a
// resumed turn under a new id). "" when no transcript holds it.
func (c *claudeCode) TurnConversation(cwd string, since time.Time, boot desired.Frame) (string, error) {
	dir, err := physicalDir(cwd)
	if err != nil {
		return "", fmt.Errorf("turn conversation in %s: %w", cwd, err)
	}
	config, err := c.configDir(dir)
	if err != nil {
		return "", fmt.Errorf("turn conversation in %s: %w", cwd, err)
	}
	paths, err := filepath.Glob(filepath.Join(config, "projects", projectDirName(dir), "*.jsonl"))
	if err != nil {
		return "", fmt.Errorf("turn conversation in %s: %w", cwd, err)
	}
	best, bestAt := "", time.Time{}
	for _, path := range paths {
		id := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		info, err := os.Stat(path)
		if err != nil || !c.ValidSessionID(id) || info.ModTime().Before(since) || !info.ModTime().After(bestAt) {
			continue
		}
		found, err := c.TranscriptFrames(Transcript{Known: true, Exists: true, Path: path}, []desired.Frame{boot})
		if err != nil {
			return "", fmt.Errorf("turn conversation in %s: %w", cwd, err)
		}
		if found[boot.ID].Whole {
			best, bestAt = id, info.ModTime()
		}
	}
	return best, nil
}
