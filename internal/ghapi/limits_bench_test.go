package ghapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// The scenario of issue 22: 40 issues open, one every 1.8 s, while GitHub
// answers every content write with its secondary limit for 72 s.
const (
	blockIssues = 40
	blockFor    = 72 * time.Second
	blockEvery  = blockFor / blockIssues
)

// BenchmarkSecondaryLimitBlock runs issue 22's scenario against the
// recording fake of the REST API with the daemon's worker, its tunables
// and a real SQLite store, on a fake clock shared by the worker and the
// fake (a 72 s block in milliseconds): each issue's status write queues
// its announcement and its eyes reaction as it opens. The block is a 403
// without Retry-After, or a 429 with retry-after: 30. It reports the
// content writes sent while the block held (writes_in_block, of which
// pauses were the first and the probes), the least and the median gap
// between the writes that landed (min_gap_s, median_gap_s), the fake
// seconds from the block's start until every issue had its one
// announcement (announced_s) and how many announcements were posted in
// all (announcements: 40 is one each).
func BenchmarkSecondaryLimitBlock(b *testing.B) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter time.Duration
	}{
		{"403_no_retry_after", http.StatusForbidden, 0},
		{"429_retry_after_30s", http.StatusTooManyRequests, 30 * time.Second},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var r blockResult
			for b.Loop() {
				r = runBlock(b, tc.status, tc.retryAfter)
			}
			b.ReportMetric(float64(r.inBlock), "writes_in_block")
			b.ReportMetric(float64(r.pauses), "pauses")
			b.ReportMetric(r.minGap.Seconds(), "min_gap_s")
			b.ReportMetric(r.medianGap.Seconds(), "median_gap_s")
			b.ReportMetric(r.announced.Seconds(), "announced_s")
			b.ReportMetric(float64(r.announcements), "announcements")
		})
	}
}

type blockResult struct {
	inBlock, pauses, announcements int
	minGap, medianGap, announced   time.Duration
}

func runBlock(b *testing.B, status int, retryAfter time.Duration) blockResult {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "loopd.db"))
	require.NoError(b, err)
	defer st.Close()
	srv := ghapitest.New(b)
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv.SetNow(clk.Now)
	t0 := clk.Now()
	srv.LimitWrites(ghapitest.SecondaryLimit{Until: t0.Add(blockFor), Status: status, RetryAfter: retryAfter})
	api, err := ghapi.New(srv.APIURL(), ghapi.Credentials{Token: "tok-123"}, nil, 5*time.Second)
	require.NoError(b, err)
	w := &ghapi.Worker{Store: st, API: api, Journal: journal.NewRecorder(slog.New(slog.NewTextHandler(io.Discard, nil)), st, clk.Now),
		Now: clk.Now, Sleep: clk.Sleep, Tries: schema.DefaultGitHubTries, Initial: schema.DefaultGitHubBackoffInitial,
		Max:    schema.DefaultGitHubBackoffMax,
		Limits: ghapi.NewLimits(schema.DefaultGitHubWriteGap, schema.DefaultGitHubPauseMin, schema.DefaultGitHubPauseMax)}

	opened := 0
	open := func(n int) {
		k := desired.Key{Owner: "acme", Repo: "api", Number: n}
		_, err := st.Ingest(ctx, store.Ingest{DeliveryID: "d" + strconv.Itoa(n), Key: k, Kind: desired.KindIssue, Harness: "h", Cwd: "/w",
			Delivery: &desired.Delivery{Event: "issues", Action: "opened", Sender: "octocat", Prompt: "p"}})
		require.NoError(b, err)
		marker := "<!-- loopd:announce " + k.String() + " -->"
		require.NoError(b, st.WriteStatus(ctx, k, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseRunning}, Calls: []desired.Call{
			{Kind: desired.CallAnnounce, Body: "An agent is working on this issue.\n\n" + marker, Marker: marker},
			{Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceItem}},
		}}))
	}
	// The daemon's loop: the issues that opened by now, a drain, then the
	// next poll (schema.DefaultGitHubPoll), or the end of the pause if it
	// ends later.
	for limit := t0.Add(time.Hour); ; {
		for opened < blockIssues && !t0.Add(time.Duration(opened)*blockEvery).After(clk.Now()) {
			opened++
			open(opened)
		}
		_, err := w.Drain(ctx)
		require.NoError(b, err)
		pending, err := st.Calls(ctx, store.CallFilter{State: desired.CallPending})
		require.NoError(b, err)
		if opened == blockIssues && len(pending) == 0 {
			break
		}
		require.True(b, clk.Now().Before(limit), "the calls never drained: %d pending", len(pending))
		next := clk.Now().Add(schema.DefaultGitHubPoll)
		for _, p := range w.Limits.Pauses() {
			if p.Holds(clk.Now()) && p.Until.After(next) {
				next = p.Until
			}
		}
		if arrival := t0.Add(time.Duration(opened) * blockEvery); opened < blockIssues && arrival.Before(next) {
			next = arrival
		}
		clk.set(next)
	}

	var r blockResult
	var landed []time.Time
	for _, req := range srv.Requests() {
		if !req.Write() {
			continue
		}
		if req.At.Before(t0.Add(blockFor)) {
			r.inBlock++
		}
		if !req.Limited {
			landed = append(landed, req.At)
			if strings.HasSuffix(req.Path, "/comments") {
				r.announced = req.At.Sub(t0)
			}
		}
	}
	between := gaps(landed)
	slices.Sort(between)
	r.minGap, r.medianGap = between[0], between[len(between)/2]
	evs, err := st.Events(ctx, store.EventFilter{Names: []string{string(journal.GitHubPaused)}})
	require.NoError(b, err)
	r.pauses = len(evs)
	for n := 1; n <= blockIssues; n++ {
		for _, c := range srv.Comments("acme", "api", n) {
			if strings.Contains(c.Body, fmt.Sprintf("<!-- loopd:announce acme/api#%d -->", n)) {
				r.announcements++
			}
		}
	}
	require.Equal(b, blockIssues, r.announcements, "one announcement each")
	return r
}
