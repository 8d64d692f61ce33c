package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The screens of Claude Code 2.1.197 that wait for a person, as
// FAKECLAUDE_SCREEN names them: each is shown at start, before the
// positional prompt is submitted, until Enter. Their texts are the CLI's
// own (its strings): docs/design.md, "Screens that wait for a human".
var screens = map[string][]string{
	// The resume-return chooser (2.1.x, behind a server flag, for an old
	// and long conversation; anthropics/claude-code#62811): shown on a
	// resume only, and never when the global config has
	// resumeReturnDismissed or the conversation is younger than
	// CLAUDE_CODE_RESUME_THRESHOLD_MINUTES (default 70).
	"resume_summary": {
		" This session is 3d 4h old and 142.3k tokens.", "",
		" Resuming the full session will consume a substantial portion of your usage limits. We recommend resuming from a summary.", "",
		" ❯ 1. Resume from summary (recommended)",
		"   2. Resume full session as-is",
		"   3. Don't ask me again", "",
		" Enter to confirm · Esc to cancel",
	},
	"cost_threshold": {
		" You've spent $5 on the Anthropic API this session.", "",
		" Learn more about how to monitor your spending:",
		" https://code.claude.com/docs/en/costs", "",
		" ❯ 1. Got it, thanks!", "",
		" Enter to confirm · Esc to cancel",
	},
	"policy_update": {
		" Updates to Consumer Terms and Policies", "",
		" An update to our Consumer Terms and Privacy Policy will take effect soon.", "",
		" ❯ 1. Accept",
		"   2. Not now", "",
		" Enter to confirm · Esc to cancel",
	},
	"mcp_server": {
		" New MCP server found in this project: github", "",
		" MCP servers may execute code or access system resources. All tool calls require approval.", "",
		" ❯ 1. Use this and all future MCP servers in this project",
		"   2. Use this MCP server",
		"   3. Continue without using this MCP server", "",
		" Enter to confirm · Esc to cancel",
	},
	"mcp_servers": {
		" 2 new MCP servers found in this project",
		" Select any you wish to enable.", "",
		" ❯ ◉ github",
		"   ◉ filesystem", "",
		" Space to select · Enter to confirm · Esc to reject all",
	},
	"external_imports": {
		" Allow external CLAUDE.md file imports?", "",
		" This project's CLAUDE.md imports files outside the current working directory.", "",
		" ❯ 1. Yes, allow external imports",
		"   2. No, disable external imports", "",
		" Enter to confirm · Esc to cancel",
	},
	// The four below are in internal/harness/testdata/claude-2.1.197 as
	// real captures, or in the CLI's strings.
	"bypass_consent": {
		"  WARNING: Claude Code running in Bypass Permissions mode", "",
		"  In Bypass Permissions mode, Claude Code will not ask for your approval before running",
		"  potentially dangerous commands.", "",
		"  ❯ 1. No, exit",
		"    2. Yes, I accept", "",
		"  Enter to confirm · Esc to cancel",
	},
	"api_key": {
		"  Detected a custom API key in your environment", "",
		"  ANTHROPIC_API_KEY: sk-ant-...XXXXXXXXXXXX", "",
		"  Do you want to use this API key?", "",
		"    1. Yes",
		"  ❯ 2. No (recommended)", "",
		"  Enter to confirm · Esc to cancel",
	},
	"onboarding": {
		" Let's get started.", "",
		" Choose the text style that looks best with your terminal", "",
		" ❯ 1. Dark mode",
		"   2. Light mode", "",
		" Enter to confirm",
	},
}

// screenExits are the screens whose default choice, taken with Enter, ends
// the CLI, with its exit status: the bypass consent's "No, exit".
var screenExits = map[string]int{"bypass_consent": 1}

// connectivityFailure is what Claude Code prints when its preflight cannot
// reach its service, before it exits 1 (FAKECLAUDE_SCREEN=connectivity).
const connectivityFailure = "Unable to connect to Anthropic services\n\nFailed to connect to api.anthropic.com: ERR_BAD_REQUEST\n" +
	"Please check your internet connection and network settings.\n"

// showsScreen reports whether the dialog FAKECLAUDE_SCREEN names is shown
// at this start of a conversation, resumed or not.
func (u *tui) showsScreen() bool {
	name := u.knobs.screen
	if name == "" {
		return false
	}
	if name != "resume_summary" {
		return true
	}
	return u.inv.resume && !resumeReturnDismissed() && u.conversationAge() >= resumeThreshold()
}

// resumeReturnDismissed reports whether the global config
// (<CLAUDE_CONFIG_DIR or ~/.claude>/.claude.json, or ~/.claude.json) says
// resumeReturnDismissed, as the CLI reads it before the chooser.
func resumeReturnDismissed() bool {
	var paths []string
	if dir := os.Getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		paths = append(paths, filepath.Join(dir, ".claude.json"))
	} else if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".claude.json"))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var c struct {
			ResumeReturnDismissed bool `json:"resumeReturnDismissed"`
		}
		if json.Unmarshal(b, &c) == nil && c.ResumeReturnDismissed {
			return true
		}
	}
	return false
}

// resumeThreshold is CLAUDE_CODE_RESUME_THRESHOLD_MINUTES, 70 by default.
func resumeThreshold() time.Duration {
	minutes := 70.0
	if v, err := strconv.ParseFloat(os.Getenv("CLAUDE_CODE_RESUME_THRESHOLD_MINUTES"), 64); err == nil {
		minutes = v
	}
	return time.Duration(minutes * float64(time.Minute))
}

// conversationAge is how long ago the resumed conversation was last
// written (its transcript's mtime).
func (u *tui) conversationAge() time.Duration {
	info, err := os.Stat(u.store.path(u.inv.resumeValue))
	if err != nil {
		return 0
	}
	return time.Since(info.ModTime())
}

// backgroundAgentRefusal is Claude Code's refusal to resume a conversation
// that runs as a background agent (its strings: interactive and print
// mode print it and exit 1).
func backgroundAgentRefusal(id string) string {
	return fmt.Sprintf("Error: Session %s is currently running as a background agent (bg-%s). "+
		"Use `claude agents` to find and attach to it, or add --fork-session to branch off a copy.\n", id, strings.SplitN(id, "-", 2)[0])
}

// once reports whether the one-shot knob name applies to conversation id
// at this start: always without FAKECLAUDE_ONCE_DIR; with it, at the first
// start that claims <dir>/<name>-<id> only.
func (k knobs) once(name, id string) bool {
	if k.onceDir == "" {
		return true
	}
	f, err := os.OpenFile(filepath.Join(k.onceDir, name+"-"+id), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false
	}
	return f.Close() == nil
}
