package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/fence"
	"github.com/loopd/loopd/internal/hostid"
	"github.com/loopd/loopd/internal/transcript"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// errNoFleet means the store cfg opens cannot share work items between
// hosts (it does not implement store.Fleet).
var errNoFleet = errors.New("store does not implement store.Fleet (host membership and leases)")

// fleetOf returns store's lease side; the error names the store's type.
func fleetOf(st store.Store) (store.Fleet, error) {
	f, ok := st.(store.Fleet)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNoFleet, st)
	}
	return f, nil
}

// joinFleet makes a this host among the hosts sharing its store: its
// name (host.name, default the hostname), instance id (hostid.Instance),
// capacity (capacity.maxLiveSessions, 0 for none) and lease TTL
// (host.leaseSeconds), its lease clock, and the Mover that copies its
// items' transcripts to the store and back. The store must implement
// store.Fleet. A passive host heartbeats and assigns nothing
// (reconciler.Hosting.Passive).
func (a *app) joinFleet(cfg *schema.Config, passive bool) error {
	fleet, err := fleetOf(a.store)
	if err != nil {
		return err
	}
	name, err := cfg.Host.HostName()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	instance, err := hostid.Instance(cfg.StateDir)
	if err != nil {
		return err
	}
	a.fleet = fleet
	a.mover = transcript.NewMover(fleet, a.harnesses, name, a.journal)
	a.hosting = &reconciler.Hosting{
		Fleet:   fleet,
		Host:    desired.Host{Name: name, Instance: instance, Capacity: cfg.Capacity.MaxLive(), LeaseTTL: cfg.Host.LeaseTTL()},
		Clock:   &reconciler.LeaseClock{Elapsed: fence.Now},
		Journal: a.journal,
		Passive: passive,
		// SQLite is a fleet of one: no other host can take the items.
		Solo: cfg.Store.URL == "",
	}
	if cfg.Store.URL != "" {
		// Another host may take the items over: each agent ends by
		// itself once the daemon stopped renewing its leases.
		stamp := &fence.Stamp{Path: filepath.Join(cfg.StateDir, fenceStamp)}
		a.launcher.Fence, a.hosting.Fence = stamp.Path, stamp
		if g, err := stamp.Read(); err == nil && !passive {
			// A restart within the grant adopts the agents under it.
			a.hosting.Clock.Resume(g)
		}
	}
	return nil
}

// fenceStamp is the file, under the state dir, in which the daemon tells
// its agents' watchdogs until when they may run (package fence).
const fenceStamp = "fence-stamp"

func newHostsCmd(g *globals) *cobra.Command {
	var forget string
	cmd := &cobra.Command{
		Use:   "hosts [--forget NAME]",
		Short: "List the hosts sharing the store: liveness, drain, capacity, leases, last heartbeat",
		Long: `hosts lists every host that heartbeats into the store: NAME (host.name), LIVE
(its last heartbeat is within its leaseSeconds), DRAINING (loopd drain),
CAPACITY (capacity.maxLiveSessions, 0 for no limit), LEASES (the items it
holds) and HEARTBEAT (how long ago its last heartbeat was).

hosts --forget NAME removes a dead member from the list. It is refused while
NAME is live or still holds leases (the live hosts take those over once its
lease lapsed); a daemon that heartbeats under NAME again joins anew.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Listing reads, and works from an invalid config (readStore);
			// forgetting writes, and needs a valid one.
			var store store.Store
			var err error
			if forget != "" {
				_, store, err = g.openStore(cmd.Context())
			} else {
				_, store, err = g.readStore(cmd.Context())
			}
			if err != nil {
				return err
			}
			defer store.Close()
			fleet, err := fleetOf(store)
			if err != nil {
				return err
			}
			if forget != "" {
				if err := fleet.ForgetHost(cmd.Context(), forget); err != nil {
					return exitError{code: 1, err: err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "host %s forgotten\n", forget)
				return nil
			}
			hosts, err := fleet.Hosts(cmd.Context())
			if err != nil {
				return err
			}
			return printHosts(cmd.OutOrStdout(), hosts, time.Now())
		},
	}
	cmd.Flags().StringVar(&forget, "forget", "", "remove the dead member NAME (refused while it is live or holds leases)")
	return cmd
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
	force   bool
	poll    time.Duration
}

func newDrainCmd(g *globals) *cobra.Command {
	o := &drainOpts{poll: schema.DrainPoll}
	cmd := &cobra.Command{
		Use:   "drain [HOST]",
		Short: "Move a host's items to the other hosts, or (--undo) take it back into service",
		Long: `drain sets HOST (default: this host, host.name) draining: it takes no new
item, and its daemon stops each agent it runs cleanly, copies its final
transcript to the store and, once the agent is gone, releases the item's
lease. Another host then takes the item and resumes the same conversation.
Never do two live agents hold one conversation.

drain refuses at once when no other live host that is not draining exists
to take the items (--force drains anyway: the items wait for a host). It
waits until every item HOST held at the start is held by another live host,
or needs no host any more (closed, its agent gone), printing its progress,
and exits non-zero when --timeout passes first (the host stays draining).
drain --undo HOST takes the host back into service.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return drain(cmd.Context(), g, o, args, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the host's items to move")
	cmd.Flags().BoolVar(&o.undo, "undo", false, "take the host back into service")
	cmd.Flags().BoolVar(&o.force, "force", false, "drain even when no other live host can take the items")
	return cmd
}

// drain carries out loopd drain (see newDrainCmd).
func drain(ctx context.Context, g *globals, o *drainOpts, args []string, out io.Writer) error {
	cfg, st, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	host, err := cfg.Host.HostName()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	if len(args) == 1 {
		host = args[0]
	}
	fleet, err := fleetOf(st)
	if err != nil {
		return err
	}
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	if !slices.ContainsFunc(hosts, func(h desired.Host) bool { return h.Name == host }) {
		return exitError{code: 1, err: fmt.Errorf("drain %s: %w (see loopd hosts)", host, store.ErrNoHost)}
	}
	if err := reconciler.DrainTaker(hosts, host); err != nil && !o.undo && !o.force {
		return exitError{code: 1, err: fmt.Errorf("drain %s: %w; start or undrain one, or drain with --force", host, err)}
	}
	if err := fleet.SetDraining(ctx, host, !o.undo); err != nil {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	if o.undo {
		fmt.Fprintf(out, "host %s is back in service\n", host)
		return nil
	}
	records, err := st.Records(ctx)
	if err != nil {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	held := reconciler.DrainMoves(records, host)
	fmt.Fprintf(out, "host %s is draining: %d item(s) to move\n", host, len(held))
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last := -1
	t := time.NewTicker(o.poll)
	defer t.Stop()
	for {
		left, err := unmoved(ctx, st, fleet, host, held)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("drain %s: %w", host, err)
		}
		if err == nil && len(left) != last {
			fmt.Fprintf(out, "host %s: %d of %d item(s) moved\n", host, len(held)-len(left), len(held))
			last = len(left)
		}
		if err == nil && len(left) == 0 {
			fmt.Fprintf(out, "host %s is drained\n", host)
			return nil
		}
		select {
		case <-ctx.Done():
			return exitError{code: 1, err: fmt.Errorf("drain %s: %d item(s) not yet on another live host after %s (%s); the host stays draining",
				host, last, o.timeout, keyList(left))}
		case <-t.C:
		}
	}
}

// unmoved returns those of keys that still wait for their move off host
// (reconciler.DrainLeft), as the store says now.
func unmoved(ctx context.Context, store store.Store, fleet store.Fleet, host string, keys []desired.Key) ([]desired.Key, error) {
	hosts, err := fleet.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	records, err := store.Records(ctx)
	if err != nil {
		return nil, err
	}
	return reconciler.DrainLeft(records, hosts, host, keys), nil
}

// keyList joins keys for a message.
func keyList(keys []desired.Key) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}
