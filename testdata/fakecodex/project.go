package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/testdata/fakecli"
)

// A project's own config, as Codex 0.171.0 reads it (measured): the
// project's .codex/config.toml (its [mcp_servers.<name>] command and args)
// and .codex/hooks.json (hooks.SessionStart commands) count only when the
// user's config trusts the project, by the exact key
//
//	[projects."<cwd>"]
//	trust_level = "trusted"
//
// in <CODEX_HOME>/config.toml. Then its MCP servers start at once, and its
// hooks run only with --dangerously-bypass-hook-trust (their review is
// never persisted here). Otherwise "untrusted project-local configuration
// is disabled". The TUI asks first in a git workdir or one with .codex/
// that the config does not trust: "Trust this folder?" without a
// trust_level, "Open restricted" with "untrusted"; Enter continues,
// trusting the folder for this run in the first case. A trusted project
// with hooks (and no --dangerously-bypass-hook-trust) asks to review them
// first: "2" runs them, "3" goes on without; its MCP servers start after.

// trustLevel returns the trust_level the user config at home gives dir,
// "" for none.
func trustLevel(home, dir string) string {
	f, err := os.Open(filepath.Join(home, "config.toml"))
	if err != nil {
		return ""
	}
	defer f.Close()
	header := `[projects."` + dir + `"]`
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "["):
			in = line == header
		case in && strings.HasPrefix(line, "trust_level"):
			if v := tomlStrings(line[strings.IndexByte(line, '=')+1:]); len(v) == 1 {
				return v[0]
			}
		}
	}
	return ""
}

// askFolder reports whether the TUI asks about dir before it starts.
func askFolder(dir, trust string) bool {
	if trust == "trusted" {
		return false
	}
	for _, name := range []string{".git", ".codex"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// project is what a trusted project's own config starts.
type project struct {
	servers []fakecli.Server
	hooks   []string // the SessionStart commands of hooks.json
}

// readProject reads dir's .codex/config.toml and .codex/hooks.json.
func readProject(dir string) project {
	var p project
	if f, err := os.Open(filepath.Join(dir, ".codex", "config.toml")); err == nil {
		var cur *fakecli.Server
		flush := func() {
			if cur != nil && cur.Command != "" {
				p.servers = append(p.servers, *cur)
			}
			cur = nil
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			key, value, _ := strings.Cut(line, "=")
			switch key = strings.TrimSpace(key); {
			case strings.HasPrefix(line, "[mcp_servers."):
				flush()
				cur = &fakecli.Server{}
			case strings.HasPrefix(line, "["):
				flush()
			case cur != nil && key == "command":
				if v := tomlStrings(value); len(v) == 1 {
					cur.Command = v[0]
				}
			case cur != nil && key == "args":
				cur.Args = tomlStrings(value)
			}
		}
		flush()
		f.Close()
	}
	var hooks struct {
		Hooks fakecli.Hooks `json:"hooks"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".codex", "hooks.json")); err == nil && json.Unmarshal(b, &hooks) == nil {
		p.hooks = hooks.Hooks.Commands("SessionStart")
	}
	return p
}

// start starts p's MCP servers in the cwd, and runs its hooks when
// runHooks; it returns the servers.
func (p project) start(runHooks bool) []*exec.Cmd {
	cmds := fakecli.StartServers("fakecodex", p.servers)
	if runHooks {
		fakecli.Run("fakecodex", "SessionStart hook", p.hooks, "")
	}
	return cmds
}

// tomlStrings returns the basic strings of a TOML value: one for a
// string, each of an array of strings; nil for anything else.
func tomlStrings(value string) []string {
	var out []string
	var b strings.Builder
	in, esc := false, false
	for _, r := range strings.TrimSpace(value) {
		switch {
		case in && esc:
			b.WriteRune(r)
			esc = false
		case in && r == '\\':
			esc = true
		case in && r == '"':
			out, in = append(out, b.String()), false
			b.Reset()
		case in:
			b.WriteRune(r)
		case r == '"':
			in = true
		case r == '#':
			return out
		}
	}
	return out
}
