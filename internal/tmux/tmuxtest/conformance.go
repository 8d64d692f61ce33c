package tmuxtest

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
)

// Polling bounds for waits on real processes. They bound the wait, they do
// not measure anything.
const (
	waitLimit = 10 * time.Second
	tick      = 5 * time.Millisecond
)

// died is the pane-died channel the suite installs.
const died = "loopd-conformance-died"

// The owners the suite uses: own makes the sessions and claims the server,
// other is a second loopd instance on the same server.
var (
	own   = tmux.NewOwner("/conformance/own")
	other = tmux.NewOwner("/conformance/other")
)

var paneIDPattern = regexp.MustCompile(`^%[0-9]+$`)

// RunConformance runs the tmux.Client contract against the implementation d
// drives, one subtest per behaviour, each on a new server:
// listing with no server and with an empty one, pane ids, duplicate and
// invalid sessions, exact targets (loop-1 never touches loop-12), dead panes
// keeping their status and death time, Paste of multi-line and 100 KB text, Paste into a
// dead pane, SendKeys, the -e environment, capture, WaitFor with the
// pane-died hook, the owner marks on the server and on sessions (a session
// of another owner, or of none, is never killed, pasted into or sent keys),
// and the guard on the pane's foreground process.
func RunConformance(t *testing.T, d Driver) {
	s := suite{d: d}
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"no_server_means_no_sessions", s.noServer},
		{"empty_server_lists_no_panes", s.emptyServer},
		{"new_session_returns_pane_id", s.newSession},
		{"duplicate_session_is_refused", s.duplicate},
		{"invalid_sessions_are_refused", s.invalid},
		{"long_argv_is_refused", s.tooLong},
		{"exact_targets_do_not_match_prefixes", s.exactTargets},
		{"pane_id_targets_work", s.paneIDTargets},
		{"many_panes_are_captured_at_once", s.capturePanes},
		{"dead_pane_keeps_status", s.deadPane},
		{"paste_arrives_whole", s.paste},
		{"paste_into_dead_pane_is_refused", s.pasteDead},
		{"send_keys_reach_the_program", s.sendKeys},
		{"launcher_becomes_the_program", s.launcher},
		{"wait_for_wakes_on_pane_death", s.waitForDeath},
		{"wait_for_keeps_an_unawaited_signal", s.waitForPending},
		{"wait_for_ends_with_ctx", s.waitForCtx},
		{"server_is_claimed_by_one_owner", s.serverOwner},
		{"only_an_empty_server_of_its_owner_stops", s.stopEmpty},
		{"foreign_sessions_are_never_touched", s.foreign},
		{"guard_needs_the_foreground_command", s.foreground},
		{"guard_needs_the_screen_to_show_its_lines", s.shows},
	} {
		t.Run(tc.name, tc.run)
	}
}

type suite struct{ d Driver }

// server returns a client whose server runs with the pane-died hook on died.
func (s suite) server(t *testing.T) tmux.Client {
	t.Helper()
	c := s.d.NewClient(t)
	require.NoError(t, c.EnsureServer(t.Context(), tmux.ServerOptions{PaneDiedChannel: died, HistoryLimit: 500, Owner: own}))
	return c
}

// guard is the guard that lets the suite's owner reach session's program.
func (s suite) guard(t *testing.T, session string) tmux.Guard {
	return tmux.Guard{Owner: own.ID, Commands: []string{tmux.CommandName(s.d.Program(t, session)[0])}}
}

// spawn creates session name, marked as the suite's own, running the
// driver's program, through launcher when not nil, and waits until the
// program is ready for input.
func (s suite) spawn(t *testing.T, c tmux.Client, name string, launcher []string) string {
	t.Helper()
	return s.spawnFor(t, c, name, launcher, own.ID)
}

// spawnFor is spawn with the session marked as owner's ("" for no mark).
func (s suite) spawnFor(t *testing.T, c tmux.Client, name string, launcher []string, owner string) string {
	t.Helper()
	id, pid, err := c.NewSession(t.Context(), tmux.NewSession{Name: name, Launcher: launcher, Argv: s.d.Program(t, name), Width: 80, Height: 24, Owner: owner})
	require.NoError(t, err)
	// The pid returned is the pane's process, as list-panes shows it.
	panes, err := c.ListPanes(t.Context())
	require.NoError(t, err)
	i := slices.IndexFunc(panes, func(p tmux.Pane) bool { return p.PaneID == id })
	require.GreaterOrEqual(t, i, 0, "pane %s of %s not listed", id, name)
	assert.Equal(t, panes[i].PID, pid, "pid of %s", name)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		screen, err := c.CapturePane(t.Context(), tmux.Target(name), false)
		require.NoError(ct, err)
		assert.Contains(ct, screen, "ready "+name)
	}, waitLimit, tick)
	return id
}

// exited makes session's program exit with status and waits until the pane
// shows as dead with that status. It kicks before each look, as observation
// does, because tmux 3.3a may not reap the child without it.
func (s suite) exited(t *testing.T, c tmux.Client, session string, status int) tmux.Pane {
	t.Helper()
	s.d.Exit(t, c, session, status)
	var panes []tmux.Pane
	var err error
	if !assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		if err = c.Kick(t.Context()); err == nil {
			panes, err = c.ListPanes(t.Context())
		}
		require.NoError(ct, err)
		p, ok := paneOf(panes, session)
		assert.True(ct, ok && p.Dead && p.StatusKnown)
	}, waitLimit, tick) {
		t.Fatalf("pane of %s did not die with a status (last error %v, panes %+v)", session, err, panes)
	}
	p, _ := paneOf(panes, session)
	return p
}

// find lists the panes and returns session's.
func find(ctx context.Context, t require.TestingT, c tmux.Client, session string) (tmux.Pane, bool) {
	panes, err := c.ListPanes(ctx)
	require.NoError(t, err)
	return paneOf(panes, session)
}

func paneOf(panes []tmux.Pane, session string) (tmux.Pane, bool) {
	for _, p := range panes {
		if p.Session == session {
			return p, true
		}
	}
	return tmux.Pane{}, false
}

func sessions(t *testing.T, c tmux.Client) []string {
	t.Helper()
	panes, err := c.ListPanes(t.Context())
	require.NoError(t, err)
	names := []string{}
	for _, p := range panes {
		names = append(names, p.Session)
	}
	return names
}

func (s suite) noServer(t *testing.T) {
	c := s.d.NewClient(t)
	ctx := t.Context()
	panes, err := c.ListPanes(ctx)
	require.NoError(t, err)
	assert.Empty(t, panes)
	assert.NoError(t, c.Kick(ctx))
	g := s.guard(t, "loop-x")
	assert.ErrorIs(t, c.KillSession(ctx, "loop-x", own.ID), tmux.ErrNoSession)
	_, err = c.CapturePane(ctx, "=loop-x:", false)
	assert.ErrorIs(t, err, tmux.ErrNoSession)
	screens, err := c.CapturePanes(ctx, []string{"=loop-x:"})
	require.NoError(t, err, "no server: nothing to capture")
	assert.Empty(t, screens)
	assert.ErrorIs(t, c.SendKeys(ctx, "=loop-x:", g, "Enter"), tmux.ErrNoSession)
	assert.ErrorIs(t, c.Paste(ctx, "=loop-x:", g, "text"), tmux.ErrNoSession)
	assert.ErrorIs(t, c.WaitFor(ctx, died), tmux.ErrNoSession)
	owner, err := c.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Zero(t, owner)
}

func (s suite) emptyServer(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	require.NoError(t, c.EnsureServer(ctx, tmux.ServerOptions{PaneDiedChannel: died}), "EnsureServer is idempotent")
	panes, err := c.ListPanes(ctx)
	require.NoError(t, err)
	assert.Empty(t, panes)
	assert.NoError(t, c.Kick(ctx))
	assert.ErrorIs(t, c.KillSession(ctx, "loop-x", own.ID), tmux.ErrNoSession)
	_, err = c.CapturePane(ctx, "%0", false)
	assert.ErrorIs(t, err, tmux.ErrNoSession)
}

func (s suite) newSession(t *testing.T) {
	c := s.server(t)
	id := s.spawn(t, c, "loop-a", nil)
	assert.Regexp(t, paneIDPattern, id)
	p, ok := find(t.Context(), t, c, "loop-a")
	require.True(t, ok)
	assert.Equal(t, id, p.PaneID)
	assert.False(t, p.Dead)
	assert.False(t, p.StatusKnown)
	assert.Positive(t, p.PID)
	assert.Equal(t, own.ID, p.ServerOwner, "the listing shows the server's mark")
	assert.Equal(t, tmux.CommandName(s.d.Program(t, "loop-a")[0]), p.CurrentCommand)
	assert.Equal(t, own.ID, p.Owner)
}

func (s suite) duplicate(t *testing.T) {
	c := s.server(t)
	id := s.spawn(t, c, "loop-a", nil)
	_, _, err := c.NewSession(t.Context(), tmux.NewSession{Name: "loop-a", Argv: s.d.Program(t, "loop-a")})
	require.ErrorIs(t, err, tmux.ErrSessionExists)
	p, ok := find(t.Context(), t, c, "loop-a")
	require.True(t, ok)
	assert.Equal(t, id, p.PaneID, "the first session is untouched")
	assert.False(t, p.Dead)
}

func (s suite) invalid(t *testing.T) {
	c := s.server(t)
	for _, tc := range []struct {
		name string
		s    tmux.NewSession
	}{
		{"one_word_argv", tmux.NewSession{Name: "loop-a", Argv: []string{"sleep"}}},
		{"no_argv", tmux.NewSession{Name: "loop-a"}},
		{"empty_name", tmux.NewSession{Argv: []string{"sleep", "100"}}},
		{"dot_in_name", tmux.NewSession{Name: "loop-a.b", Argv: []string{"sleep", "100"}}},
		{"colon_in_name", tmux.NewSession{Name: "loop-a:b", Argv: []string{"sleep", "100"}}},
		{"newline_in_name", tmux.NewSession{Name: "loop-a\nb", Argv: []string{"sleep", "100"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := c.NewSession(t.Context(), tc.s)
			assert.Error(t, err)
		})
	}
	assert.Empty(t, sessions(t, c), "no session was created")
}

func (s suite) tooLong(t *testing.T) {
	c := s.server(t)
	argv := append(s.d.Program(t, "loop-a"), strings.Repeat("x", 20000))
	_, _, err := c.NewSession(t.Context(), tmux.NewSession{Name: "loop-a", Argv: argv})
	require.ErrorIs(t, err, tmux.ErrCommandTooLong)
	assert.Empty(t, sessions(t, c))
}

func (s suite) exactTargets(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	s.spawn(t, c, "loop-12", nil)
	g := s.guard(t, "loop-1")
	assert.ErrorIs(t, c.KillSession(ctx, "loop-1", own.ID), tmux.ErrNoSession, "loop-1 must not match loop-12")
	_, err := c.CapturePane(ctx, tmux.Target("loop-1"), false)
	assert.ErrorIs(t, err, tmux.ErrNoSession)
	assert.ErrorIs(t, c.Paste(ctx, tmux.Target("loop-1"), g, "not for loop-12"), tmux.ErrNoSession)
	assert.ErrorIs(t, c.SendKeys(ctx, tmux.Target("loop-1"), g, "x"), tmux.ErrNoSession)

	s.spawn(t, c, "loop-1", nil)
	screen, err := c.CapturePane(ctx, tmux.Target("loop-1"), false)
	require.NoError(t, err)
	assert.Contains(t, screen, "ready loop-1\n")
	assert.NotContains(t, screen, "loop-12")
	history, err := c.CapturePane(ctx, tmux.Target("loop-12"), true)
	require.NoError(t, err)
	assert.Contains(t, history, "ready loop-12")

	require.NoError(t, c.KillSession(ctx, "loop-1", own.ID))
	assert.Equal(t, []string{"loop-12"}, sessions(t, c))
	assert.ErrorIs(t, c.KillSession(ctx, "loop-1", own.ID), tmux.ErrNoSession)
	assert.Empty(t, s.d.Input(t, c, "loop-12"), "loop-12 received nothing")

	for _, target := range []string{"loop-12", "=loop-12", "loop-12:", "%x"} {
		assert.Error(t, c.Paste(ctx, target, s.guard(t, "loop-12"), "text"), "inexact target %q", target)
	}
}

func (s suite) paneIDTargets(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	id := s.spawn(t, c, "loop-a", nil)
	screen, err := c.CapturePane(ctx, id, false)
	require.NoError(t, err)
	assert.Contains(t, screen, "ready loop-a")
	require.NoError(t, c.Paste(ctx, id, s.guard(t, "loop-a"), "by id"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "by id", s.d.Input(t, c, "loop-a"))
	}, waitLimit, tick)
	require.NoError(t, c.KillSession(ctx, "loop-a", own.ID))
	assert.ErrorIs(t, c.Paste(ctx, id, s.guard(t, "loop-a"), "gone"), tmux.ErrNoSession)
}

func (s suite) capturePanes(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	a := s.spawn(t, c, "loop-a", nil)
	s.spawn(t, c, "loop-b", nil)
	one, err := c.CapturePane(ctx, a, false)
	require.NoError(t, err)
	screens, err := c.CapturePanes(ctx, []string{a, "%999999", tmux.Target("loop-b"), tmux.Target("loop-x")})
	require.NoError(t, err, "a missing target is left out, not an error")
	assert.Len(t, screens, 2, "the two that exist")
	assert.Equal(t, one, screens[a], "as CapturePane shows it")
	assert.Contains(t, screens[tmux.Target("loop-b")], "ready loop-b")
	_, err = c.CapturePanes(ctx, []string{"loop-a"})
	assert.Error(t, err, "an inexact target")
	require.NoError(t, c.KillSession(ctx, "loop-a", own.ID))
	require.NoError(t, c.KillSession(ctx, "loop-b", own.ID))
	screens, err = c.CapturePanes(ctx, []string{a})
	require.NoError(t, err)
	assert.Empty(t, screens)
}

func (s suite) deadPane(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"clean_exit", 0}, {"exit_3", 3}} {
		status := tc.status
		t.Run(tc.name, func(t *testing.T) {
			c := s.server(t)
			s.spawn(t, c, "loop-a", nil)
			s.spawn(t, c, "loop-b", nil)
			before := time.Now().Truncate(time.Second)
			p := s.exited(t, c, "loop-a", status)
			after := time.Now()
			assert.Equal(t, status, p.DeadStatus)
			assert.Zero(t, p.DeadSignal)
			assert.False(t, p.DeadTime.Before(before) || p.DeadTime.After(after),
				"the death time %v is the death, in whole seconds (between %v and %v)", p.DeadTime, before, after)
			other, ok := find(t.Context(), t, c, "loop-b")
			require.True(t, ok)
			assert.False(t, other.Dead, "the other pane lives on")
			assert.True(t, other.DeadTime.IsZero(), "a live pane has no death time")
			assert.ErrorIs(t, c.KillSession(t.Context(), "loop-x", own.ID), tmux.ErrNoSession)
			require.NoError(t, c.KillSession(t.Context(), "loop-a", own.ID), "a dead pane's session can be killed")
			assert.Equal(t, []string{"loop-b"}, sessions(t, c))
		})
	}
}

func (s suite) paste(t *testing.T) {
	var big strings.Builder
	for i := 0; big.Len() < 100*1024; i++ {
		big.WriteString(strings.Repeat(string(rune('a'+i%26)), 99) + "\n")
	}
	for _, tc := range []struct{ name, text string }{
		{"multi_line", "first line\nsecond line\n\tindented; then a trailing semicolon;"},
		{"100_kb", big.String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.server(t)
			s.spawn(t, c, "loop-a", nil)
			require.NoError(t, c.Paste(t.Context(), "=loop-a:", s.guard(t, "loop-a"), tc.text))
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				got := s.d.Input(t, c, "loop-a")
				assert.Len(ct, got, len(tc.text))
				assert.True(ct, got == tc.text, "the pane got other bytes")
			}, waitLimit, tick)
			p, ok := find(t.Context(), t, c, "loop-a")
			require.True(t, ok)
			assert.False(t, p.Dead, "no Enter was sent and the program lives")
		})
	}
}

func (s suite) pasteDead(t *testing.T) {
	c := s.server(t)
	s.spawn(t, c, "loop-a", nil)
	s.spawn(t, c, "loop-b", nil)
	s.exited(t, c, "loop-a", 1)
	assert.ErrorIs(t, c.Paste(t.Context(), "=loop-a:", s.guard(t, "loop-a"), "too late"), tmux.ErrPaneDead)
	assert.Equal(t, []string{"loop-a", "loop-b"}, sessions(t, c), "the server survives")
	require.NoError(t, c.Paste(t.Context(), "=loop-b:", s.guard(t, "loop-b"), "still here"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "still here", s.d.Input(t, c, "loop-b"))
	}, waitLimit, tick)
}

func (s suite) sendKeys(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	s.spawn(t, c, "loop-a", nil)
	g := s.guard(t, "loop-a")
	require.NoError(t, c.SendKeys(ctx, "=loop-a:", g, "abc", "Enter", "C-c", "Tab", "x;"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "abc\r\x03\tx;", s.d.Input(t, c, "loop-a"))
	}, waitLimit, tick)
	s.exited(t, c, "loop-a", 2)
	assert.ErrorIs(t, c.SendKeys(ctx, "=loop-a:", g, "Enter"), tmux.ErrPaneDead, "keys for a dead pane are refused")
	assert.ErrorIs(t, c.SendKeys(ctx, "=loop-x:", g, "Enter"), tmux.ErrNoSession)
}

func (s suite) shows(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	s.spawn(t, c, "loop-a", nil)
	g := s.guard(t, "loop-a")
	g.Shows = []string{"ready loop-a"}
	require.NoError(t, c.SendKeys(ctx, "=loop-a:", g, "yes"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "yes", s.d.Input(t, c, "loop-a"))
	}, waitLimit, tick)
	for _, lines := range [][]string{
		{"ready loop-b"},
		{"ready loop-a", "not on the screen"},
		// Text that means something to a tmux format or to fnmatch is no
		// pattern: it is matched as a run of any characters, never run.
		{"ready #{pane_id}"},
		{"ready loop-a#{?1,,x}"},
	} {
		g.Shows = lines
		assert.ErrorIs(t, c.SendKeys(ctx, "=loop-a:", g, "no"), tmux.ErrScreenChanged, "%q", lines)
		assert.ErrorIs(t, c.Paste(ctx, "=loop-a:", g, "no"), tmux.ErrScreenChanged, "%q", lines)
	}
	g.Shows = []string{"#*?"}
	assert.Error(t, c.SendKeys(ctx, "=loop-a:", g, "no"), "a line of no characters of its own is refused")
	assert.Equal(t, "yes", s.d.Input(t, c, "loop-a"), "nothing refused reached the program")
}

// launcher spawns through env(1), a launcher that sets a variable and
// execs the program: the pane then runs the program itself.
func (s suite) launcher(t *testing.T) {
	c := s.server(t)
	s.spawn(t, c, "loop-a", []string{"env", "LOOPD_CONFORMANCE=a b;"})
	panes, err := c.ListPanes(t.Context())
	require.NoError(t, err)
	require.Len(t, panes, 1)
	assert.Equal(t, filepath.Base(s.d.Program(t, "loop-a")[0]), panes[0].CurrentCommand)
	if s.d.Env != nil {
		assert.Equal(t, "a b;", s.d.Env(t, c, "loop-a", "LOOPD_CONFORMANCE"))
	}
}

// waitForDeath waits in the background, then ends a pane; the hook must wake
// the waiter. Each poll kicks, as tmux 3.3a fires the hook only once it
// reaps the child.
func (s suite) waitForDeath(t *testing.T) {
	c := s.server(t)
	s.spawn(t, c, "loop-a", nil)
	woke := make(chan error, 1)
	go func() { woke <- c.WaitFor(t.Context(), died) }()
	s.d.Exit(t, c, "loop-a", 1)
	var err error
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		require.NoError(ct, c.Kick(t.Context()))
		select {
		case err = <-woke:
		default:
			assert.Fail(ct, "WaitFor has not returned")
		}
	}, waitLimit, tick)
	assert.NoError(t, err)
}

// waitForPending ends a pane with nobody waiting; a later WaitFor returns at
// once with the kept signal.
func (s suite) waitForPending(t *testing.T) {
	c := s.server(t)
	s.spawn(t, c, "loop-a", nil)
	s.exited(t, c, "loop-a", 1)
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	assert.NoError(t, c.WaitFor(ctx, died))
}

func (s suite) waitForCtx(t *testing.T) {
	c := s.server(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.WaitFor(ctx, "loopd-conformance-idle") }()
	cancel()
	select {
	case err := <-done:
		assert.True(t, errors.Is(err, context.Canceled), "err = %v", err)
	case <-time.After(waitLimit):
		t.Fatal("WaitFor did not return after ctx ended")
	}
}

// serverOwner claims the server for one owner; a second owner is refused,
// named, and changes nothing.
func (s suite) serverOwner(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	got, err := c.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Equal(t, own, got)
	err = c.EnsureServer(ctx, tmux.ServerOptions{PaneDiedChannel: died, Owner: other})
	require.ErrorIs(t, err, tmux.ErrServerOwned)
	assert.Contains(t, err.Error(), own.StateDir, "the error names the owner's state dir")
	got, err = c.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Equal(t, own, got, "the claim stands")
	require.NoError(t, c.EnsureServer(ctx, tmux.ServerOptions{PaneDiedChannel: died, Owner: own}), "the owner may ensure again")
}

// stopEmpty checks StopEmptyServer: no server is no stop; a server with
// a session, or claimed by another owner, runs on; the owner's empty one
// ends, and with it its mark.
func (s suite) stopEmpty(t *testing.T) {
	c := s.d.NewClient(t)
	ctx := t.Context()
	stopped, err := c.StopEmptyServer(ctx, own)
	require.NoError(t, err)
	assert.False(t, stopped, "no server runs")
	require.NoError(t, c.EnsureServer(ctx, tmux.ServerOptions{PaneDiedChannel: died, Owner: own}))
	s.spawn(t, c, "loop-a", nil)
	stopped, err = c.StopEmptyServer(ctx, own)
	require.NoError(t, err)
	assert.False(t, stopped, "a session runs")
	panes, err := c.ListPanes(ctx)
	require.NoError(t, err)
	require.Len(t, panes, 1, "the session lives on")
	require.NoError(t, c.KillSession(ctx, "loop-a", own.ID))
	stopped, err = c.StopEmptyServer(ctx, other)
	require.NoError(t, err)
	assert.False(t, stopped, "another owner's")
	got, err := c.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Equal(t, own, got, "the server runs on with its mark")
	stopped, err = c.StopEmptyServer(ctx, own)
	require.NoError(t, err)
	assert.True(t, stopped)
	got, err = c.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Zero(t, got, "the server and its mark are gone")
	stopped, err = c.StopEmptyServer(ctx, own)
	require.NoError(t, err)
	assert.False(t, stopped)
	_, err = c.StopEmptyServer(ctx, tmux.Owner{ID: "not an owner"})
	assert.Error(t, err, "an invalid mark is refused")
}

// foreign spawns a session of another owner and one with no mark (as made
// by hand) under the names the suite's owner would use: neither is killed,
// pasted into or sent keys, and both keep running.
func (s suite) foreign(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	s.spawnFor(t, c, "loop-a", nil, other.ID)
	s.spawnFor(t, c, "loop-u", nil, "")
	for _, name := range []string{"loop-a", "loop-u"} {
		target := tmux.Target(name)
		assert.ErrorIs(t, c.KillSession(ctx, name, own.ID), tmux.ErrForeign, name)
		assert.ErrorIs(t, c.Paste(ctx, target, s.guard(t, name), "rm -rf ~\n"), tmux.ErrForeign, name)
		assert.ErrorIs(t, c.SendKeys(ctx, target, s.guard(t, name), "x", "Enter"), tmux.ErrForeign, name)
	}
	panes, err := c.ListPanes(ctx)
	require.NoError(t, err)
	require.Len(t, panes, 2, "both sessions live on")
	a, _ := paneOf(panes, "loop-a")
	u, _ := paneOf(panes, "loop-u")
	assert.Equal(t, other.ID, a.Owner)
	assert.Empty(t, u.Owner)
	assert.False(t, a.Dead || u.Dead)
	assert.Empty(t, s.d.Input(t, c, "loop-a"), "loop-a received nothing")
	assert.Empty(t, s.d.Input(t, c, "loop-u"), "loop-u received nothing")
	require.NoError(t, c.KillSession(ctx, "loop-a", other.ID), "its owner may kill it")
}

// foreground checks the guard's command test: a pane whose foreground
// process is not an allowed name gets no paste and no keys.
func (s suite) foreground(t *testing.T) {
	c := s.server(t)
	ctx := t.Context()
	s.spawn(t, c, "loop-a", nil)
	g := s.guard(t, "loop-a")
	wrong := tmux.Guard{Owner: own.ID, Commands: []string{"claude", "node"}}
	assert.ErrorIs(t, c.Paste(ctx, "=loop-a:", wrong, "touch pwned\n"), tmux.ErrNotHarness)
	assert.ErrorIs(t, c.SendKeys(ctx, "=loop-a:", wrong, "Enter"), tmux.ErrNotHarness)
	both := tmux.Guard{Owner: own.ID, Commands: append([]string{"claude"}, g.Commands...)}
	require.NoError(t, c.Paste(ctx, "=loop-a:", both, "for the program"), "any allowed name passes")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, "for the program", s.d.Input(t, c, "loop-a"), "only the allowed paste arrived")
	}, waitLimit, tick)
}
