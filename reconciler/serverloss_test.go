package reconciler

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// eventsNamed returns the journal rows of name.
func (r *passRig) eventsNamed(t *testing.T, name journal.Name) []journal.Event {
	t.Helper()
	all, err := r.store.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	return slices.DeleteFunc(all, func(e journal.Event) bool { return e.Name != name })
}

// TestPassAfterServerLossResumesWithoutAFailure: the server is killed under
// a running agent; the next pass starts a new server, journals one
// tmux.server_lost and resumes the same conversation, with no failure
// counted; the pass after it journals nothing more.
func TestPassAfterServerLossResumesWithoutAFailure(t *testing.T) {
	r := newPassRig(t)
	r.rc.Observer.(*observed.Observer).Owner = testOwner
	id := r.running(t)

	r.tmux.KillServer()
	r.now = r.now.Add(time.Second)
	r.pass(t, false)

	st := r.record(t).Status
	assert.Equal(t, desired.PhaseSpawning, st.Phase)
	assert.Equal(t, desired.SpawnResume, st.SpawnMode)
	assert.Equal(t, id, st.HarnessSessionID, "its own conversation")
	assert.Zero(t, st.Failures)
	assert.Zero(t, st.FastFailures)
	assert.Zero(t, st.ChurnFailures)
	assert.Equal(t, "server_lost", st.LastExitReason)
	assert.NotContains(t, st.RetiredSessionIDs, id)
	_, ok := r.tmux.Options()
	assert.True(t, ok, "a new server was started with its options")
	lost := r.eventsNamed(t, journal.TmuxServerLost)
	require.Len(t, lost, 1)
	assert.Equal(t, "1", lost[0].Attrs["items"])

	r.now = r.now.Add(time.Second)
	r.pass(t, false)
	assert.Len(t, r.eventsNamed(t, journal.TmuxServerLost), 1, "one event per loss")
}

// TestRunRetriesAFailedPassSoon: a pass that fails (tmux still exiting) is
// retried after schema.PassRetryInitial, doubling, not after the resync interval.
func TestRunRetriesAFailedPassSoon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newPassRig(t)
		r.rc.Interval = time.Hour
		exiting := errors.New("server exited unexpectedly")
		r.tmux.FailNext("ListPanes", exiting)
		r.tmux.FailNext("ListPanes", exiting)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- r.rc.Run(ctx) }()
		lists := func() int {
			return len(slices.DeleteFunc(r.tmux.Calls(), func(c string) bool { return c != "ListPanes" }))
		}
		synctest.Wait()
		require.Equal(t, 1, lists(), "the first pass failed at its listing")

		time.Sleep(schema.PassRetryInitial)
		synctest.Wait()
		assert.Equal(t, 2, lists(), "the retry failed again")
		time.Sleep(2 * schema.PassRetryInitial)
		synctest.Wait()
		assert.Equal(t, 3, lists(), "the third pass ran, backed off, long before the interval")
		assert.Less(t, time.Since(start), time.Second)

		failed := r.eventsNamed(t, journal.ReconcileFailed)
		require.Len(t, failed, 2, "each failure is journaled (serve's journal.Limiter folds repeats)")
		assert.Equal(t, schema.PassRetryInitial.String(), failed[0].Attrs["retry_after"])
		assert.Equal(t, (2 * schema.PassRetryInitial).String(), failed[1].Attrs["retry_after"], "doubling")
		cancel()
		require.NoError(t, <-done)
	})
}
