package tmux

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// invocation is one tmux client run as the execute hook saw it.
type invocation struct {
	argv  []string
	stdin string
}

// owner and guard are the owner mark and guard the argv tests use.
var (
	owner = NewOwner("/srv/loopd/state")
	guard = Guard{Owner: owner.ID, Commands: []string{"claude", "node"}}
)

// guardFormat is guard as the tmux format Paste and SendKeys check.
var guardFormat = "#{&&:#{==:#{pane_dead},0},#{&&:#{==:#{@loopd-owner}," + owner.ID + "}," +
	"#{||:#{==:#{pane_current_command},claude},#{==:#{pane_current_command},node}}}}"

// recorder returns an Exec whose client runs are recorded instead of run;
// each answers with stdout and, when stderr is not empty, fails with it.
func recorder(t *testing.T, stdout, stderr string) (*Exec, *[]invocation) {
	t.Helper()
	e := NewExec("sock", slog.New(slog.DiscardHandler))
	// The argv tests see a server whose global environment is already
	// what the client would give it.
	e.Env = nil
	var runs []invocation
	e.execute = func(_ context.Context, argv []string, stdin io.Reader) ([]byte, []byte, error) {
		in := ""
		if stdin != nil {
			b, err := io.ReadAll(stdin)
			require.NoError(t, err)
			in = string(b)
		}
		runs = append(runs, invocation{argv: argv, stdin: in})
		if stderr != "" {
			return nil, []byte(stderr + "\n"), errors.New("exit status 1")
		}
		return []byte(stdout), nil, nil
	}
	return e, &runs
}

func TestExecArgv(t *testing.T) {
	bufName := regexp.MustCompile(`loopd-[A-Z2-7]{26}`)
	for _, tc := range []struct {
		name   string
		stdout string
		call   func(context.Context, *Exec) error
		want   []string
		stdin  string
	}{
		{
			name: "ensure_server_with_hook",
			call: func(ctx context.Context, e *Exec) error {
				return e.EnsureServer(ctx, ServerOptions{PaneDiedChannel: "loopd-died", HistoryLimit: 5000})
			},
			want: []string{"-L", "sock", "-f", "/dev/null", "start-server",
				";", "set-option", "-g", "exit-empty", "off",
				";", "set-option", "-g", "remain-on-exit", "on",
				";", "set-option", "-g", "history-limit", "5000",
				";", "set-hook", "-g", "pane-died", "wait-for -S 'loopd-died'",
				";", "show-environment", "-g"},
		},
		{
			name: "ensure_server_claims_for_its_owner",
			call: func(ctx context.Context, e *Exec) error {
				return e.EnsureServer(ctx, ServerOptions{Owner: Owner{ID: owner.ID, StateDir: "/srv/it's"}})
			},
			want: []string{"-L", "sock", "-f", "/dev/null", "start-server",
				";", "if-shell", "-F", "#{||:#{==:#{@loopd-server},},#{==:#{@loopd-server}," + owner.ID + "}}",
				"set-option -s @loopd-server " + owner.ID + ` ; set-option -s @loopd-server-dir '/srv/it'\''s'`,
				"display-message -p 'loopd-server-owned #{@loopd-server-dir}'",
				";", "set-option", "-g", "exit-empty", "off",
				";", "set-option", "-g", "remain-on-exit", "on",
				";", "set-hook", "-gu", "pane-died",
				";", "show-environment", "-g"},
		},
		{
			name: "ensure_server_without_hook",
			call: func(ctx context.Context, e *Exec) error { return e.EnsureServer(ctx, ServerOptions{}) },
			want: []string{"-L", "sock", "-f", "/dev/null", "start-server",
				";", "set-option", "-g", "exit-empty", "off",
				";", "set-option", "-g", "remain-on-exit", "on",
				";", "set-hook", "-gu", "pane-died",
				";", "show-environment", "-g"},
		},
		{
			name:   "new_session_escapes_trailing_semicolons",
			stdout: "%7 4242\n",
			call: func(ctx context.Context, e *Exec) error {
				id, pid, err := e.NewSession(ctx, NewSession{Name: "loop-a", Dir: "/w;",
					Launcher: []string{"/opt/loopd", "launch", "--env-file", "/s/e;", "--"},
					Argv:     []string{"claude", "--", "-p", "x;", ";", `y\;`, "a;b"}})
				assert.Equal(t, "%7", id)
				assert.Equal(t, 4242, pid)
				return err
			},
			want: []string{"-L", "sock", "-f", "/dev/null", "new-session", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", "-s", "loop-a",
				"-x", "200", "-y", "50", "-c", `/w\;`,
				"--", "/opt/loopd", "launch", "--env-file", `/s/e\;`, "--", "claude", "--", "-p", `x\;`, `\;`, `y\\;`, "a;b"},
		},
		{
			name:   "new_session_marks_its_owner",
			stdout: "%8 4243\n",
			call: func(ctx context.Context, e *Exec) error {
				_, _, err := e.NewSession(ctx, NewSession{Name: "loop-a", Argv: []string{"claude", "x"}, Owner: owner.ID})
				return err
			},
			want: []string{"-L", "sock", "-f", "/dev/null", "new-session", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", "-s", "loop-a",
				"-x", "200", "-y", "50", "--", "claude", "x",
				";", "set-option", "-t", "=loop-a:", "@loopd-owner", owner.ID},
		},
		{
			name: "server_owner",
			call: func(ctx context.Context, e *Exec) error { _, err := e.ServerOwner(ctx); return err },
			want: []string{"-L", "sock", "-f", "/dev/null", "display-message", "-p", "#{@loopd-server}\t#{@loopd-server-dir}"},
		},
		{
			name: "list_panes",
			call: func(ctx context.Context, e *Exec) error { _, err := e.ListPanes(ctx); return err },
			want: []string{"-L", "sock", "-f", "/dev/null", "list-panes", "-a", "-F", listPanesFormat},
		},
		{
			name: "kick",
			call: func(ctx context.Context, e *Exec) error { return e.Kick(ctx) },
			want: []string{"-L", "sock", "-f", "/dev/null", "run-shell", "true"},
		},
		{
			name: "paste_guards_and_loads_from_stdin",
			call: func(ctx context.Context, e *Exec) error { return e.Paste(ctx, "=it's:", guard, "a\nb;") },
			want: []string{"-L", "sock", "-f", "/dev/null", "has-session", "-t", "=it's:",
				";", "if-shell", "-F", "-t", "=it's:", guardFormat,
				`load-buffer -b BUF - ; paste-buffer -p -d -r -b BUF -t '=it'\''s:'`,
				`display-message -p -t '=it'\''s:' 'loopd-refused #{?pane_dead,dead,#{?#{==:#{@loopd-owner},` + owner.ID + `},foreground,foreign}} #{pane_current_command}'`},
			stdin: "a\nb;",
		},
		{
			name: "send_keys_guarded",
			call: func(ctx context.Context, e *Exec) error { return e.SendKeys(ctx, "%3", guard, "hi;", "Enter") },
			want: []string{"-L", "sock", "-f", "/dev/null", "has-session", "-t", "%3",
				";", "if-shell", "-F", "-t", "%3", guardFormat, "send-keys -t '%3' 'hi;' 'Enter'",
				"display-message -p -t '%3' 'loopd-refused #{?pane_dead,dead,#{?#{==:#{@loopd-owner}," + owner.ID + "},foreground,foreign}} #{pane_current_command}'"},
		},
		{
			name: "capture_visible",
			call: func(ctx context.Context, e *Exec) error { _, err := e.CapturePane(ctx, "=loop-a:", false); return err },
			want: []string{"-L", "sock", "-f", "/dev/null", "capture-pane", "-p", "-J", "-t", "=loop-a:"},
		},
		{
			name: "capture_history",
			call: func(ctx context.Context, e *Exec) error { _, err := e.CapturePane(ctx, "=loop-a:", true); return err },
			want: []string{"-L", "sock", "-f", "/dev/null", "capture-pane", "-p", "-J", "-t", "=loop-a:", "-S", "-"},
		},
		{
			name: "kill_session_is_exact_and_guarded",
			call: func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "loop-1", owner.ID) },
			want: []string{"-L", "sock", "-f", "/dev/null", "has-session", "-t", "=loop-1",
				";", "if-shell", "-F", "-t", "=loop-1:", "#{==:#{@loopd-owner}," + owner.ID + "}", "kill-session -t '=loop-1'",
				"display-message -p 'loopd-refused foreign'"},
		},
		{
			name: "wait_for",
			call: func(ctx context.Context, e *Exec) error { return e.WaitFor(ctx, "loopd-died") },
			want: []string{"-L", "sock", "-f", "/dev/null", "wait-for", "loopd-died"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, runs := recorder(t, tc.stdout, "")
			require.NoError(t, tc.call(t.Context(), e))
			require.Len(t, *runs, 1, "one tmux invocation")
			got := (*runs)[0]
			for i, a := range got.argv {
				got.argv[i] = bufName.ReplaceAllString(a, "BUF")
			}
			assert.Equal(t, tc.want, got.argv)
			assert.Equal(t, tc.stdin, got.stdin)
		})
	}
}

func TestExecPasteBufferNamesAreUnique(t *testing.T) {
	e, runs := recorder(t, "", "")
	require.NoError(t, e.Paste(t.Context(), "%1", guard, "a"))
	require.NoError(t, e.Paste(t.Context(), "%1", guard, "b"))
	require.Len(t, *runs, 2)
	last := func(r invocation) string { return r.argv[len(r.argv)-2] }
	assert.NotEqual(t, last((*runs)[0]), last((*runs)[1]))
}

func TestExecRefusesWithoutRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(context.Context, *Exec) error
	}{
		{"one_word_argv", func(ctx context.Context, e *Exec) error {
			_, _, err := e.NewSession(ctx, NewSession{Name: "loop-a", Argv: []string{"claude"}})
			return err
		}},
		{"renamed_session_name", func(ctx context.Context, e *Exec) error {
			_, _, err := e.NewSession(ctx, NewSession{Name: "loop.a", Argv: []string{"sleep", "1"}})
			return err
		}},
		{"prefix_target", func(ctx context.Context, e *Exec) error { return e.Paste(ctx, "loop-1", guard, "x") }},
		{"session_target_without_colon", func(ctx context.Context, e *Exec) error { return e.SendKeys(ctx, "=loop-1", guard, "x") }},
		{"paste_without_owner", func(ctx context.Context, e *Exec) error {
			return e.Paste(ctx, "%1", Guard{Commands: []string{"claude"}}, "x")
		}},
		{"paste_without_commands", func(ctx context.Context, e *Exec) error { return e.Paste(ctx, "%1", Guard{Owner: owner.ID}, "x") }},
		{"keys_with_a_format_in_a_command", func(ctx context.Context, e *Exec) error {
			return e.SendKeys(ctx, "%1", Guard{Owner: owner.ID, Commands: []string{"a,#{pane_id}"}}, "x")
		}},
		{"kill_without_owner", func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "loop-1", "") }},
		{"new_session_with_a_bad_owner", func(ctx context.Context, e *Exec) error {
			_, _, err := e.NewSession(ctx, NewSession{Name: "loop-a", Argv: []string{"sleep", "1"}, Owner: "x}"})
			return err
		}},
		{"pattern_target", func(ctx context.Context, e *Exec) error {
			_, err := e.CapturePane(ctx, "loop-*", false)
			return err
		}},
		{"empty_kill", func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "", owner.ID) }},
		{"empty_channel", func(ctx context.Context, e *Exec) error { return e.WaitFor(ctx, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, runs := recorder(t, "", "")
			assert.Error(t, tc.call(t.Context(), e))
			assert.Empty(t, *runs, "tmux was not run")
		})
	}
}

func TestExecEmptyPasteIsNoOp(t *testing.T) {
	e, runs := recorder(t, "", "")
	require.NoError(t, e.Paste(t.Context(), "%1", guard, ""))
	assert.Empty(t, *runs)
}

func TestExecErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stderr string
		call   func(context.Context, *Exec) error
		want   error
	}{
		{"stale_socket", "no server running on /tmp/tmux-1000/sock",
			func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "loop-a", owner.ID) }, ErrNoSession},
		{"missing_socket", "error connecting to /tmp/tmux-1000/sock (No such file or directory)",
			func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "loop-a", owner.ID) }, ErrNoSession},
		{"no_current_target", "no current target",
			func(ctx context.Context, e *Exec) error { return e.SendKeys(ctx, "=loop-a:", guard, "x") }, ErrNoSession},
		{"missing_session", "can't find session: loop-a",
			func(ctx context.Context, e *Exec) error { return e.KillSession(ctx, "loop-a", owner.ID) }, ErrNoSession},
		{"missing_pane", "can't find pane: %9",
			func(ctx context.Context, e *Exec) error { return e.Paste(ctx, "%9", guard, "x") }, ErrNoSession},
		{"duplicate", "duplicate session: loop-a",
			func(ctx context.Context, e *Exec) error {
				_, _, err := e.NewSession(ctx, NewSession{Name: "loop-a", Argv: []string{"sleep", "1"}})
				return err
			}, ErrSessionExists},
		{"too_long", "command too long",
			func(ctx context.Context, e *Exec) error { return e.SendKeys(ctx, "%1", guard, "x") }, ErrCommandTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := recorder(t, "", tc.stderr)
			err := tc.call(t.Context(), e)
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.stderr, "tmux's words stay in the error")
		})
	}
}

func TestExecNoSessionMeansEmpty(t *testing.T) {
	for _, stderr := range []string{"no current target", "no server running on /tmp/tmux-1000/sock"} {
		t.Run(strings.Fields(stderr)[1], func(t *testing.T) {
			e, _ := recorder(t, "", stderr)
			panes, err := e.ListPanes(t.Context())
			require.NoError(t, err)
			assert.Empty(t, panes)
			assert.NoError(t, e.Kick(t.Context()), "no server, nothing to reap")
		})
	}
}

func TestExecOtherErrorKeepsStderr(t *testing.T) {
	e, _ := recorder(t, "", "unknown option -- Z")
	_, err := e.CapturePane(t.Context(), "%1", false)
	require.Error(t, err)
	assert.NotErrorIs(t, err, ErrNoSession)
	assert.Contains(t, err.Error(), "capture %1: exit status 1: unknown option -- Z")
}

func TestExecNotInstalled(t *testing.T) {
	for _, tc := range []struct{ name, binary string }{
		{"not_in_path", "loopd-no-such-tmux"},
		{"missing_path", filepath.Join(t.TempDir(), "tmux")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewExec("sock", slog.New(slog.DiscardHandler))
			e.Binary = tc.binary
			_, err := e.ListPanes(t.Context())
			assert.ErrorIs(t, err, ErrNotInstalled)
		})
	}
	assert.ErrorIs(t, classify("tmux", &exec.Error{Name: "tmux", Err: exec.ErrNotFound}, ""), ErrNotInstalled)
}

func TestExecCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e := NewExec("sock", slog.New(slog.DiscardHandler))
	assert.ErrorIs(t, e.WaitFor(ctx, "loopd-died"), context.Canceled)
}

func TestNewExecEnvIsTheAllowList(t *testing.T) {
	t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cr3t")
	t.Setenv("OTHER_TOKEN", "x")
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("LANG", "C.UTF-8")
	e := NewExec("sock", slog.New(slog.DiscardHandler))
	assert.Contains(t, e.Env, "LANG=C.UTF-8")
	assert.Contains(t, e.Env, "PATH="+os.Getenv("PATH"))
	// The client really runs with Env alone: /usr/bin/env prints it.
	e.Binary = "env"
	out, _, err := e.runClient(t.Context(), nil, nil)
	require.NoError(t, err)
	assert.ElementsMatch(t, e.Env, strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"))
	for _, leak := range []string{"s3cr3t", "OTHER_TOKEN", "CLAUDECODE"} {
		assert.NotContains(t, string(out), leak)
	}
}

func TestScrubEnv(t *testing.T) {
	want := []string{"PATH=/usr/bin:/bin", "HOME=/h", "LANG=C.UTF-8"}
	for _, tc := range []struct {
		name  string
		shown string
		fix   [][]string
	}{
		{name: "started_by_this_client", shown: "HOME=/h\nLANG=C.UTF-8\nPATH=/usr/bin:/bin\nPWD=/srv\n"},
		{
			name:  "dirty_server",
			shown: "HOME=/h\nLANG=C.UTF-8\nLOOPD_WEBHOOK_SECRET=s3cr3t\nOTHER_TOKEN=x\nPATH=/usr/bin:/bin\nPWD=/srv\n",
			fix:   [][]string{{"set-environment", "-g", "-u", "LOOPD_WEBHOOK_SECRET"}, {"set-environment", "-g", "-u", "OTHER_TOKEN"}},
		},
		{
			name:  "removed_marks_are_kept_and_values_reset",
			shown: "-DISPLAY\nHOME=/old\nPATH=/usr/bin:/bin\n",
			fix:   [][]string{{"set-environment", "-g", "HOME", "/h"}, {"set-environment", "-g", "LANG", "C.UTF-8"}},
		},
		{
			name:  "multi_line_value",
			shown: "HOME=/h\nLANG=C.UTF-8\nML=a\nFAKE=1\nPATH=/usr/bin:/bin\n",
			fix:   [][]string{{"set-environment", "-g", "-u", "ML"}, {"set-environment", "-g", "-u", "FAKE"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.fix, scrubEnv([]byte(tc.shown), want))
		})
	}
}

func TestEnsureServerScrubsInASecondInvocation(t *testing.T) {
	e, runs := recorder(t, "OTHER_TOKEN=x\nPATH=/bin\n", "")
	e.Env = []string{"PATH=/bin"}
	require.NoError(t, e.EnsureServer(t.Context(), ServerOptions{}))
	require.Len(t, *runs, 2)
	assert.Equal(t, []string{"-L", "sock", "-f", "/dev/null", "set-environment", "-g", "-u", "OTHER_TOKEN"}, (*runs)[1].argv)
}
