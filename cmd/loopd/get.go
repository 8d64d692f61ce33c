package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

func newGetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get",
		Short: "List work items: key, session, phase, session id, pending count",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			records, err := store.Records(cmd.Context())
			if err != nil {
				return err
			}
			return printRecords(cmd.OutOrStdout(), records)
		},
	}
}

// openStore loads the config and opens its store, for the commands that
// need nothing else.
func (g *globals) openStore(ctx context.Context) (desired.Store, error) {
	cfg, err := schema.Load(g.config)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, cfg)
}

func printRecords(w io.Writer, records []desired.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORK ITEM\tSESSION\tPHASE\tSESSION ID\tPENDING\tFAILURES\tREASON")
	for _, r := range records {
		st := r.Status
		phase := string(st.Phase)
		if r.Spec.Held {
			phase += " (held)"
		} else if r.Spec.Closed {
			phase += " (closed)"
		}
		id := st.HarnessSessionID
		if id == "" {
			id = "-"
		}
		reason := st.Reason
		if st.Phase == desired.PhaseBackingOff && !st.NextAttempt.IsZero() {
			reason += " next_attempt=" + st.NextAttempt.Local().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Key, desired.SessionName(r.Key), phase, id,
			len(r.Pending), st.Failures, reason)
	}
	return tw.Flush()
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
			store, err := g.openStore(cmd.Context())
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
