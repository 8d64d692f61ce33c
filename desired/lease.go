package desired

import "time"

// Lease is a work item's ownership by one host. An item is run by its
// lease's owner only; every status write, outbox entry and transcript
// append carries the writer's Generation, and the store refuses one whose
// Generation is not the item's (store.ErrFenced).
type Lease struct {
	// Owner is the host name, "" when no host holds the item.
	Owner string
	// Generation is the fencing generation: 0 for an item never leased,
	// and one more on every change of Owner (a release included).
	Generation int64
	// Expires is when the lease lapses unless its owner heartbeats again:
	// the owner's last heartbeat plus its lease TTL, on the store's clock.
	// Zero when Owner is "".
	Expires time.Time
}

// Lapsed reports whether l has an owner whose lease expired by now: the
// owner stopped heartbeating, and another host may take the item.
func (l Lease) Lapsed(now time.Time) bool {
	return l.Owner != "" && !l.Expires.After(now)
}

// Host is one member of the hosts that share a store.
type Host struct {
	Name string
	// Instance identifies the daemon that heartbeats under Name: an id
	// it keeps in its state dir (internal/hostid), so that a restart keeps it and another
	// daemon given the same name (another state dir) has another. Two
	// live instances never share a name (store.ErrHostTaken).
	Instance string
	// Capacity is how many open items the host takes at most
	// (capacity.maxLiveSessions); 0 means no limit.
	Capacity int
	// LeaseTTL is how long the host's leases outlive its last heartbeat
	// (host.leaseSeconds).
	LeaseTTL time.Duration
	// Draining is set by loopd drain: the host takes no new item and
	// hands its items back (store.Fleet.ReleaseLease) once their agents are stopped.
	Draining bool
	// Heartbeat is the host's last heartbeat, on the store's clock;
	// store.Fleet.Hosts fills it in, Heartbeat sets it.
	Heartbeat time.Time
	// Leases is how many items the host holds (Hosts fills it in).
	Leases int
	// Live reports whether Heartbeat+LeaseTTL is still ahead of the
	// store's clock (Hosts fills it in).
	Live bool
}

// NeedsHost reports whether r needs a host to run it (store.Fleet.Assign's
// rule): it is open, or closed with an agent that may still run
// (Status.Phase not Stopped, Exited or empty).
func (r Record) NeedsHost() bool {
	switch r.Status.Phase {
	case "", PhaseStopped, PhaseExited:
		return !r.Spec.Closed
	}
	return true
}
