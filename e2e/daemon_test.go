package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// portTries bounds the starts of one start call that find their port
// taken, each on another port.
const portTries = 5

// start runs `loopd serve` and waits until /healthz answers. Its stderr
// goes to a file that cleanup logs when the test fails. A daemon that
// finds its port taken is started again on another, up to portTries
// times in all.
func (e *env) start(t testing.TB) {
	t.Helper()
	require.Nil(t, e.daemon, "daemon already running")
	for try := 1; ; try++ {
		serveLog, exited := e.launch(t)
		if !exited {
			return
		}
		if !bytes.Contains(serveLog, []byte("address already in use")) || try == portTries {
			t.Fatalf("loopd serve exited at start:\n%s", serveLog)
		}
		// freeAddr's port was free when the env was made; another
		// test took it since. Any free port will do.
		e.listen = freeAddr(t)
		e.ghWebhook()["listen"] = e.listen
		e.writeConfig(t)
	}
}

// launch runs `loopd serve` once and waits until /healthz answers or the
// daemon exits; then it returns the daemon's log and true.
func (e *env) launch(t testing.TB) (serveLog []byte, exited bool) {
	t.Helper()
	e.daemonRuns++
	e.daemonLog = filepath.Join(e.dir, fmt.Sprintf("serve.%d.log", e.daemonRuns))
	logFile, err := os.Create(e.daemonLog)
	require.NoError(t, err)
	cmd := exec.Command(loopdBin, "serve", "--config", e.configPath, "--log-level", "debug")
	cmd.Env = append(e.procEnv(), e.daemonEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	done, err := startDaemon(cmd, func() { logFile.Close() })
	require.NoError(t, err)
	e.daemon, e.daemonDone = cmd, done
	client := &http.Client{Timeout: time.Second}
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true // fail below with the log
		default:
		}
		// This daemon listens (serve.listening): another test's daemon
		// that took the port would answer /healthz too.
		if b, _ := os.ReadFile(e.daemonLog); !bytes.Contains(b, []byte("msg="+string(journal.ServeListening)+" ")) {
			return false
		}
		resp, err := client.Get("http://" + e.listen + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, waitShort, tick, "loopd serve did not become healthy")
	select {
	case <-done:
		b, _ := os.ReadFile(e.daemonLog)
		e.daemon, e.daemonDone = nil, nil
		return b, true
	default:
		return nil, false
	}
}

// stop ends the daemon with SIGTERM and waits for it.
func (e *env) stop(t *testing.T) {
	t.Helper()
	e.signalDaemon(t, syscall.SIGTERM)
}

// kill9 ends the daemon with SIGKILL and waits for it; the tmux server and
// its agents live on.
func (e *env) kill9(t *testing.T) {
	t.Helper()
	e.signalDaemon(t, syscall.SIGKILL)
}

func (e *env) signalDaemon(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if e.daemon == nil {
		return
	}
	_ = e.daemon.Process.Signal(sig)
	select {
	case <-e.daemonDone:
	case <-time.After(waitShort):
		_ = e.daemon.Process.Kill()
		<-e.daemonDone
		t.Errorf("loopd serve did not exit within %s of %s", waitShort, sig)
	}
	e.daemon, e.daemonDone = nil, nil
}

// reload sends SIGHUP to the running daemon and waits until the journal
// holds one more config.reloaded. SIGHUP reloads an unchanged file too.
func (e *env) reload(t *testing.T) {
	t.Helper()
	require.NotNil(t, e.daemon, "daemon not running")
	n := len(e.eventsNamed(t, journal.ConfigReloaded, desired.Key{}))
	require.NoError(t, e.daemon.Process.Signal(syscall.SIGHUP))
	e.waitEvent(t, journal.ConfigReloaded, desired.Key{}, n+1, waitShort)
}

// daemonLines returns the lines of the running or stopped daemon's stderr
// whose message is name.
func (e *env) daemonLines(t *testing.T, name journal.Name) []string {
	t.Helper()
	b, err := os.ReadFile(e.daemonLog)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "msg="+string(name)+" ") {
			out = append(out, l)
		}
	}
	return out
}

// passes returns loopd_reconcile_passes_total from the daemon's /metrics.
func (e *env) passes(t testing.TB) int {
	t.Helper()
	return int(e.metric(t, "loopd_reconcile_passes_total"))
}

// metric returns the value of the series (a name, with its labels when it
// has some: name{label="value"}) from the daemon's /metrics.
func (e *env) metric(t testing.TB, series string) float64 {
	t.Helper()
	v, ok := e.seen(t, series)
	if !ok {
		t.Fatalf("no %s in /metrics", series)
	}
	return v
}

// settle waits until the daemon has finished two more reconcile passes: at
// least one of them started after the call, so whatever the state at the
// call leads to has been planned and carried out. It is the barrier before
// asserting that something did not happen.
func (e *env) settle(t *testing.T) {
	t.Helper()
	n := e.passes(t)
	e.waitFor(t, func() bool { return e.passes(t) >= n+2 }, waitLong, "the daemon ran fewer than 2 more reconcile passes")
}

// run runs `loopd <args> --config <config>` to completion and returns its
// stdout, stderr and exit code.
func (e *env) run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return e.runEnv(t, nil, args...)
}

// runEnv is run with extra environment entries ("NAME=value"), which
// override the inherited ones.
func (e *env) runEnv(t testing.TB, extra []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return e.runIn(t, nil, extra, args...)
}

// runIn is runEnv with stdin (nil: none, /dev/null).
func (e *env) runIn(t testing.TB, stdin *os.File, extra []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, loopdBin, append(args, "--config", e.configPath)...)
	cmd.Env = append(e.procEnv(), extra...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// mustRun is run for a command that must exit 0; it returns stdout.
func (e *env) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.run(t, args...)
	require.Zero(t, code, "loopd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	return out
}
