package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

// The chaos suite (docs/chaos.md) proves loopd's promise of no lost and no
// doubled turn under faults: the real loopd binary on a private tmux
// server, the fake Claude CLI, signed deliveries built from the vendored
// fixtures over real HTTP, and the real SQLite file, while the daemon is
// killed with SIGKILL at random moments, agents are killed at random, and
// the tmux server is killed once. It runs only when LOOPD_CHAOS names a
// scale (make chaos: long; .ci/run: short), since the long run takes
// minutes; LOOPD_CHAOS_SEED replays a run's random moments.

// chaosScale is one size of the chaos run.
type chaosScale struct {
	items, deliveries int
	// daemonKills and agentKills are how many SIGKILLs the daemon and the
	// agents get; the tmux server is killed once, after half the daemon
	// kills.
	daemonKills, agentKills int
	// bootKills are SIGKILLs of a resumed agent before its boot prompt is
	// in its conversation (the fake writes it chaosBootDelay after its
	// start), probeKills of an agent inside its probe window
	// (resumeProbeSeconds after its start), and flightLosses kills of the
	// tmux server while the daemon runs and a spawn is in flight.
	bootKills, probeKills, flightLosses int
	// uptime bounds the daemon's run between a restart and its next kill
	// (uniform); down bounds how long it then stays down.
	uptimeMin, uptimeMax time.Duration
	downMax              time.Duration
	// sendGap is the most a sender waits between two deliveries (uniform
	// from 0), which spreads them over the run.
	sendGap time.Duration
	// drain bounds the wait, after the last fault, for every accepted
	// delivery to reach its agent.
	drain time.Duration
}

// chaosScales are the runs LOOPD_CHAOS selects: long is issue 12's (20
// items, 1,000 deliveries, 100 daemon kills), short is CI's (about 2 min on
// a 2-core machine).
var chaosScales = map[string]chaosScale{
	"short": {items: 8, deliveries: 200, daemonKills: 20, agentKills: 8, bootKills: 4, probeKills: 4, flightLosses: 1,
		uptimeMin: 300 * time.Millisecond, uptimeMax: 2 * time.Second, downMax: 300 * time.Millisecond,
		sendGap: 800 * time.Millisecond, drain: 2 * time.Minute},
	"long": {items: 20, deliveries: 1000, daemonKills: 100, agentKills: 40, bootKills: 16, probeKills: 16, flightLosses: 2,
		uptimeMin: 300 * time.Millisecond, uptimeMax: 2500 * time.Millisecond, downMax: 300 * time.Millisecond,
		sendGap: 500 * time.Millisecond, drain: 5 * time.Minute},
}

// chaosSenders is how many deliveries are in flight at once, as GitHub
// sends a busy repository's events concurrently.
const chaosSenders = 4

// chaosMaxAgentKills bounds the kills of one item's agent, of every kind,
// below the restart budget (10 consecutive failed runs), so that a kill is
// a crash to heal, never the end of the item.
const chaosMaxAgentKills = 8

// chaosBootDelay is how long the fake CLI waits after its start before it
// writes its boot prompt (FAKECLAUDE_BOOT_DELAY; the real one took 1.2–7.8
// s on a resume): the window of a kill during a resume's boot.
const chaosBootDelay = 800 * time.Millisecond

// chaosProbe is the suite's resumeProbeSeconds, the window of a kill
// inside the probe.
const chaosProbe = time.Second

// chaosDelivery is one delivery the suite sends, and what came of it.
type chaosDelivery struct {
	id   string
	item desired.Key
	body []byte
	// event is the X-GitHub-Event.
	event string

	accepted bool // some attempt got a 2xx
	attempts int
	// refused counts the attempts answered with a non-2xx status, and
	// unanswered those that got no answer (the daemon was down or killed
	// mid-request); late counts answers slower than GitHub's deadline.
	refused, unanswered, late int
}

// chaosSeed returns LOOPD_CHAOS_SEED, or a new seed.
func chaosSeed(t *testing.T) uint64 {
	if v := os.Getenv("LOOPD_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "LOOPD_CHAOS_SEED")
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// chaosRun returns the scale LOOPD_CHAOS names, and skips the test when it
// names none.
func chaosRun(t *testing.T) (string, chaosScale) {
	name := os.Getenv("LOOPD_CHAOS")
	sc, ok := chaosScales[name]
	if !ok {
		t.Skipf("LOOPD_CHAOS=%q: set it to short or long to run the chaos suite (make chaos)", name)
	}
	return name, sc
}

// TestChaosDaemonKills: items get a stream of signed deliveries while the
// daemon is killed with SIGKILL at random moments and restarted, random
// agents are killed with SIGKILL, and the tmux server is killed once. A
// delivery that got no 2xx is delivered again under the same id, as an
// operator redelivers it from GitHub. At the end every accepted delivery
// is in exactly one user turn of its item's conversations (0 lost, 0
// doubled), each item is on the conversation it started with unless the
// journal says why not, and no two agents ever ran one conversation at
// once. The table of counts is logged whatever the outcome.
func TestChaosDaemonKills(t *testing.T) {
	name, sc := chaosRun(t)
	seed := chaosSeed(t)
	t.Logf("chaos %s: seed %d (LOOPD_CHAOS_SEED=%d replays the random moments)", name, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	e, lockDir := fleetEnv(t, 100*time.Millisecond)
	e.harnessEnv["FAKECLAUDE_BOOT_DELAY"] = chaosBootDelay.String()
	// The suite is about delivery, not the crash-loop rules: an agent
	// killed soon after its spawn is no fast failure, and every item
	// takes as many deliveries as the run sends it.
	e.policy()["fastFailSeconds"] = 1
	e.policy()["resumeProbeSeconds"] = int(chaosProbe / time.Second)
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["maxDeliveriesPerHour"] = 1000
	e.writeConfig(t)
	e.start(t)

	deliveries := chaosDeliveries(t, e, sc, rng)
	var (
		next    atomic.Int64 // index of the next delivery to send
		senders sync.WaitGroup
		mu      sync.Mutex // guards the chaosDelivery fields
	)
	stop := make(chan struct{})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		senders.Wait()
	}()
	for s := range chaosSenders {
		gap := rand.New(rand.NewPCG(seed, uint64(s)))
		senders.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(deliveries) {
					return
				}
				if !e.chaosSend(deliveries[i], &mu, gap, stop) {
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(gap.Int64N(int64(sc.sendGap) + 1))):
				}
			}
		})
	}

	// The faults, on this goroutine: the env's helpers may fail the test.
	counts := chaosCounts{items: sc.items}
	downLoss := false // the server killed while the daemon was down
	killed := map[desired.Key]int{}
	lastKill := map[desired.Key]time.Time{}
	began := time.Now()
	expected := time.Duration(sc.daemonKills) * (sc.uptimeMin + sc.uptimeMax + sc.downMax) / 2
	agentEvery := expected / time.Duration(sc.agentKills+1)
	nextAgent := began.Add(agentEvery)
	for counts.daemonKills < sc.daemonKills {
		up := sc.uptimeMin + time.Duration(rng.Int64N(int64(sc.uptimeMax-sc.uptimeMin)+1))
		killAt := time.Now().Add(up)
		for time.Now().Before(killAt) {
			if counts.agentKills < sc.agentKills && time.Now().After(nextAgent) {
				if e.chaosKillAgent(t, rng, sc.items, killed, lastKill) {
					counts.agentKills++
				}
				nextAgent = time.Now().Add(agentEvery)
			}
			// The young agents: a resume still before its boot prompt, any
			// spawn inside its probe, and the server lost under a spawn.
			young := e.chaosYoung(t, sc.items)
			if k, ok := young.pick(rng, true, chaosBootDelay, killed); ok && counts.bootKills < sc.bootKills && syscall.Kill(young.pid[k], syscall.SIGKILL) == nil {
				counts.bootKills++
				killed[k]++
			} else if k, ok := young.pick(rng, false, chaosProbe, killed); ok && counts.probeKills < sc.probeKills && rng.IntN(4) == 0 &&
				syscall.Kill(young.pid[k], syscall.SIGKILL) == nil {
				counts.probeKills++
				killed[k]++
			} else if young.inFlight(chaosProbe) && counts.flightLosses < sc.flightLosses && counts.daemonKills >= sc.daemonKills/4 {
				if _, err := e.tmux(t, "kill-server"); err == nil {
					counts.flightLosses++
					counts.serverKills++
				}
			}
			time.Sleep(min(time.Until(killAt), 20*time.Millisecond))
		}
		e.kill9(t)
		counts.daemonKills++
		if !downLoss && counts.daemonKills >= sc.daemonKills/2 {
			// The server goes while the daemon is down: the restarted
			// daemon finds every agent gone at once.
			if _, err := e.tmux(t, "kill-server"); err == nil {
				counts.serverKills++
			}
			downLoss = true
		}
		time.Sleep(time.Duration(rng.Int64N(int64(sc.downMax) + 1)))
		e.start(t)
	}
	faultsEnded := time.Now()
	t.Logf("chaos %s: faults over %s", name, faultsEnded.Sub(began).Round(time.Second))
	senders.Wait()
	close(stop)

	// The faults are over: every accepted delivery must now reach its
	// agent, and no item may be left with an event pending.
	drained := e.chaosDrain(t, sc)
	counts.tally(t, e, deliveries, lockDir)
	for _, ev := range e.eventsNamed(t, journal.DispatchDelivered, desired.Key{}) {
		if ev.Time.Before(faultsEnded) {
			counts.duringFaults++
		}
	}
	t.Logf("chaos %s (seed %d):\n%s", name, seed, counts.table())
	assert.True(t, drained, "some items still had events pending %s after the last fault", sc.drain)
	assert.Zero(t, counts.lost, "accepted deliveries missing from their item's conversation: %v", counts.lostIDs)
	assert.Zero(t, counts.doubled, "deliveries in more than one user turn: %v", counts.doubledIDs)
	assert.Zero(t, counts.mangled, "deliveries that reached an agent mangled")
	assert.Zero(t, counts.unexplained, "conversation changes the journal does not explain: %v", counts.unexplainedItems)
	assert.Zero(t, counts.abandoned, "resumable conversations abandoned for a fresh one: %v", counts.abandonedItems)
	assert.Zero(t, counts.late, "answers slower than GitHub's %s", githubTimeout)
	assert.Empty(t, overlaps(t, lockDir), "two agents ran one conversation at once")
	assert.Equal(t, sc.deliveries, counts.accepted, "every delivery was accepted once redelivered")
}

// chaosDeliveries prepares the run's deliveries: each item's issues.opened
// first, then comments on random items, each with a unique body.
func chaosDeliveries(t *testing.T, e *env, sc chaosScale, rng *rand.Rand) []*chaosDelivery {
	var out []*chaosDelivery
	add := func(fixture string, n int, mutate func(map[string]any)) {
		body := e.payload(t, fixture, all(withNumber(n), mutate))
		out = append(out, &chaosDelivery{id: uuid.NewString(), item: issueKey(n), body: body, event: eventOf(fixture)})
	}
	for n := 1; n <= sc.items; n++ {
		add("issues.opened.1.json", n, func(map[string]any) {})
	}
	for i := len(out); i < sc.deliveries; i++ {
		add(commentFixture, 1+rng.IntN(sc.items), withComment(fmt.Sprintf("chaos comment %d: please look again", i)))
	}
	return out
}

// chaosSend delivers d until some attempt gets a 2xx, waiting a random
// 50–500 ms between attempts; it returns false when stop closed first.
// Every answer must come within GitHub's deadline.
func (e *env) chaosSend(d *chaosDelivery, mu *sync.Mutex, rng *rand.Rand, stop <-chan struct{}) bool {
	sig := webhook.Sign([]byte(e.secret), d.body)
	client := &http.Client{Timeout: 2 * githubTimeout}
	for {
		req, err := http.NewRequest(http.MethodPost, e.webhookURL(), bytes.NewReader(d.body))
		if err != nil {
			panic(err) // a constant URL
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", d.event)
		req.Header.Set("X-GitHub-Delivery", d.id)
		req.Header.Set("X-Hub-Signature-256", sig)
		sent := time.Now()
		resp, err := client.Do(req)
		took := time.Since(sent)
		mu.Lock()
		d.attempts++
		switch {
		case err != nil:
			d.unanswered++
		case resp.StatusCode/100 == 2:
			d.accepted = true
		default:
			d.refused++
		}
		if took > githubTimeout {
			d.late++
		}
		done := d.accepted
		mu.Unlock()
		if resp != nil {
			resp.Body.Close()
		}
		if done {
			return true
		}
		select {
		case <-stop:
			return false
		case <-time.After(50*time.Millisecond + time.Duration(rng.Int64N(int64(450*time.Millisecond)))):
		}
	}
}

// chaosKillAgent sends SIGKILL to the agent of a random item of issues
// 1..items that runs one, has been killed fewer than chaosMaxAgentKills times and not in the
// last 3 s; it reports whether it killed one.
func (e *env) chaosKillAgent(t *testing.T, rng *rand.Rand, items int, killed map[desired.Key]int, last map[desired.Key]time.Time) bool {
	out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_dead} #{pane_pid}")
	if err != nil {
		return false // no server at this moment
	}
	live := map[string]int{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == "0" {
			live[f[0]], _ = strconv.Atoi(f[2])
		}
	}
	var candidates []desired.Key
	for n := 1; n <= items; n++ {
		k := issueKey(n)
		if pid := live[desired.SessionName(k)]; pid > 0 && killed[k] < chaosMaxAgentKills && time.Since(last[k]) > 3*time.Second {
			candidates = append(candidates, k)
		}
	}
	if len(candidates) == 0 {
		return false
	}
	k := candidates[rng.IntN(len(candidates))]
	if syscall.Kill(live[desired.SessionName(k)], syscall.SIGKILL) != nil {
		return false
	}
	killed[k]++
	last[k] = time.Now()
	return true
}

// chaosYoungAgents are the live agents of the run's items that started
// lately, by their pane's process and the fake's start log.
type chaosYoungAgents struct {
	pid    map[desired.Key]int
	age    map[desired.Key]time.Duration
	resume map[desired.Key]bool
}

// chaosYoung returns the live agents of issues 1..items and how long ago
// each started, and whether as a resume.
func (e *env) chaosYoung(t *testing.T, items int) chaosYoungAgents {
	y := chaosYoungAgents{pid: map[desired.Key]int{}, age: map[desired.Key]time.Duration{}, resume: map[desired.Key]bool{}}
	out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_dead} #{pane_pid}")
	if err != nil {
		return y // no server at this moment
	}
	live := map[int]string{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) == 3 && f[1] == "0" {
			pid, _ := strconv.Atoi(f[2])
			live[pid] = f[0]
		}
	}
	sessions := map[string]desired.Key{}
	for n := 1; n <= items; n++ {
		sessions[desired.SessionName(issueKey(n))] = issueKey(n)
	}
	for _, s := range e.starts(t) {
		k, ok := sessions[live[s.PID]]
		if !ok {
			continue
		}
		flag, _ := s.mode()
		y.pid[k], y.age[k], y.resume[k] = s.PID, time.Since(s.Time), flag == "--resume"
	}
	return y
}

// inFlight reports whether an agent started less than within ago: its
// spawn is in flight.
func (y chaosYoungAgents) inFlight(within time.Duration) bool {
	for _, age := range y.age {
		if age < within {
			return true
		}
	}
	return false
}

// pick returns a random agent started less than within ago (a resume when
// resume is set) whose item has not had chaosMaxAgentKills kills.
func (y chaosYoungAgents) pick(rng *rand.Rand, resume bool, within time.Duration, killed map[desired.Key]int) (desired.Key, bool) {
	var candidates []desired.Key
	for k, age := range y.age {
		if age < within && (!resume || y.resume[k]) && killed[k] < chaosMaxAgentKills {
			candidates = append(candidates, k)
		}
	}
	if len(candidates) == 0 {
		return desired.Key{}, false
	}
	slices.SortFunc(candidates, func(a, b desired.Key) int { return a.Number - b.Number })
	return candidates[rng.IntN(len(candidates))], true
}

// chaosDrain waits up to sc.drain until every item runs with no event
// pending or in flight, and reports whether they all did.
func (e *env) chaosDrain(t *testing.T, sc chaosScale) bool {
	deadline := time.Now().Add(sc.drain)
	for {
		done := true
		for n := 1; n <= sc.items && done; n++ {
			r, ok := e.record(t, issueKey(n))
			done = ok && r.Status.Phase == desired.PhaseRunning && len(r.Pending) == 0 &&
				r.Status.SendingDeliveryID == "" && r.Status.SpawnDeliveryID == ""
		}
		if done {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// chaosCounts is the chaos run's table.
type chaosCounts struct {
	items, accepted, refusedAttempts, unanswered, late int
	// deliveredOnce, lost and doubled are over the accepted deliveries;
	// doubled also counts a delivery never answered 2xx that is in more
	// than one turn.
	deliveredOnce, lost, doubled, mangled int
	// duringFaults counts the deliveries the journal says reached their
	// agent before the last fault.
	duringFaults                          int
	conversations, explained, unexplained int
	// abandoned counts the fresh starts whose previous conversation's
	// transcript was intact and whose death was no refusal of the
	// harness's (session.resume_failed reason=not_resumable).
	abandoned                             int
	daemonKills, agentKills, serverKills  int
	bootKills, probeKills, flightLosses   int
	overlaps                              int
	lostIDs, doubledIDs, unexplainedItems []string
	abandonedItems                        []string
}

// frameBegin finds the begin line of every delivery frame in a message
// (desired.FrameBegin).
var frameBegin = regexp.MustCompile(`<<<github-data ([0-9a-f-]{36})\n`)

// tally reads every item's conversations (the transcripts in its project
// directory) and the journal, and fills the table.
func (c *chaosCounts) tally(t *testing.T, e *env, deliveries []*chaosDelivery, lockDir string) {
	copies := map[string]int{}  // delivery id → copies over the item's conversations
	inOne := map[string]bool{}  // delivery id → more than one copy in one conversation
	mangled := map[string]int{} // delivery id → mangled copies
	where := map[string]desired.Key{}
	items := map[desired.Key]bool{}
	for _, d := range deliveries {
		items[d.item] = true
	}
	explanations := map[string]int{} // work item → conversation changes the journal explains
	for _, ev := range e.events(t) {
		if ev.Name == journal.SessionResumeFailed || ev.Attrs["retired_session_id"] != "" {
			explanations[ev.WorkItem]++
		}
	}
	for k := range items {
		convs := e.conversations(t, k)
		c.conversations += len(convs)
		if changes := max(len(convs)-1, 0); changes > 0 {
			x := min(changes, explanations[k.String()])
			c.explained += x
			if changes > x {
				c.unexplained += changes - x
				c.unexplainedItems = append(c.unexplainedItems, k.String())
			}
		}
		for _, id := range convs {
			here := map[string]int{}
			for _, turn := range e.userTurns(t, k, id) {
				for _, m := range frameBegin.FindAllStringSubmatch(turn, -1) {
					did := m[1]
					here[did]++
					where[did] = k
					if frameSeen(did, turn) != desired.SeenWhole {
						mangled[did]++
					}
				}
			}
			for did, n := range here {
				copies[did] += n
				if n > 1 {
					inOne[did] = true
				}
			}
		}
		// A fresh conversation the journal explains is given the item's
		// opening and latest events again: copies across conversations
		// count as doubled only without an explanation.
		if len(convs) > 1 && explanations[k.String()] > 0 {
			for did, n := range copies {
				if where[did] == k && n > 1 && !inOne[did] {
					copies[did] = 1
				}
			}
		}
	}
	for _, d := range deliveries {
		c.refusedAttempts += d.refused
		c.unanswered += d.unanswered
		c.late += d.late
		n := copies[d.id]
		if n > 0 && where[d.id] != d.item {
			t.Errorf("delivery %s for %s reached %s", d.id, d.item, where[d.id])
		}
		c.mangled += mangled[d.id]
		switch {
		case n > 1:
			c.doubled++
			c.doubledIDs = append(c.doubledIDs, d.id)
		case !d.accepted:
		case n == 1:
			c.deliveredOnce++
		default:
			c.lost++
			c.lostIDs = append(c.lostIDs, d.id)
		}
		if d.accepted {
			c.accepted++
		}
	}
	c.overlaps = len(overlaps(t, lockDir))
	c.tallyAbandoned(t, e)
}

// tallyAbandoned counts the fresh starts of the fake CLI, after an item's
// first, whose previous conversation (the one the item's start before it
// ran) holds a turn, with no session.resume_failed reason=not_resumable
// for it: a resumable conversation abandoned. A start names its item by
// the brief of a fresh conversation (desired.AgentMarker), a resume by the
// conversation it resumes.
func (c *chaosCounts) tallyAbandoned(t *testing.T, e *env) {
	refused := map[string]bool{}
	for _, ev := range e.events(t) {
		if ev.Name == journal.SessionResumeFailed && ev.Attrs["reason"] == "not_resumable" {
			refused[ev.Attrs["attempted_session_id"]] = true
		}
	}
	item := map[string]desired.Key{} // conversation → item
	last := map[desired.Key]string{} // item → the conversation of its latest start
	for _, s := range e.starts(t) {
		flag, id := s.mode()
		if flag == "--resume" {
			if k, ok := item[id]; ok {
				last[k] = id
			}
			continue
		}
		var k desired.Key
		for n := 1; n <= c.items; n++ {
			if strings.Contains(s.Argv[len(s.Argv)-1], desired.AgentMarker(issueKey(n))) {
				k = issueKey(n)
			}
		}
		if k == (desired.Key{}) {
			continue
		}
		if prev, ok := last[k]; ok && !refused[prev] && len(e.transcriptLines(t, k, prev)) > 0 {
			c.abandoned++
			c.abandonedItems = append(c.abandonedItems, k.String()+" "+prev)
		}
		item[id], last[k] = k, id
	}
}

// frameSeen is desired.Frame.Check for delivery id in text, with the
// digest its end line names: a body changed on the way no longer matches.
func frameSeen(id, text string) desired.Seen {
	f := desired.Frame{ID: id, Digest: "0000000000000000"}
	head := desired.DeliveryMarker(id) + " sha256="
	if i := strings.LastIndex(text, head); i >= 0 && len(text) >= i+len(head)+16 {
		f.Digest = text[i+len(head) : i+len(head)+16]
	}
	return f.Check(text)
}

// conversations returns the ids of k's conversations that hold a turn (the
// transcripts in its project directory), oldest first.
func (e *env) conversations(t *testing.T, k desired.Key) []string {
	dir := filepath.Dir(e.transcriptPath(t, k, uuid.Nil.String()))
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	type conv struct {
		id string
		at time.Time
	}
	var convs []conv
	for _, en := range entries {
		id, ok := strings.CutSuffix(en.Name(), ".jsonl")
		if !ok || !uuidPattern.MatchString(id) || len(e.transcriptLines(t, k, id)) == 0 {
			continue
		}
		info, err := en.Info()
		require.NoError(t, err)
		convs = append(convs, conv{id, info.ModTime()})
	}
	// The start log orders them: a conversation starts with --session-id.
	order := map[string]int{}
	for i, s := range e.starts(t) {
		if flag, id := s.mode(); flag == "--session-id" {
			if _, ok := order[id]; !ok {
				order[id] = i
			}
		}
	}
	slices.SortFunc(convs, func(a, b conv) int { return order[a.id] - order[b.id] })
	var ids []string
	for _, c := range convs {
		ids = append(ids, c.id)
	}
	return ids
}

// table renders the counts as the suite prints them.
func (c *chaosCounts) table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	rows := []struct {
		name string
		n    int
	}{
		{"items", c.items},
		{"deliveries accepted (2xx)", c.accepted},
		{"  attempts refused (non-2xx)", c.refusedAttempts},
		{"  attempts unanswered (daemon down)", c.unanswered},
		{"  answers later than 10 s", c.late},
		{"delivered once", c.deliveredOnce},
		{"  dispatch.delivered rows before the last fault", c.duringFaults},
		{"lost", c.lost},
		{"doubled", c.doubled},
		{"mangled copies", c.mangled},
		{"conversations", c.conversations},
		{"conversation changes explained", c.explained},
		{"conversation changes unexplained", c.unexplained},
		{"resumable conversations abandoned", c.abandoned},
		{"agents overlapping on one conversation", c.overlaps},
		{"daemon kills (SIGKILL)", c.daemonKills},
		{"agent kills (SIGKILL)", c.agentKills},
		{"  resumes killed before their boot prompt", c.bootKills},
		{"  agents killed inside their probe", c.probeKills},
		{"tmux server kills", c.serverKills},
		{"  of them while spawns were in flight", c.flightLosses},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t\n", r.name, r.n)
	}
	w.Flush()
	return b.String()
}
