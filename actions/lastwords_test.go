package actions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
)

// TestRecordExitOfAKilledAgent: a pane a signal ended is recorded as
// signal=N with no exit status, in the journal rows, the status and the
// dry-run line; the agent's last lines, sanitized, go in session.exited
// and in the dispatch.failed of the boot event it took down.
func TestRecordExitOfAKilledAgent(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	rec.Status = desired.Status{Phase: desired.PhaseSpawning, SessionState: desired.SessionState{PaneID: pane, SpawnDeliveryID: "d-1"}}
	r.tmux.SetScreen(sess, "booting\n\x1b[31mpanic: boom\x07\n\n\n")
	r.tmux.ExitSignal(sess, 9)

	exit := actions.RecordExit{Key: r.key, Session: sess, ExitStatus: 0, Signal: 9, Phase: desired.PhaseBackingOff, Failures: 1,
		NextAttempt: r.now.Add(time.Second), DeliveryID: "d-1", PaneID: pane, Reason: actions.ReasonSpawnDied}
	assert.Contains(t, exit.String(), " signal=9 ")
	assert.NotContains(t, exit.String(), "exit_status")

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{exit})
	require.Equal(t, actions.Result{Applied: 1}, res)
	got := r.get(t)
	assert.Nil(t, got.Status.LastExitStatus, "a killed process has no exit status")
	assert.Equal(t, 9, got.Status.LastExitSignal)
	assert.Equal(t, "signal=9", got.Status.LastExit())

	for _, name := range []journal.Name{journal.SessionExited, journal.DispatchFailed} {
		rows := r.named(t, name)
		require.Len(t, rows, 1, name)
		assert.Equal(t, "9", rows[0].Attrs["signal"], name)
		assert.NotContains(t, rows[0].Attrs, "exit_status", name)
		assert.Equal(t, "booting\n[31mpanic: boom", rows[0].Attrs["output"], name)
	}
}

// TestRecordExitOfAnExitKeepsTheStatus: an exit status is recorded as
// before, with no signal key; a blank screen adds no output.
func TestRecordExitOfAnExitKeepsTheStatus(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{PaneID: pane}}
	r.tmux.SetScreen(sess, strings.Repeat("\n", 5))
	r.tmux.Exit(sess, 3)

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{
		actions.RecordExit{Key: r.key, Session: sess, ExitStatus: 3, Phase: desired.PhaseBackingOff, Failures: 1, PaneID: pane, Reason: actions.ReasonCrash}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	got := r.get(t)
	require.NotNil(t, got.Status.LastExitStatus)
	assert.Equal(t, 3, *got.Status.LastExitStatus)
	assert.Equal(t, "exit_status=3", got.Status.LastExit())
	rows := r.named(t, journal.SessionExited)
	require.Len(t, rows, 1)
	assert.Equal(t, "3", rows[0].Attrs["exit_status"])
	assert.NotContains(t, rows[0].Attrs, "signal")
	assert.NotContains(t, rows[0].Attrs, "output")
}

// TestRecordExitReadsOnlyThePaneThePassSaw: the pane id the status
// recorded may name another item's pane by now (tmux numbers panes from
// %0 again on a new server); an exit whose pass saw no pane of the item
// reads no screen, so another agent's lines never pass for its last words.
func TestRecordExitReadsOnlyThePaneThePassSaw(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	other := desired.SessionName(desired.Key{Owner: "octo-org", Repo: "api", Number: 8})
	pane, _, err := r.tmux.NewSession(ctx, tmux.NewSession{Name: other, Dir: "/", Argv: []string{"claude", "x"}, Owner: rigOwner})
	require.NoError(t, err)
	r.tmux.SetScreen(other, "another item's agent at work")
	rec := r.ingest(t, "d-1", "[loopd] x\ny")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{PaneID: pane}}

	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{
		actions.RecordExit{Key: r.key, Session: desired.SessionName(r.key), ExitStatus: -1, Phase: desired.PhaseBackingOff, Failures: 1,
			Reason: actions.ReasonSessionMissing}})
	require.Equal(t, actions.Result{Applied: 1}, res)
	rows := r.named(t, journal.SessionExited)
	require.Len(t, rows, 1)
	assert.NotContains(t, rows[0].Attrs, "output")
}
