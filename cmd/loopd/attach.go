package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
)

// execve replaces the process with argv (syscall.Exec): attach's tmux,
// and loopd itself without its secrets (scrubEnviron). Tests replace it
// to see the argv, and so that no command replaces the test binary.
var execve = syscall.Exec

// stdinIsTerminal reports whether loopd's stdin is a terminal, which
// tmux attach needs; tests replace it.
var stdinIsTerminal = func() bool { return isTerminal(os.Stdin) }

func newAttachCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "attach WORK_ITEM",
		Short: "Attach this terminal to the tmux session of a work item's agent",
		Long: `attach replaces loopd with tmux attached to the item's session on loopd's
private server (tmux -L <socket> attach -t =<session>: the exact session,
never one whose name only starts the same). Detach with the tmux prefix and
d (C-b d), which leaves the agent running. What you type reaches the agent.
While a client is attached the item is Attended: nothing is pasted into it
and a death of its agent waits; detaching hands it back (see the design's
"Takeover and handback"). The session is marked with who attached ($SUDO_USER,
else the login name) for the journal and the status page.
An item of the process runner has no session: loopd logs shows its run.
attach needs a terminal on stdin: without one it says so and exits 1.`,
		Example:           `  loopd attach codertocat/hello-world#1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, r, err := g.readItem(ctx, args[0])
			if err != nil {
				return err
			}
			session, err := itemSession(ctx, cfg, r)
			if err != nil {
				return err
			}
			if !stdinIsTerminal() {
				// tmux would only say "open terminal failed: not a terminal".
				return fmt.Errorf("attach %s: attach needs a terminal: stdin is not a tty; run it from an interactive shell (loopd logs %s prints the screen)", r.Key, r.Key)
			}
			argv := tmux.AttachArgv(cfg.Tmux.Socket, session, attender())
			bin, err := exec.LookPath(argv[0])
			if err != nil {
				return fmt.Errorf("attach %s: %w", r.Key, err)
			}
			if err := execve(bin, argv, os.Environ()); err != nil {
				return fmt.Errorf("attach %s: exec %s: %w", r.Key, bin, err)
			}
			return nil
		},
	}
}

// attender is who runs loopd attach: $SUDO_USER when set (a person
// behind sudo), else the login name of the process's user.
func attender() string {
	if u := os.Getenv("SUDO_USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}

// itemSession returns the name of r's tmux session when it is on the
// server of cfg's socket; the error says why not: the item runs as a
// process (runsAsProcess), or its session is not there (noSession).
func itemSession(ctx context.Context, cfg *schema.Config, r desired.Record) (string, error) {
	if runsAsProcess(cfg, r) {
		return "", fmt.Errorf("work item %s runs as a process, with no tmux session: loopd logs %s prints its run", r.Key, r.Key)
	}
	socket := cfg.Tmux.Socket
	name := desired.SessionName(r.Key)
	panes, err := tmux.NewExec(socket, slog.New(slog.DiscardHandler)).ListPanes(ctx)
	if err != nil {
		return "", fmt.Errorf("list tmux sessions on socket %s: %w", socket, err)
	}
	for _, p := range panes {
		if p.Session == name {
			return name, nil
		}
	}
	return "", noSession(cfg, r)
}

// runsAsProcess reports whether the process runner runs r under cfg
// (reconciler.ProcessRunner): it has runs and their logs, no tmux session.
func runsAsProcess(cfg *schema.Config, r desired.Record) bool {
	return reconciler.ProcessRunner(r, policyOf(cfg, nil, ""))
}

// noSession is the error of a command that needs r's tmux session when it
// is not on cfg's server; with a shared store it names the host whose
// lease holds the item when that is another host, where its session is.
func noSession(cfg *schema.Config, r desired.Record) error {
	err := fmt.Errorf("work item %s has no tmux session %s on socket %s (phase %s)", r.Key, desired.SessionName(r.Key), cfg.Tmux.Socket, r.Status.Phase)
	if owner := r.Lease.Owner; owner != "" {
		if self, herr := cfg.Host.HostName(); herr == nil && owner != self {
			return fmt.Errorf("%w: it runs on host %s; run the command there", err, owner)
		}
	}
	return err
}
