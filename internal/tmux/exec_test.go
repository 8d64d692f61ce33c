package tmux_test

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// Bounds for waits on real processes; they bound, they do not measure.
const (
	waitLimit = 10 * time.Second
	tick      = 5 * time.Millisecond
)

// owner marks the sessions these tests make.
var owner = tmux.NewOwner("/exec-test/state")

func TestExecConformance(t *testing.T) {
	tmuxtest.RunConformance(t, tmuxtest.ExecDriver())
}

// server returns an Exec on a private socket with its server started.
func server(t *testing.T, opts tmux.ServerOptions) *tmux.Exec {
	t.Helper()
	e := tmuxtest.NewExec(t)
	require.NoError(t, e.EnsureServer(t.Context(), opts))
	return e
}

// readWhenWritten waits until path exists and returns its content. Programs
// write to a temporary name and rename, so the content is complete.
func readWhenWritten(t *testing.T, path string) string {
	t.Helper()
	var out []byte
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var err error
		out, err = os.ReadFile(path)
		assert.NoError(ct, err)
	}, waitLimit, tick)
	return string(out)
}

// tmux splits its argv at words ending in ';' and reads words after "--"
// as they are; every word of the launcher and of the argv, and the working
// directory, must reach the program unchanged, in a pane of the default
// size.
func TestExecArgvReachesProgramVerbatim(t *testing.T) {
	e := server(t, tmux.ServerOptions{})
	out := t.TempDir()
	dir := filepath.Join(t.TempDir(), "work dir;")
	require.NoError(t, os.Mkdir(dir, 0o755))
	words := []string{"x;", ";", `a\;`, `\;`, "b;;", " ;", "; ", "a;b", "-l", "--", "-", "",
		"{", "}", "#{pane_id}", "~", "$HOME", "%1", "'q'", `"dq"`, `\`, "new\nline", "tab\there", "ünï"}
	script := `printf '%s\0' "$(stty size)" "$PWD" "$LOOPD_ENV" "$@" > "$0/argv.tmp" && mv "$0/argv.tmp" "$0/argv"`
	_, _, err := e.NewSession(t.Context(), tmux.NewSession{
		Name: "loop-argv", Dir: dir, Launcher: []string{"env", "LOOPD_ENV=v;"},
		Argv: append([]string{"sh", "-c", script, out}, words...),
	})
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(readWhenWritten(t, filepath.Join(out, "argv")), "\x00"), "\x00")
	assert.Equal(t, append([]string{"50 200", dir, "v;"}, words...), got, "default size 200x50, then dir, launcher's env and argv")
}

// paneEnv starts session name on e with a program that writes its
// environment to a file, and returns that environment.
func paneEnv(t *testing.T, e *tmux.Exec, name string) string {
	t.Helper()
	out := t.TempDir()
	_, _, err := e.NewSession(t.Context(), tmux.NewSession{Name: name,
		Argv: []string{"sh", "-c", `env > "$0/env.tmp" && mv "$0/env.tmp" "$0/env"`, out}})
	require.NoError(t, err)
	env := readWhenWritten(t, filepath.Join(out, "env"))
	require.Contains(t, env, "TMUX_PANE=", "the env file is the pane's")
	return env
}

// globalEnv returns tmux show-environment -g of the server on socket.
func globalEnv(t *testing.T, socket string) string {
	t.Helper()
	out, err := exec.Command("tmux", "-L", socket, "show-environment", "-g").Output()
	require.NoError(t, err)
	return string(out)
}

// execOn returns a tmux.Exec on a new private socket and the socket's
// name; cleanup kills its server.
func execOn(t *testing.T) (*tmux.Exec, string) {
	t.Helper()
	socket := tmuxtest.Socket(t, "env")
	return tmux.NewExec(socket, slog.New(slog.DiscardHandler)), socket
}

// The daemon's environment reaches neither the server nor the panes beyond
// the allow-list: not the webhook secret, not another token, not the
// CLAUDECODE that makes Claude Code refuse to start (docs/design.md,
// "Environment").
func TestExecPaneEnvIsTheAllowList(t *testing.T) {
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cr3t")
	t.Setenv("OTHER_TOKEN", "x")
	e, socket := execOn(t)
	require.NoError(t, e.EnsureServer(t.Context(), tmux.ServerOptions{}))
	for _, env := range []string{paneEnv(t, e, "loop-env"), globalEnv(t, socket)} {
		assert.Contains(t, env, "PATH="+os.Getenv("PATH"))
		for _, leak := range []string{"CLAUDECODE", "s3cr3t", "OTHER_TOKEN"} {
			assert.NotContains(t, env, leak)
		}
	}
}

// A server started with a dirty environment (by an older loopd, or by
// hand) is scrubbed by EnsureServer before the next session.
// startDirty starts e's server as a client holding extra variables would
// (an older loopd, or a user by hand), with a session that keeps it up, and
// leaves e's environment as it was.
func startDirty(t *testing.T, e *tmux.Exec, extra ...string) {
	t.Helper()
	clean := e.Env
	e.Env = append(slices.Clone(clean), extra...)
	defer func() { e.Env = clean }()
	_, _, err := e.NewSession(t.Context(), tmux.NewSession{Name: "loop-old", Argv: []string{"sleep", "600"}})
	require.NoError(t, err)
	name, _, _ := strings.Cut(extra[0], "=")
	require.Contains(t, paneEnv(t, e, "loop-probe"), extra[0], "the server started with %s", name)
}

func TestExecEnsureServerScrubsADirtyServer(t *testing.T) {
	e, socket := execOn(t)
	startDirty(t, e, "OTHER_TOKEN=x", "LOOPD_WEBHOOK_SECRET=s3cr3t")
	require.NoError(t, e.EnsureServer(t.Context(), tmux.ServerOptions{}))
	for _, env := range []string{paneEnv(t, e, "loop-new"), globalEnv(t, socket)} {
		assert.NotContains(t, env, "OTHER_TOKEN")
		assert.NotContains(t, env, "s3cr3t")
		assert.Contains(t, env, "PATH="+os.Getenv("PATH"))
	}
}

// A program that asked for bracketed paste gets the markers, and LFs stay
// LFs (paste-buffer -r), so a multi-line prompt is one paste, not one Enter
// per line.
func TestExecPasteIsBracketed(t *testing.T) {
	e := server(t, tmux.ServerOptions{})
	out := t.TempDir()
	script := `printf '\033[?2004h'; stty raw -echo; printf 'ready\n'; cat > "$0/in"`
	id, _, err := e.NewSession(t.Context(), tmux.NewSession{Name: "loop-bp", Argv: []string{"sh", "-c", script, out}, Owner: owner.ID})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		screen, err := e.CapturePane(t.Context(), id, false)
		require.NoError(ct, err)
		assert.Contains(ct, screen, "ready")
	}, waitLimit, tick)
	g := tmux.Guard{Owner: owner.ID, Commands: []string{"sh"}}
	require.NoError(t, e.Paste(t.Context(), id, g, "line one\nline two"))
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		b, err := os.ReadFile(filepath.Join(out, "in"))
		require.NoError(ct, err)
		assert.Equal(ct, "\x1b[200~line one\nline two\x1b[201~", string(b))
	}, waitLimit, tick)
}

// tmux 3.3a often leaves a pane's exited child unreaped: the pane shows dead
// with no status and the pane-died hook does not fire, until another child
// of the server exits. One Kick must make tmux reap it. The loss shows when
// a pane dies on an idle server (about half the exits here), so the test
// spawns one pane at a time until a dead pane has no status; should that not
// happen in 20 tries, the assertion still holds for the last pane.
func TestExecKickRecordsUnreapedStatus(t *testing.T) {
	e := server(t, tmux.ServerOptions{})
	ctx := t.Context()
	const name = "loop-kick"
	var pane tmux.Pane
	tries := 0
	for {
		tries++
		_, _, err := e.NewSession(ctx, tmux.NewSession{Name: name, Argv: []string{"sh", "-c", "sleep 0.1; exit 7"}, Owner: owner.ID})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			panes, err := e.ListPanes(ctx)
			require.NoError(ct, err)
			require.Len(ct, panes, 1)
			assert.True(ct, panes[0].Dead)
			pane = panes[0]
		}, waitLimit, tick)
		if !pane.StatusKnown || tries == 20 {
			break
		}
		require.NoError(t, e.KillSession(ctx, name, owner.ID))
	}
	t.Logf("dead pane without status after %d tries: %v", tries, !pane.StatusKnown)

	require.NoError(t, e.Kick(ctx))
	// No further kick from here: listing alone does not make tmux reap.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		panes, err := e.ListPanes(ctx)
		require.NoError(ct, err)
		require.Len(ct, panes, 1)
		assert.True(ct, panes[0].StatusKnown, "no status yet")
		assert.Equal(ct, 7, panes[0].DeadStatus)
	}, waitLimit, tick)
}

// The owner mark is a user option anyone on the server can set to any text:
// a value that is not an owner id shows as "?", and a tab or newline in it
// cannot break the listing. A session mark set globally would show on every
// session, and a server option of the same name would hide the session's
// own (tmux 3.3a format_find reads server options first); loopd uses
// neither, and this pins how tmux resolves its names.
func TestExecOwnerMarkResolution(t *testing.T) {
	e := server(t, tmux.ServerOptions{Owner: owner})
	ctx := t.Context()
	for _, name := range []string{"loop-mine", "loop-odd", "loop-bare"} {
		mark := ""
		if name == "loop-mine" {
			mark = owner.ID
		}
		_, _, err := e.NewSession(ctx, tmux.NewSession{Name: name, Argv: []string{"sleep", "100"}, Owner: mark})
		require.NoError(t, err)
	}
	require.NoError(t, exec.Command("tmux", "-L", e.Socket(), "set-option", "-t", "=loop-odd:", "@loopd-owner", "x\ty\nz").Run())
	panes, err := e.ListPanes(ctx)
	require.NoError(t, err)
	owners := map[string]string{}
	for _, p := range panes {
		owners[p.Session] = p.Owner
		assert.Equal(t, "sleep", p.CurrentCommand)
	}
	assert.Equal(t, map[string]string{"loop-mine": owner.ID, "loop-odd": "?", "loop-bare": ""}, owners)
	got, err := e.ServerOwner(ctx)
	require.NoError(t, err)
	assert.Equal(t, owner, got)
}

// A server process started with variables agents must not see keeps them in
// /proc/<pid>/environ whatever its global environment says: EnsureServer
// refuses it, naming the variables and never their values.
func TestExecEnsureServerRefusesAServerStartedDirty(t *testing.T) {
	e, _ := execOn(t)
	clean := e.Env
	startDirty(t, e, "OTHER_TOKEN=x", "LOOPD_WEBHOOK_SECRET=s3cr3t")
	allowed := func(name string) bool {
		return slices.ContainsFunc(clean, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}

	err := e.EnsureServer(t.Context(), tmux.ServerOptions{EnvAllowed: allowed})
	require.ErrorIs(t, err, tmux.ErrServerEnvironment)
	assert.Contains(t, err.Error(), "LOOPD_WEBHOOK_SECRET, OTHER_TOKEN")
	assert.NotContains(t, err.Error(), "s3cr3t")

	// A server this client started clean passes the same check.
	clean2, _ := execOn(t)
	require.NoError(t, clean2.EnsureServer(t.Context(), tmux.ServerOptions{EnvAllowed: allowed}))
}

// ServerListening tells a running server from none, and from the socket
// file that kill-server leaves behind (tmux 3.3a).
func TestServerListening(t *testing.T) {
	e := tmuxtest.NewExec(t)
	assert.False(t, tmux.ServerListening(e.Socket()), "no socket file")
	require.NoError(t, e.EnsureServer(t.Context(), tmux.ServerOptions{Owner: owner}))
	assert.True(t, tmux.ServerListening(e.Socket()))
	stopped, err := e.StopEmptyServer(t.Context(), owner)
	require.NoError(t, err)
	require.True(t, stopped)
	path, err := tmux.SocketPath(e.Socket())
	require.NoError(t, err)
	require.FileExists(t, path, "kill-server leaves the socket file")
	assert.False(t, tmux.ServerListening(e.Socket()), "a socket file with no server")
}

// A pane's text is untrusted: a screen that prints lines shaped like
// CapturePanes' markers (another nonce, the next index, the bare prefix)
// or nothing at all is read whole, and its neighbour's screen stays its
// own.
func TestExecCapturePanesSplitsOnlyOnItsOwnMarkers(t *testing.T) {
	e := server(t, tmux.ServerOptions{})
	ctx := t.Context()
	forged := "loopd-capture-AAAAAAAAAAAAAAAAAAAAAAAAAA-1\nloopd-capture-\nloopd-capture--2\n1\n\n"
	a, _, err := e.NewSession(ctx, tmux.NewSession{Name: "loop-forger", Width: 80, Height: 12,
		Argv: []string{"sh", "-c", `printf '%s' "$0"; echo done; exec sleep 1000`, forged}})
	require.NoError(t, err)
	b, _, err := e.NewSession(ctx, tmux.NewSession{Name: "loop-blank", Width: 80, Height: 12, Argv: []string{"sleep", "1000"}})
	require.NoError(t, err)
	var one string
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		one, err = e.CapturePane(ctx, a, false)
		require.NoError(ct, err)
		assert.Contains(ct, one, "done")
	}, waitLimit, tick)
	blank, err := e.CapturePane(ctx, b, false)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("\n", 12), blank, "a blank screen is a line per row")

	screens, err := e.CapturePanes(ctx, []string{a, b, a})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{a: one, b: blank}, screens, "each screen whole, the forged markers in it")
	assert.True(t, strings.HasPrefix(screens[a], forged), "%q", screens[a])
}
