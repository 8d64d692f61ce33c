package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/harness"
)

func newHookCmd() *cobra.Command {
	hook := &cobra.Command{
		Use:   harness.SessionStartArgs[0],
		Short: "Entry points that harness hooks call",
	}
	hook.AddCommand(&cobra.Command{
		Use:   harness.SessionStartArgs[1],
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
			return harness.ReportSessionStart(os.Getenv, cmd.InOrStdin(), time.Now())
		},
	})
	return hook
}
