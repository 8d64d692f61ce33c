package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/journal"
)

// newHoldCmd builds "loopd hold" (hold true) or "loopd release".
func newHoldCmd(g *globals, hold bool) *cobra.Command {
	use, short := "release WORK_ITEM", "Release a held item, or clear NeedsAttention and its crash-loop counts"
	if hold {
		use, short = "hold WORK_ITEM", "Stop a work item on purpose; a held item is never self-healed"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			k, err := desired.ParseKey(args[0])
			if err != nil {
				return err
			}
			log, err := g.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			rec := journal.NewRecorder(log, store, time.Now)
			if hold {
				if err := store.SetHeld(ctx, k, true); err != nil {
					return err
				}
				rec.Record(ctx, slog.LevelInfo, journal.ItemHeld, k.String())
				fmt.Fprintf(cmd.OutOrStdout(), "%s held; the next pass stops its session\n", k)
				return nil
			}
			r, err := store.Get(ctx, k)
			if err != nil {
				return err
			}
			if err := store.SetHeld(ctx, k, false); err != nil {
				return err
			}
			// Release also clears NeedsAttention and the crash-loop counts:
			// the operator has looked, so an item that had a session is
			// brought back at once, resuming its conversation.
			st := r.Status
			st.Phase = desired.PhaseIdle
			if st.HarnessSessionID != "" {
				st.Phase = desired.PhaseBackingOff
			}
			st.Failures, st.FastFailures, st.NextAttempt, st.Reason = 0, 0, time.Time{}, "released"
			if err := store.PutStatus(ctx, k, st); err != nil {
				return err
			}
			rec.Record(ctx, slog.LevelInfo, journal.ItemReleased, k.String())
			fmt.Fprintf(cmd.OutOrStdout(), "%s released\n", k)
			return nil
		},
	}
}
