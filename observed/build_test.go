package observed

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
)

// A session with several panes (someone split it by hand) keeps its first:
// ListPanes gives a session's panes in index order.
func TestBuildKeepsFirstPane(t *testing.T) {
	at := time.Unix(100, 0)
	s := build([]tmux.Pane{
		{Session: "loop-a", PaneID: "%4"},
		{Session: "loop-a", PaneID: "%9", Dead: true},
		{Session: "loop-b", PaneID: "%5"},
		{Session: "scratch", PaneID: "%6"},
	}, at)
	assert.Equal(t, Snapshot{At: at, Panes: map[string]tmux.Pane{
		"loop-a": {Session: "loop-a", PaneID: "%4"},
		"loop-b": {Session: "loop-b", PaneID: "%5"},
	}, ownerListed: true}, s)
}

// The sessions observed are the ones desired names, plain or hashed, with
// the one prefix: a session named for a work item is never left unseen.
func TestBuildKeepsEverySessionDesiredNames(t *testing.T) {
	at := time.Unix(100, 0)
	var panes []tmux.Pane
	for i, k := range []desired.Key{{Owner: "acme", Repo: "api", Number: 1}, {Owner: "Octo-Org", Repo: "a.b", Number: 2}} {
		panes = append(panes, tmux.Pane{Session: desired.SessionName(k), PaneID: fmt.Sprintf("%%%d", i)})
	}
	panes = append(panes, tmux.Pane{Session: "loo-acme-api-1", PaneID: "%9"})
	s := build(panes, at)
	assert.Len(t, s.Panes, 2)
	for _, p := range panes[:2] {
		assert.Contains(t, s.Panes, p.Session)
	}
}

func BenchmarkBuild(b *testing.B) {
	panes := make([]tmux.Pane, 1000)
	for i := range panes {
		panes[i] = tmux.Pane{Session: fmt.Sprintf("loop-acme-api-%d", i), PaneID: fmt.Sprintf("%%%d", i),
			Dead: i%2 == 1, StatusKnown: i%2 == 1, PID: 20000 + i, CurrentCommand: "claude"}
	}
	at := time.Unix(100, 0)
	b.ReportAllocs()
	for b.Loop() {
		if s := build(panes, at); len(s.Panes) != 1000 {
			b.Fatalf("%d panes", len(s.Panes))
		}
	}
}
