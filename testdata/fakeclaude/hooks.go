package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loopd/loopd/testdata/fakecli"
)

// Settings, as Claude Code 2.1.197 reads them (measured): the user
// settings of the config dir (<config>/settings.json), the project's
// <cwd>/.claude/settings.json and its local <cwd>/.claude/settings.local.json,
// each unless --setting-sources leaves its source out, and --settings (a
// JSON text or the name of a JSON file), always. Each command of their
// hooks.SessionStart runs through sh -c in the session's cwd with the hook
// input as JSON on stdin, when the session starts ("startup"), is resumed
// ("resume") or cleared ("clear"). The servers of the project's .mcp.json
// start when the project source is read and a settings file enables them
// (enableAllProjectMcpServers, or the name in enabledMcpjsonServers),
// unless --strict-mcp-config; those of --mcp-config always.

type settingsFile struct {
	Hooks                      fakecli.Hooks `json:"hooks"`
	EnableAllProjectMcpServers bool          `json:"enableAllProjectMcpServers"`
	EnabledMcpjsonServers      []string      `json:"enabledMcpjsonServers"`
}

// mcpFile is .mcp.json or an --mcp-config: stdio servers by name.
type mcpFile struct {
	MCPServers map[string]fakecli.Server `json:"mcpServers"`
}

// readJSON decodes text, or the file it names when it is not a JSON
// object, into v; a missing file is nothing. Failures are printed to
// stderr, as the real CLI shows them, and never stop the session.
func readJSON(text string, v any) bool {
	data := []byte(text)
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		var err error
		if data, err = os.ReadFile(text); err != nil {
			if !os.IsNotExist(err) {
				os.Stderr.WriteString("fakeclaude: settings: " + err.Error() + "\n")
			}
			return false
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		os.Stderr.WriteString("fakeclaude: settings: " + text + ": " + err.Error() + "\n")
		return false
	}
	return true
}

// loadedSettings are the settings files of inv the session reads, in the
// order Claude Code merges them (user, project, local, then --settings).
func loadedSettings(inv invocation, st store) []settingsFile {
	sources := inv.sources
	if sources == nil {
		sources = []string{"user", "project", "local"}
	}
	cwd := st.cwd
	files := map[string]string{
		"user":    filepath.Join(st.configDir(), "settings.json"),
		"project": filepath.Join(cwd, ".claude", "settings.json"),
		"local":   filepath.Join(cwd, ".claude", "settings.local.json"),
	}
	var out []settingsFile
	for _, src := range []string{"user", "project", "local"} {
		var s settingsFile
		if slices.Contains(sources, src) && readJSON(files[src], &s) {
			out = append(out, s)
		}
	}
	if inv.settings != "" {
		var s settingsFile
		if readJSON(inv.settings, &s) {
			out = append(out, s)
		}
	}
	return out
}

// runSessionStartHooks runs the SessionStart commands of every loaded
// settings file for the session id.
func runSessionStartHooks(settings []settingsFile, id, transcript, source string) {
	cwd, _ := os.Getwd()
	input, _ := json.Marshal(map[string]string{
		"session_id": id, "transcript_path": transcript, "cwd": cwd,
		"hook_event_name": "SessionStart", "source": source,
	})
	for _, s := range settings {
		fakecli.Run("fakeclaude", "SessionStart hook", s.Hooks.Commands("SessionStart"), string(input))
	}
}

// mcpWait bounds how long a print-mode turn waits for its MCP servers
// before it ends them; a TUI ends them when it exits.
const mcpWait = 5 * time.Second

// startMCPServers starts the stdio MCP servers the session gets (see the
// rules above) in the session's cwd, and returns them.
func startMCPServers(inv invocation, st store, settings []settingsFile) []*exec.Cmd {
	var files []mcpFile
	if !inv.strictMCP && (inv.sources == nil || slices.Contains(inv.sources, "project")) {
		var project mcpFile
		if readJSON(filepath.Join(st.cwd, ".mcp.json"), &project) {
			for name := range project.MCPServers {
				if !slices.ContainsFunc(settings, func(s settingsFile) bool {
					return s.EnableAllProjectMcpServers || slices.Contains(s.EnabledMcpjsonServers, name)
				}) {
					delete(project.MCPServers, name) // not approved
				}
			}
			files = append(files, project)
		}
	}
	for _, c := range inv.mcpConfigs {
		var f mcpFile
		if readJSON(c, &f) {
			files = append(files, f)
		}
	}
	var servers []fakecli.Server
	for _, f := range files {
		for _, srv := range f.MCPServers {
			servers = append(servers, srv)
		}
	}
	return fakecli.StartServers("fakeclaude", servers)
}
