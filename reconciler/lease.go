package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/fence"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// LeaseClock is this host's own reckoning of its leases, on a monotonic
// clock: valid until the start of its last successful heartbeat plus the
// lease TTL less LeaseMargin. The store reckons a lease's expiry from the
// heartbeat's commit on its own clock, which comes later, so this host
// stops acting on its items before any other host can take one over, even
// when its heartbeats stall (a SIGSTOP, a partition) and whatever the wall
// clocks say.
//
// Its epoch is the fencing token of what the host does under it: it grows
// at each renewal that finds the clock lapsed (or never valid), so that a
// pass, or a spawn, drawn under an epoch before a lapse is refused after
// the renewal (ValidAt; the fence stamp carries it to each pane's launcher
// and watchdog, package fence) although the clock is valid again: another
// host may hold those items by then. The zero LeaseClock is not valid; its
// methods are safe for concurrent use.
type LeaseClock struct {
	// Elapsed is the monotonic clock: fence.Now (CLOCK_BOOTTIME, the fence
	// stamp's clock) in production.
	Elapsed func() time.Duration

	mu      sync.Mutex
	until   time.Duration
	epoch   uint64
	renewed bool
	resumed bool // Resume took up an earlier process's grant
}

// LeaseMargin returns how long before a lease of ttl expires, counted from
// the start of the heartbeat that renewed it, this host stops acting on
// it: a fifth of ttl (3 s of the default 15 s), which covers a heartbeat's
// round trip and the spread of a pass between the check and the act.
func LeaseMargin(ttl time.Duration) time.Duration { return ttl / 5 }

// Renew records a successful heartbeat that started at start (an
// Elapsed reading taken before it was sent): the clock is valid until
// start + ttl - LeaseMargin(ttl). A clock that had lapsed by now, or was
// never valid, starts a new epoch. It reports whether the clock lapsed
// after an earlier renewal of this process, or after the grant of an
// earlier process that Resume took up (what Hosting.Lapsed tells: the
// agents' watchdogs ended them meanwhile).
func (c *LeaseClock) Renew(start, ttl time.Duration) (lapsed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.until <= c.Elapsed() {
		c.epoch++
		lapsed = c.renewed || c.resumed
	}
	c.resumed = false
	c.until, c.renewed = start+ttl-LeaseMargin(ttl), true
	return lapsed
}

// Resume takes up, before the first Renew, the grant an earlier process
// of this host left in its fence stamp: a renewal before g.Until keeps its
// epoch, and the agents the daemon adopts under it run on; a later one
// starts the next epoch and is a lapse (Renew), as their watchdogs have
// ended them by then: a daemon stopped for longer than its lease finds
// its agents fenced, not crashed.
func (c *LeaseClock) Resume(g fence.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.renewed {
		c.until, c.epoch, c.resumed = g.Until, g.Epoch, true
	}
}

// Follow sets the epoch to that of the grant the host's daemon stamped,
// for a process that follows its heartbeats rather than making them
// (Hosting.Passive): its spawns run under the daemon's epoch.
func (c *LeaseClock) Follow(g fence.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch = g.Epoch
}

// Valid reports whether this host may act on the items it holds now.
func (c *LeaseClock) Valid() bool { return c.Remaining() > 0 }

// Epoch returns the clock's current epoch (0 before the first Renew).
func (c *LeaseClock) Epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// ValidAt reports whether this host may act now on what it drew under
// epoch: the clock is valid and has not lapsed since (the same epoch).
func (c *LeaseClock) ValidAt(epoch uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewed && c.epoch == epoch && c.until > c.Elapsed()
}

// Grant returns what the fence stamp must say for the clock as it is:
// its expiry, on Elapsed's clock, and its epoch.
func (c *LeaseClock) Grant() fence.Grant {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fence.Grant{Until: c.until, Epoch: c.epoch}
}

// Remaining returns how long the clock stays valid, 0 or less once it
// lapsed (and before the first Renew).
func (c *LeaseClock) Remaining() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.renewed {
		return 0
	}
	return c.until - c.Elapsed()
}

// Renewed reports whether a heartbeat ever succeeded: a clock that lapsed
// once it was valid stops the local agents (self-fencing); one never
// renewed means the daemon has just started, and adopts them.
func (c *LeaseClock) Renewed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.renewed
}

// Fleet is what Hosting asks of the store's hosts and leases
// (store.Fleet has it; its doc comments give each method's contract).
type Fleet interface {
	Heartbeat(ctx context.Context, h desired.Host) error
	Hosts(ctx context.Context) ([]desired.Host, error)
	Assign(ctx context.Context) ([]store.LeaseChange, error)
}

// Hosting is this host among the hosts that share the store
// (docs/design.md, "Many hosts"): its membership row and heartbeat, its
// lease clock, the Assign calls that hand out items with no live host,
// and its drain flag as the store holds it.
type Hosting struct {
	Fleet Fleet
	// Host is this host's row: Name (host.name), Capacity
	// (capacity.maxLiveSessions) and LeaseTTL (host.leaseSeconds).
	Host    desired.Host
	Clock   *LeaseClock
	Journal *journal.Recorder
	// Passive is set for a loopd reconcile --once on a shared store
	// (PostgreSQL): it is no member, only a safety net beside this host's
	// daemon. Heartbeat writes nothing and takes the lease clock from
	// the daemon's last heartbeat; Assign assigns nothing.
	Passive bool
	// Capacity, when set, is read at each heartbeat for the row's
	// Capacity (a hot reload of capacity.maxLiveSessions shows in loopd
	// hosts and on the status page from the next heartbeat on); nil
	// keeps Host.Capacity.
	Capacity func() int
	// Solo is set when this host is its store's only possible member
	// (SQLite: the state dir's lock admits one daemon, and the cron pass
	// of that state dir is the same host, name and instance): no other
	// host can ever take its items, so its lease clock lapsing (the store
	// held locked by a backup or a sqlite3 shell past the lease) stops
	// none of its agents (Valid). It re-acquires at the next heartbeat.
	Solo bool
	// Fence, when set, is the fence stamp of this host's agents: each
	// heartbeat that renewed the lease clock writes its Grant there, for
	// the agents' launchers and watchdogs (package fence), so that an
	// agent ends by itself once it passed with no renewal, whatever became
	// of the daemon. A Passive host reads the daemon's epoch from it
	// instead. The clock's Elapsed must then be fence.Now.
	Fence *fence.Stamp

	mu       sync.Mutex
	draining bool
	known    bool           // draining was read once
	taken    error          // the last heartbeat's store.ErrHostTaken, nil once one succeeds
	lapsed   bool           // a heartbeat renewed the lease clock after it lapsed, and no pass took it since
	down     time.Time      // when the heartbeats found the store out of reach; zero while it answers
	downErr  error          // the first failure of that outage
	hosts    []desired.Host // the membership rows as the last heartbeat read them
}

// Lapsed reports, once, whether a heartbeat renewed this host's lease
// clock after it had lapsed since the last call: with a fence stamp
// (Fence), every local agent was ended by its watchdog meanwhile
// (Policy.Fenced).
func (h *Hosting) Lapsed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	lapsed := h.lapsed
	h.lapsed = false
	return lapsed
}

// StoreDown returns since when the heartbeats find the store out of reach,
// and the outage's first error; a zero time while it answers.
func (h *Hosting) StoreDown() (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down, h.downErr
}

// storeFailed records a heartbeat that could not reach the store: the
// first of an outage journals store.unreachable, whose row waits for the
// store (RecordLater).
func (h *Hosting) storeFailed(ctx context.Context, err error) {
	h.mu.Lock()
	first := h.down.IsZero()
	if first {
		h.down, h.downErr = time.Now(), err
	}
	h.mu.Unlock()
	if first {
		h.Journal.RecordLater(ctx, slog.LevelError, journal.StoreUnreachable, "", journal.KeyHost, h.Host.Name, journal.KeyErr, err)
	}
}

// storeAnswered records a heartbeat that reached the store: after an
// outage the store.unreachable row is written, then store.reachable.
func (h *Hosting) storeAnswered(ctx context.Context) {
	h.mu.Lock()
	since := h.down
	h.down, h.downErr = time.Time{}, nil
	h.mu.Unlock()
	if since.IsZero() {
		return
	}
	_ = h.Journal.Flush(ctx) // a row it could not write waits for the next Flush
	h.Journal.Record(ctx, slog.LevelWarn, journal.StoreReachable, "", journal.KeyHost, h.Host.Name,
		journal.KeyDownFor, time.Since(since).Round(time.Millisecond))
}

// Heartbeat writes this host's membership row, which renews every lease
// it holds, renews the lease clock from the time it started, and reads
// this host's drain flag back (host.draining when it changed). A
// heartbeat refused because another live instance holds the name
// (store.ErrHostTaken) is kept for Taken and, once this host's own
// heartbeats had held the name, journaled (host.taken, once per run of
// them). The error names the host.
func (h *Hosting) Heartbeat(ctx context.Context) error {
	if h.Passive {
		return h.follow(ctx)
	}
	start := h.Clock.Elapsed()
	row := h.Host
	if h.Capacity != nil {
		row.Capacity = h.Capacity()
	}
	err := h.Fleet.Heartbeat(ctx, row)
	if errors.Is(err, store.ErrHostTaken) {
		h.mu.Lock()
		first := h.taken == nil
		h.taken = err
		h.mu.Unlock()
		// A daemon that never held the name is refused (serve.refused),
		// not taken over: its row would alarm about the live one.
		if first && h.Clock.Renewed() {
			h.Journal.Record(ctx, slog.LevelError, journal.HostTaken, "", journal.KeyHost, h.Host.Name, journal.KeyErr, err)
		}
	}
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", h.Host.Name, err)
	}
	lapsed := h.Clock.Renew(start, h.Host.LeaseTTL)
	h.mu.Lock()
	h.taken = nil
	h.lapsed = h.lapsed || h.Fence != nil && lapsed
	h.mu.Unlock()
	if h.Fence != nil {
		// The grant's instant is the clock's own, never one recomputed
		// here: a freeze between the two would extend it by the freeze.
		if err := h.Fence.Write(h.Clock.Grant()); err != nil {
			return fmt.Errorf("heartbeat %s: %w: %w", h.Host.Name, errStamp, err)
		}
	}
	if err := h.readDraining(ctx); err != nil {
		return fmt.Errorf("heartbeat %s: %w", h.Host.Name, err)
	}
	return nil
}

// readDraining reads this host's drain flag from the store's membership
// rows (setDraining), and keeps the rows for RoomElsewhere.
func (h *Hosting) readDraining(ctx context.Context) error {
	hosts, err := h.Fleet.Hosts(ctx)
	if err != nil {
		return err // the store names the operation
	}
	h.mu.Lock()
	h.hosts = hosts
	h.mu.Unlock()
	for _, m := range hosts {
		if m.Name == h.Host.Name {
			h.setDraining(ctx, m.Draining)
		}
	}
	return nil
}

// confirmDraining reads the drain flag from the store again when this
// host believes it is draining, so that Draining, which the pass then
// reads, is the store's word: a pass hands its items over (and stops
// their agents) never on a flag that `loopd drain --undo` cleared since
// the last heartbeat, which would hand back at once the items Assign just
// gave it. Not draining costs no read. The error names the host.
func (h *Hosting) confirmDraining(ctx context.Context) error {
	if !h.Draining() {
		return nil
	}
	if err := h.readDraining(ctx); err != nil {
		return fmt.Errorf("read drain flag %s: %w", h.Host.Name, err)
	}
	return nil
}

// setDraining records the drain flag read from the store, and journals
// host.draining when it changed (or is set at start).
func (h *Hosting) setDraining(ctx context.Context, draining bool) {
	h.mu.Lock()
	changed := draining != h.draining || !h.known && draining
	h.draining, h.known = draining, true
	h.mu.Unlock()
	if changed {
		h.Journal.Record(ctx, slog.LevelInfo, journal.HostDraining, "", journal.KeyHost, h.Host.Name, journal.KeyDraining, draining)
	}
}

// follow is Heartbeat of a Passive host: it reads this host's row and,
// while it is live, renews the lease clock as the daemon's last
// heartbeat did (its age on this host's wall clock, which LeaseMargin
// covers against the store's), and reads the drain flag. With no live
// row the clock is never renewed, and no item is this host's to run.
func (h *Hosting) follow(ctx context.Context) error {
	start := h.Clock.Elapsed()
	hosts, err := h.Fleet.Hosts(ctx)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", h.Host.Name, err)
	}
	for _, m := range hosts {
		if m.Name == h.Host.Name && m.Live {
			h.Clock.Renew(start-max(time.Since(m.Heartbeat), 0), m.LeaseTTL)
			h.setDraining(ctx, m.Draining)
		}
	}
	if h.Fence != nil {
		// Unreadable, the clock keeps an epoch of its own, which no
		// launcher of the daemon's agents accepts.
		if g, err := h.Fence.Read(); err == nil {
			h.Clock.Follow(g)
		}
	}
	return nil
}

// Valid reports whether this host may act on the items it holds now: its
// lease clock is valid, or it is its store's only member (Solo) and a
// heartbeat succeeded once, since no other host can have taken them.
func (h *Hosting) Valid() bool {
	return h.Clock.Valid() || h.Solo && h.Clock.Renewed()
}

// ValidAt reports whether this host may act now on what it drew under
// epoch (LeaseClock.Epoch when it drew it): as Valid, and the clock has
// not lapsed since (LeaseClock.ValidAt). A Solo host's epochs fence
// nothing, as its lapses stop no agent.
func (h *Hosting) ValidAt(epoch uint64) bool {
	return h.Clock.ValidAt(epoch) || h.Solo && h.Clock.Renewed()
}

// Taken returns the error of the last heartbeat when another live
// instance holds this host's name (it wraps store.ErrHostTaken), nil
// otherwise: the daemon then plans nothing, and its lapsed lease clock
// stops its local agents.
func (h *Hosting) Taken() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taken
}

// RoomElsewhere returns how many more items the other live hosts that
// are not draining may take, by the membership rows the last heartbeat
// read: each host's Capacity less the items it holds, and a host with no
// limit (Capacity 0) as much as any pass can hand over. 0 for a Passive
// or Solo host, which hands nothing over (the daemon does, and SQLite
// has no other host).
func (h *Hosting) RoomElsewhere() int {
	if h.Passive || h.Solo {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	room := 0
	for _, o := range h.hosts {
		switch {
		case o.Name == h.Host.Name || !o.Live || o.Draining:
		case o.Capacity <= 0:
			return math.MaxInt32
		default:
			room += max(o.Capacity-o.Leases, 0)
		}
	}
	return room
}

// confirmRoom reads the membership rows again and returns RoomElsewhere
// by them, for a pass about to hand items over on the last heartbeat's
// reading: a host set draining, or given items, since then has less room
// than it had. A read that fails returns 0: nothing is handed over on a
// guess.
func (h *Hosting) confirmRoom(ctx context.Context) int {
	if err := h.readDraining(ctx); err != nil {
		return 0
	}
	return h.RoomElsewhere()
}

// Draining reports whether this host is set draining (loopd drain), as
// its last heartbeat read it.
func (h *Hosting) Draining() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.draining
}

// Assign hands every item that needs a host and has no live one to the
// live host with the most free capacity (store.Fleet.Assign), and
// journals each change: lease.acquired for an item no host held,
// lease.moved for one taken over. It reports whether any item came to
// this host. A Passive host assigns nothing.
func (h *Hosting) Assign(ctx context.Context) (bool, error) {
	if h.Passive {
		return false, nil
	}
	changes, err := h.Fleet.Assign(ctx)
	if err != nil {
		return false, fmt.Errorf("assign: %w", err)
	}
	mine := false
	for _, c := range changes {
		mine = mine || c.To == h.Host.Name
		if c.From == "" {
			h.Journal.Record(ctx, slog.LevelInfo, journal.LeaseAcquired, c.Key.String(), journal.KeyToHost, c.To, journal.KeyLeaseGen, c.Generation)
			continue
		}
		h.Journal.Record(ctx, slog.LevelWarn, journal.LeaseMoved, c.Key.String(), journal.KeyFromHost, c.From, journal.KeyToHost, c.To,
			journal.KeyLeaseGen, c.Generation)
	}
	return mine, nil
}

// errStamp marks a heartbeat whose store write succeeded but whose
// fence stamp could not be written.
var errStamp = errors.New("leases renewed")

// HeartbeatReason is the reason of host.heartbeat_failed, and
// StampReason its reason when the store renewed the leases but the fence
// stamp could not be written (the agents end at the last one's instant).
const (
	HeartbeatReason = "store_unreachable"
	StampReason     = "fence_stamp_failed"
)

// Run heartbeats every LeaseTTL/3 until ctx ends, each success followed
// by an Assign, and calls wake when an item came to this host, when its
// drain flag changed, when the other hosts' room grew (RoomElsewhere: an
// item queued here may go there), and when its lease clock lapses after
// failed heartbeats (the pass then stops the local agents). A failure is
// journaled (host.heartbeat_failed, with the lease clock's remaining
// time); the journal's Limiter folds a run of them.
//
// The Assigns run beside the heartbeats (assignAfter), never before the
// next one: a takeover of many items journals a row for each, and each
// row waits its turn at a busy store's writers, so an Assign that held up
// the heartbeat could outlast this host's own lease clock and lose it the
// items it holds, the ones it was just given among them.
func (h *Hosting) Run(ctx context.Context, wake func()) {
	every := max(h.Host.LeaseTTL/3, 10*time.Millisecond)
	beats := make(chan struct{}, 1)
	assigned := make(chan struct{})
	go func() { defer close(assigned); h.assignAfter(ctx, beats, wake) }()
	defer func() { <-assigned }()
	t := time.NewTimer(every)
	defer t.Stop()
	var lapse *time.Timer
	defer func() {
		if lapse != nil {
			lapse.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		draining, room := h.Draining(), h.RoomElsewhere()
		err := h.Heartbeat(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil, errors.Is(err, store.ErrHostTaken), errors.Is(err, errStamp):
			h.storeAnswered(ctx)
		default:
			h.storeFailed(ctx, err)
		}
		switch {
		case errors.Is(err, store.ErrHostTaken):
			wake() // the pass stops planning, and fences
		case err != nil:
			left := h.Clock.Remaining()
			reason := HeartbeatReason
			if errors.Is(err, errStamp) {
				reason = StampReason
			}
			h.Journal.Record(ctx, slog.LevelError, journal.HostHeartbeatFailed, "", journal.KeyHost, h.Host.Name,
				journal.KeyReason, reason, journal.KeyLeaseRemaining, max(left, 0).Round(time.Millisecond), journal.KeyErr, err)
			if left > 0 && left < every && lapse == nil {
				lapse = time.AfterFunc(left, wake)
			}
		default:
			if lapse != nil {
				lapse.Stop()
				lapse = nil
			}
			select {
			case beats <- struct{}{}:
			default: // an Assign is due already
			}
			if draining != h.Draining() || h.RoomElsewhere() > room {
				wake() // a drain to carry out, or room for what waits here
			}
		}
		next := every
		if err == nil {
			// The rows the heartbeat has just read (readDraining).
			h.mu.Lock()
			hosts := h.hosts
			h.mu.Unlock()
			next = nextBeat(every, time.Now(), h.Host.Name, hosts)
		}
		t.Reset(next)
	}
}

// assignAfter calls Assign after each heartbeat that succeeded (a signal
// on beats; one still pending stands for any number) until ctx ends, and
// wake when an item came to this host. A failure is journaled
// (host.heartbeat_failed, reason assign_failed); the next heartbeat tries
// again.
func (h *Hosting) assignAfter(ctx context.Context, beats <-chan struct{}, wake func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-beats:
		}
		mine, err := h.Assign(ctx)
		if err != nil && ctx.Err() == nil {
			h.Journal.Record(ctx, slog.LevelError, journal.HostHeartbeatFailed, "", journal.KeyHost, h.Host.Name,
				journal.KeyReason, "assign_failed", journal.KeyErr, err)
		}
		if mine {
			wake()
		}
	}
}

// nextBeat is how long until this host's next heartbeat and Assign: every,
// or sooner when another host that holds leases stopped heartbeating, so
// that its items are taken over as soon as Assign may (its last heartbeat
// plus its TTL and schema.TakeoverMargin, plus schema.LeaseExpirySlack),
// not up to every later.
func nextBeat(every time.Duration, now time.Time, self string, hosts []desired.Host) time.Duration {
	next := every
	for _, o := range hosts {
		if o.Name == self || o.Leases == 0 {
			continue
		}
		if d := o.Heartbeat.Add(o.LeaseTTL+schema.TakeoverMargin).Sub(now) + schema.LeaseExpirySlack; d < next {
			next = max(d, schema.LeaseExpirySlack)
		}
	}
	return next
}

// needsAssign reports whether some record needs a host
// (desired.Record.NeedsHost) and has no live one, by the lease as read
// (its owner's expiry against now): the pass then calls Assign before it
// plans. Assign itself decides, on the store's clock; this only spares
// the call when nothing can change.
func needsAssign(records []desired.Record, now time.Time) bool {
	return slices.ContainsFunc(records, func(r desired.Record) bool { return unhosted(r, now) })
}

// unhosted reports whether r needs a host and no live host holds it.
func unhosted(r desired.Record, now time.Time) bool {
	return r.NeedsHost() && (r.Lease.Owner == "" || r.Lease.Lapsed(now))
}

// dryRunLeases returns records with every unhosted item as host's, in
// memory only: a dry run assigns nothing, and shows what this host would
// do with the items that Assign may give it (with one host, all of them).
func dryRunLeases(records []desired.Record, host string, now time.Time) []desired.Record {
	out := slices.Clone(records)
	for i := range out {
		if unhosted(out[i], now) {
			out[i].Lease.Owner = host
		}
	}
	return out
}
