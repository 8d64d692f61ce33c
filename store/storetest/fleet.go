package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// Bounds of the fleet cases' waits. They bound how long a broken store
// takes to fail; nothing is timed.
const (
	// shortTTL is the lease TTL of a host's last heartbeat when a case
	// lets it die (letLapse).
	shortTTL = 300 * time.Millisecond
	// longTTL is the lease TTL of a host that stays live for a case.
	longTTL = time.Hour
	// waitFleet bounds a wait for a lease to lapse or a wake to come.
	waitFleet = 10 * time.Second
	pollFleet = 20 * time.Millisecond
)

// RunFleet runs the store.Fleet contract against the stores b makes,
// which must implement it: membership and liveness, Assign's choice of
// host (the most free capacity, spread by load with no limit, never a
// draining or dead member), the
// fencing generation that grows on every change of owner, the takeover
// of an expired lease, leases kept across a restart within the TTL, one
// live instance per host name (a lapsed one's name taken over, its leases
// fenced), forgetting a dead member,
// fenced writes refused and not applied (status, delivered marks,
// outbox), the outbox of the items a host holds, a release, and the
// transcript copies (append by offset, fenced, read whole). With
// b.Listens, the store must be a store.Listener woken by another
// handle's writes; without it, it must not be one.
func RunFleet(t *testing.T, b Backend) {
	require.NotNil(t, b.New, "Backend.New")
	s := suite{b: b}
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"heartbeat_hosts_live", s.membership},
		{"assign_by_free_capacity", s.assignByCapacity},
		{"assign_spreads_by_load", s.assignSpreads},
		{"assign_skips_draining_and_dead_hosts", s.assignSkips},
		{"assign_only_items_that_need_a_host", s.assignNeeds},
		{"takeover_of_an_expired_lease", s.takeover},
		{"restart_within_ttl_keeps_leases", s.restartKeeps},
		{"one_live_instance_per_host_name", s.instances},
		{"forget_host", s.forget},
		{"fenced_writes_refused_not_applied", s.fencedWrites},
		{"due_calls_for_a_host", s.dueCallsFor},
		{"release_lease", s.releaseLease},
		{"transcript_copies", s.transcripts},
		{"listen", s.listen},
	} {
		t.Run(tc.name, tc.run)
	}
}

// fleetOf returns st as a Fleet, failing t when it is not one.
func fleetOf(t *testing.T, st store.Store) store.Fleet {
	t.Helper()
	f, ok := st.(store.Fleet)
	require.True(t, ok, "%T implements store.Fleet", st)
	return f
}

// openFleet is open for a Fleet: a handle and the function that opens
// more.
func (s suite) openFleet(t *testing.T) (store.Store, store.Fleet, func() (store.Store, store.Fleet)) {
	st, open := s.open(t)
	another := func() (store.Store, store.Fleet) {
		st := open()
		return st, fleetOf(t, st)
	}
	return st, fleetOf(t, st), another
}

func heartbeat(t *testing.T, f store.Fleet, name string, capacity int, ttl time.Duration) {
	t.Helper()
	require.NoError(t, f.Heartbeat(context.Background(), desired.Host{Name: name, Capacity: capacity, LeaseTTL: ttl}))
}

func assign(t *testing.T, f store.Fleet) []store.LeaseChange {
	t.Helper()
	changes, err := f.Assign(context.Background())
	require.NoError(t, err)
	return changes
}

func hosts(t *testing.T, f store.Fleet) map[string]desired.Host {
	t.Helper()
	hs, err := f.Hosts(context.Background())
	require.NoError(t, err)
	out := map[string]desired.Host{}
	for i, h := range hs {
		if i > 0 {
			require.Less(t, hs[i-1].Name, h.Name, "Hosts comes by name")
		}
		out[h.Name] = h
	}
	return out
}

// waitDead polls until name is no longer Live.
func waitDead(t *testing.T, f store.Fleet, name string) {
	t.Helper()
	require.Eventually(t, func() bool { return !hosts(t, f)[name].Live }, waitFleet, pollFleet, "%s's heartbeat lapses", name)
}

// letLapse gives the member name one last heartbeat through its own
// handle own, with shortTTL, and waits on watch for it to lapse. A case
// holds a member it needs live with longTTL until then, so that a slow
// machine cannot let it lapse before the case is done with it.
func letLapse(t *testing.T, own, watch store.Fleet, name string, capacity int) {
	t.Helper()
	heartbeat(t, own, name, capacity, shortTTL)
	waitDead(t, watch, name)
}

// takeOver polls Assign on f until it gives out the items of dead, whose
// heartbeat lapsed (waitDead): not before schema.TakeoverMargin past its
// lease's expiry, on the store's clock (the same machine's as the test's).
func takeOver(t *testing.T, f store.Fleet, dead string) []store.LeaseChange {
	t.Helper()
	h := hosts(t, f)[dead]
	var changes []store.LeaseChange
	require.Eventually(t, func() bool { changes = assign(t, f); return len(changes) > 0 }, waitFleet, pollFleet,
		"%s's items are taken over", dead)
	assert.False(t, time.Now().Before(h.Heartbeat.Add(h.LeaseTTL+schema.TakeoverMargin)),
		"taken over only TakeoverMargin after the lease's expiry")
	return changes
}

// item returns the key of item n of the fleet cases.
func item(n int) desired.Key { return desired.Key{Owner: "acme", Repo: "fleet", Number: n} }

// ingestItems creates items 1..n, open, each with one pending delivery.
func ingestItems(t *testing.T, st store.Store, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		ingest(t, st, comment(item(i), fmt.Sprintf("d-%d", i), t0))
	}
}

func owners(t *testing.T, st store.Store) map[desired.Key]desired.Lease {
	t.Helper()
	out := map[desired.Key]desired.Lease{}
	for _, r := range records(t, st) {
		out[r.Key] = r.Lease
	}
	return out
}

// membership: Heartbeat makes a member, Live while its heartbeat is within
// its TTL, and updates its capacity and TTL while keeping its Draining;
// Hosts counts its leases; bad rows and unknown names are refused.
func (s suite) membership(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	before := time.Now()
	heartbeat(t, f, "b", 3, longTTL)
	heartbeat(t, f, "a", 2, longTTL)
	hs := hosts(t, f)
	require.Len(t, hs, 2)
	a := hs["a"]
	assert.Equal(t, desired.Host{Name: "a", Capacity: 2, LeaseTTL: longTTL, Heartbeat: a.Heartbeat, Live: true}, a)
	// The store's clock may be another machine's; on this one it is
	// close to the test's.
	assert.WithinDuration(t, before, a.Heartbeat, time.Minute)
	assert.Equal(t, time.UTC, a.Heartbeat.Location())
	assert.True(t, hs["b"].Live)

	letLapse(t, f, f, "b", 3)
	heartbeat(t, f, "b", 5, longTTL)
	assert.True(t, hosts(t, f)["b"].Live, "a heartbeat brings a member back")
	assert.Equal(t, 5, hosts(t, f)["b"].Capacity)

	require.NoError(t, f.SetDraining(ctx, "a", true))
	heartbeat(t, f, "a", 4, longTTL)
	assert.True(t, hosts(t, f)["a"].Draining, "a heartbeat keeps Draining")
	assert.Equal(t, 4, hosts(t, f)["a"].Capacity)
	require.NoError(t, f.SetDraining(ctx, "a", false))
	assert.False(t, hosts(t, f)["a"].Draining)
	assert.ErrorIs(t, f.SetDraining(ctx, "nobody", true), store.ErrNoHost)

	ingestItems(t, st, 3)
	assign(t, f)
	hs = hosts(t, f)
	assert.Equal(t, 3, hs["a"].Leases+hs["b"].Leases)

	for _, bad := range []desired.Host{{Capacity: 1, LeaseTTL: time.Second}, {Name: "c", LeaseTTL: 0}, {Name: "c", Capacity: -1, LeaseTTL: time.Second}} {
		assert.Error(t, f.Heartbeat(ctx, bad), "%+v", bad)
	}
	assert.NotContains(t, hosts(t, f), "c")
}

// assignByCapacity: each item goes to the member with the most free
// capacity (Capacity less the open items it holds; 0 is no limit), ties
// by name, in key order, each at generation 1; a second Assign changes
// nothing. Records show the lease with its expiry.
func (s suite) assignByCapacity(t *testing.T) {
	st, f, _ := s.openFleet(t)
	heartbeat(t, f, "a", 2, longTTL)
	heartbeat(t, f, "b", 3, longTTL)
	ingestItems(t, st, 5)
	changes := assign(t, f)
	// Free b3 a2: b; b2 a2: a (name); b2 a1: b; b1 a1: a; b1 a0: b.
	want := []store.LeaseChange{
		{Key: item(1), To: "b", Generation: 1},
		{Key: item(2), To: "a", Generation: 1},
		{Key: item(3), To: "b", Generation: 1},
		{Key: item(4), To: "a", Generation: 1},
		{Key: item(5), To: "b", Generation: 1},
	}
	assert.Equal(t, want, changes)
	assert.Empty(t, assign(t, f), "a second Assign changes nothing")

	hb := hosts(t, f)["b"].Heartbeat
	r := get(t, st, item(1))
	assert.Equal(t, desired.Lease{Owner: "b", Generation: 1, Expires: hb.Add(longTTL)}, r.Lease)

	// Capacity 0 is no limit: the new member takes the next item.
	heartbeat(t, f, "c", 0, longTTL)
	ingestItems(t, st, 6)
	assert.Equal(t, []store.LeaseChange{{Key: item(6), To: "c", Generation: 1}}, assign(t, f))
}

// assignSpreads: members with no limit (Capacity 0) share the items by
// their load, never all to one by name: a loaded one gets none until the
// others hold as many; the items of a dead member go to the survivors
// evenly.
func (s suite) assignSpreads(t *testing.T) {
	st, f, _ := s.openFleet(t)
	heartbeat(t, f, "a", 0, longTTL)
	ingestItems(t, st, 6)
	require.Len(t, assign(t, f), 6)
	heartbeat(t, f, "b", 0, longTTL)
	heartbeat(t, f, "c", 0, longTTL)
	ingestItems(t, st, 10) // items 7..10 are new
	perHost := map[string]int{}
	for _, c := range assign(t, f) {
		perHost[c.To]++
	}
	assert.Equal(t, map[string]int{"b": 2, "c": 2}, perHost, "a holds 6: the new items go to the idle members, evenly")

	st, f, _ = s.openFleet(t)
	heartbeat(t, f, "a", 0, longTTL)
	ingestItems(t, st, 6)
	require.Len(t, assign(t, f), 6)
	heartbeat(t, f, "b", 0, longTTL)
	heartbeat(t, f, "c", 0, longTTL)
	letLapse(t, f, f, "a", 0)
	perHost = map[string]int{}
	for _, c := range takeOver(t, f, "a") {
		assert.Equal(t, "a", c.From)
		perHost[c.To]++
	}
	assert.Equal(t, map[string]int{"b": 3, "c": 3}, perHost, "a's 6 items spread over the survivors")
}

// assignSkips: a draining member and a dead one get no item, even with
// more free capacity; with no live member that takes items, nothing is
// assigned.
func (s suite) assignSkips(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ingestItems(t, st, 2)
	heartbeat(t, f, "a-dead", 0, time.Millisecond)
	heartbeat(t, f, "a-drain", 0, longTTL)
	require.NoError(t, f.SetDraining(context.Background(), "a-drain", true))
	waitDead(t, f, "a-dead")
	assert.Empty(t, assign(t, f), "no member takes items")
	assert.Equal(t, desired.Lease{}, get(t, st, item(1)).Lease)

	heartbeat(t, f, "z", 1, longTTL)
	changes := assign(t, f)
	require.Len(t, changes, 2)
	for _, c := range changes {
		assert.Equal(t, "z", c.To, "over capacity, still the only live member that takes items")
	}
}

// assignNeeds: a closed item whose agent is stopped, exited or never ran
// needs no host; a closed item whose agent may still run does.
func (s suite) assignNeeds(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 4)
	for n, phase := range map[int]desired.Phase{1: desired.PhaseStopped, 2: desired.PhaseExited, 3: desired.PhaseRunning} {
		ingest(t, st, stateChange(item(n), fmt.Sprintf("close-%d", n), true, t0.Add(time.Second)))
		require.NoError(t, st.PutStatus(ctx, item(n), desired.Status{Phase: phase}))
	}
	heartbeat(t, f, "a", 0, longTTL)
	var keys []desired.Key
	for _, c := range assign(t, f) {
		keys = append(keys, c.Key)
	}
	assert.Equal(t, []desired.Key{item(3), item(4)}, keys)
}

// takeover: a live owner keeps its items; once its heartbeat lapses, the
// next Assign gives them to a live member under a new generation, and the
// old owner's heartbeat does not win them back.
func (s suite) takeover(t *testing.T) {
	st, f, open := s.openFleet(t)
	ingestItems(t, st, 2)
	heartbeat(t, f, "a", 0, longTTL)
	require.Len(t, assign(t, f), 2)

	_, other := open() // another host's handle
	heartbeat(t, other, "b", 0, longTTL)
	assert.Empty(t, assign(t, other), "a's leases are live")

	letLapse(t, f, other, "a", 0)
	assert.Equal(t, []store.LeaseChange{
		{Key: item(1), From: "a", To: "b", Generation: 2},
		{Key: item(2), From: "a", To: "b", Generation: 2},
	}, takeOver(t, other, "a"))
	heartbeat(t, f, "a", 0, shortTTL)
	assert.Empty(t, assign(t, f))
	assert.Equal(t, "b", get(t, st, item(1)).Lease.Owner)
	assert.Equal(t, int64(2), get(t, st, item(1)).Lease.Generation)
}

// restartKeeps: a host that closes its handle and opens a new one (a
// daemon restart) within its TTL keeps every lease, at the same
// generation.
func (s suite) restartKeeps(t *testing.T) {
	st, f, open := s.openFleet(t)
	ingestItems(t, st, 2)
	heartbeat(t, f, "a", 0, longTTL)
	heartbeat(t, f, "b", 1, longTTL)
	require.Len(t, assign(t, f), 2)
	before := owners(t, st)
	require.NoError(t, st.Close())

	st2, f2 := open()
	heartbeat(t, f2, "a", 0, longTTL)
	assert.Empty(t, assign(t, f2))
	after := owners(t, st2)
	for k, l := range before {
		assert.Equal(t, l.Owner, after[k].Owner, k.String())
		assert.Equal(t, l.Generation, after[k].Generation, k.String())
		assert.True(t, after[k].Expires.After(l.Expires) || after[k].Expires.Equal(l.Expires), "%s: renewed", k)
	}
}

// instances: a second instance heartbeating under a name whose instance
// is live is refused (ErrHostTaken) and changes nothing; the same
// instance keeps its leases across a restart; once the first instance's
// heartbeat lapsed, the second takes the name over with every lease it
// holds under a new generation, and the first is refused in turn.
func (s suite) instances(t *testing.T) {
	st, f, open := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 2)
	first := desired.Host{Name: "a", Instance: "i-1", LeaseTTL: longTTL}
	require.NoError(t, f.Heartbeat(ctx, first))
	require.Len(t, assign(t, f), 2)
	before := owners(t, st)

	_, other := open() // another daemon, same name, another state dir
	second := desired.Host{Name: "a", Instance: "i-2", Capacity: 7, LeaseTTL: longTTL}
	err := other.Heartbeat(ctx, second)
	require.ErrorIs(t, err, store.ErrHostTaken)
	assert.Contains(t, err.Error(), "lapses in")
	h := hosts(t, f)["a"]
	assert.Equal(t, "i-1", h.Instance, "the refused heartbeat wrote nothing")
	assert.Equal(t, 0, h.Capacity)
	require.NoError(t, f.Heartbeat(ctx, first), "the same instance (a restart) keeps heartbeating")
	assert.Equal(t, gens(before), gens(owners(t, st)), "and keeps its leases at their generation")

	first.LeaseTTL = shortTTL // its last heartbeat (letLapse)
	require.NoError(t, f.Heartbeat(ctx, first))
	waitDead(t, other, "a")
	require.NoError(t, other.Heartbeat(ctx, second), "a lapsed instance's name is taken over")
	h = hosts(t, other)["a"]
	assert.Equal(t, "i-2", h.Instance)
	assert.True(t, h.Live)
	after := owners(t, st)
	for k, l := range before {
		assert.Equal(t, "a", after[k].Owner, k.String())
		assert.Equal(t, l.Generation+1, after[k].Generation, "%s: the old instance is fenced", k)
	}
	assert.ErrorIs(t, f.FencedWrite(ctx, item(1), before[item(1)].Generation, store.StatusWrite{}), store.ErrFenced)
	assert.ErrorIs(t, f.Heartbeat(ctx, first), store.ErrHostTaken, "the old instance is refused in turn")
	require.NoError(t, other.Heartbeat(ctx, second))
	assert.Equal(t, gens(after), gens(owners(t, st)), "the owning instance's heartbeat bumps nothing")
}

// gens is leases without their expiry, which every heartbeat moves.
func gens(leases map[desired.Key]desired.Lease) map[desired.Key]desired.Lease {
	out := map[desired.Key]desired.Lease{}
	for k, l := range leases {
		out[k] = desired.Lease{Owner: l.Owner, Generation: l.Generation}
	}
	return out
}

// forget: a member is forgotten only once it is dead and holds no lease;
// an unknown name is ErrNoHost.
func (s suite) forget(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 1)
	heartbeat(t, f, "a", 0, longTTL)
	require.Len(t, assign(t, f), 1)
	assert.ErrorIs(t, f.ForgetHost(ctx, "a"), store.ErrHostInUse, "live")
	letLapse(t, f, f, "a", 0)
	assert.ErrorIs(t, f.ForgetHost(ctx, "a"), store.ErrHostInUse, "holds a lease")
	heartbeat(t, f, "b", 0, longTTL)
	require.Len(t, takeOver(t, f, "a"), 1)
	require.NoError(t, f.ForgetHost(ctx, "a"))
	assert.NotContains(t, hosts(t, f), "a")
	assert.ErrorIs(t, f.ForgetHost(ctx, "a"), store.ErrNoHost)
	assert.ErrorIs(t, f.ForgetHost(ctx, "b"), store.ErrHostInUse)
}

// fencedWrites: a write under the item's generation is applied, calls
// keep it; once the lease moved, a write under the old generation is
// refused with ErrFenced and nothing of it (status, delivered marks,
// outbox rows) is applied; the unfenced writes are refused on a leased
// item.
func (s suite) fencedWrites(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 1)
	k := item(1)
	ingest(t, st, comment(k, "d-1b", t0.Add(time.Second)))
	heartbeat(t, f, "a", 0, longTTL)
	require.Len(t, assign(t, f), 1)
	call := desired.Call{Kind: desired.CallAnnounce, Body: "hi <!-- m -->", Marker: "<!-- m -->"}

	require.NoError(t, f.FencedWrite(ctx, k, 1, store.StatusWrite{
		Status: desired.Status{Phase: desired.PhaseRunning, DeliveryState: desired.DeliveryState{SendAttempts: 1}}, Delivered: []string{"d-1"}, Calls: []desired.Call{call}}))
	r := get(t, st, k)
	assert.Equal(t, 1, r.Status.SendAttempts)
	require.Len(t, r.Pending, 1)
	calls, err := st.Calls(ctx, store.CallFilter{WorkItem: k.String()})
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, int64(1), calls[0].Generation, "the call keeps the generation it was written under")

	// The lease moves: a releases it, b takes it (generation 3).
	require.NoError(t, f.ReleaseLease(ctx, k, "a", 1))
	require.NoError(t, f.SetDraining(ctx, "a", true))
	heartbeat(t, f, "b", 0, longTTL)
	require.Len(t, assign(t, f), 1)

	err = f.FencedWrite(ctx, k, 1, store.StatusWrite{
		Status: desired.Status{Phase: desired.PhaseRunning, DeliveryState: desired.DeliveryState{SendAttempts: 9}}, Delivered: []string{"d-1b"}, Calls: []desired.Call{call}})
	assert.ErrorIs(t, err, store.ErrFenced)
	assert.ErrorIs(t, st.PutStatus(ctx, k, desired.Status{Phase: desired.PhaseRunning, DeliveryState: desired.DeliveryState{SendAttempts: 9}}, "d-1b"), store.ErrFenced)
	assert.ErrorIs(t, st.WriteStatus(ctx, k, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseIdle}, Calls: []desired.Call{call}}),
		store.ErrFenced)
	r = get(t, st, k)
	assert.Equal(t, 1, r.Status.SendAttempts, "no refused status was applied")
	assert.Len(t, r.Pending, 1, "no refused delivered mark was applied")
	calls, err = st.Calls(ctx, store.CallFilter{WorkItem: k.String()})
	require.NoError(t, err)
	assert.Len(t, calls, 1, "no refused call was queued")

	require.NoError(t, f.FencedWrite(ctx, k, 3, store.StatusWrite{
		Status: desired.Status{Phase: desired.PhaseRunning, DeliveryState: desired.DeliveryState{SendAttempts: 2}}, Delivered: []string{"d-1b"}, Calls: []desired.Call{call}}))
	r = get(t, st, k)
	assert.Equal(t, 2, r.Status.SendAttempts)
	assert.Empty(t, r.Pending)
	calls, err = st.Calls(ctx, store.CallFilter{WorkItem: k.String()})
	require.NoError(t, err)
	require.Len(t, calls, 2)
	assert.Equal(t, int64(3), calls[1].Generation)

	assert.ErrorIs(t, f.FencedWrite(ctx, item(99), 0, store.StatusWrite{}), store.ErrNotFound)
}

// dueCallsFor: a host gets the due calls of the items it holds only,
// including those a former owner queued.
func (s suite) dueCallsFor(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 2)
	for n := 1; n <= 2; n++ {
		require.NoError(t, st.WriteStatus(ctx, item(n), store.StatusWrite{Status: desired.Status{Phase: desired.PhaseIdle},
			Calls: []desired.Call{{Kind: desired.CallNotify, Body: fmt.Sprintf("n%d", n), Marker: fmt.Sprintf("<!-- %d -->", n)}}}))
	}
	heartbeat(t, f, "a", 1, longTTL)
	heartbeat(t, f, "b", 1, longTTL)
	require.Len(t, assign(t, f), 2) // item 1 to a, item 2 to b
	now := time.Now()
	for host, want := range map[string]desired.Key{"a": item(1), "b": item(2)} {
		calls, err := f.DueCallsFor(ctx, host, now, 0)
		require.NoError(t, err)
		require.Len(t, calls, 1, host)
		assert.Equal(t, want, calls[0].Key, host)
	}
	calls, err := f.DueCallsFor(ctx, "nobody", now, 0)
	require.NoError(t, err)
	assert.Empty(t, calls)
	all, err := st.DueCalls(ctx, now, 0)
	require.NoError(t, err)
	assert.Len(t, all, 2)
}

// releaseLease: only the owner under the current generation releases; the
// item then has no owner, a greater generation and no expiry, and the
// next Assign gives it out again.
func (s suite) releaseLease(t *testing.T) {
	st, f, _ := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 1)
	k := item(1)
	heartbeat(t, f, "a", 0, longTTL)
	require.Len(t, assign(t, f), 1)
	assert.ErrorIs(t, f.ReleaseLease(ctx, k, "b", 1), store.ErrFenced, "not the owner")
	assert.ErrorIs(t, f.ReleaseLease(ctx, k, "a", 2), store.ErrFenced, "not the generation")
	assert.ErrorIs(t, f.ReleaseLease(ctx, item(99), "a", 1), store.ErrNotFound)
	assert.Equal(t, desired.Lease{Owner: "a", Generation: 1, Expires: get(t, st, k).Lease.Expires}, get(t, st, k).Lease)

	require.NoError(t, f.ReleaseLease(ctx, k, "a", 1))
	assert.Equal(t, desired.Lease{Generation: 2}, get(t, st, k).Lease)
	assert.ErrorIs(t, f.ReleaseLease(ctx, k, "a", 1), store.ErrFenced, "released once")
	assert.Equal(t, []store.LeaseChange{{Key: k, To: "a", Generation: 3}}, assign(t, f))
}

// transcripts: appends go at the stored size only, under the item's
// generation; the transcript reads back whole, from any handle; sessions
// are kept apart.
func (s suite) transcripts(t *testing.T) {
	st, f, open := s.openFleet(t)
	ctx := context.Background()
	ingestItems(t, st, 1)
	k := item(1)
	size := func(f store.Fleet, id string) int64 {
		t.Helper()
		n, err := f.TranscriptSize(ctx, k, id)
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, size(f, "s1"))
	_, err := f.Transcript(ctx, k, "s1")
	assert.ErrorIs(t, err, store.ErrNoTranscript)

	require.NoError(t, f.AppendTranscript(ctx, k, "s1", 0, []byte("{\"a\":1}\n"), 0))
	assert.ErrorIs(t, f.AppendTranscript(ctx, k, "s1", 3, []byte("x"), 0), store.ErrTranscriptOffset)
	assert.ErrorIs(t, f.AppendTranscript(ctx, k, "s1", 0, []byte("x"), 0), store.ErrTranscriptOffset, "no rewrite")
	require.NoError(t, f.AppendTranscript(ctx, k, "s1", 8, []byte("{\"b\":\x00\xff}\n"), 0))
	require.NoError(t, f.AppendTranscript(ctx, k, "s2", 0, []byte("other"), 0))
	assert.Equal(t, int64(8+9), size(f, "s1"))

	heartbeat(t, f, "a", 0, longTTL)
	require.Len(t, assign(t, f), 1)
	assert.ErrorIs(t, f.AppendTranscript(ctx, k, "s1", 17, []byte("late"), 0), store.ErrFenced)
	require.NoError(t, f.AppendTranscript(ctx, k, "s1", 17, []byte("tail"), 1))
	assert.ErrorIs(t, f.AppendTranscript(ctx, item(99), "s1", 0, []byte("x"), 0), store.ErrNotFound)

	_, other := open()
	got, err := other.Transcript(ctx, k, "s1")
	require.NoError(t, err)
	assert.Equal(t, []byte("{\"a\":1}\n{\"b\":\x00\xff}\ntail"), got)
	got, err = other.Transcript(ctx, k, "s2")
	require.NoError(t, err)
	assert.Equal(t, []byte("other"), got)
	assert.Equal(t, int64(21), size(other, "s1"))
}

// listen: with b.Listens, a Listener on one handle is woken by another
// handle's ingest, Assign, ReleaseLease and SetDraining, and by an
// operator's SetHeld and Release (loopd hold and release), and Listen
// returns its context's cause; otherwise the store is no Listener.
func (s suite) listen(t *testing.T) {
	st, _, open := s.openFleet(t)
	l, ok := st.(store.Listener)
	if !s.b.Listens {
		assert.False(t, ok, "%T is a Listener, and Backend.Listens is false", st)
		return
	}
	require.True(t, ok, "%T implements store.Listener", st)
	ctx, cancel := context.WithCancelCause(context.Background())
	wakes := make(chan struct{}, 64)
	done := make(chan error, 1)
	go func() { done <- l.Listen(ctx, func() { wakes <- struct{}{} }, store.ListenJournal{}) }()
	t.Cleanup(func() {
		cancel(context.Canceled)
		<-done
	})
	other, otherFleet := open()
	drain := func() {
		for len(wakes) > 0 {
			<-wakes
		}
	}
	woken := func(what string) {
		t.Helper()
		select {
		case <-wakes:
		case <-time.After(waitFleet):
			t.Fatalf("no wake after %s", what)
		}
	}
	// Listen connects in the background: ingest until the first wake.
	n := 0
	require.Eventually(t, func() bool {
		n++
		ingest(t, other, comment(item(1), fmt.Sprintf("wake-%d", n), t0))
		select {
		case <-wakes:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}, waitFleet, pollFleet, "an ingest on another handle wakes the listener")

	drain()
	heartbeat(t, otherFleet, "b", 0, longTTL)
	require.Len(t, assign(t, otherFleet), 1)
	woken("Assign")
	drain()
	require.NoError(t, otherFleet.ReleaseLease(context.Background(), item(1), "b", 1))
	woken("ReleaseLease")
	drain()
	require.NoError(t, otherFleet.SetDraining(context.Background(), "b", true))
	woken("SetDraining")
	drain()
	require.NoError(t, other.SetHeld(context.Background(), item(1), true))
	woken("SetHeld")
	drain()
	require.NoError(t, other.Release(context.Background(), item(1), false))
	woken("Release")

	cause := fmt.Errorf("test over")
	cancel(cause)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, cause)
		done <- err // for the cleanup
	case <-time.After(waitFleet):
		t.Fatal("Listen did not return when its context ended")
	}
}
