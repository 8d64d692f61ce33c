package e2e

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// fenceLeaseSeconds is host.leaseSeconds of the fencing tests: short, so
// that freezes of several leases stay short, and long enough that a
// loaded box does not miss a heartbeat of a host that is not frozen.
const fenceLeaseSeconds = 3

// samplePeriod is how often a holderSampler looks at the processes.
const samplePeriod = 50 * time.Millisecond

// holderSampler samples, every samplePeriod, the processes of the fake
// CLI (argv[0] bin) that hold conversation id on their command line
// (--session-id or --resume), zombies left out: the agents on that
// conversation, whichever host runs them.
type holderSampler struct {
	bin, id string
	stop    chan struct{}
	done    chan struct{}

	mu       sync.Mutex
	samples  int
	doubled  int          // samples with two or more holders
	seen     [][]string   // the holders of the first doubled samples, described for the log (holderOf)
	old      map[int]bool // the holders when markOld was called
	lastOld  time.Time    // the last sample that saw an old holder
	firstNew time.Time    // the first sample that saw another holder
}

func startSampler(bin, id string) *holderSampler {
	s := &holderSampler{bin: bin, id: id, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(samplePeriod)
		defer t.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// holders returns the pids of the fake CLI's live agents on s.id: its
// live processes on it, less those whose parent is one of them. A child
// the agent forked is its own, and until it execs (the SessionStart
// hook's sh -c) it shows the agent's command line: under load a sample
// finds it there (issue 23: a sample with a "second" agent whose parent
// was the first). The parent is read with the command line, since such a
// child is gone or changed a moment later.
func (s *holderSampler) holders() []int {
	entries, _ := os.ReadDir("/proc")
	parents := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.HasPrefix(cmdline, []byte(s.bin+"\x00")) {
			continue
		}
		if !slices.Contains(strings.Split(string(cmdline), "\x00"), s.id) {
			continue
		}
		if state, ppid, _ := statOf(pid); state != "" && state != "Z" {
			parents[pid] = ppid
		}
	}
	var out []int
	for pid, ppid := range parents {
		if _, forked := parents[ppid]; !forked {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// statOf returns pid's state (R, S, T, Z, …; "" when it is gone), parent
// and start (field 22, in clock ticks since boot, as text).
func statOf(pid int) (state string, ppid int, start string) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, ""
	}
	// The fields after the command's closing parenthesis: state, ppid, …,
	// starttime (field 22).
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) <= 19 {
		return "", 0, ""
	}
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0], ppid, fields[19]
}

// holderOf describes the process pid for the log of a doubled sample:
// its state (T: stopped, as a watchdog leaves it just before the kill),
// its parent, and its workdir and start, which tell the host and the
// spawn it belongs to.
func holderOf(pid int) string {
	state, ppid, start := statOf(pid)
	cwd, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	return fmt.Sprintf("pid=%d state=%s ppid=%d start=%s cwd=%s", pid, state, ppid, start, cwd)
}

func (s *holderSampler) sample() {
	pids := s.holders()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	if len(pids) > 1 {
		s.doubled++
		if len(s.seen) < 4 {
			var holders []string
			for _, pid := range pids {
				holders = append(holders, holderOf(pid))
			}
			s.seen = append(s.seen, holders)
		}
	}
	for _, pid := range pids {
		switch {
		case s.old == nil:
		case s.old[pid]:
			s.lastOld = now
		case s.firstNew.IsZero():
			s.firstNew = now
		}
	}
}

// markOld takes the holders of now as the old agents, whose end the gap
// is counted from.
func (s *holderSampler) markOld() []int {
	pids := s.holders()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.old = map[int]bool{}
	for _, pid := range pids {
		s.old[pid] = true
	}
	s.lastOld = time.Now()
	return pids
}

// fenceRun is what one freeze showed.
type fenceRun struct {
	samples, doubled int
	seen             [][]string
	gap              time.Duration // last old agent seen → first new agent seen
}

func (s *holderSampler) finish() fenceRun {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return fenceRun{samples: s.samples, doubled: s.doubled, seen: s.seen, gap: s.firstNew.Sub(s.lastOld)}
}

// freezeOwner freezes the daemon of f's host frozen, which runs k on
// conversation id, with SIGSTOP for freeze, while the fleet's other host
// takes k over; then it wakes it and waits until it stopped what it had
// of k. It returns what a holderSampler saw meanwhile.
func freezeOwner(t testing.TB, f *fleet, frozen int, k desired.Key, id string, freeze time.Duration) fenceRun {
	t.Helper()
	e, name := f.hosts[frozen], hostName(frozen)
	s := startSampler(e.harnessCmd, id)
	require.Eventually(t, func() bool { return len(s.holders()) == 1 }, waitLong, tick, "no agent on %s", id)
	require.NotEmpty(t, s.markOld())
	pid := e.daemon.Process.Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	stopped := time.Now()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	require.Eventually(t, func() bool {
		r, ok := e.record(t, k)
		return ok && r.Lease.Owner != "" && r.Lease.Owner != name && r.Status.Host == r.Lease.Owner &&
			r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID == id && r.Status.ConfirmedSessionID != ""
	}, waitLong+freeze, tick, "%s never ran on another host", k)
	// The freeze is the scenario: it lasts freeze, however soon the
	// other host took over.
	time.Sleep(time.Until(stopped.Add(freeze)))
	require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
	require.Eventually(t, func() bool {
		out, err := e.tmux(t, "list-sessions", "-F", "#{session_name}")
		return err != nil || !slices.Contains(strings.Fields(out), desired.SessionName(k))
	}, waitLong, tick, "%s kept its session of %s", name, k)
	return s.finish()
}

// TestFleetFrozenHostsAgentEndsBeforeAnotherResumes: a host's daemon
// frozen (SIGSTOP) for 2 and then 3 leases does not freeze its agent's
// watchdog (package fence): the agent ends before the other host resumes
// its conversation, so that no sample, every 50 ms, ever finds two live
// agents on it, and the fake CLI's lock never sees a second start beside
// a live one. The first freeze is host-a's, the second host-b's, once it
// holds the item.
func TestFleetFrozenHostsAgentEndsBeforeAnotherResumes(t *testing.T) {
	t.Parallel()
	lease := fenceLeaseSeconds * time.Second
	f := newFleet(t, 2, fenceLeaseSeconds, envOpts{})
	a, b := f.hosts[0], f.hosts[1]
	a.start(t)
	openIssue(t, a, 1)
	id := f.waitRunningOn(t, item(1), "", waitLong).Status.HarnessSessionID
	b.start(t)
	for i, factor := range []int{2, 3} {
		run := freezeOwner(t, f, i, item(1), id, time.Duration(factor)*lease)
		t.Logf("freeze %dx lease: %d samples, %d with two agents, gap %s %v", factor, run.samples, run.doubled, run.gap, run.seen)
		assert.Zero(t, run.doubled, "freeze of %dx the lease: samples with two agents on %s", factor, id)
		assert.Positive(t, run.gap, "the new agent came up after the old one was gone")
	}
	assert.Empty(t, overlaps(t, f.lockDir))
}

// BenchmarkFleetFence freezes the owner of an item, alternately each of
// two hosts, for 2, 3 and 10 leases (fenceLeaseSeconds), sampling its
// conversation's agents every 50 ms, and reports the gap from the last
// old agent seen to the first new one (median and max) and the samples
// that saw two (which must be none):
//
//	go test ./e2e -run '^$' -bench FleetFence -benchtime 10x -timeout 60m
func BenchmarkFleetFence(b *testing.B) {
	lease := fenceLeaseSeconds * time.Second
	for _, factor := range []int{2, 3, 10} {
		b.Run(strconv.Itoa(factor)+"x", func(b *testing.B) {
			f := newFleet(b, 2, fenceLeaseSeconds, envOpts{})
			f.hosts[0].start(b)
			f.hosts[0].deliver(b, "issues.opened.1.json", withNumber(1))
			var id string
			require.Eventually(b, func() bool {
				r, ok := f.hosts[0].record(b, item(1))
				id = r.Status.ConfirmedSessionID
				return ok && r.Status.Phase == desired.PhaseRunning && id != ""
			}, waitLong, tick)
			f.hosts[1].start(b)
			var gaps []time.Duration
			doubled, owner := 0, 0
			for b.Loop() {
				run := freezeOwner(b, f, owner, item(1), id, time.Duration(factor)*lease)
				gaps = append(gaps, run.gap)
				doubled += run.doubled
				if run.doubled > 0 {
					b.Logf("two agents on %s: %v", id, run.seen)
				}
				owner = 1 - owner
			}
			slices.Sort(gaps)
			b.ReportMetric(gaps[len(gaps)/2].Seconds(), "gap-median-s")
			b.ReportMetric(gaps[len(gaps)-1].Seconds(), "gap-max-s")
			b.ReportMetric(float64(doubled), "two-agent-samples")
			require.Empty(b, overlaps(b, f.lockDir))
		})
	}
}
