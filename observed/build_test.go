package observed

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

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
