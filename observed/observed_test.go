package observed_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/observed"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// owner marks the sessions the tests make.
var owner = tmux.NewOwner("/srv/loopd/state").ID

func spawn(t *testing.T, c tmux.Client, name string, argv ...string) {
	t.Helper()
	_, _, err := c.NewSession(t.Context(), tmux.NewSession{Name: name, Argv: argv, Owner: owner})
	require.NoError(t, err)
}

// An idle pass is one exec: the listing, no kick, nothing per session.
func TestObserveListsOnceWithoutKick(t *testing.T) {
	f := tmuxtest.NewFake()
	for _, name := range []string{"loop-a", "loop-b", "loop-c"} {
		spawn(t, f, name, "claude", "hi")
	}
	f.Exit("loop-b", 1)
	_, err := observed.TakeSnapshot(t.Context(), f, now)
	require.NoError(t, err)
	assert.Equal(t, []string{"ListPanes"}, f.Calls()[3:], "one listing; a dead pane with its status needs no kick")
}

// A listing that shows a loopd pane dead with no status (tmux 3.3a did not
// reap it) kicks the server and lists again, which shows the status.
func TestObserveKicksOnlyForUnreapedPanes(t *testing.T) {
	f := tmuxtest.NewFake()
	spawn(t, f, "loop-a", "claude", "hi")
	spawn(t, f, "loop-b", "claude", "hi")
	f.ExitUnknown("loop-b", 3)
	s, err := observed.TakeSnapshot(t.Context(), f, now)
	require.NoError(t, err)
	assert.Equal(t, []string{"ListPanes", "Kick", "ListPanes"}, f.Calls()[2:])
	b, _ := s.Pane("loop-b")
	assert.True(t, b.StatusKnown)
	assert.Equal(t, 3, b.DeadStatus)
}

func TestObserve(t *testing.T) {
	f := tmuxtest.NewFake()
	f.Now = func() time.Time { return now.Add(-time.Minute) }
	require.NoError(t, f.EnsureServer(t.Context(), tmux.ServerOptions{}))
	spawn(t, f, "loop-live", "claude", "hi")
	spawn(t, f, "loop-crashed", "claude", "hi")
	spawn(t, f, "loop-unreaped", "claude", "hi")
	spawn(t, f, "loop-signalled", "claude", "hi")
	spawn(t, f, "other", "sh", "-l")
	spawn(t, f, "loopish", "sh", "-l")
	f.Exit("loop-crashed", 1)
	f.ExitUnknown("loop-unreaped", 2)
	f.ExitSignal("loop-signalled", 9)

	s, err := observed.TakeSnapshot(t.Context(), f, now)
	require.NoError(t, err)
	assert.Equal(t, now, s.At)
	assert.ElementsMatch(t, []string{"loop-live", "loop-crashed", "loop-unreaped", "loop-signalled"},
		keys(s.Panes), "only loop- sessions")

	live, ok := s.Pane("loop-live")
	require.True(t, ok)
	assert.False(t, live.Dead)
	assert.Equal(t, "%0", live.PaneID)

	crashed, _ := s.Pane("loop-crashed")
	assert.Equal(t, tmux.Pane{Session: "loop-crashed", PaneID: "%1", Dead: true, DeadStatus: 1, StatusKnown: true,
		DeadTime: now.Add(-time.Minute), Activity: now.Add(-time.Minute), PID: crashed.PID, CurrentCommand: "claude", Owner: owner}, crashed)

	unreaped, _ := s.Pane("loop-unreaped")
	assert.True(t, unreaped.StatusKnown, "the kick before listing revealed the status")
	assert.Equal(t, 2, unreaped.DeadStatus)

	signalled, _ := s.Pane("loop-signalled")
	assert.Equal(t, 9, signalled.DeadSignal)

	_, ok = s.Pane("other")
	assert.False(t, ok)
	_, ok = s.Pane("loop-missing")
	assert.False(t, ok)
}

func TestObserveEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start bool
	}{{"no_server", false}, {"empty_server", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := tmuxtest.NewFake()
			if tc.start {
				require.NoError(t, f.EnsureServer(t.Context(), tmux.ServerOptions{}))
			}
			s, err := observed.TakeSnapshot(t.Context(), f, now)
			require.NoError(t, err)
			assert.Empty(t, s.Panes)
			assert.NotNil(t, s.Panes)
			assert.Equal(t, now, s.At)
		})
	}
}

func TestObserveErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		verb  string
		calls []string
	}{
		{"ListPanes", []string{"ListPanes"}},
		{"Kick", []string{"ListPanes", "Kick"}},
	} {
		t.Run(tc.verb, func(t *testing.T) {
			f := tmuxtest.NewFake()
			spawn(t, f, "loop-a", "claude", "hi")
			f.ExitUnknown("loop-a", 1)
			f.FailNext(tc.verb, boom)
			_, err := observed.TakeSnapshot(t.Context(), f, now)
			assert.ErrorIs(t, err, boom)
			assert.Equal(t, tc.calls, f.Calls()[1:])
		})
	}
}

// The snapshot holds its own copy: later changes on the server do not show.
func TestSnapshotIsAValue(t *testing.T) {
	f := tmuxtest.NewFake()
	spawn(t, f, "loop-a", "claude", "hi")
	s, err := observed.TakeSnapshot(t.Context(), f, now)
	require.NoError(t, err)
	f.Exit("loop-a", 1)
	require.NoError(t, f.KillSession(t.Context(), "loop-a", owner))
	p, ok := s.Pane("loop-a")
	require.True(t, ok)
	assert.False(t, p.Dead)
}

func TestObserveRealTmux(t *testing.T) {
	e := tmuxtest.NewExec(t)
	ctx := t.Context()
	require.NoError(t, e.EnsureServer(ctx, tmux.ServerOptions{}))
	spawn(t, e, "loop-live", "sleep", "600")
	spawn(t, e, "loop-exit-3", "sh", "-c", "exit 3")
	spawn(t, e, "scratch", "sleep", "600")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		s, err := observed.TakeSnapshot(ctx, e, now)
		require.NoError(ct, err)
		assert.ElementsMatch(ct, []string{"loop-live", "loop-exit-3"}, keys(s.Panes))
		live, _ := s.Pane("loop-live")
		assert.False(ct, live.Dead)
		assert.Positive(ct, live.PID)
		exited, _ := s.Pane("loop-exit-3")
		assert.True(ct, exited.Dead && exited.StatusKnown, "%+v", exited)
		assert.Equal(ct, 3, exited.DeadStatus)
	}, 10*time.Second, 5*time.Millisecond)
}

func keys(m map[string]tmux.Pane) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
