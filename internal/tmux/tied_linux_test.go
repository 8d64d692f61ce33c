package tmux_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux"
)

// waitForHelperEnv, when set ("<socket> <channel>"), makes this test
// binary a process that blocks in WaitFor (TestWaitForHelper), for
// TestWaitForEndsWithItsCaller to kill.
const waitForHelperEnv = "LOOPD_TEST_WAIT_FOR_HELPER"

// TestWaitForHelper is the process TestWaitForEndsWithItsCaller kills; it
// does nothing in a plain run.
func TestWaitForHelper(t *testing.T) {
	args, ok := os.LookupEnv(waitForHelperEnv)
	if !ok {
		return
	}
	socket, channel, _ := strings.Cut(args, " ")
	_ = tmux.NewExec(socket, slog.New(slog.DiscardHandler)).WaitFor(context.Background(), channel)
}

// TestWaitForEndsWithItsCaller: a loopd killed with SIGKILL while its
// pane-died watch blocks in tmux wait-for leaves no wait-for client of it
// behind.
func TestWaitForEndsWithItsCaller(t *testing.T) {
	e, socket := execOn(t)
	require.NoError(t, e.EnsureServer(t.Context(), tmux.ServerOptions{}))
	channel := "loopd-test-tied-" + uuid.NewString()

	helper := exec.Command(os.Args[0], "-test.run=^TestWaitForHelper$")
	helper.Env = append(os.Environ(), waitForHelperEnv+"="+socket+" "+channel)
	require.NoError(t, helper.Start())
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	require.Eventually(t, func() bool { return len(waitingOn(channel)) == 1 }, waitLimit, tick, "the helper never waited")

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	_ = helper.Wait()
	require.Eventually(t, func() bool { return len(waitingOn(channel)) == 0 }, waitLimit, tick,
		"tmux wait-for %s outlived the process that ran it: %v", channel, waitingOn(channel))
}

// waitingOn returns the pids of the processes whose command line is a
// tmux client waiting for channel.
func waitingOn(channel string) []string {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		argv := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if len(argv) >= 2 && string(argv[len(argv)-2]) == "wait-for" && string(argv[len(argv)-1]) == channel {
			out = append(out, filepath.Base(d))
		}
	}
	return out
}
