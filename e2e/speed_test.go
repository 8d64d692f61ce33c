package e2e

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// The speed benchmarks of issue 12 (docs/performance.md): the real loopd
// serve, real tmux and the fake CLI, with a 30 s resync interval so that
// only the fast paths (pidfds, the pane-died hook, transcript writes) can
// explain the figures. Each reports its median and 95th percentile.

// speedEnv is a fleet env (fleetEnv) whose resync interval is 30 s. A run
// of a second is healthy, so that each kill of an agent that runs again is
// a first crash, respawned at once, not a crash loop backing off.
func speedEnv(b *testing.B) *env {
	e := newEnv(b, envOpts{IntervalSeconds: 30, Policy: map[string]any{"healthyResetSeconds": 1}})
	e.config["capacity"] = map[string]any{"maxLiveSessions": 0, "maxStartsInFlight": fleetStarts}
	e.writeConfig(b)
	e.start(b)
	return e
}

// reportLatencies reports the median and the 95th percentile of lat, in
// milliseconds, under the names prefix-p50-ms and prefix-p95-ms.
func reportLatencies(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), prefix+"-p50-ms")
	b.ReportMetric(at(0.95), prefix+"-p95-ms")
}

// poll calls done every 2 ms until it reports true, for at most 20 s.
func poll(b *testing.B, what string, done func() bool) {
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// BenchmarkKillToRespawn kills one live agent per iteration (kill -9 of
// its pane's process, issues 1..n in turn) at n = 1 and 100 live items,
// and measures from the kill to the start of the respawned harness (the
// fake CLI's start log); the iteration then waits until the item runs
// again. Goal (issue 12): median ≤ 50 ms, p95 ≤ 100 ms.
//
//	go test ./e2e -run '^$' -bench KillToRespawn -benchtime 40x
func BenchmarkKillToRespawn(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			e := speedEnv(b)
			e.bootFleet(b, n)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				k := issueKey(1 + i%n)
				i++
				r, _ := e.record(b, k)
				out, err := e.tmux(b, "display-message", "-p", "-t", "="+desired.SessionName(k)+":", "#{pane_pid}")
				if err != nil {
					b.Fatal(err)
				}
				pid, err := strconv.Atoi(strings.TrimSpace(out))
				if err != nil {
					b.Fatal(err)
				}
				before := len(e.starts(b))
				killed := time.Now()
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					b.Fatal(err)
				}
				var started time.Time
				poll(b, "respawn of "+k.String(), func() bool {
					if s := e.starts(b); len(s) > before {
						started = s[before].Time
						return true
					}
					return false
				})
				lat = append(lat, started.Sub(killed))
				poll(b, k.String()+" running again", func() bool {
					got, _ := e.record(b, k)
					return got.Status.Phase == desired.PhaseRunning && got.Status.PaneID != r.Status.PaneID &&
						time.Since(got.Status.SpawnedAt) > time.Second
				})
			}
			reportLatencies(b, "kill-respawn", lat)
		})
	}
}

// BenchmarkAcceptedToVerified delivers one comment per iteration to one
// of n = 100 running items in turn, and measures from the delivery's
// acceptance (the webhook's 202) to its dispatch.delivered verified=true
// row (its frame seen whole in the transcript). Goal (issue 12): median
// ≤ 400 ms.
//
//	go test ./e2e -run '^$' -bench AcceptedToVerified -benchtime 40x
func BenchmarkAcceptedToVerified(b *testing.B) {
	const n = 100
	e := speedEnv(b)
	e.bootFleet(b, n)
	var lat []time.Duration
	i := 0
	for b.Loop() {
		k := issueKey(1 + i%n)
		i++
		id := e.deliver(b, commentFixture, func(m map[string]any) {
			withNumber(k.Number)(m)
			withComment("please look again marker-" + uuid.NewString())(m)
		})
		accepted := time.Now()
		var verified time.Time
		poll(b, "delivery "+id+" verified", func() bool {
			for _, ev := range e.events(b) {
				if ev.Name == journal.DispatchDelivered && ev.Attrs["delivery"] == id && ev.Attrs["verified"] == "true" {
					verified = ev.Time
					return true
				}
			}
			return false
		})
		lat = append(lat, verified.Sub(accepted))
	}
	reportLatencies(b, "accepted-verified", lat)
}
