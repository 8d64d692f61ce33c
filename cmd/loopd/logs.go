package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// logsOpts are the flags of loopd logs.
type logsOpts struct {
	follow bool
	tail   int // last N lines; < 0: all
}

func newLogsCmd(g *globals) *cobra.Command {
	o := logsOpts{tail: -1}
	cmd := &cobra.Command{
		Use:   "logs WORK_ITEM",
		Short: "Print a work item's agent screen with its history, or its process run's log",
		Long: `logs prints what the item's agent shows: the whole pane of its tmux session,
scrollback included (tmux capture-pane -p -J -S -, wrapped lines joined, each
line's trailing blanks and the screen's empty lines below the last one
trimmed), also when the agent has died and its pane is kept. For an item of
the process runner it prints the log of its current run instead.

--tail N prints only the last N lines. --follow then keeps printing, until
interrupted: a run's log as it grows; a pane's lines as they scroll off its
screen into its history (a screen that is redrawn in place, as a full-screen
agent's is, shows nothing new until it scrolls).`,
		Example: `  loopd logs codertocat/hello-world#1 | less
  loopd logs -f --tail 20 codertocat/hello-world#1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.tail < -1 || (o.tail == -1 && cmd.Flags().Changed("tail")) {
				return fmt.Errorf("--tail %d: want a number of lines, 0 or more", o.tail)
			}
			ctx := cmd.Context()
			cfg, r, err := g.readItem(ctx, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if runsAsProcess(cfg, r) {
				if r.Status.RunID == "" {
					return fmt.Errorf("work item %s runs as a process and has no run now: loopd events %s shows its runs", r.Key, r.Key)
				}
				return o.runLog(ctx, runLogPath(cfg, r), out)
			}
			ex := tmux.NewExec(cfg.Tmux.Socket, slog.New(slog.DiscardHandler))
			target := tmux.Target(desired.SessionName(r.Key))
			err = o.pane(ctx, ex, target, out)
			if errors.Is(err, tmux.ErrNoSession) {
				return noSession(cfg, r)
			}
			if err != nil {
				return fmt.Errorf("logs of %s: %w", r.Key, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines until interrupted")
	f.IntVar(&o.tail, "tail", -1, "print only the last N lines (default: all)")
	return cmd
}

// trimLines returns text's lines with their trailing blanks and the empty
// lines at its end removed: a pane's capture pads each line to the
// screen's width and the screen to its height.
func trimLines(text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// last returns the last n of lines (all when n < 0).
func last(lines []string, n int) []string {
	if n >= 0 && n < len(lines) {
		return lines[len(lines)-n:]
	}
	return lines
}

func writeLines(w io.Writer, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// pane prints target's capture, then with --follow the lines that scroll
// into its history, until ctx ends. The screen's rows that were printed
// (those above its empty bottom rows) are the first to scroll in, and are
// skipped.
func (o logsOpts) pane(ctx context.Context, ex *tmux.Exec, target string, w io.Writer) error {
	screen, err := ex.CapturePane(ctx, target, true)
	if err != nil {
		return err
	}
	history, height, err := ex.HistorySize(ctx, target)
	if err != nil {
		return err
	}
	lines := trimLines(screen)
	if err := writeLines(w, last(lines, o.tail)); err != nil || !o.follow {
		return err
	}
	rows := strings.Count(screen, "\n") // history + screen, untrimmed
	skip := max(0, height-(rows-len(lines)))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(schema.LogsPoll):
		}
		now, _, err := ex.HistorySize(ctx, target)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		grown := now - history
		history = now
		if grown <= 0 {
			continue
		}
		text, err := ex.CaptureNewest(ctx, target, grown)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		n := min(skip, len(lines))
		skip -= n
		for i, l := range lines[n:] {
			lines[n+i] = strings.TrimRight(l, " \t")
		}
		if err := writeLines(w, lines[n:]); err != nil {
			return err
		}
	}
}

// runLog prints the run log at path, then with --follow what is appended
// to it, until ctx ends.
func (o logsOpts) runLog(ctx context.Context, path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("run log: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("run log: %w", err)
	}
	if o.tail < 0 {
		_, err = w.Write(b)
	} else {
		err = writeLines(w, last(trimLines(string(b)), o.tail))
	}
	if err != nil || !o.follow {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(schema.LogsPoll):
		}
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("run log: %w", err)
		}
	}
}
