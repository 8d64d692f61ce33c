package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

// newHoldCmd builds "loopd hold" (hold true) or "loopd release".
func newHoldCmd(g *globals, hold bool) *cobra.Command {
	use, short := "release WORK_ITEM", "Release a held item, or clear NeedsAttention and its crash-loop counts"
	long := `release clears a hold and NeedsAttention and the restart budget's counts: an
item that had a session is brought back, resuming its conversation; one whose
agent still runs is left running. With --fresh it starts a new conversation
instead (the old id is retired), carrying the item's opening and latest events.
The release is recorded in the store; the next reconcile pass carries it out,
under the reconcile lock, and journals item.released.

With --budget +200k it only raises the item's token budget by that many
weighted tokens (k and m suffixes), for good: an item held BudgetExhausted goes
on in the same conversation once its usage is under the raised budget, and its
pending events are delivered then. It journals item.budget_raised.`
	if hold {
		use, short, long = "hold WORK_ITEM", "Stop a work item on purpose; a held item is never self-healed", ""
	}
	var (
		fresh  bool
		budget string
	)
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
			cfg, store, err := g.openStore(ctx)
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
				noteNoServe(cmd, cfg)
				return nil
			}
			if budget != "" {
				n, err := desired.ParseTokens(budget)
				if err != nil {
					return fmt.Errorf("--budget: %w", err)
				}
				if err := store.RaiseBudget(ctx, k, n); err != nil {
					return err
				}
				journal.NewRecorder(log, store, time.Now).Record(ctx, slog.LevelInfo, journal.ItemBudgetRaised, k.String(), journal.KeyBudgetRaise, n)
				fmt.Fprintf(cmd.OutOrStdout(), "%s budget raised by %s tokens (%s in all); the next pass lets it go on\n", k,
					desired.FormatTokens(n), desired.FormatTokens(r.Spec.BudgetRaise+n))
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
			noteNoServe(cmd, cfg)
			return nil
		},
	}
	if !hold {
		cmd.Flags().BoolVar(&fresh, "fresh", false, "start a new conversation instead of resuming the recorded one")
		cmd.Flags().StringVar(&budget, "budget", "", "only raise the item's token budget by this many weighted tokens (+200k, +1.5m)")
	}
	return cmd
}

// noteNoServe prints noServeNote, when there is one, on the command's
// error writer.
func noteNoServe(cmd *cobra.Command, cfg *schema.Config) {
	if note := noServeNote(cfg); note != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: "+note)
	}
}
