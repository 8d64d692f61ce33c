package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/proc"
)

// processStart is one start of the fake CLI, one line of its start log
// (FAKECLAUDE_START_LOG).
type processStart struct {
	Time time.Time `json:"time"`
	PID  int       `json:"pid"`
	Argv []string  `json:"argv"`
}

// mode returns the session flag of the start ("--session-id" for a fresh
// conversation, "--resume" for a resume) and the id after it.
func (p processStart) mode() (flag, id string) {
	for _, flag := range []string{"--session-id", "--resume"} {
		if id, ok := flagValue(p.Argv, flag); ok {
			return flag, id
		}
	}
	return "", ""
}

// flagValue returns the value after flag in argv, and whether flag is there.
func flagValue(argv []string, flag string) (string, bool) {
	i := slices.Index(argv, flag)
	if i < 0 || i+1 >= len(argv) {
		return "", i >= 0
	}
	return argv[i+1], true
}

// starts returns every start of the fake CLI so far, in order; none when
// it never started.
func (e *env) starts(t testing.TB) []processStart {
	t.Helper()
	return readJSONLines[processStart](t, e.startLog)
}

// argvLog returns the argv of every start of the fake CLI so far, in order.
func (e *env) argvLog(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, s := range e.starts(t) {
		out = append(out, s.Argv)
	}
	return out
}

// waitStarts waits until at least n processes have started and returns
// them all.
func (e *env) waitStarts(t *testing.T, n int, timeout time.Duration) []processStart {
	t.Helper()
	var got []processStart
	e.waitFor(t, func() bool {
		got = e.starts(t)
		return len(got) >= n
	}, timeout, "fewer than %d harness starts", n)
	return got
}

// readJSONLines decodes a file of one JSON value a line; a missing file is
// empty.
func readJSONLines[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var v T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "%s: line %q", path, sc.Text())
		out = append(out, v)
	}
	require.NoError(t, sc.Err())
	return out
}

// boot starts the daemon, delivers the fixture (edited by mutate) and
// waits until issue 1's agent runs a conversation whose transcript holds a
// user turn. It returns the record.
func (e *env) boot(t *testing.T, fixture string, mutate func(map[string]any)) desired.Record {
	t.Helper()
	e.start(t)
	e.deliver(t, fixture, mutate)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	id := r.Status.HarnessSessionID
	require.Regexp(t, uuidPattern, id)
	e.waitFor(t, func() bool { return len(e.userTurns(t, keyIssue, id)) > 0 }, waitLong,
		"the opening prompt never reached the transcript")
	return r
}

// bootRunning boots issue 1 on its opening event and returns the
// conversation id, whose transcript holds that one prompt.
func (e *env) bootRunning(t *testing.T) string {
	t.Helper()
	id := e.boot(t, "issues.opened.1.json", nil).Status.HarnessSessionID
	require.Len(t, e.userTurns(t, keyIssue, id), 1, "one turn: the opening prompt")
	return id
}

// startWithComment boots issue 1 on a first comment with body and waits
// until the comment is in the transcript. It returns the record.
func startWithComment(t *testing.T, e *env, body string) desired.Record {
	t.Helper()
	r := e.boot(t, commentFixture, withComment(body))
	e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, body, waitLong, "the first comment never reached the transcript")
	return r
}

// stuckAtTrustDialog starts the daemon with a harness that waits at the
// workspace trust dialog, sends a comment and waits until the item needs
// attention. It returns the delivery id and the conversation id.
func stuckAtTrustDialog(t *testing.T, e *env, body string) (delivery, sessionID string) {
	t.Helper()
	e.start(t)
	delivery = sendComment(t, e, body)
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	require.Equal(t, string("spawn_unconfirmed"), r.Status.Reason)
	require.Empty(t, e.userTurns(t, keyIssue, r.Status.HarnessSessionID), "nothing passed the dialog yet")
	return delivery, r.Status.HarnessSessionID
}

// pressEnter is the operator answering the dialog in the pane by hand.
func pressEnter(t *testing.T, e *env) {
	t.Helper()
	e.sendKeys(t, keyIssue, "Enter")
}

// realClaude returns the real Claude Code CLI named by LOOPD_REAL_CLAUDE,
// or skips the test when it is unset or not an executable file.
func realClaude(t *testing.T) string {
	t.Helper()
	path := os.Getenv("LOOPD_REAL_CLAUDE")
	if path == "" {
		t.Skip("LOOPD_REAL_CLAUDE is not set")
	}
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		t.Skipf("LOOPD_REAL_CLAUDE=%q is not an executable file", path)
	}
	return path
}

// killFake sends SIGKILL to pid, and to the group it leads, only while pid
// is still a process of bin (its argv[0]): a pid logged long ago may name
// another process by now (pid_max can be 32768), a tmux server of another
// test among them.
func killFake(pid int, bin string) {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !bytes.HasPrefix(cmdline, []byte(bin+"\x00")) {
		return
	}
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// hostPID returns the host's pid of the process that a sandbox knows as
// pid (what the fake CLIs log of themselves: their pid namespace's),
// looked for among root and what descends from it, by the NSpid line of
// /proc/<pid>/status (the pid in each namespace, the host's first); pid
// itself when none is its (a harness run with sandbox.mode none).
func hostPID(t testing.TB, root, pid int) int {
	t.Helper()
	for _, p := range proc.Descendants([]int{root}) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/status")
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if ns, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(ns)
				if len(f) > 1 && f[len(f)-1] == strconv.Itoa(pid) {
					return p
				}
			}
		}
	}
	return pid
}
