package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/loopd/loopd/testdata/fakecli"
)

// The workspace's trust and what a trusted one runs, as Gemini 0.61.0 has
// them (measured, and read in its checkPathTrust, loadSettings and
// folderTrustCheck): GEMINI_CLI_TRUST_WORKSPACE "true" trusts the folder,
// "false" distrusts it, before anything else; --skip-trust sets it to
// "true" only after the settings are loaded, so that the TUI then runs
// trusted without the workspace's settings. Only a folder trusted from
// the start merges its .gemini/settings.json: its hooks.SessionStart
// commands and tools.discoveryCommand run through sh -c, and its
// mcpServers start, at the session's start. A headless run in a folder
// that is not trusted exits 55 (FatalUntrustedWorkspaceError), after the
// auth check (41 comes first, measured).

// trustEnv is the variable the real CLI reads the trust from.
const trustEnv = "GEMINI_CLI_TRUST_WORKSPACE"

// exitUntrusted is FATAL_UNTRUSTED_WORKSPACE.
const exitUntrusted = 55

// untrustedText is the real CLI's message for exitUntrusted.
const untrustedText = "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, " +
	"set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode."

// trusted reports whether the folder is trusted for inv, and decided
// whether anything says so either way.
func trusted(inv invocation) (trusted, decided bool) {
	switch os.Getenv(trustEnv) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return inv.skipTrust, inv.skipTrust
}

// workspace is what a trusted workspace's settings run.
type workspace struct {
	Hooks      fakecli.Hooks             `json:"hooks"`
	MCPServers map[string]fakecli.Server `json:"mcpServers"`
	Tools      struct {
		DiscoveryCommand string `json:"discoveryCommand"`
	} `json:"tools"`
}

// startWorkspace runs what cwd's .gemini/settings.json runs at a session's
// start when the folder was trusted before the settings were loaded
// (GEMINI_CLI_TRUST_WORKSPACE=true), and returns its MCP servers.
func startWorkspace(cwd string) []*exec.Cmd {
	if os.Getenv(trustEnv) != "true" {
		return nil
	}
	var w workspace
	b, err := os.ReadFile(filepath.Join(cwd, ".gemini", "settings.json"))
	if err != nil || json.Unmarshal(b, &w) != nil {
		return nil
	}
	fakecli.Run("fakegemini", "SessionStart hook", w.Hooks.Commands("SessionStart"), "")
	if w.Tools.DiscoveryCommand != "" {
		fakecli.Run("fakegemini", "tool discovery", []string{w.Tools.DiscoveryCommand}, "")
	}
	servers := make([]fakecli.Server, 0, len(w.MCPServers))
	for _, s := range w.MCPServers {
		servers = append(servers, s)
	}
	return fakecli.StartServers("fakegemini", servers)
}
