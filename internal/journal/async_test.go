package journal

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func row(n int) Event {
	return Event{Name: DeliveryRejected, Level: slog.LevelWarn, Attrs: map[string]string{"n": strconv.Itoa(n)}}
}

// TestAsyncQueuesAndDropsWhenFull: nothing reaches the store before Run or
// Drain; past the queue's length rows are dropped and counted, and the
// ones queued are written oldest first.
func TestAsyncQueuesAndDropsWhenFull(t *testing.T) {
	ctx := context.Background()
	j := &memJournal{}
	a := NewAsync(j, 2, slog.New(slog.DiscardHandler))

	require.NoError(t, a.AppendEvent(ctx, row(1)))
	require.NoError(t, a.AppendEvent(ctx, row(2)))
	require.ErrorIs(t, a.AppendEvent(ctx, row(3)), ErrQueueFull)
	assert.Empty(t, j.events, "AppendEvent never writes")
	assert.Equal(t, uint64(1), a.Dropped())

	a.Drain(ctx)
	require.Len(t, j.events, 2)
	assert.Equal(t, "1", j.events[0].Attrs["n"])
	assert.Equal(t, "2", j.events[1].Attrs["n"])
	require.NoError(t, a.AppendEvent(ctx, row(4)), "a drained queue takes rows again")
}

// TestAsyncNeverWaitsForItsStore: while the store is stalled under Run,
// AppendEvent still returns at once, and a row the store refuses is
// counted and logged.
func TestAsyncNeverWaitsForItsStore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	j := &stalledJournal{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var out bytes.Buffer
	a := NewAsync(j, 4, slog.New(slog.NewTextHandler(&out, nil)))
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()

	require.NoError(t, a.AppendEvent(ctx, row(1)))
	<-j.entered // Run waits on the store with row 1
	for i := 2; i <= 5; i++ {
		require.NoError(t, a.AppendEvent(ctx, row(i)), "row %d", i)
	}
	require.ErrorIs(t, a.AppendEvent(ctx, row(6)), ErrQueueFull)
	close(j.release)
	require.Eventually(t, func() bool { return a.Dropped() == 6 }, 5*time.Second, time.Millisecond,
		"one row refused by the full queue, five by the store")
	cancel()
	<-done
	assert.Contains(t, out.String(), "msg=journal.append_failed name=delivery.rejected")
}

func TestAsyncRunWritesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	j := &memJournal{}
	a := NewAsync(j, 0, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	for i := range 10 {
		require.NoError(t, a.AppendEvent(ctx, row(i)))
	}
	require.Eventually(t, func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return len(j.events) == 10
	}, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.Zero(t, a.Dropped())
}
