package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/journal"
)

// newHoldCmd builds "loopd hold" (hold true) or "loopd release".
func newHoldCmd(g *globals, hold bool) *cobra.Command {
	use, short := "release WORK_ITEM", "Release a held item, or clear NeedsAttention and its crash-loop counts"
	long := `release clears a hold and NeedsAttention and the restart budget's counts: an
item that had a session is brought back, resuming its conversation; one whose
agent still runs is left running. With --fresh it starts a new conversation
instead (the old id is retired), carrying the item's opening and latest events.
The release is recorded in the store; the next reconcile pass carries it out,
under the reconcile lock, and journals item.released.`
	if hold {
		use, short, long = "hold WORK_ITEM", "Stop a work item on purpose; a held item is never self-healed", ""
	}
	var fresh bool
	cmd := &cobra.Command{
		Use:               use,
		Short:             short,
		Long:              long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			log, err := g.verbLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			_, store, err := g.openStore(ctx)
			if err != nil {
				return err
			}
			defer store.Close()
			r, err := resolveItem(ctx, store, args[0])
			if err != nil {
				return err
			}
			k := r.Key
			if hold {
				if r.Spec.Held {
					fmt.Fprintf(cmd.OutOrStdout(), "%s already held\n", k)
					return nil
				}
				if err := store.SetHeld(ctx, k, true); err != nil {
					return err
				}
				journal.NewRecorder(log, store, time.Now).Record(ctx, slog.LevelInfo, journal.ItemHeld, k.String())
				fmt.Fprintf(cmd.OutOrStdout(), "%s held; the next pass stops its session\n", k)
				return nil
			}
			var stands bool
			if fresh, stands = r.ReleaseFresh(fresh); stands {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: a release --fresh is still pending; it stands\n", k)
			}
			// A spec change, like hold: the reconciler carries it out under
			// its lock (reconciler.release), never this process.
			if err := store.Release(ctx, k, fresh); err != nil {
				return err
			}
			what := "released"
			if fresh {
				what = "released for a new conversation"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s; the next pass brings it back\n", k, what)
			return nil
		},
	}
	if !hold {
		cmd.Flags().BoolVar(&fresh, "fresh", false, "start a new conversation instead of resuming the recorded one")
	}
	return cmd
}
