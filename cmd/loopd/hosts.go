package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/transcript"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
)

// errNoFleet means the store cfg opens cannot share work items between
// hosts (it does not implement desired.Fleet).
var errNoFleet = errors.New("store does not implement desired.Fleet (host membership and leases)")

// fleetOf returns store's lease side; the error names the store's type.
func fleetOf(store desired.Store) (desired.Fleet, error) {
	f, ok := store.(desired.Fleet)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoFleet, store)
	}
	return f, nil
}

// joinFleet makes a this host among the hosts sharing its store: its
// name (host.name, default the hostname), capacity
// (capacity.maxLiveSessions, 0 for none) and lease TTL
// (host.leaseSeconds), its lease clock, and the Mover that copies its
// items' transcripts to the store and back. The store must implement
// desired.Fleet.
func (a *app) joinFleet(cfg *schema.Config) error {
	fleet, err := fleetOf(a.store)
	if err != nil {
		return err
	}
	name, err := cfg.Host.HostName()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	capacity := 0
	if n := cfg.Capacity.MaxLiveSessions; n != nil {
		capacity = *n
	}
	a.fleet = fleet
	a.mover = transcript.NewMover(fleet, a.harnesses, name, a.journal)
	a.hosting = &reconciler.Hosting{
		Fleet:   fleet,
		Host:    desired.Host{Name: name, Capacity: capacity, LeaseTTL: cfg.Host.LeaseTTL()},
		Clock:   &reconciler.LeaseClock{Elapsed: reconciler.Elapsed},
		Journal: a.journal,
	}
	return nil
}

func newHostsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "hosts",
		Short: "List the hosts sharing the store: liveness, drain, capacity, leases, last heartbeat",
		Long: `hosts lists every host that heartbeats into the store: NAME (host.name), LIVE
(its last heartbeat is within its leaseSeconds), DRAINING (loopd drain),
CAPACITY (capacity.maxLiveSessions, 0 for no limit), LEASES (the items it
holds) and HEARTBEAT (how long ago its last heartbeat was).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := g.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer store.Close()
			fleet, err := fleetOf(store)
			if err != nil {
				return err
			}
			hosts, err := fleet.Hosts(cmd.Context())
			if err != nil {
				return err
			}
			return printHosts(cmd.OutOrStdout(), hosts, time.Now())
		},
	}
}

// printHosts writes one line per host, its heartbeat's age as of now.
func printHosts(w io.Writer, hosts []desired.Host, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLIVE\tDRAINING\tCAPACITY\tLEASES\tHEARTBEAT")
	for _, h := range hosts {
		age := "-"
		if !h.Heartbeat.IsZero() {
			age = now.Sub(h.Heartbeat).Round(100*time.Millisecond).String() + " ago"
		}
		fmt.Fprintf(tw, "%s\t%t\t%t\t%d\t%d\t%s\n", h.Name, h.Live, h.Draining, h.Capacity, h.Leases, age)
	}
	return tw.Flush()
}

// drainOpts are the flags of loopd drain.
type drainOpts struct {
	timeout time.Duration
	undo    bool
	poll    time.Duration
}

func newDrainCmd(g *globals) *cobra.Command {
	o := &drainOpts{poll: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "drain [HOST]",
		Short: "Move a host's items to the other hosts, or (--undo) take it back into service",
		Long: `drain sets HOST (default: this host, host.name) draining: it takes no new
item, and its daemon stops each agent it runs cleanly, copies its final
transcript to the store and, once the agent is gone, releases the item's
lease. Another host then takes the item and resumes the same conversation.
Never do two live agents hold one conversation.

drain waits until HOST holds no lease, printing its progress, and exits
non-zero when --timeout passes first (the host stays draining). drain --undo
HOST takes the host back into service.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return drain(cmd.Context(), g, o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the host to hold no lease")
	cmd.Flags().BoolVar(&o.undo, "undo", false, "take the host back into service")
	return cmd
}

// drain carries out loopd drain (see newDrainCmd).
func drain(ctx context.Context, g *globals, o *drainOpts, args []string, out io.Writer) error {
	cfg, err := schema.Load(g.config)
	if err != nil {
		return err
	}
	host, err := cfg.Host.HostName()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	if len(args) == 1 {
		host = args[0]
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	fleet, err := fleetOf(store)
	if err != nil {
		return err
	}
	if err := fleet.SetDraining(ctx, host, !o.undo); err != nil {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	if o.undo {
		fmt.Fprintf(out, "host %s is back in service\n", host)
		return nil
	}
	fmt.Fprintf(out, "host %s is draining\n", host)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := -1
	t := time.NewTicker(o.poll)
	defer t.Stop()
	for {
		leases, err := leasesOf(ctx, fleet, host)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("drain %s: %w", host, err)
		}
		if err == nil && leases != last {
			fmt.Fprintf(out, "host %s holds %d lease(s)\n", host, leases)
			last = leases
		}
		if err == nil && leases == 0 {
			fmt.Fprintf(out, "host %s is drained\n", host)
			return nil
		}
		select {
		case <-ctx.Done():
			return exitError{code: 1, err: fmt.Errorf("drain %s: %d lease(s) still held after %s; the host stays draining", host, last, o.timeout)}
		case <-t.C:
		}
	}
}

// leasesOf returns how many items host holds; the error wraps
// desired.ErrNotFound when no member has that name.
func leasesOf(ctx context.Context, fleet desired.Fleet, host string) (int, error) {
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		return 0, err
	}
	for _, h := range hosts {
		if h.Name == host {
			return h.Leases, nil
		}
	}
	return 0, fmt.Errorf("host %s: %w", host, desired.ErrNotFound)
}
