package schema

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/sandbox"
)

// TestSandboxConfig: every route runs sandboxed by default; the top-level
// sandbox is every route's, a route's own overrides the mode and adds
// binds; bind paths are made absolute ("~/" from loopd's home, a
// relative one from the config's directory).
func TestSandboxConfig(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", "/home/op")
	cfg, err := Parse([]byte(minimal), filepath.Join(dir, "loopd.yaml"))
	require.NoError(t, err)
	assert.Equal(t, sandbox.ModeBubblewrap, cfg.Sandbox.Mode)
	assert.True(t, cfg.NeedsSandbox())
	r := cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Equal(t, Sandbox{Mode: sandbox.ModeBubblewrap}, r.SandboxOf(cfg.Sandbox))

	cfg, err = Parse([]byte(`
sandbox:
  binds:
    - path: ~/.gitconfig
    - path: cache
      write: true
`+minimal+`          sandbox:
            mode: none
            binds: [{path: /srv/tools}]
`), filepath.Join(dir, "loopd.yaml"))
	require.NoError(t, err)
	r = cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Equal(t, Sandbox{Mode: sandbox.ModeNone, Binds: []SandboxBind{
		{Path: "/home/op/.gitconfig"}, {Path: filepath.Join(dir, "cache"), Write: true}, {Path: "/srv/tools"},
	}}, r.SandboxOf(cfg.Sandbox))
	assert.False(t, r.SandboxOf(cfg.Sandbox).Sandboxed())
	assert.False(t, cfg.NeedsSandbox(), "no route runs sandboxed")
	assert.Equal(t, []sandbox.Bind{{Source: "/srv/tools"}}, Sandbox{Binds: []SandboxBind{{Path: "/srv/tools"}}}.BindsOf())

	_, err = Parse([]byte("sandbox: {mode: docker}\n"+minimal), filepath.Join(dir, "loopd.yaml"))
	assert.ErrorIs(t, err, ErrInvalid)
}

// TestSandboxBindsOfLoopdRefused: a bind that would show loopd's state dir
// (holding it or inside it), the config file, secretFile or the App's
// key is refused with the path; a file next to them is not.
func TestSandboxBindsOfLoopdRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CREDS", filepath.Join(dir, "creds"))
	config := func(binds string) string {
		return "stateDir: " + filepath.Join(dir, "state") + "\nsandbox:\n  binds:\n" + binds + minimal +
			"    secretFile: ${CREDS}/secret\n"
	}
	for _, bad := range []string{dir, filepath.Join(dir, "state"), filepath.Join(dir, "state/mirrors"), filepath.Join(dir, "creds"), "/"} {
		_, err := Parse([]byte(config("    - path: "+bad+"\n")), filepath.Join(dir, "loopd.yaml"))
		require.ErrorIs(t, err, ErrInvalid, bad)
		assert.Contains(t, err.Error(), "sandbox.binds[0].path", bad)
		assert.Contains(t, err.Error(), "would show loopd's own", bad)
	}
	_, err := Parse([]byte(config("    - path: "+filepath.Join(dir, "fake-cli-logs")+"\n")), filepath.Join(dir, "loopd.yaml"))
	require.NoError(t, err, "a file next to the config is the operator's to show")
}

func TestHidden(t *testing.T) {
	cfg, err := Parse([]byte("stateDir: /var/lib/loopd/state\n"+minimal+"    secretFile: /run/credentials/loopd.service/webhook-secret\n"+
		"github:\n  app: {appID: 1, installationID: 2, privateKeyFile: /etc/loopd-app.pem}\n"), "/etc/loopd/loopd.yaml")
	require.NoError(t, err)
	dirs, files := cfg.Hidden("/etc/loopd/loopd.yaml", os.LookupEnv)
	assert.Equal(t, []string{"/var/lib/loopd/state", "/etc/loopd", "/run/credentials/loopd.service"}, dirs)
	assert.Equal(t, []string{"/etc/loopd-app.pem"}, files, "/etc itself is the system's: the key alone is hidden")
}
