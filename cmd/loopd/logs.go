package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
)

func newLogsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "logs WORK_ITEM",
		Short: "Print a work item's agent screen with its history, or its process run's log",
		Long: `logs prints what the item's agent shows: the whole pane of its tmux session,
scrollback included (tmux capture-pane -p -J -S -, wrapped lines joined), also
when the agent has died and its pane is kept. For an item of the process
runner it prints the log of its current run instead.`,
		Example:           `  loopd logs codertocat/hello-world#1 | less`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, r, err := g.readItem(ctx, args[0])
			if err != nil {
				return err
			}
			if runsAsProcess(cfg, r) {
				if r.Status.RunID == "" {
					return fmt.Errorf("work item %s runs as a process and has no run now: loopd events %s shows its runs", r.Key, r.Key)
				}
				f, err := os.Open(runLogPath(cfg, r))
				if err != nil {
					return fmt.Errorf("run log of %s: %w", r.Key, err)
				}
				defer f.Close()
				_, err = io.Copy(cmd.OutOrStdout(), f)
				return err
			}
			screen, err := tmux.NewExec(cfg.Tmux.Socket, slog.New(slog.DiscardHandler)).CapturePane(ctx, "="+desired.SessionName(r.Key)+":", true)
			if errors.Is(err, tmux.ErrNoSession) {
				return noSession(cfg, r)
			}
			if err != nil {
				return fmt.Errorf("logs of %s: %w", r.Key, err)
			}
			_, err = io.WriteString(cmd.OutOrStdout(), screen)
			return err
		},
	}
}
