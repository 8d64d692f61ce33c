package e2e

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// TestJournalPrunedAtStart: serve deletes the journal rows older than
// retention.journalDays when it starts, keeps the newer ones, and says so
// in the journal (journal.pruned, with the rows removed), which loopd
// events shows.
func TestJournalPrunedAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.config["retention"] = map[string]any{"journalDays": 2}
	e.writeConfig(t)
	now := time.Now()
	s := e.openStore(t)
	for _, ev := range []journal.Event{
		{Time: now.Add(-5 * 24 * time.Hour), Name: journal.ItemHeld, Level: slog.LevelInfo, WorkItem: keyIssue.String()},
		{Time: now.Add(-3 * 24 * time.Hour), Name: journal.ItemReleased, Level: slog.LevelInfo, WorkItem: keyIssue.String()},
		{Time: now.Add(-time.Hour), Name: journal.ItemHeld, Level: slog.LevelInfo, WorkItem: keyPR.String()},
	} {
		require.NoError(t, s.AppendEvent(context.Background(), ev))
	}
	require.NoError(t, s.Close())

	e.start(t)
	pruned := e.waitEvent(t, journal.JournalPruned, desired.Key{}, 1, waitShort)
	assert.Equal(t, "2", pruned[0].Attrs[journal.KeyRows])
	assert.Empty(t, e.eventsNamed(t, journal.ItemReleased, keyIssue), "older than two days")
	assert.Empty(t, e.eventsNamed(t, journal.ItemHeld, keyIssue), "older than two days")
	assert.Len(t, e.eventsNamed(t, journal.ItemHeld, keyPR), 1, "an hour old: kept")
	assert.Contains(t, e.mustRun(t, "events"), "journal.pruned")
}

// TestForgetClosedItem: loopd forget refuses an open item; on a closed
// one it says what it would remove and exits 1 without --yes, and with
// --yes removes the record and its clean worktree, while the worktree of
// an item with an untracked file is kept and named; the daemon, running
// all along, does not bring the items back, and the journal says what
// became of each worktree.
func TestForgetClosedItem(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	dirty := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}
	e.boot(t, "issues.opened.1.json", nil)
	e.deliver(t, "issues.opened.1.json", withNumber(3))
	e.waitPhase(t, dirty, desired.PhaseRunning, waitLong)
	clean := e.workdir(keyIssue)
	require.NoError(t, os.WriteFile(filepath.Join(e.workdir(dirty), "notes.txt"), []byte("keep me\n"), 0o644))

	out, errOut, code := e.run(t, "forget", keyIssue.String(), "--yes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is open")
	assert.Empty(t, out)
	e.mustRecord(t, keyIssue)

	closeIssue(t, e, "2030-01-01T00:00:00Z")
	e.deliver(t, "issues.opened.1.json", all(withNumber(3), func(m map[string]any) { m["action"] = "closed" },
		withIssueState("closed", "2030-01-01T00:00:00Z")))
	for _, k := range []desired.Key{keyIssue, dirty} {
		e.waitPhase(t, k, desired.PhaseStopped, waitLong)
		e.waitFor(t, func() bool { return !e.hasSession(t, k) }, waitShort, "the close did not stop %s", k)
	}

	out, errOut, code = e.run(t, "forget", keyIssue.String())
	assert.Equal(t, 1, code, "without --yes")
	assert.Contains(t, out, "its worktree "+clean+" (clean)")
	assert.Contains(t, errOut, "--yes")
	e.mustRecord(t, keyIssue)
	assert.DirExists(t, clean)
	assert.DirExists(t, e.channelDir(keyIssue))

	out, errOut, code = e.run(t, "forget", keyIssue.String(), "--yes")
	require.Zero(t, code, errOut)
	assert.Empty(t, errOut, "no log lines without --log-level debug")
	assert.Contains(t, out, keyIssue.String()+" forgotten")
	assert.Contains(t, out, "worktree "+clean+" removed")
	assert.NoDirExists(t, clean)
	assert.NoDirExists(t, e.channelDir(keyIssue), "its channel goes with it")

	out = e.mustRun(t, "forget", dirty.String(), "--yes")
	assert.Contains(t, out, "worktree "+e.workdir(dirty)+" kept: untracked_files")
	assert.FileExists(t, filepath.Join(e.workdir(dirty), "notes.txt"))

	e.settle(t)
	for _, k := range []desired.Key{keyIssue, dirty} {
		_, ok := e.record(t, k)
		assert.False(t, ok, "%s is forgotten", k)
	}
	_, errOut, code = e.run(t, "forget", keyIssue.String(), "--yes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "work item "+keyIssue.String()+" not found")
	forgotten := e.eventsNamed(t, journal.ItemForgotten, keyIssue)
	require.Len(t, forgotten, 1)
	assert.Equal(t, "removed", forgotten[0].Attrs[journal.KeyWorkspace])
	kept := e.eventsNamed(t, journal.ItemForgotten, dirty)
	require.Len(t, kept, 1)
	assert.Equal(t, "kept", kept[0].Attrs[journal.KeyWorkspace])
	assert.Equal(t, "untracked_files", kept[0].Attrs[journal.KeyReason])
}
