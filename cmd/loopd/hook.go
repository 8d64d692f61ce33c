package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/harness"
	"github.com/loopd/loopd/journal"
)

// workItemEnv names the environment variable that tells a hook which work
// item its pane belongs to; the executor sets it on every pane.
const workItemEnv = "LOOPD_WORK_ITEM"

// maxHookInput caps what a hook reads from stdin, in bytes.
const maxHookInput = 1 << 20

// sessionStartInput is the part of Claude Code's SessionStart hook input
// loopd uses (Claude Code settings, "hooks"; source is "startup",
// "resume", "clear" or "compact").
type sessionStartInput struct {
	SessionID string `json:"session_id"`
	Source    string `json:"source"`
}

func newHookCmd(g *globals) *cobra.Command {
	hook := &cobra.Command{
		Use:   "hook",
		Short: "Entry points that harness hooks call",
	}
	hook.AddCommand(&cobra.Command{
		Use:   "session-start",
		Short: "Record the session id a harness reports at session start (Claude Code SessionStart hook)",
		Long: `session-start reads the SessionStart hook input (JSON with session_id and
source) on stdin and records it for the work item named by $LOOPD_WORK_ITEM,
which loopd sets on every pane. The reconciler uses it to confirm a resume
and to follow the conversation id when it changes (/clear). It prints
nothing on stdout: Claude Code would add that to the conversation.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			k, err := desired.ParseKey(os.Getenv(workItemEnv))
			if err != nil {
				return fmt.Errorf("hook session-start: $%s: %w", workItemEnv, err)
			}
			data, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxHookInput))
			if err != nil {
				return fmt.Errorf("hook session-start %s: read input: %w", k, err)
			}
			var in sessionStartInput
			if err := json.Unmarshal(data, &in); err != nil {
				return fmt.Errorf("hook session-start %s: input: %w", k, err)
			}
			if !harness.SessionIDPattern.MatchString(in.SessionID) {
				return fmt.Errorf("hook session-start %s: %w: %q", k, harness.ErrInvalidSessionID, in.SessionID)
			}
			store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			now := time.Now()
			if err := store.ReportSession(ctx, k, desired.SessionReport{SessionID: in.SessionID, Source: in.Source, At: now}); err != nil {
				return err
			}
			// The log goes nowhere: the hook's output belongs to the harness.
			rec := journal.NewRecorder(slog.New(slog.DiscardHandler), store, func() time.Time { return now })
			rec.Record(ctx, slog.LevelInfo, journal.SessionReported, k.String(), "harness_session_id", in.SessionID, "source", in.Source)
			return nil
		},
	})
	return hook
}

// sessionStartHook is the shell command line a harness runs at session
// start: this executable's "hook session-start" with the absolute config.
func sessionStartHook(config string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("session-start hook: %w", err)
	}
	abs, err := filepath.Abs(config)
	if err != nil {
		return "", fmt.Errorf("session-start hook: %w", err)
	}
	return shellQuote(exe) + " hook session-start --config " + shellQuote(abs), nil
}

// shellQuote quotes s for sh: single quotes, with each ' written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
