package fakecli

import (
	"os"
	"os/exec"
	"strings"
	"time"
)

// What the fakes run of the settings a CLI reads (a workdir's own among
// them), in the shapes the three real CLIs share: hooks by event, each a
// list of matchers holding command hooks, and stdio MCP servers.

// Hooks is the "hooks" object of a settings file: matchers by event.
type Hooks map[string][]struct {
	Hooks []struct {
		Type    string `json:"type"`
		Command string `json:"command"`
	} `json:"hooks"`
}

// Commands returns the commands of h's command hooks for event, in order.
func (h Hooks) Commands(event string) []string {
	var out []string
	for _, m := range h[event] {
		for _, hook := range m.Hooks {
			if hook.Type == "command" {
				out = append(out, hook.Command)
			}
		}
	}
	return out
}

// Server is a stdio MCP server: its command and arguments.
type Server struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// Run runs each command through sh -c in the cwd, with stdin on its
// stdin; a failure is printed to stderr as "<prog>: <what>: …", as the
// real CLIs show a failed hook, and never stops the session.
func Run(prog, what string, commands []string, stdin string) {
	for _, c := range commands {
		cmd := exec.Command("sh", "-c", c)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Stderr.WriteString(prog + ": " + what + ": " + err.Error() + ": " + strings.TrimSpace(string(out)) + "\n")
		}
	}
}

// StartServers starts servers in the cwd and returns them; one that cannot
// start is printed to stderr as "<prog>: MCP server: …".
func StartServers(prog string, servers []Server) []*exec.Cmd {
	var cmds []*exec.Cmd
	for _, s := range servers {
		cmd := exec.Command(s.Command, s.Args...)
		if err := cmd.Start(); err != nil {
			os.Stderr.WriteString(prog + ": MCP server: " + err.Error() + "\n")
			continue
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// StopServers ends cmds, waiting up to wait for each to end by itself
// first (a headless turn lets its servers answer; a TUI that exits waits
// for none).
func StopServers(cmds []*exec.Cmd, wait time.Duration) {
	for _, cmd := range cmds {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}
