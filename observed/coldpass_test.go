package observed_test

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/observed"
)

// execLog is a slog.Handler that keeps the commands of each tmux.Exec
// invocation (its journal.TmuxExec lines) and drops every other line.
type execLog struct {
	mu    sync.Mutex
	execs [][]string
}

func (l *execLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *execLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != string(journal.TmuxExec) {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "commands" {
			l.mu.Lock()
			l.execs = append(l.execs, a.Value.Any().([]string))
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *execLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *execLog) WithGroup(string) slog.Handler      { return l }

// take returns the invocations logged since the last take.
func (l *execLog) take() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.execs
	l.execs = nil
	return out
}

// capturing is a tmux.Client that keeps the targets of each CapturePanes.
type capturing struct {
	tmux.Client
	mu      sync.Mutex
	batches [][]string
}

func (c *capturing) CapturePanes(ctx context.Context, targets []string) (map[string]string, error) {
	c.mu.Lock()
	c.batches = append(c.batches, slices.Clone(targets))
	c.mu.Unlock()
	return c.Client.CapturePanes(ctx, targets)
}

func (c *capturing) take() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.batches
	c.batches = nil
	return out
}

// TestObserverColdPassOnRealTmux: a new Observer (a cold pass) on real
// tmux is one listing and one invocation for the screens a decision
// needs (Need.Screen without ScreenIfChanged), and captures no pane only
// watched for news until that pane writes; a warm pass with no output is
// the listing alone.
func TestObserverColdPassOnRealTmux(t *testing.T) {
	r := newObserverRig(t)
	ctx := t.Context()
	log := &execLog{}
	e := tmux.NewExec(tmuxtest.Socket(t, "cold"), slog.New(log))
	require.NoError(t, e.EnsureServer(ctx, tmux.ServerOptions{}))
	c := &capturing{Client: e}
	r.o.Tmux = c
	rule := strings.Repeat("─", 20)
	// Each agent shows Claude Code's input box and its login block, and
	// prints what it reads.
	screen := rule + `\n❯\xc2\xa0\n` + rule + `\n  ? for shortcuts     Not logged in · Run /login\n`
	var recs []desired.Record
	panes := map[int]string{}
	for i, id := range []string{idA, idB, idC} {
		name := fmt.Sprintf("loop-acme-api-%d", i+1)
		pane, _, err := e.NewSession(ctx, tmux.NewSession{Name: name, Owner: owner, Width: 80, Height: 24,
			Argv: []string{"sh", "-c", `printf "$0"; while read -r l; do echo "$l"; done`, screen}})
		require.NoError(t, err)
		panes[i+1] = pane
		recs = append(recs, r.item(t, i+1, fmt.Sprint(i), true, id))
	}
	// A pass in a later second than the panes' output (Pane.Activity is
	// in whole seconds).
	quiet := func() {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			s, err := observed.TakeSnapshot(ctx, e, time.Now())
			require.NoError(ct, err)
			for i := range panes {
				p, ok := s.Pane(fmt.Sprintf("loop-acme-api-%d", i))
				require.True(ct, ok)
				require.False(ct, p.Activity.IsZero())
				assert.True(ct, p.Activity.Before(time.Now().Truncate(time.Second)), "pane %d wrote this second", i)
			}
		}, 10*time.Second, 5*time.Millisecond)
	}
	quiet()
	log.take()
	needs := map[int]observed.Need{1: {Screen: true}, 2: {Screen: true, ScreenIfChanged: true}, 3: {Screen: true, ScreenIfChanged: true}}
	observe := func() observed.Observation {
		var seen []observed.Snapshot
		o, err := r.o.Observe(ctx, recs, needsOf(needs, &seen), time.Now())
		require.NoError(t, err)
		return o
	}

	o := observe()
	assert.Equal(t, [][]string{{"list-panes"}, {"source-file"}}, log.take(), "a cold pass: the listing and one invocation for the screens")
	assert.Equal(t, [][]string{{panes[1]}}, c.take(), "only the screen a decision needs is captured")
	assert.Equal(t, "login_required", string(o.Screens[recs[0].Key].Blocked))
	assert.NotContains(t, o.Screens, recs[1].Key, "watched for news, first seen: not captured")
	assert.NotContains(t, o.Screens, recs[2].Key)

	o = observe()
	assert.Equal(t, [][]string{{"list-panes"}}, log.take(), "a warm pass with no output: the listing alone")
	assert.Empty(t, c.take())
	assert.Contains(t, o.Screens, recs[0].Key, "the kept screen stands")

	// Pane 2 writes: its news is captured, in one invocation with the one
	// a decision now needs.
	out, err := exec.Command("tmux", "-L", e.Socket(), "send-keys", "-t", panes[2], "news", "Enter").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		s, err := e.CapturePane(ctx, panes[2], false)
		require.NoError(ct, err)
		assert.Contains(ct, s, "news\nnews")
	}, 10*time.Second, 5*time.Millisecond)
	log.take()
	needs[3] = observed.Need{Screen: true}
	o = observe()
	assert.Equal(t, [][]string{{"list-panes"}, {"source-file"}}, log.take())
	batches := c.take()
	require.Len(t, batches, 1)
	assert.ElementsMatch(t, []string{panes[2], panes[3]}, batches[0], "the pane that wrote and the one now needed")
	assert.Equal(t, "login_required", string(o.Screens[recs[1].Key].Blocked), "news")
	assert.Equal(t, "login_required", string(o.Screens[recs[2].Key].Blocked), "needed")
}
