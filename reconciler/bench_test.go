package reconciler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// BenchmarkPlan plans 10,000 and 100,000 items in a realistic mix: most
// running with nothing to do, some with an event to paste, some crashed,
// some probing. The goals of issue 26: 2 ms at 10,000, linear to 100,000
// (25 ms).
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchmarkPlan(b, n) })
	}
}

func benchmarkPlan(b *testing.B, n int) {
	items := make([]desired.Record, 0, n)
	obs := observed.Observation{Snapshot: observed.Snapshot{Panes: make(map[string]tmux.Pane, n)},
		Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{}}
	for i := 0; i < n; i++ {
		k := desired.Key{Owner: "octo-org", Repo: fmt.Sprintf("repo%d", i%50), Number: i}
		st := desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: oldID, PaneID: fmt.Sprintf("%%%d", i), SpawnMode: desired.SpawnFresh, SpawnedAt: t0.Add(-time.Hour)}}
		pane := tmux.Pane{Session: desired.SessionName(k), PaneID: st.PaneID, StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}
		r := desired.Record{Key: k, Spec: desired.Spec{Harness: "claude-code", Cwd: fmt.Sprintf("/w/%s/%d", k.Repo, i), Generation: 2}, Status: st}
		switch i % 10 {
		case 0:
			r.Pending = []desired.Delivery{ev1}
		case 1:
			pane.Dead, pane.DeadStatus = true, 1
			obs.Transcripts[k] = transcript
		case 2:
			r.Status.Phase, r.Status.SpawnMode, r.Status.ProbeDeadline = desired.PhaseSpawning, desired.SpawnResume, t0.Add(time.Second)
		}
		obs.Snapshot.Panes[pane.Session] = pane
		items = append(items, r)
	}
	// The store returns the records in key order (store.Store.Records).
	slices.SortFunc(items, func(a, b desired.Record) int { return compareKeys(a.Key, b.Key) })
	p := testPolicy()
	// Every item's workdir and checkout are rendered from the routing on
	// every pass (workspaceOf).
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/*": {Harness: "claude-code", Workdir: "/w/{{.Repo}}/{{.Number}}",
		Checkout: &schema.Checkout{URL: "git@github.com:{{.Owner}}/{{.Repo}}.git", RemoveOnClose: true}}}}
	b.ReportAllocs()
	for b.Loop() {
		if len(Plan(items, obs, p, t0)) == 0 {
			b.Fatal("empty plan")
		}
	}
}
