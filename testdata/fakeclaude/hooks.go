package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
)

// Settings hooks, as Claude Code runs them: --settings takes a JSON text or
// the name of a JSON file; each command of hooks.SessionStart runs through
// sh -c in the session's cwd with the hook input as JSON on stdin, when the
// session starts ("startup") or is resumed ("resume").

type hookSettings struct {
	Hooks map[string][]struct {
		Hooks []struct {
			Type    string `json:"type"`
			Command string `json:"command"`
		} `json:"hooks"`
	} `json:"hooks"`
}

// runSessionStartHooks runs the SessionStart commands of settings for the
// session id; failures are printed to stderr, as the real CLI shows them,
// and never stop the session.
func runSessionStartHooks(settings, id, transcript, source string) {
	if settings == "" {
		return
	}
	data := []byte(settings)
	if !strings.HasPrefix(strings.TrimSpace(settings), "{") {
		var err error
		if data, err = os.ReadFile(settings); err != nil {
			os.Stderr.WriteString("fakeclaude: settings: " + err.Error() + "\n")
			return
		}
	}
	var hs hookSettings
	if err := json.Unmarshal(data, &hs); err != nil {
		os.Stderr.WriteString("fakeclaude: settings: " + err.Error() + "\n")
		return
	}
	cwd, _ := os.Getwd()
	input, _ := json.Marshal(map[string]string{
		"session_id": id, "transcript_path": transcript, "cwd": cwd,
		"hook_event_name": "SessionStart", "source": source,
	})
	for _, matcher := range hs.Hooks["SessionStart"] {
		for _, h := range matcher.Hooks {
			if h.Type != "command" {
				continue
			}
			cmd := exec.Command("sh", "-c", h.Command)
			cmd.Stdin = strings.NewReader(string(input))
			if out, err := cmd.CombinedOutput(); err != nil {
				os.Stderr.WriteString("fakeclaude: SessionStart hook: " + err.Error() + ": " + string(out) + "\n")
			}
		}
	}
}
