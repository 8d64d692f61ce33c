package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/store"
)

// fleetLeaseSeconds is host.leaseSeconds of the fleet tests, the schema's
// least: a dead host's items come back within it plus a pass.
const fleetLeaseSeconds = 2

// steadyLeaseSeconds is host.leaseSeconds of the fleet tests in which no
// lease may lapse: long enough that a loaded two-core box never misses
// a heartbeat by that much.
const steadyLeaseSeconds = 5

// fleet is several loopd hosts sharing one PostgreSQL store. Each host is
// an env of its own (tmux socket, state dir, port, Claude config dir); the
// workdir root is shared, as one config deployed to every host renders
// the same workdirs.
type fleet struct {
	hosts   []*env
	url     string
	lockDir string // FAKECLAUDE_LOCK_DIR of every host (overlaps)
}

// newFleet makes n hosts named host-a, host-b, … on a new database of the
// test binary's PostgreSQL cluster, with leaseSeconds each; it starts none.
func newFleet(t testing.TB, n, leaseSeconds int, opts envOpts) *fleet {
	t.Helper()
	f := &fleet{url: pgtest.URL(t), lockDir: filepath.Join(t.TempDir(), "locks")}
	workRoot, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(f.lockDir, 0o755))
	// The fake CLIs of every host lock their conversations in one dir,
	// and log a start on a conversation another process still runs.
	opts.HarnessEnv = maps.Clone(opts.HarnessEnv)
	if opts.HarnessEnv == nil {
		opts.HarnessEnv = map[string]string{}
	}
	opts.HarnessEnv["FAKECLAUDE_LOCK_DIR"] = f.lockDir
	opts.Binds = append(slices.Clone(opts.Binds), f.lockDir)
	for i := range n {
		e := newEnv(t, opts)
		e.workRoot = workRoot
		e.pgURL = f.url
		e.config["store"] = map[string]any{"url": f.url}
		e.config["host"] = map[string]any{"name": hostName(i), "leaseSeconds": leaseSeconds}
		routes := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)
		routes["*"].(map[string]any)["workdir"] = filepath.Join(workRoot, "{{.Owner}}", "{{.Repo}}", "{{.Number}}")
		e.writeConfig(t)
		f.hosts = append(f.hosts, e)
	}
	return f
}

// hostName is the name of the fleet's i-th host.
func hostName(i int) string { return "host-" + string(rune('a'+i)) }

// start starts every host's daemon.
func (f *fleet) start(t *testing.T) {
	t.Helper()
	for _, e := range f.hosts {
		e.start(t)
	}
}

// host returns the env of the host called name.
func (f *fleet) host(t *testing.T, name string) *env {
	t.Helper()
	for i, e := range f.hosts {
		if hostName(i) == name {
			return e
		}
	}
	t.Fatalf("no host %q", name)
	return nil
}

// item returns the key of issue n of the fixtures' repository.
func item(n int) desired.Key {
	return desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: n}
}

// openIssue sends issue n's "opened" event to e.
func openIssue(t *testing.T, e *env, n int) string {
	t.Helper()
	return e.deliver(t, "issues.opened.1.json", withNumber(n))
}

// waitRunningOn waits until k runs on a host other than not (any host
// when not is ""), by its lease and its phase, and returns the record.
func (f *fleet) waitRunningOn(t *testing.T, k desired.Key, not string, timeout time.Duration) desired.Record {
	t.Helper()
	return f.hosts[0].waitRecord(t, k, func(r desired.Record) bool {
		return r.Lease.Owner != "" && r.Lease.Owner != not && r.Status.Phase == desired.PhaseRunning &&
			r.Status.Host == r.Lease.Owner && r.Status.ConfirmedSessionID != ""
	}, timeout, "never ran on another host")
}

// livePanes returns how many live panes the fleet's hosts run for k, over
// every host's tmux server.
func (f *fleet) livePanes(t *testing.T, k desired.Key) int {
	t.Helper()
	n, name := 0, desired.SessionName(k)
	for _, e := range f.hosts {
		out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_dead}")
		if err != nil {
			continue // a server that is gone, or went when its last session did
		}
		for line := range strings.Lines(out) {
			if strings.TrimSpace(line) == name+" 0" {
				n++
			}
		}
	}
	return n
}

// killHost ends e's daemon and its tmux server with SIGKILL, agents
// included, as the loss of the machine would: nothing gets to clean up.
func (e *env) killHost(t testing.TB) {
	t.Helper()
	var pids []int
	if out, err := e.tmux(t, "list-panes", "-a", "-F", "#{pane_pid}"); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	server := -1
	if out, err := e.tmux(t, "display-message", "-p", "#{pid}"); err == nil {
		server, _ = strconv.Atoi(strings.TrimSpace(out))
	}
	e.signalDaemon(t, syscall.SIGKILL)
	for _, pid := range pids {
		killFake(pid, e.harnessCmd)
	}
	if server > 0 {
		_ = syscall.Kill(server, syscall.SIGKILL)
	}
	require.Eventually(t, func() bool {
		for _, pid := range pids {
			if proc.Alive(pid) {
				return false
			}
		}
		return server <= 0 || !proc.Alive(server)
	}, waitShort, tick, "the host's processes outlived SIGKILL")
}

// TestFleetSpreadsItemsAndStoresARedeliveryOnce: three hosts on one
// PostgreSQL store take webhooks alike. New items go to the host with the
// most free capacity, so six items spread two a host, each run by its
// owner alone; a redelivery that reaches two hosts at once is stored, and
// reaches its agent, once.
func TestFleetSpreadsItemsAndStoresARedeliveryOnce(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, steadyLeaseSeconds, envOpts{})
	f.start(t)
	for n := 1; n <= 6; n++ {
		openIssue(t, f.hosts[(n-1)%3], n) // any host takes webhooks
		f.waitRunningOn(t, item(n), "", waitLong)
	}
	per := map[string]int{}
	for n := 1; n <= 6; n++ {
		r := f.hosts[0].mustRecord(t, item(n))
		per[r.Lease.Owner]++
		for i, e := range f.hosts {
			_, live := e.itemPanes(t, item(n))
			want := 0
			if hostName(i) == r.Lease.Owner {
				want = 1
			}
			assert.Equal(t, want, live, "%s on %s (owner %s)", item(n), hostName(i), r.Lease.Owner)
		}
	}
	assert.Equal(t, map[string]int{"host-a": 2, "host-b": 2, "host-c": 2}, per, "spread by free capacity")

	body := "redelivered " + uuid.NewString()
	payload := f.hosts[0].payload(t, commentFixture, all(withNumber(2), withComment(body)))
	id := uuid.NewString()
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			e := f.hosts[i]
			codes[i] = e.post(t, eventOf(commentFixture), id, payload, webhook.Sign([]byte(e.secret), payload))
		})
	}
	wg.Wait()
	// One host stores it (202); the other finds it stored (200, GitHub's
	// redelivery answer).
	assert.ElementsMatch(t, []int{http.StatusAccepted, http.StatusOK}, codes)
	waitDelivered(t, f.hosts[0], id, waitLong)
	accepted := 0
	for _, ev := range f.hosts[0].eventsNamed(t, journal.DeliveryAccepted, desired.Key{}) {
		if ev.Attrs["delivery"] == id {
			accepted++
		}
	}
	assert.Equal(t, 1, accepted, "stored once")
	owner := f.host(t, f.hosts[0].mustRecord(t, item(2)).Lease.Owner)
	sid := owner.mustRecord(t, item(2)).Status.HarnessSessionID
	time.Sleep(time.Second) // a second delivery would show by now
	assert.Equal(t, 1, countContaining(owner.userTurns(t, item(2), sid), body), "reached the agent once")
}

// TestFleetHostLossMovesItsItemsOnTheirConversations: kill -9 of a host's
// daemon and tmux server, agents included. Within leaseSeconds and a pass
// its items run on the other hosts, on the same conversation ids, their
// transcripts restored from the store into the new hosts' config dirs;
// an event sent meanwhile is delivered once, into that conversation.
func TestFleetHostLossMovesItsItemsOnTheirConversations(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, fleetLeaseSeconds, envOpts{})
	f.start(t)
	ids := map[int]string{}
	for n := 1; n <= 3; n++ {
		openIssue(t, f.hosts[0], n)
		ids[n] = f.waitRunningOn(t, item(n), "", waitLong).Status.HarnessSessionID
	}
	lost := f.host(t, "host-a")
	var moved []int
	for n := 1; n <= 3; n++ {
		if f.hosts[0].mustRecord(t, item(n)).Lease.Owner == "host-a" {
			moved = append(moved, n)
		}
	}
	require.NotEmpty(t, moved, "host-a runs an item")
	first := "before the loss " + uuid.NewString()
	d0 := commentOn(t, f.hosts[1], moved[0], first)
	waitDelivered(t, f.hosts[1], d0, waitLong)
	// The verified delivery ships the transcript; wait for the copy.
	fl := f.hosts[1].openFleet(t)
	f.hosts[1].waitFor(t, func() bool {
		size, err := fl.TranscriptSize(t.Context(), item(moved[0]), ids[moved[0]])
		require.NoError(t, err)
		tr, err := os.Stat(lost.transcriptPath(t, item(moved[0]), ids[moved[0]]))
		return err == nil && size == tr.Size()
	}, waitShort, "the transcript never reached the store")

	killed := time.Now()
	lost.killHost(t)
	after := "after the loss " + uuid.NewString()
	d1 := commentOn(t, f.hosts[1], moved[0], after)
	for _, n := range moved {
		r := f.waitRunningOn(t, item(n), "host-a", waitLong)
		assert.Equal(t, ids[n], r.Status.HarnessSessionID, "%s: the same conversation", item(n))
	}
	t.Logf("takeover of %d item(s): %s after the kill (leaseSeconds %d)", len(moved), time.Since(killed), fleetLeaseSeconds)

	r := f.hosts[1].mustRecord(t, item(moved[0]))
	owner := f.host(t, r.Lease.Owner)
	waitDelivered(t, owner, d1, waitLong)
	assert.Len(t, waitDeliveriesOfItem(t, owner, journal.DispatchDelivered, item(moved[0]), d1, 1), 1, "delivered once")
	owner.waitTurn(t, item(moved[0]), ids[moved[0]], after, waitLong, "the event never reached the moved conversation")
	turns := owner.userTurns(t, item(moved[0]), ids[moved[0]])
	assert.Equal(t, 1, countContaining(turns, first), "the restored transcript holds the turn from the lost host")
	assert.Equal(t, 1, countContaining(turns, after))
	starts := owner.starts(t)
	require.NotEmpty(t, starts)
	flag, resumed := starts[len(starts)-1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, ids[moved[0]], resumed)
	assert.Empty(t, overlaps(t, f.lockDir), "two agents on one conversation")
	moves := owner.eventsNamed(t, journal.SessionMoved, item(moved[0]))
	if assert.NotEmpty(t, moves) {
		assert.Equal(t, "host-a", moves[len(moves)-1].Attrs["from_host"])
	}
}

// TestFleetStaleHostIsFencedAndStopsItsAgents: a host SIGSTOPped past its
// lease loses its items to another host. Once SIGCONTed it writes nothing
// under its old leases and stops its stale agents without pasting into
// them.
func TestFleetStaleHostIsFencedAndStopsItsAgents(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, fleetLeaseSeconds, envOpts{})
	stale := f.host(t, "host-a")
	stale.start(t) // host-a alone: the item is its
	openIssue(t, stale, 1)
	id := f.waitRunningOn(t, item(1), "", waitLong).Status.HarnessSessionID
	require.Equal(t, "host-a", stale.mustRecord(t, item(1)).Lease.Owner)
	f.host(t, "host-b").start(t)

	require.NoError(t, stale.daemon.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(stale.daemon.Process.Pid, syscall.SIGCONT) })
	other := f.host(t, "host-b")
	r := f.waitRunningOn(t, item(1), "host-a", waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	body := "while host-a sleeps " + uuid.NewString()
	d := commentOn(t, other, 1, body)
	waitDelivered(t, other, d, waitLong)
	gen := other.mustRecord(t, item(1)).Lease.Generation

	require.NoError(t, stale.daemon.Process.Signal(syscall.SIGCONT))
	stale.waitFor(t, func() bool { return !stale.hasSession(t, item(1)) }, waitLong, "the stale host kept its agent")
	lost := stale.waitEvent(t, journal.LeaseLost, item(1), 1, waitShort)
	assert.Contains(t, []string{"lease_lost", "lease_lapsed", "fenced"}, lost[0].Attrs["reason"])
	assert.Equal(t, 0, countContaining(stale.userTurns(t, item(1), id), body), "nothing pasted on the stale host")
	time.Sleep(time.Second)
	r = other.mustRecord(t, item(1))
	assert.Equal(t, "host-b", r.Lease.Owner)
	assert.Equal(t, gen, r.Lease.Generation)
	assert.Equal(t, "host-b", r.Status.Host, "no status written by the stale host")
	assert.Equal(t, 1, f.livePanes(t, item(1)), "one agent on the conversation")
}

// TestFleetRestartWithinTheLeaseKeepsItsItems: a SIGTERM and restart of a
// host's daemon within leaseSeconds keeps its items on it: its agents,
// which kept running in tmux, go on taking its events, never respawned,
// and no other host starts one.
func TestFleetRestartWithinTheLeaseKeepsItsItems(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, 5, envOpts{})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	a.start(t)
	openIssue(t, a, 1)
	r := f.waitRunningOn(t, item(1), "", waitLong)
	require.Equal(t, "host-a", r.Lease.Owner)
	b.start(t)

	a.stop(t)
	a.start(t)
	d := commentOn(t, b, 1, "after the restart "+uuid.NewString())
	waitDelivered(t, a, d, waitLong)
	got := a.mustRecord(t, item(1))
	assert.Equal(t, "host-a", got.Lease.Owner)
	assert.Equal(t, r.Lease.Generation, got.Lease.Generation, "never changed owner")
	assert.Len(t, a.starts(t), 1, "adopted, not respawned")
	assert.Empty(t, b.starts(t), "no agent on the other host")
	assert.Empty(t, overlaps(t, f.lockDir))
}

// TestFleetRestartPastTheLeaseCountsNoCrash: a host's daemon stopped
// (SIGTERM) for longer than its lease, with no other host to take its
// items: the agents' watchdogs end them once the grant runs out (self-
// fencing), and the restarted daemon resumes each on its conversation as
// a fenced agent, counting no failure and journaling no crash.
func TestFleetRestartPastTheLeaseCountsNoCrash(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1, fleetLeaseSeconds, envOpts{})
	a := f.hosts[0]
	a.start(t)
	openIssue(t, a, 1)
	r := f.waitRunningOn(t, item(1), "", waitLong)

	a.stop(t)
	a.waitFor(t, func() bool { return f.livePanes(t, item(1)) == 0 }, waitLong, "the watchdog never ended the agent past its grant")
	a.start(t)
	got := a.waitRecord(t, item(1), func(got desired.Record) bool {
		return got.Status.Phase == desired.PhaseRunning && got.Status.ConfirmedSessionID != "" && got.Status.PaneID != r.Status.PaneID
	}, waitLong, "never resumed after the restart")
	assert.Equal(t, r.Status.HarnessSessionID, got.Status.HarnessSessionID, "the same conversation")
	assert.Zero(t, got.Status.Failures, "a fenced agent is no crash")
	for _, e := range a.eventsNamed(t, journal.SessionExited, item(1)) {
		assert.NotEqual(t, string(actions.ReasonCrash), e.Attrs[journal.KeyReason], "no crash journaled: %s", e)
	}
	assert.Len(t, a.starts(t), 2, "one resume")
}

// TestFleetDrainMovesItemsWithOneAgentAtATime: loopd drain moves a host's
// items to another host: each agent is stopped, its transcript copied and
// its lease released before the other host resumes it, on the same
// conversation. Sampled all along, no conversation ever has two live
// agents.
func TestFleetDrainMovesItemsWithOneAgentAtATime(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, steadyLeaseSeconds, envOpts{})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	a.start(t)
	ids := map[int]string{}
	for n := 1; n <= 2; n++ {
		openIssue(t, a, n)
		ids[n] = f.waitRunningOn(t, item(n), "", waitLong).Status.HarnessSessionID
	}
	b.start(t)

	stop := make(chan struct{})
	var most [3]int
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for n := 1; n <= 2; n++ {
				most[n] = max(most[n], f.livePanes(t, item(n)))
			}
		}
	})
	out, stderr, code := a.run(t, "drain", "host-a", "--timeout", "60s")
	require.Equal(t, 0, code, "loopd drain: %s%s", out, stderr)
	for n := 1; n <= 2; n++ {
		r := f.waitRunningOn(t, item(n), "host-a", waitLong)
		assert.Equal(t, "host-b", r.Lease.Owner)
		assert.Equal(t, ids[n], r.Status.HarnessSessionID, "%s: the same conversation", item(n))
	}
	close(stop)
	sampled.Wait()
	assert.Empty(t, overlaps(t, f.lockDir), "two agents on one conversation")
	assert.Equal(t, 1, most[1], "never two live agents on %s", item(1))
	assert.Equal(t, 1, most[2], "never two live agents on %s", item(2))
	assert.Len(t, a.eventsNamed(t, journal.LeaseReleased, desired.Key{}), 2)
	for _, s := range b.starts(t) {
		flag, _ := s.mode()
		assert.Equal(t, "--resume", flag, "%q", s.Argv)
	}
	hosts := a.mustRun(t, "hosts")
	assert.Regexp(t, `host-a\s+\S+\s+(true|yes)`, hosts, "host-a shows draining:\n%s", hosts)
}

// TestRealClaudeMovesHosts: with the real Claude Code CLI, an item's
// conversation, restored from the store on another host (another config
// dir and tmux server), resumes with --resume on the same id, and the next
// comment lands in it.
func TestRealClaudeMovesHosts(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, fleetLeaseSeconds, envOpts{
		Harness: realClaude(t),
		Policy:  map[string]any{"restartPolicy": "OnFailure", "resumeProbeSeconds": 2},
	})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	a.start(t)
	first := "first comment " + uuid.NewString()
	d0 := commentOn(t, a, 1, first)
	waitDelivered(t, a, d0, waitLong)
	id := a.mustRecord(t, item(1)).Status.HarnessSessionID
	fl := a.openFleet(t)
	a.waitFor(t, func() bool {
		size, err := fl.TranscriptSize(t.Context(), item(1), id)
		require.NoError(t, err)
		tr, err := os.Stat(a.transcriptPath(t, item(1), id))
		return err == nil && size == tr.Size()
	}, waitLong, "the transcript never reached the store")
	b.start(t)
	a.killHost(t)

	next := "on the new host " + uuid.NewString()
	d1 := commentOn(t, b, 1, next)
	r := f.waitRunningOn(t, item(1), "host-a", waitLong)
	assert.Equal(t, "host-b", r.Lease.Owner)
	assert.Equal(t, id, r.Status.HarnessSessionID)
	assert.Contains(t, b.paneStartCommand(t, item(1)), "--resume "+id)
	assert.Equal(t, "true", waitDelivered(t, b, d1, waitLong).Attrs["verified"])
	b.waitTurn(t, item(1), id, next, waitLong, "the comment never reached the moved conversation")
	turns := b.userTurns(t, item(1), id)
	assert.Equal(t, 1, countContaining(turns, first), "the old turn came with the transcript")
	assert.Empty(t, b.eventsNamed(t, journal.SessionResumeFailed, item(1)))
}

// BenchmarkFleetTakeover measures a host's loss to all of its n items
// confirmed running on the other host (Running, confirmed, on the same
// conversation): leaseSeconds to notice, then the restores and resumes,
// at capacity.maxStartsInFlight starts at once. Each iteration boots its
// fleet anew, outside the timer. Goal (issue 13): leaseSeconds + 2 s at
// 50 items.
//
//	go test ./e2e -run '^$' -bench FleetTakeover -benchtime 3x
func BenchmarkFleetTakeover(b *testing.B) {
	const n, leaseSeconds = 50, 5
	var total time.Duration
	for b.Loop() {
		total += takeover(b, 2, n, leaseSeconds, map[string]any{"maxLiveSessions": 0, "maxStartsInFlight": 50}).took
	}
	mean := total.Seconds() / float64(b.N)
	b.ReportMetric(mean, "takeover-s")
	b.ReportMetric(mean-leaseSeconds, "past-lease-s")
}

// moved is what one run of the takeover benchmarks measured: the time from
// the kill until all the items run elsewhere (waitMoved), until the first
// of them was given to another host (its lease.moved row), and how many
// each survivor runs.
type moved struct {
	took, lapse time.Duration
	perHost     map[string]int
}

// takeover is one run of the takeover benchmarks, b's timer running only
// for the takeover: a fleet of hosts, each with capacity, whose first
// host runs n items alone until the others join and it is killed.
func takeover(b *testing.B, hosts, n, leaseSeconds int, capacity map[string]any) moved {
	b.StopTimer()
	f := newFleet(b, hosts, leaseSeconds, envOpts{})
	for _, e := range f.hosts {
		e.config["capacity"] = capacity
		e.writeConfig(b)
	}
	a := f.hosts[0]
	a.start(b)
	before := a.bootFleet(b, n)
	for _, e := range f.hosts[1:] {
		e.start(b)
	}
	b.StartTimer()
	lost := time.Now()
	a.killHost(b)
	m := moved{perHost: waitMoved(b, f.hosts[1], before, hostName(0)), took: time.Since(lost)}
	b.StopTimer()
	require.Empty(b, overlaps(b, f.lockDir))
	if evs := f.hosts[1].eventsNamed(b, journal.LeaseMoved, desired.Key{}); len(evs) > 0 {
		m.lapse = evs[0].Time.Sub(lost)
	}
	for _, e := range f.hosts[1:] {
		e.signalDaemon(b, syscall.SIGTERM)
		e.killServer(b)
	}
	b.StartTimer()
	return m
}

// waitMoved waits until every item of before runs on a host other than
// dead, confirmed on its own conversation, as e reads the store, and
// returns how many each host runs.
func waitMoved(t testing.TB, e *env, before map[desired.Key]string, dead string) map[string]int {
	t.Helper()
	var perHost map[string]int
	require.Eventually(t, func() bool {
		perHost = map[string]int{}
		for k, id := range before {
			r, ok := e.record(t, k)
			if !ok || r.Lease.Owner == dead || r.Status.Host != r.Lease.Owner ||
				r.Status.Phase != desired.PhaseRunning || r.Status.ConfirmedSessionID != id {
				return false
			}
			perHost[r.Lease.Owner]++
		}
		return true
	}, time.Minute, tick, "the items never ran on another host")
	return perHost
}

// BenchmarkFleetSpreadOnTakeover: three hosts with no session limit, one of
// them holding 50 items, is killed (daemon, tmux server, agents); the
// clock runs until all 50 run on the two others, confirmed on their own
// conversations. It reports the time, how many runs were within the goal
// of issue 23 (leaseSeconds + 2 s), the lapse (the kill to the first
// lease.moved) and the spread (the fewest and the most items a survivor
// took), with the default capacity.maxStartsInFlight (2, sized for the
// real CLI's start) and with 25, a start for each item a survivor takes
// (the fake CLI's start costs next to nothing):
//
//	go test ./e2e -run '^$' -bench FleetSpreadOnTakeover -benchtime 10x
func BenchmarkFleetSpreadOnTakeover(b *testing.B) {
	const n, leaseSeconds = 50, 5
	for _, starts := range []int{0, 25} {
		capacity := map[string]any{"maxLiveSessions": 0}
		name := "starts=default"
		if starts > 0 {
			capacity["maxStartsInFlight"] = starts
			name = fmt.Sprintf("starts=%d", starts)
		}
		b.Run(name, func(b *testing.B) {
			var total, lapses time.Duration
			within := 0
			least, most := n, 0
			for b.Loop() {
				m := takeover(b, 3, n, leaseSeconds, capacity)
				total, lapses = total+m.took, lapses+m.lapse
				if m.took <= (leaseSeconds+2)*time.Second {
					within++
				}
				for _, h := range []string{hostName(1), hostName(2)} {
					least, most = min(least, m.perHost[h]), max(most, m.perHost[h])
				}
				b.Logf("takeover %s (lapse %s), items per host %v", m.took.Round(10*time.Millisecond), m.lapse.Round(10*time.Millisecond), m.perHost)
			}
			mean := total.Seconds() / float64(b.N)
			b.ReportMetric(mean, "takeover-s")
			b.ReportMetric(mean-leaseSeconds, "past-lease-s")
			b.ReportMetric(float64(within), "within-goal-runs")
			b.ReportMetric(lapses.Seconds()/float64(b.N), "lapse-s")
			b.ReportMetric(float64(least), "fewest-per-host")
			b.ReportMetric(float64(most), "most-per-host")
		})
	}
}

// TestFleetNotifyWakesTheOwner: an event taken by one host reaches the
// agent on the item's owner at once, through PostgreSQL's NOTIFY: the
// owner's resync interval (10 minutes here) never comes into it.
func TestFleetNotifyWakesTheOwner(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, steadyLeaseSeconds, envOpts{IntervalSeconds: 600})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	b.start(t) // host-b alone: the item is its
	openIssue(t, b, 1)
	f.waitRunningOn(t, item(1), "", waitLong)
	a.start(t)
	body := "through host-a " + uuid.NewString()
	d := commentOn(t, a, 1, body)
	waitDelivered(t, b, d, waitShort)
	r := b.mustRecord(t, item(1))
	assert.Equal(t, "host-b", r.Lease.Owner)
	b.waitTurn(t, item(1), r.Status.HarnessSessionID, body, waitShort, "the comment never reached host-b's agent")
	assert.Empty(t, a.starts(t), "no agent on the host that took the webhook")
}

// TestLostTranscriptIsRestoredFromTheStore: the local transcript of a
// conversation is gone (a disk wiped, the machine replaced under the same
// host name) when the next comment comes: the copy the store holds is
// written back and the conversation resumed on its id, the comment landing
// in it, with no resume_failed. Once the store's copy is gone too, a later
// loss goes fresh with the event (TestRealClaudeDeletedTranscriptStartsFresh).
func TestLostTranscriptIsRestoredFromTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Policy: map[string]any{"restartPolicy": "Never"}})
	first := "first comment " + uuid.NewString()
	r := startWithComment(t, e, first)
	id := r.Status.HarnessSessionID
	path := e.transcriptPath(t, keyIssue, id)
	e.waitFor(t, func() bool {
		return countContaining(e.userTurns(t, keyIssue, id), first) == 1 && e.storedTranscriptSize(t, keyIssue, id) > 0
	}, waitLong, "the transcript never reached the store")

	e.killPane(t, keyIssue)
	failures := e.waitPhase(t, keyIssue, desired.PhaseExited, waitShort).Status.Failures
	require.NoError(t, os.Remove(path))

	body := "after the disk was lost " + uuid.NewString()
	sendComment(t, e, body)
	e.waitTurn(t, keyIssue, id, body, waitLong, "the comment never reached the restored conversation")
	after := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, after.Status.HarnessSessionID)
	assert.Equal(t, desired.SpawnResume, after.Status.SpawnMode)
	log := e.argvLog(t)
	require.Len(t, log, 2)
	got, ok := flagValue(log[1], "--resume")
	assert.True(t, ok, "the respawn resumes: %q", log[1])
	assert.Equal(t, id, got)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), first), "the restored conversation holds what came before")
	assert.Len(t, e.eventsNamed(t, journal.TranscriptRestored, keyIssue), 1)
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
	assert.Equal(t, failures, after.Status.Failures, "the restore counts no failure")
}

// TestFleetQueuedItemGoesToAHostWithRoom: a host with no slot left
// (capacity.maxLiveSessions 1) queues its second item while it is the
// only host; once another host with room joins, the queued item is handed
// over (its lease released, reason no_slot) and runs there, while the
// first stays where it runs. One agent per conversation throughout.
func TestFleetQueuedItemGoesToAHostWithRoom(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, steadyLeaseSeconds, envOpts{})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	for _, e := range f.hosts {
		e.config["capacity"] = map[string]any{"maxLiveSessions": 1}
		e.writeConfig(t)
	}
	a.start(t)
	openIssue(t, a, 1)
	first := f.waitRunningOn(t, item(1), "", waitLong)
	openIssue(t, a, 2)
	a.waitRecord(t, item(2), func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseQueued && r.Lease.Owner == "host-a"
	}, waitLong, "never queued on the full host")

	b.start(t)
	moved := f.waitRunningOn(t, item(2), "host-a", waitLong)
	assert.Equal(t, "host-b", moved.Lease.Owner)
	released := a.eventsNamed(t, journal.LeaseReleased, item(2))
	require.Len(t, released, 1)
	assert.Equal(t, string(actions.ReasonNoSlot), released[0].Attrs[journal.KeyReason])
	stays := a.mustRecord(t, item(1))
	assert.Equal(t, "host-a", stays.Lease.Owner)
	assert.Equal(t, first.Lease.Generation, stays.Lease.Generation, "the running item stays where it runs")
	assert.Len(t, a.starts(t), 1)
	assert.Len(t, b.starts(t), 1)
	assert.Empty(t, overlaps(t, f.lockDir))
}

// TestFleetTakeoverKeepsToCapacity: items a drain moves to a host of
// capacity.maxLiveSessions 1 go through its admission like any start: one
// resumes, the other waits Queued, and resumes on its own conversation
// when the first is parked; the host never runs two agents, and no
// failure is counted.
func TestFleetTakeoverKeepsToCapacity(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, steadyLeaseSeconds, envOpts{})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	b.config["capacity"] = map[string]any{"maxLiveSessions": 1, "idleParkSeconds": 1}
	b.writeConfig(t)
	a.start(t)
	ids := map[string]int{}
	for n := 1; n <= 2; n++ {
		openIssue(t, a, n)
		ids[f.waitRunningOn(t, item(n), "", waitLong).Status.HarnessSessionID] = n
	}
	b.start(t)

	stop := make(chan struct{})
	var most int
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			out, err := b.tmux(t, "list-panes", "-a", "-F", "#{pane_dead}")
			if err == nil {
				most = max(most, strings.Count(out, "0\n"))
			}
		}
	})
	out, stderr, code := a.run(t, "drain", "host-a", "--timeout", "60s")
	require.Equal(t, 0, code, "loopd drain: %s%s", out, stderr)
	b.waitFor(t, func() bool { return len(b.starts(t)) >= 2 }, waitLong, "both items never resumed on host-b")
	close(stop)
	sampled.Wait()
	assert.Equal(t, 1, most, "host-b ran more agents than its capacity")
	resumed := map[string]int{}
	for _, s := range b.starts(t)[:2] {
		flag, id := s.mode()
		assert.Equal(t, "--resume", flag, "%q", s.Argv)
		resumed[id] = ids[id]
	}
	assert.Equal(t, ids, resumed, "each item resumed on its own conversation")
	queued := b.eventsNamed(t, journal.SessionQueued, desired.Key{})
	require.Len(t, queued, 1)
	assert.Equal(t, "capacity", queued[0].Attrs["reason"])
	for n := 1; n <= 2; n++ {
		assert.Zero(t, b.mustRecord(t, item(n)).Status.Failures, "%s", item(n))
	}
}

// TestFleetOneLiveDaemonPerHostName: a second daemon given the host name
// of a live one (another state dir and socket) exits non-zero at start,
// naming the host and when its lease lapses, and changes nothing of the
// first's items. Once the first is frozen past its lease, the second
// takes the name over with its items under new generations; the first,
// thawed, is refused its heartbeat, journals host.taken, stops planning
// and stops its stale agent.
func TestFleetOneLiveDaemonPerHostName(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, fleetLeaseSeconds, envOpts{})
	first, twin := f.hosts[0], f.hosts[1]
	twin.config["host"] = map[string]any{"name": "host-a", "leaseSeconds": fleetLeaseSeconds}
	twin.writeConfig(t)
	first.start(t)
	openIssue(t, first, 1)
	r := f.waitRunningOn(t, item(1), "", waitLong)
	require.Equal(t, "host-a", r.Lease.Owner)

	out, errOut, code := twin.runEnv(t, twin.daemonEnv, "serve")
	assert.NotZero(t, code, "a second live daemon under host-a: %s%s", out, errOut)
	assert.Contains(t, errOut, "host-a")
	assert.Contains(t, errOut, "lapses in")
	got := first.mustRecord(t, item(1))
	assert.Equal(t, r.Lease.Generation, got.Lease.Generation, "the refused daemon took nothing")
	assert.Empty(t, twin.starts(t), "no agent started by the refused daemon")
	assert.Len(t, first.starts(t), 1)
	assert.Empty(t, first.eventsNamed(t, journal.HostTaken, desired.Key{}), "a daemon refused is no host taken over")

	// The conversation's copy reaches the store (every few seconds).
	fl := first.openFleet(t)
	first.waitFor(t, func() bool {
		size, err := fl.TranscriptSize(t.Context(), item(1), r.Status.HarnessSessionID)
		return err == nil && size > 0
	}, waitLong, "the transcript never reached the store")
	require.NoError(t, first.daemon.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(first.daemon.Process.Pid, syscall.SIGCONT) })
	first.waitFor(t, func() bool {
		out, _, _ := twin.run(t, "hosts")
		return strings.Contains(out, "host-a") && !regexpLive.MatchString(out)
	}, waitLong, "host-a's heartbeat never lapsed")
	twin.start(t)
	moved := twin.waitRecord(t, item(1), func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Lease.Generation > got.Lease.Generation && len(twin.starts(t)) == 1
	}, waitLong, "the twin never ran host-a's item")
	assert.Equal(t, "host-a", moved.Lease.Owner)
	// The twin's config dir never held the conversation: it came from the
	// store (restored before any fresh start), on the same id.
	assert.Equal(t, r.Status.HarnessSessionID, moved.Status.HarnessSessionID, "the same conversation")
	flag, resumed := twin.starts(t)[0].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, r.Status.HarnessSessionID, resumed)

	require.NoError(t, first.daemon.Process.Signal(syscall.SIGCONT))
	assert.Len(t, first.waitEvent(t, journal.HostTaken, desired.Key{}, 1, waitLong), 1, "the daemon taken over")
	first.waitFor(t, func() bool { return !first.hasSession(t, item(1)) }, waitLong, "the taken daemon kept its agent")
	// The taken daemon stops planning, visibly: its passes fail from the
	// first one after the session's stop, which the journal may show a few
	// milliseconds after the session went.
	first.waitEvent(t, journal.ReconcileFailed, desired.Key{}, 1, waitShort)
	assert.Equal(t, moved.Lease.Generation, twin.mustRecord(t, item(1)).Lease.Generation)
	assert.Equal(t, 1, f.livePanes(t, item(1)), "one agent on the conversation")
}

// regexpLive matches a live host-a line of loopd hosts.
var regexpLive = regexp.MustCompile(`host-a\s+true`)

// TestFleetOperatorCommands: drain refuses an unknown host and a host no
// other live host can relieve; reconcile --once on the shared store joins
// nothing; get marks a host whose lease lapsed; hosts --forget removes a
// dead member only once it holds no lease.
func TestFleetOperatorCommands(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, fleetLeaseSeconds, envOpts{})
	a, b := f.host(t, "host-a"), f.host(t, "host-b")
	a.start(t)
	openIssue(t, a, 1)
	r := f.waitRunningOn(t, item(1), "", waitLong)
	log, err := os.ReadFile(a.daemonLog)
	require.NoError(t, err)
	assert.Regexp(t, `msg=serve.listening .*host=host-a store="?postgres://`, string(log), "serve.listening names the host and the store")

	_, errOut, code := a.run(t, "drain", "nobody")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, store.ErrNoHost.Error())
	assert.NotContains(t, errOut, store.ErrNotFound.Error())
	out, errOut, code := a.run(t, "drain", "host-a")
	assert.Equal(t, 1, code, "drain with no taker: %s%s", out, errOut)
	assert.Contains(t, errOut, "no other live host")
	assert.NotContains(t, out, "drained")
	assert.Regexp(t, `host-a\s+true\s+false`, a.mustRun(t, "hosts"), "host-a is not left draining")

	b.mustRun(t, "reconcile", "--once")
	assert.NotContains(t, a.mustRun(t, "hosts"), "host-b", "a cron pass on PostgreSQL is no member")
	got := a.mustRecord(t, item(1))
	assert.Equal(t, r.Lease, desired.Lease{Owner: got.Lease.Owner, Generation: got.Lease.Generation, Expires: r.Lease.Expires})
	assert.Empty(t, b.starts(t), "the cron pass ran nothing of host-a's")

	a.kill9(t)
	a.waitFor(t, func() bool {
		out, _, _ := b.run(t, "get")
		return strings.Contains(out, "host-a (lapsed)")
	}, waitLong, "get never marked host-a lapsed")
	_, errOut, code = b.run(t, "hosts", "--forget", "host-a")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "holds 1 lease")
	b.start(t)
	f.waitRunningOn(t, item(1), "host-a", waitLong)
	assert.Contains(t, b.mustRun(t, "hosts", "--forget", "host-a"), "forgotten")
	assert.NotContains(t, b.mustRun(t, "hosts"), "host-a")
}

// TestFleetBudgetHeldItemMovesHostsAndCountsNothingTwice: two hosts on one
// PostgreSQL store, a route whose items may use 5,000 weighted tokens a
// day, each message of the fake CLI 1,300. A long turn runs the budget
// out on the item's host: held BudgetExhausted there. That host is lost;
// the other takes the item over, restores its transcript from the store
// and keeps it held, starting nothing, until loopd release --budget
// raises it there: the same conversation resumes on the new host. What
// loopd counted is, after the move and after the raise, the usage of the
// messages of both hosts' transcripts, each once: the restored history
// counts nothing again, the new host's turns count once.
func TestFleetBudgetHeldItemMovesHostsAndCountsNothingTwice(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 2, fleetLeaseSeconds, envOpts{HarnessEnv: map[string]string{
		"FAKECLAUDE_USAGE":       "100,200,0,1000",
		"FAKECLAUDE_LONG_TURN":   "200",
		"FAKECLAUDE_REPLY_DELAY": "400ms",
	}})
	for _, e := range f.hosts {
		e.route()["budget"] = map[string]any{"tokens": 5000, "window": "24h",
			"weights": map[string]any{"input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1}}
		e.writeConfig(t)
	}
	f.start(t)
	k := item(1)
	openIssue(t, f.hosts[0], 1)
	id := f.waitRunningOn(t, k, "", waitLong).Status.HarnessSessionID
	commentOn(t, f.hosts[0], 1, "LONG TURN "+uuid.NewString())
	held := f.hosts[0].waitRecord(t, k, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseBudgetExhausted && r.Lease.Owner != ""
	}, waitLong, "never held for its budget")
	lost := f.host(t, held.Lease.Owner)
	// The interrupt ends the turn where it is, and a message in flight
	// may land after the hold: once the turn has ended, the host counts
	// every message once and ships the whole transcript, and only then
	// is it lost (what a host writes after its last shipping dies with
	// it).
	lost.waitFor(t, func() bool {
		return countContaining(lost.userTurns(t, k, id), "[Request interrupted by user") > 0
	}, waitLong, "the long turn never ended interrupted")
	var (
		counted  desired.Tokens
		messages int
	)
	held = lost.waitRecord(t, k, func(r desired.Record) bool {
		counted, messages = lost.transcriptUsage(t, k, id)
		return r.Status.UsageTotal == counted
	}, waitLong, "the messages of the transcript never counted once each before the move")
	require.Equal(t, desired.PhaseBudgetExhausted, held.Status.Phase)
	t.Logf("%d messages counted before the move: %+v", messages, counted)
	fl := lost.openFleet(t)
	local, err := os.Stat(lost.transcriptPath(t, k, id))
	require.NoError(t, err)
	lost.waitFor(t, func() bool {
		size, err := fl.TranscriptSize(t.Context(), k, id)
		require.NoError(t, err)
		return size == local.Size()
	}, waitLong, "the whole transcript never reached the store")

	lost.killHost(t)
	var other *env
	for _, e := range f.hosts {
		if e != lost {
			other = e
		}
	}
	moved := other.waitRecord(t, k, func(r desired.Record) bool {
		return r.Lease.Owner != "" && r.Lease.Owner != held.Lease.Owner && r.Status.Phase == desired.PhaseBudgetExhausted &&
			len(other.eventsNamed(t, journal.SessionMoved, k)) > 0
	}, waitLong, "never held again on the other host")
	assert.Equal(t, id, moved.Status.HarnessSessionID, "the same conversation")
	both := func() (desired.Tokens, int) {
		byID := lost.messageUsage(t, k, id)
		return sumUsage(other.messageUsage(t, k, id, byID))
	}
	other.settle(t)
	moved = other.mustRecord(t, k)
	counted, messages = both()
	assert.Equal(t, counted, moved.Status.UsageTotal, "each of the %d messages of both hosts counted once", messages)
	assert.Equal(t, held.Status.UsageTotal, moved.Status.UsageTotal, "the restored history counts nothing again")
	assert.Empty(t, other.starts(t), "held, nothing runs on the new host before the raise")

	other.mustRun(t, "release", "--budget", "+50000", k.String())
	r := other.waitPhase(t, k, desired.PhaseRunning, waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation again")
	other.waitFor(t, func() bool {
		return countContaining(other.userTurns(t, k, id), "token budget raised") == 1
	}, waitLong, "the resume's prompt never reached the conversation")
	other.settle(t)
	r = other.mustRecord(t, k)
	starts := other.starts(t)
	require.Len(t, starts, 1)
	flag, resumed := starts[0].mode()
	assert.Equal(t, "--resume "+id, flag+" "+resumed, "the raise resumes the moved conversation")
	counted, messages = both()
	assert.Equal(t, counted, r.Status.UsageTotal, "each of the %d messages counted once, across the move and the raise", messages)
	assert.Zero(t, r.Status.Failures)
	assert.Empty(t, overlaps(t, f.lockDir), "two agents on one conversation")
}
