package reconciler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/fence"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// hostingRig is a Hosting on a real SQLite store, with its journal in
// the store.
func hostingRig(t *testing.T, host desired.Host, passive bool) (*Hosting, store.Fleet, store.Store) {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	var fleet store.Fleet = st
	rec := journal.NewRecorder(slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), st, time.Now)
	return &Hosting{Fleet: fleet, Host: host, Clock: &LeaseClock{Elapsed: fence.Now}, Journal: rec, Passive: passive}, fleet, st
}

// TestHostingPassiveJoinsNothing: a passive Hosting (reconcile --once on a
// shared store) writes no membership row and assigns nothing; its lease
// clock is valid only while its daemon's row is live, and lapses with it.
func TestHostingPassiveJoinsNothing(t *testing.T) {
	ctx := context.Background()
	ttl := 400 * time.Millisecond
	h, fleet, st := hostingRig(t, desired.Host{Name: "a", Instance: "cron", LeaseTTL: time.Hour}, true)
	key := desired.Key{Owner: "acme", Repo: "fleet", Number: 1}
	_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d-1", Key: key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: t.TempDir(),
		Delivery: &desired.Delivery{ID: "d-1", Event: "issues", Action: "opened", Sender: "octocat", Prompt: "[loopd] issues.opened\nfix it"}})
	require.NoError(t, err)

	require.NoError(t, h.Heartbeat(ctx))
	hosts, err := fleet.Hosts(ctx)
	require.NoError(t, err)
	assert.Empty(t, hosts, "no membership row")
	assert.False(t, h.Clock.Renewed(), "no daemon row: nothing is this host's")
	mine, err := h.Assign(ctx)
	require.NoError(t, err)
	assert.False(t, mine)
	records, err := st.Records(ctx)
	require.NoError(t, err)
	assert.Empty(t, records[0].Lease.Owner, "nothing assigned")

	require.NoError(t, fleet.Heartbeat(ctx, desired.Host{Name: "a", Instance: "daemon", LeaseTTL: ttl})) // the daemon
	require.NoError(t, h.Heartbeat(ctx))
	assert.True(t, h.Clock.Valid(), "the daemon's live row")
	assert.LessOrEqual(t, h.Clock.Remaining(), ttl-LeaseMargin(ttl))
	require.Eventually(t, func() bool { return !h.Clock.Valid() }, 5*time.Second, 10*time.Millisecond, "lapses with the daemon's row")
	hosts, err = fleet.Hosts(ctx)
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	assert.Equal(t, "daemon", hosts[0].Instance, "the passive heartbeat wrote nothing")
}

// TestHostingTaken: a heartbeat refused because another live instance
// holds the name is kept for Taken, and journaled once (host.taken) when
// this host had held the name; a later successful one clears it. A
// newcomer refused before it ever held the name journals nothing: it is
// refused (serve.refused), not taken over.
func TestHostingTaken(t *testing.T) {
	ctx := context.Background()
	taken := func(st store.Store) int {
		evs, err := st.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		n := 0
		for _, ev := range evs {
			if ev.Name == journal.HostTaken {
				n++
			}
		}
		return n
	}
	t.Run("newcomer", func(t *testing.T) {
		h, fleet, st := hostingRig(t, desired.Host{Name: "a", Instance: "new", LeaseTTL: time.Minute}, false)
		require.NoError(t, fleet.Heartbeat(ctx, desired.Host{Name: "a", Instance: "live", LeaseTTL: time.Hour}))
		require.ErrorIs(t, h.Heartbeat(ctx), store.ErrHostTaken)
		require.ErrorIs(t, h.Taken(), store.ErrHostTaken)
		assert.False(t, h.Clock.Renewed())
		assert.Zero(t, taken(st), "a newcomer refused is no host taken over")
	})
	t.Run("taken_over", func(t *testing.T) {
		h, fleet, st := hostingRig(t, desired.Host{Name: "a", Instance: "mine", LeaseTTL: time.Minute}, false)
		stealable := &stealableFleet{Fleet: fleet}
		h.Fleet = stealable
		require.NoError(t, h.Heartbeat(ctx))
		stealable.stolen.Store(true)
		for range 2 {
			require.ErrorIs(t, h.Heartbeat(ctx), store.ErrHostTaken)
		}
		require.ErrorIs(t, h.Taken(), store.ErrHostTaken)
		assert.Equal(t, 1, taken(st), "host.taken once per run of refusals")
		stealable.stolen.Store(false)
		require.NoError(t, h.Heartbeat(ctx))
		assert.NoError(t, h.Taken())
		assert.True(t, h.Clock.Valid())
	})
}

// stealableFleet refuses every heartbeat with store.ErrHostTaken while
// stolen is set, as the store does once another instance took the name.
type stealableFleet struct {
	store.Fleet
	stolen atomic.Bool
}

func (f *stealableFleet) Heartbeat(ctx context.Context, h desired.Host) error {
	if f.stolen.Load() {
		return fmt.Errorf("heartbeat %s: %w", h.Name, store.ErrHostTaken)
	}
	return f.Fleet.Heartbeat(ctx, h)
}

// TestSoloHostStaysValidPastItsLease: a host that is its store's only
// possible member (SQLite) may act on its items while its lease clock has
// lapsed, once a heartbeat succeeded (issue 21, case 11: the store held
// locked 12 s stopped the only host's agents); a host of a shared store
// may not, and neither may a solo one never renewed.
func TestSoloHostStaysValidPastItsLease(t *testing.T) {
	var now time.Duration
	clock := func() *LeaseClock { return &LeaseClock{Elapsed: func() time.Duration { return now }} }
	shared, solo := &Hosting{Clock: clock()}, &Hosting{Clock: clock(), Solo: true}
	assert.False(t, solo.Valid(), "never renewed: a daemon just started adopts, it does not act")
	for _, h := range []*Hosting{shared, solo} {
		h.Clock.Renew(0, 15*time.Second)
	}
	now = 5 * time.Second
	assert.True(t, shared.Valid())
	assert.True(t, solo.Valid())
	now = 13 * time.Second // past the lease less its margin
	assert.False(t, shared.Valid(), "another host may take the items")
	assert.True(t, solo.Valid(), "no other host can")
}

// TestHeartbeatWritesTheCapacityInForce: a hot reload of
// capacity.maxLiveSessions reaches the host's row at the next heartbeat
// (loopd hosts and the status page read it there).
func TestHeartbeatWritesTheCapacityInForce(t *testing.T) {
	ctx := context.Background()
	h, fleet, _ := hostingRig(t, desired.Host{Name: "a", Instance: "daemon", Capacity: 10, LeaseTTL: time.Hour}, false)
	capacity := 10
	h.Capacity = func() int { return capacity }
	require.NoError(t, h.Heartbeat(ctx))
	hosts, err := fleet.Hosts(ctx)
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	assert.Equal(t, 10, hosts[0].Capacity)
	capacity = 3 // the reload
	require.NoError(t, h.Heartbeat(ctx))
	hosts, err = fleet.Hosts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, hosts[0].Capacity)
}

// flakyFleet is a Fleet whose heartbeats fail while down is set, and
// counts them.
type flakyFleet struct {
	store.Fleet
	down   atomic.Bool
	failed atomic.Int32
}

func (f *flakyFleet) Heartbeat(ctx context.Context, h desired.Host) error {
	if f.down.Load() {
		f.failed.Add(1)
		return errors.New("dial tcp 127.0.0.1:5432: connection refused")
	}
	return f.Fleet.Heartbeat(ctx, h)
}

// TestStoreOutageIsJournaledOnce: a run of failed heartbeats is one
// outage: StoreDown says since when, store.unreachable is journaled once,
// timed at its start and written once the store answers again, and
// store.reachable once, after it.
func TestStoreOutageIsJournaledOnce(t *testing.T) {
	h, fleet, st := hostingRig(t, desired.Host{Name: "a", LeaseTTL: 150 * time.Millisecond}, false)
	flaky := &flakyFleet{Fleet: fleet}
	h.Fleet = flaky
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx, func() {}) }()
	defer func() { cancel(); <-done }()

	flaky.down.Store(true)
	require.Eventually(t, func() bool { return flaky.failed.Load() >= 3 }, 10*time.Second, 10*time.Millisecond)
	since, err := h.StoreDown()
	assert.False(t, since.IsZero())
	assert.ErrorContains(t, err, "connection refused")
	back := time.Now()
	flaky.down.Store(false)
	require.Eventually(t, func() bool { since, _ := h.StoreDown(); return since.IsZero() }, 10*time.Second, 10*time.Millisecond)
	var down, up []journal.Event
	require.Eventually(t, func() bool {
		events, err := st.Events(context.Background(), store.EventFilter{})
		require.NoError(t, err)
		down, up = nil, nil
		for _, e := range events {
			switch e.Name {
			case journal.StoreUnreachable:
				down = append(down, e)
			case journal.StoreReachable:
				up = append(up, e)
			}
		}
		return len(up) > 0
	}, 10*time.Second, 10*time.Millisecond)
	require.Len(t, down, 1)
	require.Len(t, up, 1)
	assert.True(t, down[0].Time.Before(back), "timed at the outage's start, not when written")
	assert.True(t, up[0].Time.After(back))
}

// TestHeartbeatStampsTheFence: each heartbeat writes the lease clock's
// grant to the fence stamp, its instant at most the TTL less the margin
// ahead; a failed one stamps nothing; a passive host (reconcile --once)
// writes none and takes the daemon's epoch from it.
func TestHeartbeatStampsTheFence(t *testing.T) {
	ttl := time.Hour
	h, fleet, _ := hostingRig(t, desired.Host{Name: "a", Instance: "daemon", LeaseTTL: ttl}, false)
	h.Fence = &fence.Stamp{Path: filepath.Join(t.TempDir(), "fence-stamp")}
	before := fence.Now()
	require.NoError(t, h.Heartbeat(context.Background()))
	g, err := h.Fence.Read()
	require.NoError(t, err)
	assert.Equal(t, h.Clock.Grant(), g)
	assert.Equal(t, uint64(1), g.Epoch, "the first renewal starts epoch 1")
	assert.GreaterOrEqual(t, g.Until, before+ttl-LeaseMargin(ttl))
	assert.LessOrEqual(t, g.Until, fence.Now()+ttl-LeaseMargin(ttl))

	// The daemon's epoch moves on; a passive host follows it.
	require.NoError(t, h.Fence.Write(fence.Grant{Until: g.Until, Epoch: 5}))
	passive, _, _ := hostingRig(t, desired.Host{Name: "a", Instance: "cron", LeaseTTL: ttl}, true)
	passive.Fleet, passive.Fence = fleet, h.Fence
	require.NoError(t, passive.Heartbeat(context.Background()))
	assert.Equal(t, uint64(5), passive.Clock.Epoch())
	assert.True(t, passive.ValidAt(5))
	got, err := h.Fence.Read()
	require.NoError(t, err)
	assert.Equal(t, uint64(5), got.Epoch, "a passive host writes no stamp")

	flaky := &flakyFleet{Fleet: fleet}
	flaky.down.Store(true)
	h.Fleet = flaky
	require.Error(t, h.Heartbeat(context.Background()))
	got, err = h.Fence.Read()
	require.NoError(t, err)
	assert.Equal(t, uint64(5), got.Epoch, "a failed heartbeat stamps nothing")
}

// TestLeaseEpochFencesWhatWasDrawnBeforeALapse: a renewal of a lapsed
// clock starts a new epoch, so that what the host drew under the old one
// (a pass, a spawn: a daemon paused between its plan and its act) is not
// valid although the clock is again; renewals of a valid clock keep the
// epoch. A restart takes up the stamp's epoch, kept when it renews within
// the stamp's grant (it adopts the agents under it) and moved on after.
// A solo host's epochs fence nothing.
func TestLeaseEpochFencesWhatWasDrawnBeforeALapse(t *testing.T) {
	var now time.Duration
	ttl := 10 * time.Second // valid 8 s from each renewal's start
	c := &LeaseClock{Elapsed: func() time.Duration { return now }}
	assert.Zero(t, c.Epoch())
	assert.False(t, c.ValidAt(0), "never renewed")
	c.Renew(now, ttl)
	assert.Equal(t, uint64(1), c.Epoch())
	assert.True(t, c.ValidAt(1))
	now = 5 * time.Second
	c.Renew(now, ttl)
	assert.Equal(t, uint64(1), c.Epoch(), "renewed while valid")
	now = 14 * time.Second
	assert.False(t, c.ValidAt(1), "lapsed")
	// The pass drew under epoch 1; a heartbeat renews before it acts.
	c.Renew(now, ttl)
	assert.True(t, c.Valid())
	assert.False(t, c.ValidAt(1), "drawn before the lapse")
	assert.True(t, c.ValidAt(2))
	assert.Equal(t, fence.Grant{Until: now + ttl - LeaseMargin(ttl), Epoch: 2}, c.Grant())

	restarted := func(g fence.Grant) *LeaseClock {
		c := &LeaseClock{Elapsed: func() time.Duration { return now }}
		c.Resume(g)
		assert.False(t, c.Valid(), "a resumed clock is renewed by a heartbeat only")
		c.Renew(now, ttl)
		return c
	}
	assert.Equal(t, uint64(2), restarted(c.Grant()).Epoch(), "within the grant: the agents under it are adopted")
	assert.Equal(t, uint64(3), restarted(fence.Grant{Until: now, Epoch: 2}).Epoch(), "after it: they were fenced")

	shared := &Hosting{Clock: c}
	assert.False(t, shared.ValidAt(1))
	assert.True(t, shared.ValidAt(2))
	solo := &Hosting{Clock: &LeaseClock{Elapsed: func() time.Duration { return now }}, Solo: true}
	solo.Clock.Renew(now, ttl)
	now += ttl
	solo.Clock.Renew(now, ttl)
	assert.Equal(t, uint64(2), solo.Clock.Epoch())
	assert.True(t, solo.ValidAt(1), "a solo host's lapses stop nothing")
}

// TestLapsedIsToldOnce: a heartbeat that renews a lapsed lease clock of a
// fenced host is told to the next pass once (Policy.Fenced); one that
// renews a valid clock is not.
func TestLapsedIsToldOnce(t *testing.T) {
	ttl := 100 * time.Millisecond
	h, _, _ := hostingRig(t, desired.Host{Name: "a", LeaseTTL: ttl}, false)
	h.Fence = &fence.Stamp{Path: filepath.Join(t.TempDir(), "fence-stamp")}
	ctx := context.Background()
	require.NoError(t, h.Heartbeat(ctx))
	assert.False(t, h.Lapsed(), "the first renewal is no lapse")
	require.Eventually(t, func() bool { return !h.Clock.Valid() }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, h.Heartbeat(ctx))
	assert.True(t, h.Lapsed())
	assert.False(t, h.Lapsed(), "told once")
}

// slowAssignFleet is a Fleet whose Assign waits until release is closed,
// as one does behind a busy store's writers, counting the heartbeats
// that succeed meanwhile.
type slowAssignFleet struct {
	store.Fleet
	assigning chan struct{} // closed when the first Assign started
	release   chan struct{}
	once      atomic.Bool
	beats     atomic.Int32
}

func (f *slowAssignFleet) Heartbeat(ctx context.Context, h desired.Host) error {
	err := f.Fleet.Heartbeat(ctx, h)
	if err == nil {
		f.beats.Add(1)
	}
	return err
}

func (f *slowAssignFleet) Assign(ctx context.Context) ([]store.LeaseChange, error) {
	if f.once.CompareAndSwap(false, true) {
		close(f.assigning)
	}
	select {
	case <-f.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return f.Fleet.Assign(ctx)
}

// TestHeartbeatsGoOnWhileAssignWaits: an Assign that waits (a takeover's
// many rows at a busy store) never holds up the heartbeats behind it, so
// the lease clock stays valid through it; the wake for the items it gave
// this host comes once it returns.
func TestHeartbeatsGoOnWhileAssignWaits(t *testing.T) {
	ttl := 300 * time.Millisecond
	h, fleet, st := hostingRig(t, desired.Host{Name: "a", LeaseTTL: ttl}, false)
	slow := &slowAssignFleet{Fleet: fleet, assigning: make(chan struct{}), release: make(chan struct{})}
	h.Fleet = slow
	key := desired.Key{Owner: "acme", Repo: "fleet", Number: 1}
	_, err := st.Ingest(context.Background(), store.Ingest{DeliveryID: "d-1", Key: key, Kind: desired.KindIssue, Harness: "claude-code", Cwd: t.TempDir(),
		Delivery: &desired.Delivery{ID: "d-1", Event: "issues", Action: "opened", Sender: "octocat", Prompt: "[loopd] issues.opened\nfix it"}})
	require.NoError(t, err)

	woken := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx, func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()

	<-slow.assigning
	at := slow.beats.Load()
	require.Eventually(t, func() bool { return slow.beats.Load() >= at+3 }, 30*time.Second, 5*time.Millisecond,
		"heartbeats go on while Assign waits")
	select {
	case <-woken:
		t.Fatal("woken before Assign returned")
	default:
	}
	close(slow.release)
	select {
	case <-woken:
	case <-time.After(30 * time.Second):
		t.Fatal("no wake after Assign gave this host its item")
	}
	records, err := st.Records(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "a", records[0].Lease.Owner)
}

// TestRestartPastTheGrantIsALapse: a daemon that takes up the grant of
// the process before it (its fence stamp) and first renews after the
// grant ran out tells a lapse (the watchdogs ended its agents, which the
// pass then resumes counting no failure); one that renews within the
// grant tells none, and adopts them.
func TestRestartPastTheGrantIsALapse(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		left   time.Duration // of the earlier grant at the restart
		lapsed bool
	}{
		{"within_the_grant", time.Hour, false},
		{"past_the_grant", -time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _, _ := hostingRig(t, desired.Host{Name: "a", LeaseTTL: time.Minute}, false)
			h.Fence = &fence.Stamp{Path: filepath.Join(t.TempDir(), "fence-stamp")}
			h.Clock.Resume(fence.Grant{Until: fence.Now() + tc.left, Epoch: 7})
			require.NoError(t, h.Heartbeat(ctx))
			assert.Equal(t, tc.lapsed, h.Lapsed())
			if tc.lapsed {
				assert.Equal(t, uint64(8), h.Clock.Epoch(), "a new epoch")
			} else {
				assert.Equal(t, uint64(7), h.Clock.Epoch(), "the adopted agents' epoch")
			}
			require.NoError(t, h.Heartbeat(ctx))
			assert.False(t, h.Lapsed(), "the next renewal is no lapse")
		})
	}
}

// TestRoomElsewhere: the room of the other live hosts that are not
// draining, by their capacity less the items they hold; one with no limit
// takes any number; this host, a dead host and a draining one count
// nothing; a passive or solo host hands nothing over.
func TestRoomElsewhere(t *testing.T) {
	h := &Hosting{Host: desired.Host{Name: "a"}}
	host := func(name string, capacity, leases int, live, draining bool) desired.Host {
		return desired.Host{Name: name, Capacity: capacity, Leases: leases, Live: live, Draining: draining}
	}
	for _, tc := range []struct {
		name  string
		hosts []desired.Host
		want  int
	}{
		{"none", nil, 0},
		{"free_slots", []desired.Host{host("a", 4, 6, true, false), host("b", 4, 1, true, false), host("c", 2, 0, true, false)}, 5},
		{"a_full_host_has_none", []desired.Host{host("b", 4, 5, true, false)}, 0},
		{"dead_and_draining_hosts_take_nothing", []desired.Host{host("b", 4, 0, false, false), host("c", 4, 0, true, true)}, 0},
		{"no_limit_takes_any_number", []desired.Host{host("b", 0, 40, true, false)}, math.MaxInt32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.hosts = tc.hosts
			assert.Equal(t, tc.want, h.RoomElsewhere())
		})
	}
	h.hosts = []desired.Host{{Name: "b", Capacity: 4, Live: true}}
	h.Passive = true
	assert.Zero(t, h.RoomElsewhere(), "a passive host hands nothing over")
	h.Passive, h.Solo = false, true
	assert.Zero(t, h.RoomElsewhere(), "a solo host has no other")
}

// TestConfirmRoomReadsTheStore: the room a pass hands items over on is
// the store's word, not the last heartbeat's: a host set draining since
// has none.
func TestConfirmRoomReadsTheStore(t *testing.T) {
	ctx := context.Background()
	h, fleet, _ := hostingRig(t, desired.Host{Name: "a", LeaseTTL: time.Minute}, false)
	require.NoError(t, fleet.Heartbeat(ctx, desired.Host{Name: "b", Instance: "b", Capacity: 4, LeaseTTL: time.Minute}))
	require.NoError(t, h.Heartbeat(ctx))
	assert.Equal(t, 4, h.RoomElsewhere(), "as the heartbeat read it")
	require.NoError(t, fleet.SetDraining(ctx, "b", true))
	assert.Equal(t, 4, h.RoomElsewhere(), "the last heartbeat's reading, stale")
	assert.Zero(t, h.confirmRoom(ctx), "b is draining")
}
