package e2e

import (
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// respawnEnv is an env whose fake CLI also logs every process start with
// its time and pid (FAKECLAUDE_START_LOG), so that tests can see when each
// spawn happened, not only its argv.
type respawnEnv struct {
	*env
	startLog string
}

// newRespawnEnv is newEnv plus the start log.
func newRespawnEnv(t *testing.T, opts envOpts) *respawnEnv {
	t.Helper()
	startLog := filepath.Join(t.TempDir(), "starts.log")
	harnessEnv := map[string]string{"FAKECLAUDE_START_LOG": startLog}
	maps.Copy(harnessEnv, opts.HarnessEnv)
	opts.HarnessEnv = harnessEnv
	return &respawnEnv{env: newEnv(t, opts), startLog: startLog}
}

// processStart is one line of the start log.
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

// starts returns every process start of the fake CLI so far, in order.
func (e *respawnEnv) starts(t *testing.T) []processStart {
	t.Helper()
	return readJSONLines[processStart](t, e.startLog)
}

// waitStarts waits until at least n processes have started and returns
// them all.
func (e *respawnEnv) waitStarts(t *testing.T, n int, timeout time.Duration) []processStart {
	t.Helper()
	var got []processStart
	e.waitFor(t, func() bool {
		got = e.starts(t)
		return len(got) >= n
	}, timeout, "fewer than %d harness starts", n)
	return got
}

// bootRunning starts the daemon, opens issue 1 and waits until its agent
// runs and has taken the opening prompt; it returns the conversation id.
func (e *respawnEnv) bootRunning(t *testing.T) string {
	t.Helper()
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	id := r.Status.HarnessSessionID
	require.Regexp(t, uuidPattern, id)
	e.waitFor(t, func() bool { return len(e.userTurns(t, keyIssue, id)) == 1 }, waitShort, "the opening prompt never reached the transcript")
	return id
}

// deliver replays the fixture as a new delivery, requires it accepted and
// returns its delivery id.
func (e *respawnEnv) deliver(t *testing.T, fixture string, mutate func(map[string]any)) string {
	t.Helper()
	id := uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, fixture, id, mutate), "delivery %s of %s", id, fixture)
	return id
}

// comment delivers a new comment on issue 1 whose body holds a unique
// marker, and returns the marker and the delivery id.
func (e *respawnEnv) comment(t *testing.T) (marker, deliveryID string) {
	t.Helper()
	marker = "marker-" + uuid.NewString()
	return marker, e.deliver(t, "issue_comment.created.1.json", withComment("please look again "+marker))
}

// exitCleanly presses Ctrl-C twice in k's pane: the CLI exits 0.
func (e *respawnEnv) exitCleanly(t *testing.T, k desired.Key) {
	t.Helper()
	_, err := e.tmux(t, "send-keys", "-t", "="+desired.SessionName(k)+":", "C-c", "C-c")
	require.NoError(t, err)
}

// passes returns loopd_reconcile_passes_total from the daemon's /metrics.
func (e *respawnEnv) passes(t *testing.T) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: waitShort}).Get("http://" + e.listen + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "loopd_reconcile_passes_total "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	t.Fatal("no loopd_reconcile_passes_total in /metrics")
	return 0
}

// waitPasses waits until the daemon has run n more reconcile passes: a
// barrier for asserting that something did not happen.
func (e *respawnEnv) waitPasses(t *testing.T, n int) {
	t.Helper()
	from := e.passes(t)
	e.waitFor(t, func() bool { return e.passes(t) >= from+n }, waitLong, "the daemon ran fewer than %d passes", n)
}

// sighup sends SIGHUP to the running daemon.
func (e *respawnEnv) sighup(t *testing.T) {
	t.Helper()
	require.NotNil(t, e.daemon, "daemon not running")
	require.NoError(t, e.daemon.Process.Signal(syscall.SIGHUP))
}

// itemPanes returns how many sessions the server has for k and how many
// live panes they hold.
func (e *respawnEnv) itemPanes(t *testing.T, k desired.Key) (sessions, live int) {
	t.Helper()
	name := desired.SessionName(k)
	for _, s := range e.sessions(t) {
		if s == name {
			sessions++
		}
	}
	out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_dead}")
	require.NoError(t, err)
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == name+" 0" {
			live++
		}
	}
	return sessions, live
}

// paneState returns "#{pane_dead}:#{pane_dead_status}" of k's pane; "" when
// there is none.
func (e *respawnEnv) paneState(t *testing.T, k desired.Key) string {
	t.Helper()
	out, err := e.tmux(t, "list-panes", "-t", "="+desired.SessionName(k)+":", "-F", "#{pane_dead}:#{pane_dead_status}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
