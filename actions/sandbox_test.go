package actions_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/schema"
)

// sandboxRig is a rig whose executor makes sandboxes on a machine laid out
// as Debian's, with a harness executable outside the system; it returns
// the executable.
func sandboxRig(t *testing.T) (*rig, string) {
	t.Helper()
	r := newRig(t)
	tools := t.TempDir()
	cli := filepath.Join(tools, "claude")
	require.NoError(t, os.WriteFile(cli, []byte("\x7fELF"), 0o755))
	cli, err := filepath.EvalSymlinks(cli)
	require.NoError(t, err)
	ad, err := harness.New("claude-code", schema.Harness{Command: cli, Env: map[string]string{"CLAUDE_CONFIG_DIR": r.claudeDir}})
	require.NoError(t, err)
	r.exec.Harnesses["claude-code"] = ad
	require.NoError(t, os.MkdirAll(r.cwd, 0o755))
	state := filepath.Join(filepath.Dir(r.claudeDir), "state")
	r.exec.Sandbox = &actions.Sandbox{
		Host: sandbox.Host{Bwrap: "/usr/bin/bwrap", Exe: "/opt/loopd", Root: true, System: []sandbox.Entry{{Path: "/usr"}, {Path: "/etc"}}},
		Hide: []string{state},
	}
	r.exec.Channels = channel.Root(state)
	return r, cli
}

// TestSpawnInASandbox: a spawn of a sandboxed route runs its harness in a
// sandbox put between the launcher and the harness's argv, which is
// unchanged, showing the workdir, the harness, its per-item view and the
// route's binds, with a channel dir of its own named in the environment;
// the status records the mode.
func TestSpawnInASandbox(t *testing.T) {
	r, cli := sandboxRig(t)
	cache := t.TempDir()
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	s := r.spawn(rec, rec.Pending[0])
	s.Binds = []sandbox.Bind{{Source: cache, Write: true}}
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: s}})
	require.Equal(t, actions.Result{Applied: 1}, res, r.log.String())
	sess := desired.SessionName(r.key)
	spec, ok := r.tmux.Spec(sess)
	require.True(t, ok)
	wrap := spec.Launcher[5:]
	require.NotEmpty(t, wrap)
	assert.Equal(t, "/usr/bin/bwrap", wrap[0])
	assert.Equal(t, []string{"/opt/loopd", "sandbox-exec", "--path", cli, "--"}, wrap[len(wrap)-5:])
	assert.Equal(t, cli, spec.Argv[0], "the harness's argv as it is")
	for _, want := range [][]string{{"--bind", r.cwd, r.cwd}, {"--ro-bind", cli, cli}, {"--bind", cache, cache}} {
		assert.True(t, slices.ContainsFunc(windows(wrap, 3), func(w []string) bool { return slices.Equal(w, want) }), "%q in %q", want, wrap)
	}
	dir := channel.Dir(r.exec.Channels, sess)
	assert.DirExists(t, dir)
	assert.True(t, slices.ContainsFunc(windows(wrap, 3), func(w []string) bool { return slices.Equal(w, []string{"--bind", dir, dir}) }),
		"the item's channel, writable, in %q", wrap)
	env := r.launchEnv(t, sess)
	assert.Equal(t, dir, env[channel.EnvDir])
	assert.Equal(t, r.claudeDir, env["CLAUDE_CONFIG_DIR"])
	assert.Equal(t, sandbox.ModeBubblewrap, r.get(t).Status.Sandbox)
}

// windows returns every run of n consecutive elements of s.
func windows(s []string, n int) [][]string {
	var out [][]string
	for i := 0; i+n <= len(s); i++ {
		out = append(out, s[i:i+n])
	}
	return out
}

// TestSpawnWithoutASandbox: a route of sandbox none runs the harness after
// the launcher alone, and the status says none.
func TestSpawnWithoutASandbox(t *testing.T) {
	r, _ := sandboxRig(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	s := r.spawn(rec, rec.Pending[0])
	s.NoSandbox = true
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: s}})
	require.Equal(t, actions.Result{Applied: 1}, res, r.log.String())
	spec, ok := r.tmux.Spec(desired.SessionName(r.key))
	require.True(t, ok)
	assert.Len(t, spec.Launcher, 5, "the launcher alone: %q", spec.Launcher)
	assert.Equal(t, sandbox.ModeNone, r.get(t).Status.Sandbox)
}

// TestSpawnRefusedWithoutTheSandbox: where no sandbox can be made (bwrap
// missing), or a bind of the route is gone, the spawn is refused
// (sandbox_failed) with the reason, keeping the conversation, and no
// session is made.
func TestSpawnRefusedWithoutTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(r *rig, s *actions.Spawn)
		want   string
	}{
		{"bwrap_missing", func(r *rig, _ *actions.Spawn) { r.exec.Sandbox.Err = errors.New("bubblewrap is not installed") }, "bubblewrap is not installed"},
		{"bind_gone", func(_ *rig, s *actions.Spawn) { s.Binds = []sandbox.Bind{{Source: "/nonexistent/cache"}} }, "/nonexistent/cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := sandboxRig(t)
			rec := r.ingest(t, "d-1", "[loopd] x\ny")
			s := r.spawn(rec, rec.Pending[0])
			tc.break_(r, &s)
			res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: s}})
			assert.Equal(t, 1, res.Failed)
			_, ok := r.tmux.Spec(desired.SessionName(r.key))
			assert.False(t, ok, "no session")
			st := r.get(t).Status
			assert.Equal(t, string(actions.ReasonSandboxFailed), st.Reason, "loopd's fault, not the conversation's")
			assert.Contains(t, st.SpawnRefused, tc.want)
			assert.Contains(t, r.log.String(), "reason=sandbox_failed")
		})
	}
}

// TestMarkRunningRecordsTheSandboxsInit: a sandboxed agent's pane process
// is bwrap; the process recorded for the next spawn to wait for is the
// sandbox's init (sandbox.Init), which ends after every other process of
// the sandbox, never bwrap, which dies first on a hangup.
func TestMarkRunningRecordsTheSandboxsInit(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed")
	}
	cmd := exec.Command(bwrap, "--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--", "sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var init int
	require.Eventually(t, func() bool {
		var ok bool
		init, ok = sandbox.Init(cmd.Process.Pid)
		return ok
	}, 10*time.Second, 10*time.Millisecond)

	r := newRig(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	id := "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	rec.Status = desired.Status{Phase: desired.PhaseSpawning, SessionState: desired.SessionState{HarnessSessionID: id, SpawnMode: desired.SpawnFresh, PaneID: "%3",
		Sandbox: sandbox.ModeBubblewrap}}
	sess := desired.SessionName(r.key)
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, []actions.Action{
		actions.MarkRunning{Key: r.key, Session: sess, PaneID: "%3", SessionID: id, Mode: desired.SpawnFresh, Confirmed: true,
			PID: cmd.Process.Pid, Reason: actions.ReasonConfirmed},
	})
	require.Equal(t, actions.Result{Applied: 1}, res)
	assert.Equal(t, init, r.get(t).Status.HarnessPID, "the sandbox's init, not bwrap %d", cmd.Process.Pid)
}
