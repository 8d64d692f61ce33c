package e2e

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// attachClient runs loopd attach for k as octo (SUDO_USER) under a
// pseudo-terminal (script), its input a pipe that stays open and empty:
// a person's tmux client that types nothing. It returns a func that
// detaches the client and waits for it to end.
func (e *env) attachClient(t *testing.T, k desired.Key) (detach func()) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command("script", "-qfc", loopdBin+" attach "+k.String()+" --config "+e.configPath, os.DevNull)
	cmd.Env = append(e.procEnv(), "SUDO_USER=octo", "TERM=xterm")
	cmd.Stdin = r
	require.NoError(t, cmd.Start())
	r.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	detached := false
	detach = func() {
		if detached {
			return
		}
		detached = true
		_, err := e.tmux(t, "detach-client", "-s", "="+desired.SessionName(k))
		require.NoError(t, err)
		<-done
		w.Close()
	}
	t.Cleanup(func() {
		if !detached {
			_ = cmd.Process.Kill()
			<-done
			w.Close()
		}
	})
	return detach
}

// TestTakeoverAndHandback: a person attaches to the agent's session with
// loopd attach; two comments sent meanwhile stay pending, and the agent
// killed meanwhile is not respawned. On detach loopd hands the item back:
// the same conversation is resumed, counting no crash, and each comment
// reaches it exactly once.
func TestTakeoverAndHandback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	id := e.bootRunning(t)
	detach := e.attachClient(t, keyIssue)

	attended := e.waitEvent(t, journal.ItemAttended, keyIssue, 1, waitLong)
	assert.Equal(t, "octo", attended[0].Attrs["by"])
	assert.NotEmpty(t, attended[0].Attrs["since"], "the journal says when")
	e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Attended() }, waitShort, "never attended")
	assert.Contains(t, e.mustRun(t, "get"), "Running/Attended")

	m1, d1 := e.comment(t)
	m2, d2 := e.comment(t)
	e.waitRecord(t, keyIssue, func(r desired.Record) bool { return len(r.Pending) == 2 }, waitShort, "the comments were not queued")
	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool {
		out, err := e.tmux(t, "list-panes", "-t", "="+desired.SessionName(keyIssue), "-F", "#{pane_dead}")
		return err == nil && strings.TrimSpace(out) == "1"
	}, waitShort, "the killed agent's pane never showed dead")
	// A pass now plans a wait for the person, no respawn.
	plan := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, plan, "reason=attended")
	assert.NotContains(t, plan, "resume_spawn")
	r, _ := e.record(t, keyIssue)
	assert.Len(t, r.Pending, 2, "a comment was pasted while attended")
	assert.Empty(t, deliveriesOfItem(t, e, journal.DispatchSent, keyIssue, d1))

	detach()
	back := e.waitEvent(t, journal.ItemHandedBack, keyIssue, 1, waitLong)
	assert.Equal(t, "octo", back[0].Attrs["by"])
	assert.Equal(t, "detached", back[0].Attrs["how"])
	assert.Equal(t, d1+","+d2, back[0].Attrs["deliveries"])
	assert.NotEmpty(t, back[0].Attrs["attended_for"], "and for how long")
	assert.Equal(t, attended[0].Attrs["since"], back[0].Attrs["since"])

	waitDelivered(t, e, d1, waitLong)
	waitDelivered(t, e, d2, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the handback resumes the same conversation")
	assert.Zero(t, r.Status.Failures, "a death while attended is no crash")
	assert.False(t, r.Status.Attended())
	for _, m := range []string{m1, m2} {
		e.waitTurn(t, keyIssue, id, m, waitLong, "a comment never reached the conversation")
	}
	assert.Len(t, deliveriesOfItem(t, e, journal.DispatchDelivered, keyIssue, d1), 1)
	assert.Len(t, deliveriesOfItem(t, e, journal.DispatchDelivered, keyIssue, d2), 1)
	// One prompt told the agent what queued, both events in order, before
	// either came; each then came once, as its own message.
	turns := e.userTurns(t, keyIssue, id)
	told := slices.IndexFunc(turns, func(s string) bool { return strings.Contains(s, "[loopd] handed back on "+keyIssue.String()) })
	require.GreaterOrEqual(t, told, 0, "no handback prompt in %q", turns)
	assert.Equal(t, 1, countContaining(turns, "[loopd] handed back on "), "one handback prompt")
	assert.Less(t, strings.Index(turns[told], d1), strings.Index(turns[told], d2), "it names both, oldest first: %q", turns[told])
	assert.NotContains(t, turns[told], m1, "it names the events, it does not carry them")
	for _, m := range []string{m1, m2} {
		at := slices.IndexFunc(turns, func(s string) bool { return strings.Contains(s, m) })
		assert.Greater(t, at, told, "%s came after the handback prompt", m)
	}
	exits := e.eventsNamed(t, journal.SessionExited, keyIssue)
	require.NotEmpty(t, exits)
	assert.Equal(t, "attended", exits[len(exits)-1].Attrs["reason"])
}
