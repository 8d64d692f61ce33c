package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
)

func newGetCmd(g *globals) *cobra.Command {
	var stale time.Duration
	cmd := &cobra.Command{
		Use:   "get",
		Short: "List work items: key, host, session, phase, session id, pending count",
		Long: `get lists every work item. An item that is Stopped while events have been
pending for longer than --stale-pending is flagged in the reason column
(stale_pending=N since=D): it is closed or held, so they wait, or a reopen
was lost on the way from GitHub (the next comment heals that). A Queued item
waits for a free slot of the host's capacity; position=N is its place in the
queue, 1 next. SESSION ID says "unconfirmed" while loopd has not yet learned
the id of a conversation its harness started without one given (Codex).
HOST is the host whose lease runs the item ("-" for none yet).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, store, err := g.readStore(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			records, err := store.Records(cmd.Context())
			if err != nil {
				return err
			}
			policy := reconciler.PolicyFrom(cfg.Webhooks.GHWebhook.Routing.Tmux, accounts(cfg), "")
			policy.Routing = cfg.Webhooks.GHWebhook.Routing
			now := time.Now()
			if err := printRecords(cmd.OutOrStdout(), records, now, stale, policy, deaths(cmd.Context(), cfg, records, now)); err != nil {
				return err
			}
			failed, err := store.Calls(cmd.Context(), desired.CallFilter{State: desired.CallFailed})
			if err != nil {
				return err
			}
			return printCalls(cmd.OutOrStdout(), failed)
		},
	}
	cmd.Flags().DurationVar(&stale, "stale-pending", schema.DefaultStalePending,
		"flag Stopped items whose oldest pending event is older than this")
	return cmd
}

// openStore loads the config and opens its store, for the commands that
// need nothing else.
func (g *globals) openStore(ctx context.Context) (desired.Store, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	return openStore(ctx, cfg)
}

// printRecords writes one line per record, with the reason
// reconciler.Reasons gives it (a Stopped one whose oldest pending event
// was received more than stale before now is flagged, a Queued one gets
// its place in the queue, position=N, 1 first). The
// failure count is the one the next restart decision under p would start
// from (reconciler.NextFailures), not a stale recorded one.
func printRecords(w io.Writer, records []desired.Record, now time.Time, stale time.Duration, p reconciler.Policy, died map[desired.Key]time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORK ITEM\tHOST\tSESSION\tPHASE\tSESSION ID\tPENDING\tFAILURES\tREASON")
	reasons := reconciler.Reasons(records, p, now, stale)
	for _, r := range records {
		st := r.Status
		phase := string(st.Phase)
		if r.Spec.Held {
			phase += " (held)"
		} else if r.Spec.Closed {
			phase += " (closed)"
		}
		id := r.ConversationID(nil)
		switch {
		case st.IDUnconfirmed:
			// The harness chose an id loopd has not learned yet.
			id = "unconfirmed"
		case id == "":
			id = "-"
		}
		reason := reasons[r.Key]
		host := r.Lease.Owner // the host that runs the item
		switch {
		case host == "":
			host = "-"
		case !r.Lease.Expires.After(now):
			// Its owner stopped heartbeating: the item waits for
			// another host to take it over.
			host += " (lapsed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Key, host, desired.SessionName(r.Key), phase, id,
			len(r.Pending), reconciler.NextFailures(r, p, now, died[r.Key]), reason)
	}
	return tw.Flush()
}

// accounts returns the account of each harness of cfg
// (harness.Adapter.Account), the one capability get needs: which items a
// usage limit holds. A harness whose adapter cannot be made is left out.
func accounts(cfg *schema.Config) map[string]reconciler.Capabilities {
	out := map[string]reconciler.Capabilities{}
	for name, h := range cfg.Harnesses {
		if ad, err := harness.New(name, h); err == nil {
			out[name] = reconciler.Capabilities{Account: ad.Account()}
		}
	}
	return out
}

// deaths returns when tmux saw the pane of each running or spawning record
// die, from one observation of cfg's tmux server; none when no record runs
// or tmux cannot be read (get then measures a run to now).
func deaths(ctx context.Context, cfg *schema.Config, records []desired.Record, now time.Time) map[desired.Key]time.Time {
	if !slices.ContainsFunc(records, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning || r.Status.Phase == desired.PhaseSpawning
	}) {
		return nil
	}
	snap, err := observed.TakeSnapshot(ctx, tmux.NewExec(cfg.Tmux.Socket, slog.New(slog.DiscardHandler)), now)
	if err != nil {
		return nil
	}
	out := map[desired.Key]time.Time{}
	for _, r := range records {
		if p, ok := snap.Pane(desired.SessionName(r.Key)); ok && p.Dead && !p.DeadTime.IsZero() {
			out[r.Key] = p.DeadTime
		}
	}
	return out
}

func newEventsCmd(g *globals) *cobra.Command {
	var f desired.EventFilter
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "events [work-item]",
		Short: "Print the event journal, one event a line",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				k, err := desired.ParseKey(args[0])
				if err != nil {
					return err
				}
				f.WorkItem = k.String()
			}
			if since > 0 {
				f.Since = time.Now().Add(-since)
			}
			_, store, err := g.readStore(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			events, err := store.Events(cmd.Context(), f)
			if err != nil {
				return err
			}
			for _, e := range events {
				fmt.Fprintln(cmd.OutOrStdout(), e.String())
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "only the newest N events (0: all)")
	cmd.Flags().DurationVar(&since, "since", 0, "only events newer than this, e.g. 1h")
	return cmd
}
