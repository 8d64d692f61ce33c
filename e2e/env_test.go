package e2e

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// secretEnv is the env var the test configs name for the webhook secret.
const secretEnv = "LOOPD_E2E_SECRET"

// envOpts configures newEnv. Zero fields take the defaults noted.
type envOpts struct {
	// Harness is the claude-code harness command; default the fake CLI.
	Harness string
	// HarnessEnv is added to the harness env (CLAUDE_CONFIG_DIR and, for
	// the fake CLI, FAKECLAUDE_START_LOG are always set).
	HarnessEnv map[string]string
	// Policy overrides keys of webhooks.ghWebhook.routing.tmux, e.g.
	// {"restartPolicy": "Never"}.
	Policy map[string]any
	// IntervalSeconds is reconcile.intervalSeconds; default 1.
	IntervalSeconds int
	// ProcessName is the harness's processName (the pane's foreground
	// process while it runs); default none.
	ProcessName string
	// Binds are more host paths the agents' sandbox shows, writable
	// (sandbox.binds), besides fakeDir.
	Binds []string
}

// env is one isolated loopd installation: config, state dir, workdir root,
// Claude config dir, tmux socket, port and secret, all unique to one test.
type env struct {
	dir        string // the test's temp dir
	configPath string
	stateDir   string
	workRoot   string // physical path; workdirs are <workRoot>/<owner>/<repo>/<number>
	claudeDir  string // CLAUDE_CONFIG_DIR of the harness
	socket     string
	listen     string // host:port of the webhook server
	secret     string
	startLog   string // FAKECLAUDE_START_LOG: every start of the fake CLI
	// fakeDir holds the files the fake CLIs write for the test to read
	// (startLog among them): the agents' sandbox shows it, writable.
	fakeDir    string
	harnessCmd string
	harnessEnv map[string]string
	config     map[string]any // as last written
	// pgURL is store.url when the env shares a PostgreSQL store (fleet),
	// "" for its own SQLite file.
	pgURL string
	// sharesServer says the tmux socket is another env's (sharedSocket):
	// that env's cleanup, which stops its daemon first, kills the server.
	sharesServer bool

	// daemonEnv is added to the environment of `loopd serve` (NAME=value),
	// after procEnv's.
	daemonEnv []string

	daemon     *exec.Cmd
	daemonDone chan struct{}
	daemonLog  string
	daemonRuns int
}

// newEnv prepares an env and writes its config; it does not start the
// daemon. Cleanup stops the daemon, kills the tmux server and, when the
// test failed, logs the daemon's stderr and the journal.
func newEnv(t testing.TB, opts envOpts) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	e := &env{
		dir:        dir,
		configPath: filepath.Join(dir, "loopd.yaml"),
		stateDir:   filepath.Join(dir, "state"),
		workRoot:   filepath.Join(dir, "agents"),
		claudeDir:  filepath.Join(dir, "claude"),
		socket:     tmuxtest.SocketName("e2e"),
		listen:     freeAddr(t),
		secret:     "e2e-" + uuid.NewString(),
		fakeDir:    filepath.Join(dir, "fake"),
		startLog:   filepath.Join(dir, "fake", "starts.log"),
		harnessCmd: opts.Harness,
	}
	if e.harnessCmd == "" {
		e.harnessCmd = fakeClaudeBin
	}
	require.NoError(t, os.MkdirAll(e.workRoot, 0o755))
	require.NoError(t, os.MkdirAll(e.fakeDir, 0o755))
	// The Claude config dir starts empty: loopd provisions it (onboarding
	// done, each workdir trusted) before every spawn.
	require.NoError(t, os.MkdirAll(e.claudeDir, 0o755))

	e.harnessEnv = map[string]string{"CLAUDE_CONFIG_DIR": e.claudeDir, "FAKECLAUDE_START_LOG": e.startLog}
	maps.Copy(e.harnessEnv, opts.HarnessEnv)
	policy := map[string]any{
		"resumeOnRespawn":       true,
		"resumeProbeSeconds":    1,
		"restartPolicy":         "OnFailure",
		"backoffInitialSeconds": 1,
		"backoffMaxSeconds":     2,
	}
	maps.Copy(policy, opts.Policy)
	interval := opts.IntervalSeconds
	if interval == 0 {
		interval = 1
	}
	binds := []map[string]any{{"path": e.fakeDir, "write": true}}
	for _, b := range opts.Binds {
		binds = append(binds, map[string]any{"path": b, "write": true})
	}
	e.config = map[string]any{
		"stateDir":  e.stateDir,
		"sandbox":   map[string]any{"binds": binds},
		"tmux":      map[string]any{"socket": e.socket},
		"reconcile": map[string]any{"intervalSeconds": interval},
		"harnesses": map[string]any{
			"claude-code": map[string]any{"command": e.harnessCmd, "env": e.harnessEnv},
		},
		"webhooks": map[string]any{
			"ghWebhook": map[string]any{
				"listen":          e.listen,
				"path":            "/webhook",
				"secretEnv":       secretEnv,
				"authorizedUsers": []string{"Codertocat"},
				"routing": map[string]any{
					"repos": map[string]any{
						"*": map[string]any{
							"harness": "claude-code",
							"workdir": filepath.Join(e.workRoot, "{{.Owner}}", "{{.Repo}}", "{{.Number}}"),
						},
					},
					"tmux": policy,
				},
			},
		},
	}
	if opts.ProcessName != "" {
		e.harness()["processName"] = opts.ProcessName
	}
	e.writeConfig(t)
	t.Cleanup(func() { e.cleanup(t) })
	return e
}

// fakeFile is the path of a file named name in fakeDir, where the fake
// CLIs may write from inside their sandbox.
func (e *env) fakeFile(name string) string { return filepath.Join(e.fakeDir, name) }

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// writeConfig writes e.config to e.configPath as YAML.
func (e *env) writeConfig(t testing.TB) {
	t.Helper()
	b, err := yaml.Marshal(e.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.configPath, b, 0o600))
}

// harness returns the harnesses.claude-code map of e.config, for edits
// before writeConfig.
func (e *env) harness() map[string]any {
	return e.config["harnesses"].(map[string]any)["claude-code"].(map[string]any)
}

// ghWebhook returns the webhooks.ghWebhook map of e.config, for edits
// before writeConfig.
func (e *env) ghWebhook() map[string]any {
	return e.config["webhooks"].(map[string]any)["ghWebhook"].(map[string]any)
}

// policy returns the routing.tmux map of e.config, for edits before
// writeConfig.
func (e *env) policy() map[string]any {
	return e.ghWebhook()["routing"].(map[string]any)["tmux"].(map[string]any)
}

func (e *env) cleanup(t testing.TB) {
	if e.daemon != nil {
		e.signalDaemon(t, syscall.SIGTERM)
	}
	if !e.sharesServer {
		e.killServer(t)
	}
	if !t.Failed() {
		return
	}
	if b, err := os.ReadFile(e.daemonLog); err == nil {
		t.Logf("loopd serve stderr:\n%s", b)
	}
	if out, _, _ := e.run(t, "events"); out != "" {
		t.Logf("loopd events:\n%s", out)
	}
	if out, _, _ := e.run(t, "get"); out != "" {
		t.Logf("loopd get:\n%s", out)
	}
}

// procEnv is the environment of every loopd process: the test's own,
// without anything that would tie tmux or claude to an outer session, plus
// the webhook secret.
func (e *env) procEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "TMUX" || name == "TMUX_PANE" || name == "CLAUDECODE" || name == secretEnv {
			continue
		}
		out = append(out, kv)
	}
	return append(out, secretEnv+"="+e.secret)
}
