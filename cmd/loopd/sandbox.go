package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// newSandboxExecCmd is the first process inside a sandbox (sandbox.Exec):
// hidden, since only the sandbox runs it.
func newSandboxExecCmd() *cobra.Command {
	return newExecStepCmd(sandbox.Command, sandbox.PathFlag, "EXECUTABLE",
		"Take the terminal's foreground and run the harness (used inside loopd's sandboxes)",
		"the harness's executable", sandbox.Exec)
}

// sandboxOf is this machine's sandbox for cfg, loaded from configPath:
// sandbox.Check's host, or why none can be made, and what of loopd no
// sandbox shows (schema.Config.Hidden, and the tmux socket's dir).
func sandboxOf(ctx context.Context, cfg *schema.Config, configPath string) (*actions.Sandbox, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	sb := &actions.Sandbox{}
	sb.Host, sb.Err = sandbox.Check(ctx, exe, os.Getenv("PATH"))
	sb.Hide, sb.Mask = cfg.Hidden(configPath, os.LookupEnv)
	if socket, err := tmux.SocketPath(cfg.Tmux.Socket); err == nil {
		sb.Hide = append(sb.Hide, filepath.Dir(socket))
	}
	return sb, nil
}

// checkSandbox says, when a route of cfg runs its agents in a sandbox
// (schema.Config.NeedsSandbox) and sb cannot make one, why, with the
// package or the kernel setting it takes; config validate, serve's start
// and every reload ask it.
func checkSandbox(cfg *schema.Config, sb *actions.Sandbox) error {
	if sb.Err == nil || !cfg.NeedsSandbox() {
		return nil
	}
	return fmt.Errorf("sandbox.mode bubblewrap: %w; or set sandbox.mode: none to run the agents without one", sb.Err)
}
