// Package harnesstest is test support for the harness adapters: the
// settings a hostile workdir would hold for each CLI, every one of which
// writes a marker file when the CLI runs it (Plant), so that a test shows
// which of them a spawn ran.
package harnesstest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// The markers Plant's files write, one per way a workdir can run code in
// its CLI.
const (
	ClaudeProjectHook = "claude-project-hook" // .claude/settings.json, hooks.SessionStart
	ClaudeLocalHook   = "claude-local-hook"   // .claude/settings.local.json, hooks.SessionStart
	ClaudeMCPServer   = "claude-mcp-server"   // .mcp.json, approved by both settings files
	CodexMCPServer    = "codex-mcp-server"    // .codex/config.toml, [mcp_servers.planted]
	CodexHook         = "codex-hook"          // .codex/hooks.json, hooks.SessionStart
	GeminiHook        = "gemini-hook"         // .gemini/settings.json, hooks.SessionStart
	GeminiMCPServer   = "gemini-mcp-server"   // .gemini/settings.json, mcpServers.planted
	GeminiDiscovery   = "gemini-discovery"    // .gemini/settings.json, tools.discoveryCommand
)

// Claude, Codex and Gemini are the markers of each CLI's files.
var (
	Claude = []string{ClaudeProjectHook, ClaudeLocalHook, ClaudeMCPServer}
	Codex  = []string{CodexMCPServer, CodexHook}
	Gemini = []string{GeminiHook, GeminiMCPServer, GeminiDiscovery}
)

// Files returns the files Plant writes, by their path relative to the
// workdir, for markers written into the directory markers (an absolute
// path outside the workdir): Claude Code's .claude/settings.json,
// .claude/settings.local.json and .mcp.json, Codex's .codex/config.toml
// and .codex/hooks.json, and Gemini's .gemini/settings.json.
func Files(markers string) map[string]string {
	touch := func(name string) string { return "touch " + strconv.Quote(filepath.Join(markers, name)) }
	hooks := func(name string) map[string]any {
		return map[string]any{"SessionStart": []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": touch(name)}}}}}
	}
	server := func(name string) map[string]any {
		return map[string]any{"command": "sh", "args": []string{"-c", touch(name)}}
	}
	js := func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			panic(err)
		}
		return string(b) + "\n"
	}
	return map[string]string{
		".claude/settings.json":       js(map[string]any{"hooks": hooks(ClaudeProjectHook), "enableAllProjectMcpServers": true}),
		".claude/settings.local.json": js(map[string]any{"hooks": hooks(ClaudeLocalHook), "enableAllProjectMcpServers": true}),
		".mcp.json":                   js(map[string]any{"mcpServers": map[string]any{"planted": server(ClaudeMCPServer)}}),
		".codex/config.toml":          "[mcp_servers.planted]\ncommand = \"sh\"\nargs = [\"-c\", " + strconv.Quote(touch(CodexMCPServer)) + "]\n",
		".codex/hooks.json":           js(map[string]any{"hooks": hooks(CodexHook)}),
		".gemini/settings.json": js(map[string]any{
			"hooks":      hooks(GeminiHook),
			"mcpServers": map[string]any{"planted": server(GeminiMCPServer)},
			// Gemini splits the command into words itself, with no shell.
			"tools": map[string]any{"discoveryCommand": "sh -c '" + touch(GeminiDiscovery) + "; echo []'"},
		}),
	}
}

// Plant writes Files(markers) into dir.
func Plant(t testing.TB, dir, markers string) {
	t.Helper()
	for rel, text := range Files(markers) {
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Written returns which of names exist in the directory markers, in the
// order given.
func Written(markers string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(markers, n)); err == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
