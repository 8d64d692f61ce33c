package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/store"
)

// BenchmarkBacklogRSS measures the resident memory of the real `loopd
// serve` over a backlog: items work items, each held (loopd hold: no
// agent, nothing sent), with backlog events of about 2 KiB pending
// among them, written to the store before the daemon starts. Once the
// daemon has run passes reconcile passes over them, it reports the
// daemon's VmRSS and VmHWM (/proc/<pid>/status, in MB of 10^6 bytes).
// Goal (issue 12): 40 MB or less with 1,000 items and a 10,000-event
// backlog.
//
//	go test ./e2e -run '^$' -bench BacklogRSS -benchtime 1x -count 3
func BenchmarkBacklogRSS(b *testing.B) {
	const items, backlog, passes = 1000, 10000, 5
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, envOpts{})
		fillHeldBacklog(b, e, items, backlog)
		e.start(b)
		n := e.passes(b)
		deadline := time.Now().Add(2 * time.Minute)
		for e.passes(b) < n+passes {
			require.True(b, time.Now().Before(deadline), "the daemon ran fewer than %d passes in 2 minutes", passes)
			time.Sleep(100 * time.Millisecond)
		}
		st := procStatus(b, e.daemon.Process.Pid)
		b.ReportMetric(float64(st["VmRSS"])/1e6, "VmRSS-MB")
		b.ReportMetric(float64(st["VmHWM"])/1e6, "VmHWM-MB")
		e.signalDaemon(b, syscall.SIGTERM)
		b.StartTimer()
	}
}

// fillHeldBacklog writes items held work items to e's store and backlog
// pending events spread evenly over them, each a rendered comment of
// about 2 KiB, through the store's Ingest and SetHeld (32 writers at once,
// so that group commit packs them).
func fillHeldBacklog(tb testing.TB, e *env, items, backlog int) {
	tb.Helper()
	s := e.openStore(tb)
	defer s.Close()
	body := strings.Repeat("The build fails on the arm64 runner; see the log above. ", 2<<10/56)
	key := func(i int) desired.Key { return desired.Key{Owner: "acme", Repo: "api", Number: 1 + i%items} }
	var next atomic.Int64
	run := func(n int, do func(i int) error) {
		next.Store(0)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for range 32 {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					if err := do(i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		require.NoError(tb, <-errs)
	}
	run(backlog, func(i int) error {
		k, id := key(i), uuid.NewString()
		prompt := webhook.Render(webhook.PromptInput{Event: "issue_comment", Action: "created", WorkItem: k.String(),
			Sender: "octocat", DeliveryID: id, Title: "Flaky build on arm64", URL: "https://github.com/acme/api/issues/" + strconv.Itoa(k.Number),
			Body: fmt.Sprintf("%s (%d)", body, i)})
		_, err := s.Ingest(context.Background(), store.Ingest{DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: "claude-code",
			Cwd: e.workdir(k), Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "octocat",
				Prompt: prompt, ReceivedAt: time.Now().UTC()}})
		return err
	})
	run(items, func(i int) error { return s.SetHeld(context.Background(), key(i), true) })
}

// procStatus returns the fields of /proc/<pid>/status that are sizes
// (VmRSS, VmHWM, …), in bytes.
func procStatus(tb testing.TB, pid int) map[string]int64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(tb, err)
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		require.NoError(tb, err)
		out[name] = n << 10
	}
	require.NoError(tb, sc.Err())
	return out
}
