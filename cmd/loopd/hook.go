package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/launch"
)

// errNoChannel is the error of a channel command run where loopd did not
// start it: no channel in its environment.
var errNoChannel = errors.New("no loopd channel here: $" + channel.EnvDir + " and $" + channel.EnvToken +
	" are set by loopd on the harnesses it starts")

func newHookCmd() *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "Entry points that harness hooks call",
	}
	hook.AddCommand(&cobra.Command{
		Use:   "session-start",
		Short: "Report the session id a harness starts with (Claude Code SessionStart hook)",
		Long: `session-start reads the SessionStart hook input (JSON with session_id and
source) on stdin and drops it, with the spawn's token, into the channel of
the work item loopd started the harness for ($LOOPD_CHANNEL and
$LOOPD_CHANNEL_TOKEN, which loopd sets on every spawn). The next reconcile
pass, of loopd serve or of a cron loopd reconcile --once, reads it: it
confirms a spawn and follows the conversation id when it changes (/clear).
It needs neither the config nor the store, and prints nothing on stdout
(Claude Code would add that to the conversation).

The pass checks the report: one object of at most 64 KiB, source one of
startup, resume, clear or compact, the work item the channel belongs to,
the token of the item's current spawn, and a session id the item's harness
accepts. One that fails is journaled as session.report_rejected with its
reason and changes nothing. This command fails only where loopd did not
start it (no channel) or the report cannot be written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sessionStart(os.Getenv, cmd.InOrStdin(), time.Now())
		},
	})
	return hook
}

// sessionStart drops the SessionStart input on stdin into the channel
// getenv names, for the work item it names, with its token.
func sessionStart(getenv func(string) string, stdin io.Reader, now time.Time) error {
	dir, token := getenv(channel.EnvDir), getenv(channel.EnvToken)
	if dir == "" || token == "" {
		return fmt.Errorf("hook session-start: %w", errNoChannel)
	}
	// One byte past the bound, so that the pass can tell it was too long.
	input, err := io.ReadAll(io.LimitReader(stdin, channel.MaxInput+1))
	if err != nil {
		return fmt.Errorf("hook session-start: read input: %w", err)
	}
	if err := channel.WriteReport(dir, getenv(channel.EnvWorkItem), token, input, now); err != nil {
		return fmt.Errorf("hook session-start: %w", err)
	}
	return nil
}

// sessionStartHook is the shell command line a harness runs at session
// start: this executable's "hook session-start". It names no config: the
// hook finds its item's channel in its environment.
func sessionStartHook() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("session-start hook: %w", err)
	}
	return launch.ShellQuote(exe) + " hook session-start", nil
}
