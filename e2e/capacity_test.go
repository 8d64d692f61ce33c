package e2e

import (
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// The capacity tests bound the fleet one host runs (capacity in the
// config) and check it on real tmux: the sessions the server holds,
// sampled through the run, the journal, the store and /metrics.

// capacityEnv is an env whose host runs at most live agents (0: no limit),
// starts at most starts at once, and parks an agent idle for park
// seconds (0: never).
func capacityEnv(t testing.TB, live, starts, park int) *env {
	e := newEnv(t, envOpts{})
	e.config["capacity"] = map[string]any{"maxLiveSessions": live, "maxStartsInFlight": starts, "idleParkSeconds": park}
	e.writeConfig(t)
	return e
}

// sessionSampler lists the env's tmux sessions every tick in the
// background and keeps the most item sessions (loop-…) seen at once.
type sessionSampler struct {
	most    atomic.Int64
	samples atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup
}

// sampleSessions starts a sampler; its done stops it and returns the most
// sessions seen, and how many samples were taken.
func (e *env) sampleSessions(t *testing.T) func() (most, samples int) {
	s := &sessionSampler{stop: make(chan struct{})}
	s.wg.Go(func() {
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			out, err := exec.Command("tmux", "-L", e.socket, "list-sessions", "-F", "#{session_name}").Output()
			if err != nil {
				continue // no server yet
			}
			n := int64(0)
			for _, name := range strings.Fields(string(out)) {
				if strings.HasPrefix(name, "loop-") {
					n++
				}
			}
			s.samples.Add(1)
			if n > s.most.Load() {
				s.most.Store(n)
			}
		}
	})
	var once sync.Once
	done := func() (int, int) {
		once.Do(func() { close(s.stop); s.wg.Wait() })
		return int(s.most.Load()), int(s.samples.Load())
	}
	t.Cleanup(func() { done() })
	return done
}

// phasesOf returns the phase of issues 1..n.
func (e *env) phasesOf(t *testing.T, n int) map[int]desired.Phase {
	out := map[int]desired.Phase{}
	for i := 1; i <= n; i++ {
		if r, ok := e.record(t, issueKey(i)); ok {
			out[i] = r.Status.Phase
		}
	}
	return out
}

// want is n items: the first live ones Running, the rest Queued.
func want(live, n int, skip ...int) map[int]desired.Phase {
	out := map[int]desired.Phase{}
	for i := 1; i <= n; i++ {
		out[i] = desired.PhaseQueued
		if i <= live {
			out[i] = desired.PhaseRunning
		}
	}
	for _, i := range skip {
		delete(out, i)
	}
	return out
}

// TestCapacityBoundsTheFleet: with maxLiveSessions 3, eight issues get
// three agents and five places in the queue, in the order their events
// came; a crash of an admitted agent keeps its slot (no queued item takes
// it); closing an item admits the oldest queued one in the same pass. No
// more than three item sessions ever exist on the server.
func TestCapacityBoundsTheFleet(t *testing.T) {
	e := capacityEnv(t, 3, 2, 0)
	e.start(t)
	done := e.sampleSessions(t)
	for i := 1; i <= 8; i++ {
		e.deliver(t, "issues.opened.1.json", withNumber(i))
	}
	e.waitFor(t, func() bool { return assert.ObjectsAreEqual(want(3, 8), e.phasesOf(t, 8)) }, waitLong,
		"three running, five queued")

	out := e.mustRun(t, "get")
	for i := 4; i <= 8; i++ {
		line := lineWith(out, issueKey(i).String())
		assert.Contains(t, line, "Queued", "%s", line)
		assert.Contains(t, line, "position="+strconv.Itoa(i-3), "the oldest event first: %s", line)
	}
	for i := 4; i <= 8; i++ {
		assert.Len(t, e.eventsNamed(t, journal.SessionQueued, issueKey(i)), 1, "session.queued once for %s", issueKey(i))
	}
	e.settle(t)
	assert.Equal(t, 3.0, e.metric(t, "loopd_live_sessions"))
	assert.Equal(t, 3.0, e.metric(t, "loopd_max_live_sessions"))
	assert.Equal(t, 5.0, e.metric(t, `loopd_work_items{phase="Queued"}`))
	assert.Equal(t, 3.0, e.metric(t, `loopd_work_items{phase="Running"}`))

	// A crash of an admitted agent: it comes back on its own conversation,
	// in its own slot; the queue does not move.
	crashed := issueKey(2)
	id := e.mustRecord(t, crashed).Status.HarnessSessionID
	e.killPane(t, crashed)
	e.waitEvent(t, journal.SessionRespawned, crashed, 1, waitLong)
	r := e.waitPhase(t, crashed, desired.PhaseRunning, waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID, "resumed on its own conversation")
	e.settle(t)
	assert.Equal(t, want(3, 8), e.phasesOf(t, 8), "no queued item took the crashed agent's slot")

	// Closing an item frees its slot: the oldest queued item is admitted
	// by the pass that stops it.
	e.deliver(t, "issues.opened.1.json", all(withNumber(1), func(m map[string]any) { m["action"] = "closed" },
		withIssueState("closed", "2030-01-01T00:00:00Z")))
	e.waitPhase(t, issueKey(4), desired.PhaseRunning, waitLong)
	stopped := e.waitEvent(t, journal.SessionStopped, issueKey(1), 1, waitShort)[0]
	pass := stopped.Attrs[journal.KeyReconcileID]
	require.NotEmpty(t, pass)
	var admitted []string
	for _, l := range e.daemonLines(t, journal.SessionStarting) {
		if strings.Contains(l, "work_item="+issueKey(4).String()+" ") {
			admitted = append(admitted, l)
		}
	}
	require.Len(t, admitted, 1, "issue 4 started once")
	assert.Contains(t, admitted[0], "reconcile_id="+pass, "admitted by the pass that stopped issue 1")
	assert.Contains(t, admitted[0], "reason=queued")
	e.settle(t)
	assert.Equal(t, map[int]desired.Phase{1: desired.PhaseStopped, 2: desired.PhaseRunning, 3: desired.PhaseRunning, 4: desired.PhaseRunning,
		5: desired.PhaseQueued, 6: desired.PhaseQueued, 7: desired.PhaseQueued, 8: desired.PhaseQueued}, e.phasesOf(t, 8))
	line := lineWith(e.mustRun(t, "get"), issueKey(5).String())
	assert.Contains(t, line, "position=1", "%s", line)

	most, samples := done()
	require.Greater(t, samples, 20, "the sampler ran")
	assert.LessOrEqual(t, most, 3, "never more than three agents on the server")
	assert.LessOrEqual(t, e.startsAtOnce(t, time.Time{}), 2, "never more than two harnesses starting at once")
	for _, k := range []int{1, 3, 4} {
		assert.Zero(t, e.mustRecord(t, issueKey(k)).Status.Failures, "issue %d", k)
	}
}

// lineWith returns the line of text that contains s, "" when none does.
func lineWith(text, s string) string {
	for line := range strings.Lines(text) {
		if strings.Contains(line, s+" ") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// TestIdleAgentIsParkedAndResumedByItsNextEvent: an agent idle for
// idleParkSeconds is parked (its session stopped, session.parked, no exit
// counted) unless its input box holds a draft; the next comment resumes
// the same conversation with the comment as its boot prompt.
func TestIdleAgentIsParkedAndResumedByItsNextEvent(t *testing.T) {
	e := capacityEnv(t, 10, 2, 2)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	id := r.Status.HarnessSessionID

	// A draft in the input box keeps the agent from being parked.
	_, err := e.tmux(t, "send-keys", "-t", paneTarget(keyIssue), "-l", "half-written")
	require.NoError(t, err)
	e.waitRecord(t, keyIssue, func(r desired.Record) bool { return !r.Status.ActiveSeenAt.IsZero() }, waitShort,
		"the park never looked at the screen")
	e.settle(t)
	assert.Equal(t, desired.PhaseRunning, e.mustRecord(t, keyIssue).Status.Phase, "a draft is not idle")
	assert.True(t, e.hasSession(t, keyIssue))
	for range len("half-written") {
		_, err := e.tmux(t, "send-keys", "-t", paneTarget(keyIssue), "BSpace")
		require.NoError(t, err)
	}

	parked := e.waitEvent(t, journal.SessionParked, keyIssue, 1, waitLong)[0]
	assert.Equal(t, id, parked.Attrs[journal.KeyHarnessSessionID])
	r = e.waitPhase(t, keyIssue, desired.PhaseParked, waitShort)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitShort, "the parked agent's session is gone")
	e.settle(t)
	r = e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseParked, r.Status.Phase, "it stays parked without an event")
	assert.Zero(t, r.Status.Failures)
	assert.Empty(t, e.eventsNamed(t, journal.SessionExited, keyIssue), "a park is no exit")
	assert.Contains(t, lineWith(e.mustRun(t, "get"), keyIssue.String()), "Parked")

	body := "after the park " + strconv.FormatInt(time.Now().UnixNano(), 36)
	delivery := sendComment(t, e, body)
	got := waitDelivered(t, e, delivery, waitLong)
	assert.Equal(t, "boot_prompt", got.Attrs[journal.KeyVia], "the event is the resume's boot prompt")
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, desired.SpawnResume, r.Status.SpawnMode)
	starts := e.starts(t)
	require.Len(t, starts, 2)
	flag, resumed := starts[1].mode()
	assert.Equal(t, "--resume", flag)
	assert.Equal(t, id, resumed)
	assert.Contains(t, strings.Join(starts[1].Argv, " "), body, "the comment boots the resumed agent")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}
