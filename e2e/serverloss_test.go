package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/reconciler"
)

// The server-loss tests end loopd's tmux server under live agents and
// check that every agent comes back on its own conversation, that one
// tmux.server_lost says so, that no failure is counted, and, through the
// fake CLI's own lock per conversation, that no two agents ever ran one
// conversation at once.

// fleetStarts is the fleet's capacity.maxStartsInFlight, the default: its
// resumes after a loss go through admission, fleetStarts starting at a
// time.
const fleetStarts = 2

// fleetEnv is an env whose fake CLI holds a lock per conversation
// (overlaps are written to lockDir/overlaps.log) and runs on for hangup
// after SIGHUP, as the real CLI runs on for 40–150 ms. Its host runs any
// number of agents, fleetStarts starting at once.
func fleetEnv(t testing.TB, hangup time.Duration) (*env, string) {
	lockDir := filepath.Join(t.TempDir(), "locks")
	require.NoError(t, os.MkdirAll(lockDir, 0o755))
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_LOCK_DIR": lockDir, "FAKECLAUDE_HANGUP_DELAY": hangup.String()},
		Binds: []string{lockDir}})
	e.config["capacity"] = map[string]any{"maxLiveSessions": 0, "maxStartsInFlight": fleetStarts}
	e.writeConfig(t)
	return e, lockDir
}

// startsAtOnce returns the most harnesses that were starting at one
// instant among those started after since: each from its process's start
// (the fake CLI's start log) to the first row after it that says its
// conversation started, its SessionStart hook's session.reported, or its
// session.spawned or session.respawned. That lies within the time the
// daemon's admission counts the start in flight (reconciler's
// startInFlight: from the spawn's intent, written before the process
// starts, to the pass that reads the report), so more here would be more
// there. The daemon's session.starting bounds nothing: it is logged once
// new-session has returned, which on a loaded machine comes after the
// harness has started and reported (measured: 90 ms after the report).
func (e *env) startsAtOnce(t *testing.T, since time.Time) int {
	t.Helper()
	type span struct {
		id       string
		from, to time.Time
	}
	var spans []*span
	for _, s := range e.starts(t) {
		if _, id := s.mode(); id != "" && s.Time.After(since) {
			spans = append(spans, &span{id: id, from: s.Time})
		}
	}
	events := e.events(t)
	for _, s := range spans {
		for _, ev := range events {
			started := ev.Name == journal.SessionReported || ev.Name == journal.SessionRespawned || ev.Name == journal.SessionSpawned
			if started && ev.Attrs["harness_session_id"] == s.id && ev.Time.After(s.from) && (s.to.IsZero() || ev.Time.Before(s.to)) {
				s.to = ev.Time
			}
		}
	}
	most := 0
	for _, s := range spans {
		n := 0
		for _, o := range spans {
			if !o.from.After(s.from) && (o.to.IsZero() || o.to.After(s.from)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// logField returns the value of key in a text log line (a value without
// spaces: a time, a work item).
func logField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// issueKey is issue n of the fixtures' repository.
func issueKey(n int) desired.Key {
	k := keyIssue
	k.Number = n
	return k
}

// bootFleet opens issues 1..n and waits until each runs with its opening
// prompt in its transcript (a conversation to come back to: an agent
// killed before it wrote one starts fresh); it returns each item's
// conversation id.
func (e *env) bootFleet(t testing.TB, n int) map[desired.Key]string {
	for i := 1; i <= n; i++ {
		e.deliver(t, "issues.opened.1.json", withNumber(i))
	}
	ids := e.waitFleet(t, n, nil)
	require.Eventually(t, func() bool {
		for k, id := range ids {
			if len(e.userTurns(t, k, id)) == 0 {
				return false
			}
		}
		return true
	}, waitLong, tick, "an opening prompt never reached its transcript")
	return ids
}

// waitFleet waits until issues 1..n are all Running in a pane that is not
// the one in before (when before names one), and returns their ids.
func (e *env) waitFleet(t testing.TB, n int, before map[desired.Key]string) map[desired.Key]string {
	ids := map[desired.Key]string{}
	require.Eventually(t, func() bool {
		for i := 1; i <= n; i++ {
			k := issueKey(i)
			r, ok := e.record(t, k)
			if !ok || r.Status.Phase != desired.PhaseRunning || r.Status.LastExitReason == "" && before != nil {
				return false
			}
			ids[k] = r.Status.HarnessSessionID
		}
		return true
	}, waitLong, tick, "the fleet of %d never ran", n)
	return ids
}

// overlaps returns the lines of the fake CLI's overlaps.log: starts on a
// conversation another process still ran.
func overlaps(t testing.TB, lockDir string) []string {
	b, err := os.ReadFile(filepath.Join(lockDir, "overlaps.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

// serverPID returns the pid of the env's tmux server.
func (e *env) serverPID(t *testing.T) int {
	t.Helper()
	out, err := e.tmux(t, "display-message", "-p", "#{pid}")
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	return pid
}

// checkResumed checks that every item of before came back on its own
// conversation, none with a failure counted, that one tmux.server_lost
// was journaled, and that no two agents ran one conversation at once.
func checkResumed(t *testing.T, e *env, lockDir string, before map[desired.Key]string) {
	after := e.waitFleet(t, len(before), before)
	for k, id := range before {
		assert.Equal(t, id, after[k], "%s came back on its own conversation", k)
		r := e.mustRecord(t, k)
		assert.Equal(t, "server_lost", r.Status.LastExitReason, "%s", k)
		assert.Zero(t, r.Status.Failures, "%s: no failure counted", k)
		assert.Zero(t, r.Status.FastFailures, "%s", k)
		assert.Zero(t, r.Status.ChurnFailures, "%s", k)
		assert.Empty(t, r.Status.RetiredSessionIDs, "%s", k)
	}
	lost := e.eventsNamed(t, journal.TmuxServerLost, desired.Key{})
	if assert.Len(t, lost, 1, "one tmux.server_lost") {
		assert.Equal(t, strconv.Itoa(len(before)), lost[0].Attrs["items"])
	}
	assert.Empty(t, e.eventsNamed(t, journal.SessionCrashLoop, desired.Key{}))
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, desired.Key{}))
	resumes := 0
	for _, s := range e.starts(t) {
		if flag, _ := s.mode(); flag == "--resume" {
			resumes++
		}
	}
	assert.Equal(t, len(before), resumes, "one resume per item")
	assert.Empty(t, overlaps(t, lockDir), "a resumed agent ran next to its predecessor")
}

// TestServerLossResumesEveryAgent: 20 live agents, then tmux kill-server.
// The fake CLI runs on 300 ms after its SIGHUP, longer than a new server
// and pane take to start, so a respawn that did not wait for its
// predecessor would overlap it. The resumes go through admission: never
// more than fleetStarts starting at once.
func TestServerLossResumesEveryAgent(t *testing.T) {
	e, lockDir := fleetEnv(t, 300*time.Millisecond)
	e.start(t)
	before := e.bootFleet(t, 20)
	lost := time.Now()
	_, err := e.tmux(t, "kill-server")
	require.NoError(t, err)
	checkResumed(t, e, lockDir, before)
	assert.LessOrEqual(t, e.startsAtOnce(t, lost), fleetStarts, "never more than maxStartsInFlight resumes starting at once")
}

// BenchmarkServerLoss measures, with the fake CLI, the time from tmux
// kill-server under n live agents to all n running again on their own
// conversations (Running, confirmed). Each iteration boots its fleet anew,
// outside the timer. Goal (issue 10): 20 agents in 5 s or less.
//
//	go test ./e2e -run '^$' -bench ServerLoss -benchtime 3x
func BenchmarkServerLoss(b *testing.B) {
	for _, n := range []int{20, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				e, lockDir := fleetEnv(b, 0)
				e.start(b)
				before := e.bootFleet(b, n)
				b.StartTimer()
				if _, err := e.tmux(b, "kill-server"); err != nil {
					b.Fatal(err)
				}
				after := e.waitFleet(b, n, before)
				b.StopTimer()
				for k, id := range before {
					if after[k] != id {
						b.Fatalf("%s came back on %s, not %s", k, after[k], id)
					}
				}
				if o := overlaps(b, lockDir); len(o) > 0 {
					b.Fatalf("overlaps: %v", o)
				}
				e.signalDaemon(b, syscall.SIGTERM)
				e.killServer(b)
				b.StartTimer()
			}
		})
	}
}

// TestServerLossOtherWays: the server killed with SIGKILL (as the OOM
// killer does), and its socket deleted (the server runs on, unreachable,
// with its agents: loopd starts a new one, and each respawn kills its
// predecessor, which nothing else would end).
func TestServerLossOtherWays(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, e *env)
	}{
		{"server_sigkilled", func(t *testing.T, e *env) {
			require.NoError(t, syscall.Kill(e.serverPID(t), syscall.SIGKILL))
		}},
		{"socket_deleted", func(t *testing.T, e *env) {
			server, err := proc.Lookup(e.serverPID(t))
			require.NoError(t, err)
			t.Cleanup(func() {
				if server.Running() { // never a later process that got its pid
					_ = syscall.Kill(server.PID, syscall.SIGKILL)
				}
			})
			path, err := tmux.SocketPath(e.socket)
			require.NoError(t, err)
			require.NoError(t, os.Remove(path))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, lockDir := fleetEnv(t, 300*time.Millisecond)
			e.start(t)
			before := e.bootFleet(t, 3)
			tc.lose(t, e)
			checkResumed(t, e, lockDir, before)
		})
	}
}

// TestServerLostWhileDaemonDownMidSpawn: the daemon is killed while a
// respawn it started is still unconfirmed, and the tmux server goes while
// it is down. The agent it started runs on for a second after its SIGHUP;
// the next daemon, which never saw that agent run, must still wait for it
// before it resumes the conversation: the spawn recorded the pane's
// process with its pane, not only once confirmed.
func TestServerLostWhileDaemonDownMidSpawn(t *testing.T) {
	e, lockDir := fleetEnv(t, time.Second)
	e.start(t)
	// The next daemon starts a server of its own before its first pass,
	// so it sees the loss as an outage: reconciler.OutageMinLive items,
	// resumed at once, with no backoff.
	before := e.bootFleet(t, reconciler.OutageMinLive)
	k := issueKey(1)
	id := before[k]

	// The agent crashes; the daemon starts its resume, records the new
	// pane and its process, and is killed before it can confirm it. (Its
	// session.starting line comes before that record, whose write can
	// take tens of milliseconds on a loaded machine: a kill on the line
	// could land before it.)
	out, err := e.tmux(t, "list-panes", "-t", "="+desired.SessionName(k)+":", "-F", "#{pane_pid}")
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	e.waitRecord(t, k, func(r desired.Record) bool {
		st := r.Status
		return st.Phase == desired.PhaseSpawning && st.PaneID != "" && st.HarnessPID != 0 && st.HarnessPID != pid
	}, waitLong, "no respawn recorded with its pane and process")
	e.kill9(t)
	require.Equal(t, desired.PhaseSpawning, e.mustRecord(t, k).Status.Phase,
		"the daemon must die before it confirms the respawn")
	// The resumed agent holds its conversation's lock once it runs.
	require.Eventually(t, func() bool { return lockHeld(t, filepath.Join(lockDir, id+".lock")) },
		waitLong, tick, "the resumed agent never took its conversation")

	_, err = e.tmux(t, "kill-server")
	require.NoError(t, err)
	e.start(t)
	after := e.waitFleet(t, reconciler.OutageMinLive, before)
	assert.Equal(t, before, after, "each item came back on its own conversation")
	assert.Empty(t, overlaps(t, lockDir), "the next daemon's agent ran next to the one the killed daemon started")
}

// lockHeld reports whether another process holds the flock on path (the
// fake CLI's lock on a conversation).
func lockHeld(t *testing.T, path string) bool {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return false
	}
	require.NoError(t, err)
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	require.NoError(t, unix.Flock(int(f.Fd()), unix.LOCK_UN))
	return false
}

// TestServerLostWhileDaemonStoppedCountsNoCrash: the tmux server goes
// while no loopd runs (serve stopped, then kill-server, as the README's
// "Stopping it" says). The next serve starts a server of its own before
// its first pass; that pass still takes the agent as lost with its server
// (one tmux.server_lost), not as a crash: it is resumed on its own
// conversation with no failure counted, as the dry run before said.
func TestServerLostWhileDaemonStoppedCountsNoCrash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	e.stop(t)
	_, err := e.tmux(t, "kill-server")
	require.NoError(t, err)
	plan := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, plan, "reason=server_lost", "the dry run's word")

	e.start(t)
	lost := e.waitEvent(t, journal.TmuxServerLost, desired.Key{}, 1, waitLong)
	require.Len(t, lost, 1)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	assert.Zero(t, r.Status.Failures, "a lost server is no crash")
	assert.Equal(t, string(actions.ReasonServerLost), r.Status.LastExitReason)
}
