package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// cronUntilRunning runs reconcile --once, as cron would, until k runs.
func (e *env) cronUntilRunning(t *testing.T, k desired.Key) desired.Record {
	t.Helper()
	var r desired.Record
	e.waitFor(t, func() bool {
		_, errOut, code := e.run(t, "reconcile", "--once")
		require.Zero(t, code, errOut)
		r, _ = e.record(t, k)
		return r.Status.Phase == desired.PhaseRunning
	}, waitLong, "cron passes never brought %s to Running", k)
	return r
}

// TestCrashWhileNoDaemonRanHealsInOneCronRun: with no daemon, only cron
// passes. The agent crashes a second time in a row (a 2 s backoff) and the
// next cron run comes 7 s later: the backoff, counted from the death that
// tmux recorded, is over, so the dry run plans the resume, not a wait, and
// one plain run carries it out.
func TestCrashWhileNoDaemonRanHealsInOneCronRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Policy: map[string]any{"resumeProbeSeconds": 1}})
	e.ingestComment(t, keyIssue, "a comment for cron")
	id := e.cronUntilRunning(t, keyIssue).Status.HarnessSessionID

	e.killPane(t, keyIssue)
	r := e.cronUntilRunning(t, keyIssue)
	require.Equal(t, 1, r.Status.Failures, "the first crash resumed at once and counts")
	require.Equal(t, id, r.Status.HarnessSessionID)
	starts := len(e.argvLog(t))

	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool { return e.panePID(t, keyIssue) == 0 }, waitShort, "the pane never died")
	// tmux 3.3a may leave the child unreaped, and then records the death
	// only at the next kick (docs/design.md, "Death time"): reap it now, as
	// any other activity on the server would, so the death is recorded
	// when it happened rather than at the dry run's own kick.
	_, err := e.tmux(t, "run-shell", "true")
	require.NoError(t, err)
	time.Sleep(7 * time.Second)

	out := e.mustRun(t, "reconcile", "--once", "--dry-run")
	var names []string
	for line := range strings.Lines(strings.TrimSpace(out)) {
		names = append(names, strings.Fields(line)[0])
	}
	require.Equal(t, []string{"record_exit", "resume_spawn"}, names, "the backoff ran from the death:\n%s", out)
	assert.Contains(t, strings.Fields(out), "resume_id="+id)

	_, errOut, code := e.run(t, "reconcile", "--once")
	require.Zero(t, code, errOut)
	r, _ = e.record(t, keyIssue)
	assert.Equal(t, desired.PhaseSpawning, r.Status.Phase, "one cron run resumed the agent")
	assert.Equal(t, desired.SpawnResume, r.Status.SpawnMode)
	assert.Equal(t, 2, r.Status.Failures)
	e.waitFor(t, func() bool { return len(e.argvLog(t)) == starts+1 }, waitShort, "the resumed agent never started")
	_, resumed := flagValue(e.argvLog(t)[starts], "--resume")
	assert.True(t, resumed, "%q", e.argvLog(t)[starts])
}
