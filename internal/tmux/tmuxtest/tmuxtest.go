// Package tmuxtest is the test support of package tmux: Fake, a stateful
// in-memory tmux.Client, and one conformance suite (RunConformance) that
// tmux.Exec and Fake must both pass, so that the Fake stays honest. Its
// drivers are ExecDriver, real tmux on a private socket per test, and
// FakeDriver. Other packages use NewFake for tests without tmux and
// NewExec for tests against real tmux. Every private tmux socket a test
// makes is named, removed and, when a killed test run left it, swept here
// (Socket, KillServer, Sweep, Main). Only tests import it, so no fake ships
// in the loopd binary.
package tmuxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
)

// Driver adapts one tmux.Client implementation to RunConformance. The suite
// runs a program of the driver's choice in each pane and reads back what the
// program saw through the driver.
type Driver struct {
	// NewClient returns a client for a new server that is not running yet,
	// and registers its cleanup on t.
	NewClient func(t *testing.T) tmux.Client
	// Program returns the argv of a pane program for session. Once it reads
	// input, the program shows "ready <session>" on its screen; it records
	// its environment and every byte it reads, and runs until Exit.
	Program func(t *testing.T, session string) []string
	// Input returns every byte the program in session's pane has read.
	Input func(t *testing.T, c tmux.Client, session string) string
	// Env returns the value of environment variable key in the program in
	// session's pane, "" when unset; nil when the driver runs no program
	// (the Fake).
	Env func(t *testing.T, c tmux.Client, session, key string) string
	// Exit makes the program in session's pane exit with status.
	Exit func(t *testing.T, c tmux.Client, session string, status int)
}

// NewExec returns a tmux.Exec on a new private socket (Socket, label
// "exec"); no server runs until a verb starts one. At cleanup it kills that
// server and removes the socket file (KillServer). It skips the test when
// tmux is not installed.
func NewExec(t testing.TB) *tmux.Exec {
	t.Helper()
	return tmux.NewExec(Socket(t, "exec"), slog.New(slog.DiscardHandler))
}

// programScript is ExecDriver's pane program. $0 is its directory and $1 the
// session. It switches the tty to raw mode before it says ready, so that
// every byte reaches cat unchanged. It exits with the status that Exit
// writes into the FIFO $0/exit; no signal reaches the shell, which keeps
// the exit free of races with its children.
const programScript = `stty raw -echo
env > "$0/env.tmp" && mv "$0/env.tmp" "$0/env"
: > "$0/in"
cat < /dev/tty >> "$0/in" &
printf 'ready %s\n' "$1"
read status < "$0/exit"
kill $!
wait $!
exit "$status"`

// ExecDriver returns the Driver for tmux.Exec on real tmux: each client is
// NewExec's, and the pane program is a small sh script that keeps its
// environment and input in files under t.TempDir().
func ExecDriver() Driver {
	var mu sync.Mutex
	dirs := map[*testing.T]string{}
	dir := func(t *testing.T, session string) string {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := dirs[t]; !ok {
			dirs[t] = t.TempDir()
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				delete(dirs, t)
			})
		}
		return filepath.Join(dirs[t], session)
	}
	read := func(t *testing.T, session, file string) string {
		b, err := os.ReadFile(filepath.Join(dir(t, session), file))
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("read %s of %s: %v", file, session, err)
		}
		return string(b)
	}
	return Driver{
		NewClient: func(t *testing.T) tmux.Client {
			// The directories first: cleanups run last-in first-out, so
			// the server and its programs are gone before the removal.
			dir(t, "")
			return NewExec(t)
		},
		Program: func(t *testing.T, session string) []string {
			d := dir(t, session)
			require.NoError(t, os.MkdirAll(d, 0o755))
			if err := syscall.Mkfifo(filepath.Join(d, "exit"), 0o600); !errors.Is(err, fs.ErrExist) {
				require.NoError(t, err)
			}
			return []string{"sh", "-c", programScript, d, session}
		},
		Input: func(t *testing.T, _ tmux.Client, session string) string {
			return read(t, session, "in")
		},
		Env: func(t *testing.T, _ tmux.Client, session, key string) string {
			for line := range strings.Lines(read(t, session, "env")) {
				if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), key+"="); ok {
					return v
				}
			}
			return ""
		},
		Exit: func(t *testing.T, _ tmux.Client, session string, status int) {
			// Opening a FIFO without a reader fails with ENXIO; retry until
			// the program is in its read.
			var fifo *os.File
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				var err error
				fifo, err = os.OpenFile(filepath.Join(dir(t, session), "exit"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
				require.NoError(ct, err)
			}, waitLimit, tick)
			_, err := fmt.Fprintf(fifo, "%d\n", status)
			require.NoError(t, err)
			require.NoError(t, fifo.Close())
		},
	}
}

// FakeDriver returns the Driver for Fake: the program is only an argv,
// its screen is "ready <session>" from InitialScreen, and Input and Exit
// use the Fake's helpers.
func FakeDriver() Driver {
	fake := func(c tmux.Client) *Fake { return c.(*Fake) }
	return Driver{
		NewClient: func(*testing.T) tmux.Client {
			f := NewFake()
			f.InitialScreen = func(s tmux.NewSession) string { return "ready " + s.Argv[1] + "\n" }
			return f
		},
		Program: func(_ *testing.T, session string) []string { return []string{"program", session} },
		Input:   func(_ *testing.T, c tmux.Client, session string) string { return fake(c).Input(session) },
		Exit:    func(_ *testing.T, c tmux.Client, session string, status int) { fake(c).Exit(session, status) },
	}
}
