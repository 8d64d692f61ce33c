package tmuxtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
)

func TestFakeConformance(t *testing.T) {
	RunConformance(t, FakeDriver())
}

// The owner of the sessions fakeWithSession makes, and the guard that
// reaches them.
var (
	fakeOwner = tmux.NewOwner("/fake/state")
	fakeGuard = tmux.Guard{Owner: fakeOwner.ID, Commands: []string{"claude"}}
)

func fakeWithSession(t *testing.T, opts tmux.ServerOptions) *Fake {
	t.Helper()
	f := NewFake()
	require.NoError(t, f.EnsureServer(t.Context(), opts))
	_, _, err := f.NewSession(t.Context(), tmux.NewSession{Name: "loop-a", Dir: "/w",
		Launcher: []string{"loopd", "launch"}, Argv: []string{"claude", "--", "hi"}, Owner: fakeOwner.ID})
	require.NoError(t, err)
	return f
}

func onlyPane(t *testing.T, f *Fake) tmux.Pane {
	t.Helper()
	panes, err := f.ListPanes(t.Context())
	require.NoError(t, err)
	require.Len(t, panes, 1)
	return panes[0]
}

func TestFakeRecordsSpawn(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{PaneDiedChannel: "died", HistoryLimit: 10})
	assert.Equal(t, []string{"loop-a"}, f.Sessions())
	assert.Equal(t, []string{"claude", "--", "hi"}, f.Argv("loop-a"))
	spec, ok := f.Spec("loop-a")
	require.True(t, ok)
	assert.Equal(t, "/w", spec.Dir)
	assert.Equal(t, []string{"loopd", "launch"}, spec.Launcher)
	opts, ensured := f.Options()
	assert.True(t, ensured)
	assert.Equal(t, tmux.ServerOptions{PaneDiedChannel: "died", HistoryLimit: 10}, opts)
	p := onlyPane(t, f)
	assert.Equal(t, tmux.Pane{Session: "loop-a", PaneID: "%0", PID: p.PID, Activity: p.Activity,
		CurrentCommand: "claude", Owner: fakeOwner.ID}, p, "the launcher has become the harness")
	assert.Nil(t, f.Argv("loop-missing"))

	// Returned values are copies.
	f.Argv("loop-a")[0] = "changed"
	spec.Launcher[0] = "changed"
	assert.Equal(t, []string{"claude", "--", "hi"}, f.Argv("loop-a"))
	spec, _ = f.Spec("loop-a")
	assert.Equal(t, []string{"loopd", "launch"}, spec.Launcher)
}

func TestFakePaneIDsAreNotReused(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	require.NoError(t, f.KillSession(t.Context(), "loop-a", fakeOwner.ID))
	id, _, err := f.NewSession(t.Context(), tmux.NewSession{Name: "loop-a", Argv: []string{"claude", "hi"}})
	require.NoError(t, err)
	assert.Equal(t, "%1", id)
}

func TestFakeExitUnknownUntilKick(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{PaneDiedChannel: "died"})
	ctx := t.Context()
	f.ExitUnknown("loop-a", 9)
	p := onlyPane(t, f)
	assert.True(t, p.Dead)
	assert.False(t, p.StatusKnown)
	assert.Zero(t, p.DeadStatus)

	// No hook fired: no signal is kept, so this wait runs out. Like tmux's,
	// the abandoned waiter stays and takes the next signal along with the
	// live one below.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, f.WaitFor(short, "died"), context.DeadlineExceeded)

	woke := make(chan error, 1)
	go func() { woke <- f.WaitFor(ctx, "died") }()
	require.Eventually(t, func() bool { return count(f.Calls(), "WaitFor") == 2 }, waitLimit, tick)
	require.NoError(t, f.Kick(ctx))
	assert.NoError(t, <-woke, "the kick fired the hook")
	p = onlyPane(t, f)
	assert.True(t, p.StatusKnown)
	assert.Equal(t, 9, p.DeadStatus)
}

// An abandoned WaitFor swallows the channel's next signal when no other
// waiter is present, as in tmux 3.3a.
func TestFakeAbandonedWaiterTakesNextSignal(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{PaneDiedChannel: "died"})
	ctx := t.Context()
	ended, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.WaitFor(ended, "died") }()
	require.Eventually(t, func() bool { return count(f.Calls(), "WaitFor") == 1 }, waitLimit, tick)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	f.Exit("loop-a", 1)
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	assert.ErrorIs(t, f.WaitFor(short, "died"), context.DeadlineExceeded, "the signal went to the abandoned waiter")
}

func count(calls []string, verb string) int {
	n := 0
	for _, c := range calls {
		if c == verb {
			n++
		}
	}
	return n
}

func TestFakeExitSignal(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	f.ExitSignal("loop-a", 15)
	p := onlyPane(t, f)
	assert.True(t, p.Dead)
	assert.True(t, p.StatusKnown)
	assert.Equal(t, 15, p.DeadSignal)
	assert.Zero(t, p.DeadStatus)
}

func TestFakeHelpersPanicOnMisuse(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	assert.Panics(t, func() { f.Exit("loop-missing", 1) })
	assert.Panics(t, func() { f.SetScreen("loop-missing", "x") })
	assert.Panics(t, func() { f.FailNext("Spawn", errors.New("x")) })
	f.Exit("loop-a", 1)
	assert.Panics(t, func() { f.Exit("loop-a", 1) }, "already dead")
}

func TestFakeFailNext(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	ctx := t.Context()
	boom := errors.New("boom")
	f.FailNext("KillSession", boom)
	f.FailNext("KillSession", tmux.ErrNoSession)
	assert.ErrorIs(t, f.KillSession(ctx, "loop-a", fakeOwner.ID), boom)
	assert.ErrorIs(t, f.KillSession(ctx, "loop-a", fakeOwner.ID), tmux.ErrNoSession)
	assert.Equal(t, []string{"loop-a"}, f.Sessions(), "failed calls change nothing")
	require.NoError(t, f.KillSession(ctx, "loop-a", fakeOwner.ID))
	assert.Empty(t, f.Sessions())
}

func TestFakeInputLogs(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	ctx := t.Context()
	require.NoError(t, f.Paste(ctx, "=loop-a:", fakeGuard, "one\ntwo"))
	require.NoError(t, f.SendKeys(ctx, "%0", fakeGuard, "Enter", "C-c", "hi"))
	require.NoError(t, f.Paste(ctx, "%0", fakeGuard, "three"))
	assert.Equal(t, []string{"one\ntwo", "three"}, f.Pasted("loop-a"))
	assert.Equal(t, []string{"Enter", "C-c", "hi"}, f.Keys("loop-a"))
	assert.Equal(t, "one\ntwo\r\x03hithree", f.Input("loop-a"))
	f.SetScreen("loop-a", "> ")
	screen, err := f.CapturePane(ctx, "=loop-a:", true)
	require.NoError(t, err)
	assert.Equal(t, "> ", screen)
	assert.Equal(t, []string{"EnsureServer", "NewSession", "Paste", "SendKeys", "Paste", "CapturePane"}, f.Calls())
}

func TestFakeKillServerWakesWaiters(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{PaneDiedChannel: "died"})
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = f.WaitFor(t.Context(), "died") })
	}
	require.Eventually(t, func() bool { return count(f.Calls(), "WaitFor") == len(errs) }, waitLimit, tick)
	f.KillServer()
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Empty(t, f.Sessions())
	assert.ErrorIs(t, f.WaitFor(t.Context(), "died"), tmux.ErrNoSession)
}

// SetForeground stands for a harness that exits and leaves its shell: the
// pane lives, and the guard keeps every paste and key out of it.
func TestFakeSetForegroundTripsTheGuard(t *testing.T) {
	f := fakeWithSession(t, tmux.ServerOptions{})
	ctx := t.Context()
	f.SetForeground("loop-a", "sh")
	assert.Equal(t, "sh", onlyPane(t, f).CurrentCommand)
	assert.ErrorIs(t, f.Paste(ctx, "=loop-a:", fakeGuard, "touch pwned\n"), tmux.ErrNotHarness)
	assert.ErrorIs(t, f.SendKeys(ctx, "=loop-a:", fakeGuard, "Enter"), tmux.ErrNotHarness)
	assert.Empty(t, f.Input("loop-a"))
}
