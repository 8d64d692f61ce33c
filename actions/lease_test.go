package actions_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// fakeFleet is the lease side of a store, kept in memory over a real
// SQLite store, with honest semantics: a write is applied only under the
// item's current generation, and stored transcripts are kept by offset.
type fakeFleet struct {
	*sqlstore.SQLite
	mu       sync.Mutex
	gen      map[desired.Key]int64
	owner    map[desired.Key]string
	scripts  map[string][]byte
	released []desired.Key
	writes   int
}

func newFakeFleet(s *sqlstore.SQLite) *fakeFleet {
	return &fakeFleet{SQLite: s, gen: map[desired.Key]int64{}, owner: map[desired.Key]string{}, scripts: map[string][]byte{}}
}

// lease gives k to host under a new generation, as a takeover does.
func (f *fakeFleet) lease(k desired.Key, host string) desired.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen[k]++
	f.owner[k] = host
	return desired.Lease{Owner: host, Generation: f.gen[k]}
}

func (f *fakeFleet) Heartbeat(context.Context, desired.Host) error       { return nil }
func (f *fakeFleet) Hosts(context.Context) ([]desired.Host, error)       { return nil, nil }
func (f *fakeFleet) Assign(context.Context) ([]store.LeaseChange, error) { return nil, nil }
func (f *fakeFleet) SetDraining(context.Context, string, bool) error     { return nil }

func (f *fakeFleet) ReleaseLease(_ context.Context, k desired.Key, host string, gen int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owner[k] != host || f.gen[k] != gen {
		return fmt.Errorf("release %s: %w", k, store.ErrFenced)
	}
	f.owner[k] = ""
	f.gen[k]++
	f.released = append(f.released, k)
	return nil
}

func (f *fakeFleet) FencedWrite(ctx context.Context, k desired.Key, gen int64, w store.StatusWrite) error {
	f.mu.Lock()
	if f.gen[k] != gen {
		f.mu.Unlock()
		return fmt.Errorf("write status %s: %w", k, store.ErrFenced)
	}
	f.writes++
	f.mu.Unlock()
	return f.WriteStatus(ctx, k, w)
}

func (f *fakeFleet) DueCallsFor(context.Context, string, time.Time, int) ([]desired.Call, error) {
	return nil, nil
}

func (f *fakeFleet) TranscriptSize(_ context.Context, k desired.Key, id string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int64(len(f.scripts[k.String()+"/"+id])), nil
}

func (f *fakeFleet) AppendTranscript(_ context.Context, k desired.Key, id string, off int64, data []byte, gen int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gen[k] != gen {
		return store.ErrFenced
	}
	if int64(len(f.scripts[k.String()+"/"+id])) != off {
		return store.ErrTranscriptOffset
	}
	f.scripts[k.String()+"/"+id] = append(f.scripts[k.String()+"/"+id], data...)
	return nil
}

func (f *fakeFleet) Transcript(_ context.Context, k desired.Key, id string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.scripts[k.String()+"/"+id]
	if !ok {
		return nil, store.ErrNoTranscript
	}
	return b, nil
}

var _ store.Fleet = (*fakeFleet)(nil)

// fakeMover records what it was asked to ship and restore.
type fakeMover struct {
	shipped  []string // conversation ids
	restored []string
	missing  bool // Restore finds no stored transcript
}

func (m *fakeMover) Ship(_ context.Context, r desired.Record) error {
	m.shipped = append(m.shipped, r.Status.HarnessSessionID)
	return nil
}

func (m *fakeMover) Restore(_ context.Context, _ desired.Record, id, _ string) error {
	if m.missing {
		return fmt.Errorf("restore %s: %w", id, store.ErrNoTranscript)
	}
	m.restored = append(m.restored, id)
	return nil
}

// hosted makes the rig's executor host h1 of a fleet, its lease clock
// valid while *valid.
func (r *rig) hosted(t *testing.T, valid *bool) (*fakeFleet, *fakeMover) {
	t.Helper()
	f, m := newFakeFleet(r.store), &fakeMover{}
	r.exec.Fleet, r.exec.Host, r.exec.Mover = f, "h1", m
	r.exec.LeaseValid = func(uint64) bool { return *valid }
	return f, m
}

// TestFencedWriteStopsTheLocalAgentAndIsNeverRetried: a write under a
// generation the lease no longer has is refused by the store; the executor
// journals lease.lost once, stops the item's local agent, writes nothing
// and runs none of the item's later actions.
func TestFencedWriteStopsTheLocalAgentAndIsNeverRetried(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	valid := true
	f, _ := r.hosted(t, &valid)
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec.Lease = f.lease(r.key, "h1")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	f.lease(r.key, "h2") // another host took it over since the pass read it
	before := r.get(t).Status
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))

	plan := []actions.Action{
		actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-1"},
		actions.ConfirmDelivery{Key: r.key, Session: sess, DeliveryID: "d-1", Verified: true},
	}
	res := r.exec.Execute(ctx, []desired.Record{rec}, plan)
	assert.Equal(t, 0, res.Applied)
	assert.NotContains(t, r.tmux.Calls(), "Paste", "nothing is pasted after a fenced write")
	_, ok := r.tmux.Spec(sess)
	assert.False(t, ok, "the local agent was stopped")
	assert.Equal(t, before, r.get(t).Status, "nothing was written")
	assert.Zero(t, f.writes)
	lost := r.named(t, journal.LeaseLost)
	require.Len(t, lost, 1)
	assert.Equal(t, string(actions.ReasonFenced), lost[0].Attrs["reason"])

	// The same item met again: not journaled twice.
	r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.Relinquish{Key: r.key, Session: sess, Owner: "h2", Reason: actions.ReasonLeaseLost}})
	assert.Len(t, r.named(t, journal.LeaseLost), 1)
}

// TestNoPasteOnceTheLeaseClockLapsed: a host paused between its plan and
// its paste finds its lease clock lapsed and pastes nothing, though its
// write of the send went through (the store had not moved the lease yet).
func TestNoPasteOnceTheLeaseClockLapsed(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	valid := true
	f, _ := r.hosted(t, &valid)
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec.Lease = f.lease(r.key, "h1")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	r.tmux.SetScreen(sess, screen(t, "ready-empty.txt"))
	valid = false // SIGSTOPped past its lease after the plan

	r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.DeliverPrompt{Key: r.key, Session: sess, PaneID: pane, DeliveryID: "d-1"}})
	assert.NotContains(t, r.tmux.Calls(), "Paste")
	assert.NotContains(t, r.tmux.Calls(), "SendKeys")
	_, ok := r.tmux.Spec(sess)
	assert.False(t, ok, "its stale agent was stopped")
	lost := r.named(t, journal.LeaseLost)
	require.Len(t, lost, 1)
	assert.Equal(t, string(actions.ReasonLeaseLapsed), lost[0].Attrs["reason"])
	assert.Equal(t, map[desired.Key]bool{r.key: true}, r.exec.Relinquished(), "the planner learns that this host stopped it")

	// Nor is anything spawned.
	valid = false
	rec = r.get(t)
	rec.Lease = desired.Lease{Owner: "h1", Generation: 1}
	calls := len(r.tmux.Calls())
	r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	assert.NotContains(t, r.tmux.Calls()[calls:], "NewSession", "no spawn once the lease clock lapsed")
}

// TestSpawnDrawnBeforeALapseIsRefusedAfterTheRenewal: a pass drawn under
// lease epoch 1 whose host was paused past its lease and renewed (epoch 2)
// before it acts spawns nothing, although the clock is valid again; a
// pass drawn under the current epoch spawns, and its pane's launcher is
// given that epoch to check the fence stamp against.
func TestSpawnDrawnBeforeALapseIsRefusedAfterTheRenewal(t *testing.T) {
	r := newRig(t)
	f, _ := r.hosted(t, new(bool))
	current := uint64(2)
	r.exec.LeaseValid = func(epoch uint64) bool { return epoch == current }
	r.exec.Launcher.Fence = filepath.Join(t.TempDir(), "fence-stamp")
	rec := r.ingest(t, "d-1", "[loopd] issues.opened\nhello")
	rec.Lease = f.lease(r.key, "h1")

	stale := actions.WithLeaseEpoch(context.Background(), 1)
	r.exec.Execute(stale, []desired.Record{rec}, []actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	assert.NotContains(t, r.tmux.Calls(), "NewSession", "drawn before the lapse")
	lost := r.named(t, journal.LeaseLost)
	require.Len(t, lost, 1)
	assert.Equal(t, string(actions.ReasonLeaseLapsed), lost[0].Attrs["reason"])

	rec = r.get(t)
	rec.Lease = f.lease(r.key, "h1")
	res := r.exec.Execute(actions.WithLeaseEpoch(context.Background(), current), []desired.Record{rec},
		[]actions.Action{actions.FreshSpawn{Spawn: r.spawn(rec, rec.Pending[0])}})
	require.Equal(t, 1, res.Applied)
	spec, ok := r.tmux.Spec(desired.SessionName(r.key))
	require.True(t, ok)
	assert.Subset(t, spec.Launcher, []string{"--fence", r.exec.Launcher.Fence, "--fence-epoch", "2"})
}

// TestStatusWritesCarryTheHostAndShipAfterAVerifiedDelivery: every write
// is fenced and stamped with its host; a verified delivery ships the
// transcript.
func TestStatusWritesCarryTheHostAndShipAfterAVerifiedDelivery(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	valid := true
	f, m := r.hosted(t, &valid)
	sess, _ := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec.Lease = f.lease(r.key, "h1")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"}, DeliveryState: desired.DeliveryState{SendingDeliveryID: "d-1"}}
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.ConfirmDelivery{Key: r.key, Session: sess, DeliveryID: "d-1", Verified: true}})
	require.Equal(t, 1, res.Applied)
	assert.Equal(t, "h1", r.get(t).Status.Host)
	assert.Equal(t, 1, f.writes)
	assert.Equal(t, []string{"7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"}, m.shipped)
}

// TestRestoreTranscriptRecordsTheMove: the restore writes the transcript
// back and records the move; a store without the transcript records it
// too and skips the resume, for the next pass to go fresh.
func TestRestoreTranscriptRecordsTheMove(t *testing.T) {
	const id = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	for _, missing := range []bool{false, true} {
		t.Run(fmt.Sprint("missing=", missing), func(t *testing.T) {
			r, m, res, got := runRestore(t, missing, "h2",
				desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: id, PaneID: "%9", HarnessPID: 4242}, LeaseState: desired.LeaseState{Host: "h2"}})
			assert.Equal(t, "h1", got.Host)
			assert.Equal(t, "h2", got.MovedFrom)
			assert.Zero(t, got.HarnessPID)
			restored := r.named(t, journal.SessionMoved)
			require.Len(t, restored, 1)
			if missing {
				assert.Equal(t, "false", restored[0].Attrs["found"])
				assert.True(t, res.Replan)
				assert.Equal(t, desired.PhaseBackingOff, got.Phase, "no resume: the next pass goes fresh")
				return
			}
			assertRestoredAndResumed(t, m.restored, got, id)
		})
	}
}

// TestRestoreOfAMissingLocalTranscript: on the item's own host (From "")
// the restore records the attempt and leaves the phase to the resume that
// follows; a store without the transcript skips the resume, for the next
// pass to go fresh, and journals no move.
func TestRestoreOfAMissingLocalTranscript(t *testing.T) {
	const id = "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab"
	for _, missing := range []bool{false, true} {
		t.Run(fmt.Sprint("missing=", missing), func(t *testing.T) {
			r, m, res, got := runRestore(t, missing, "",
				desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: id, ConfirmedSessionID: id}, LeaseState: desired.LeaseState{Host: "h1"}})
			assert.Equal(t, id, got.RestoredID, "the attempt is remembered")
			assert.Empty(t, got.MovedFrom)
			assert.Empty(t, r.named(t, journal.SessionMoved))
			if missing {
				assert.True(t, res.Replan)
				assert.Equal(t, desired.PhaseExited, got.Phase, "no resume: the next pass goes fresh")
				return
			}
			assertRestoredAndResumed(t, m.restored, got, id)
		})
	}
}

// TestHandoverReleasesOnlyOnceTheAgentIsGone: a drain stops the agent,
// ships its transcript, leaves the item to be resumed, and releases the
// lease last.
func TestHandoverReleasesOnlyOnceTheAgentIsGone(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	valid := true
	f, m := r.hosted(t, &valid)
	sess, pane := r.livePane(t)
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec.Lease = f.lease(r.key, "h1")
	rec.Status = desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{HarnessSessionID: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", PaneID: pane}}
	res := r.exec.Execute(ctx, []desired.Record{rec}, []actions.Action{actions.Handover{Key: r.key, Session: sess, Live: true, Reason: actions.ReasonDrained}})
	require.Equal(t, 1, res.Applied)
	_, ok := r.tmux.Spec(sess)
	assert.False(t, ok)
	assert.Equal(t, []desired.Key{r.key}, f.released)
	assert.Len(t, m.shipped, 1)
	got := r.get(t)
	assert.Equal(t, desired.PhaseBackingOff, got.Status.Phase)
	assert.Equal(t, string(actions.ReasonDrained), got.Status.LastExitReason)
	assert.Len(t, got.Pending, 1, "its event waits for the next host")
	assert.Len(t, r.named(t, journal.LeaseReleased), 1)
}

// runRestore executes, on host h1, the restore of st's conversation from
// host from ("" for the item's own host, whose restore the planner marks
// Restored on the resume) followed by its resume, with the store's copy
// missing or not, and returns the rig, its mover, the result and the
// status left.
func runRestore(t *testing.T, missing bool, from string, st desired.Status) (*rig, *fakeMover, actions.Result, desired.Status) {
	t.Helper()
	r := newRig(t)
	valid := true
	f, m := r.hosted(t, &valid)
	m.missing = missing
	rec := r.ingest(t, "d-1", "[loopd] issue_comment.created\nhello")
	rec.Lease = f.lease(r.key, "h1")
	rec.Status = st
	id := st.HarnessSessionID
	plan := []actions.Action{
		actions.RestoreTranscript{Key: r.key, Session: desired.SessionName(r.key), ResumeID: id, Cwd: r.cwd, From: from, To: "h1", Resume: true},
		actions.ResumeSpawn{Spawn: r.spawn(rec, desired.Delivery{}), ResumeID: id},
	}
	res := r.exec.Execute(context.Background(), []desired.Record{rec}, plan)
	return r, m, res, r.get(t).Status
}

// assertRestoredAndResumed checks that conversation id was restored (the
// mover's list) and that the resume of it followed.
func assertRestoredAndResumed(t *testing.T, restored []string, got desired.Status, id string) {
	t.Helper()
	assert.Equal(t, []string{id}, restored)
	assert.Equal(t, desired.PhaseSpawning, got.Phase)
	assert.Equal(t, desired.SpawnResume, got.SpawnMode)
	assert.Equal(t, id, got.HarnessSessionID)
}
