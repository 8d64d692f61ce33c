package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// serveSecretEnv is the variable the serve tests' configs take the webhook
// secret from.
const serveSecretEnv = "LOOPD_TEST_SERVE_SECRET"

// writeServeConfig writes a config for serve with its state in dir, its
// tmux server on socket and its listener on listen.
func writeServeConfig(t *testing.T, dir, socket, listen string) string {
	t.Helper()
	return writeConfigWith(t, dir, "tmux: {socket: "+socket+"}\n",
		"    listen: \""+listen+"\"\n    secretEnv: "+serveSecretEnv+"\n")
}

// partGoroutines returns the stacks of the live goroutines that run
// loopd's code, the store's connections or the config's file watch, less
// those whose ids are in before (the test's own).
func partGoroutines(before map[string]bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		if before[id] || strings.Contains(g, "_test.go") {
			continue
		}
		if strings.Contains(g, "github.com/loopd/loopd/") || strings.Contains(g, "database/sql.") ||
			strings.Contains(g, "github.com/fsnotify/") {
			out = append(out, g)
		}
	}
	return out
}

// goroutineIDs returns the "goroutine N" headers of the live goroutines.
func goroutineIDs() map[string]bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	ids := map[string]bool{}
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		ids[id] = true
	}
	return ids
}

// serve stopped at each stage of its start-up, and once it runs, stops
// cleanly and leaves nothing running: none of its goroutines, no
// listening port, the state dir's lock free, and no tmux server, socket
// lock file or socket, since it holds no agent (one with agents runs on
// for the next serve to adopt: e2e.TestRestartSaysHowManyAgentsItAdopted).
func TestServeStoppedAtEachStageLeavesNothingRunning(t *testing.T) {
	var names []string
	for _, s := range (&daemon{}).stages() {
		names = append(names, s.name)
	}
	for _, at := range append(names, "running") {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			socket := tmuxtest.Socket(t, "serve")
			listen := freeLoopback(t)
			g := &globals{config: writeServeConfig(t, dir, socket, listen), logLevel: "error", logFormat: "text", stderr: os.Stderr}
			t.Setenv(serveSecretEnv, "s3cret")
			before := goroutineIDs()

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var reached []string
			stop := func(name string) {
				reached = append(reached, name)
				if name == at {
					cancel()
				}
			}
			served := make(chan error, 1)
			go func() { served <- serve(ctx, g, stop) }()
			if at == "running" {
				waitHealthy(t, listen, served)
				cancel()
			}
			require.NoError(t, <-served, "a stop is no failure")
			if at == "running" {
				assert.Equal(t, names, reached)
			} else {
				assert.Equal(t, names[:slices.Index(names, at)+1], reached, "no stage after the stop runs")
			}

			assert.Eventually(t, func() bool { return len(partGoroutines(before)) == 0 }, 10*time.Second, 10*time.Millisecond,
				"goroutines left: %v", partGoroutines(before))
			ln, err := net.Listen("tcp", listen)
			if assert.NoError(t, err, "the port is free") {
				ln.Close()
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); err == nil || at != names[0] {
				// A stop before the state dir stage leaves none to lock.
				unlock, err := flock.Lock(ctx, filepath.Join(dir, "state", serveLockFile))
				if assert.NoError(t, err, "the state dir's lock is free") {
					unlock()
				}
			}
			path, err := tmux.SocketPath(socket)
			require.NoError(t, err)
			assert.Empty(t, tmuxtest.ServerPIDs(socket), "no tmux server is left")
			assert.NoFileExists(t, path+socketLockSuffix, "nor the socket's lock file")
			assert.NoFileExists(t, path, "nor the socket")
		})
	}
}

// TestServeStartsOverWhatAStoppedServerLeft: a tmux server killed while
// no loopd ran leaves its socket file and serve's lock file beside it; the
// next serve starts as it would without them and, stopped with no agent,
// removes both.
func TestServeStartsOverWhatAStoppedServerLeft(t *testing.T) {
	dir := t.TempDir()
	socket := tmuxtest.Socket(t, "serve")
	path, err := tmux.SocketPath(socket)
	require.NoError(t, err)
	out, err := exec.Command("tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "sleep 600").CombinedOutput()
	require.NoError(t, err, "%s", out)
	pids := tmuxtest.ServerPIDs(socket)
	require.Len(t, pids, 1)
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	require.Eventually(t, func() bool { return !tmux.ServerListening(socket) }, 10*time.Second, 10*time.Millisecond)
	require.FileExists(t, path, "a killed server leaves its socket")
	require.NoError(t, os.WriteFile(path+socketLockSuffix, []byte("/elsewhere/state\n"), 0o600))

	listen := freeLoopback(t)
	g := &globals{config: writeServeConfig(t, dir, socket, listen), logLevel: "error", logFormat: "text", stderr: os.Stderr}
	t.Setenv(serveSecretEnv, "s3cret")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, g, nil) }()
	waitHealthy(t, listen, served)
	cancel()
	require.NoError(t, <-served)
	assert.Empty(t, tmuxtest.ServerPIDs(socket), "no tmux server is left")
	assert.NoFileExists(t, path+socketLockSuffix, "nor the socket's lock file")
	assert.NoFileExists(t, path, "nor the socket")
}

// freeLoopback returns a loopback host:port that was free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// waitHealthy waits until serve answers /healthz on listen, failing t if
// serve returns first.
func waitHealthy(t *testing.T, listen string, served <-chan error) {
	t.Helper()
	for {
		select {
		case err := <-served:
			require.FailNow(t, "serve returned before it listened", "err: %v", err)
		default:
		}
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}
