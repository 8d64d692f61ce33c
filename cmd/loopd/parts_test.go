package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopRecorder records the order in which parts return.
type stopRecorder struct {
	mu    sync.Mutex
	order []string
}

// waiting is a part that returns once its ctx ends.
func (r *stopRecorder) waiting(name string) part {
	return part{name, func(ctx context.Context) error {
		<-ctx.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.order = append(r.order, name)
		return nil
	}}
}

// The first part to fail stops the others one by one in their order, and
// its error is runParts'; a signal (ctx's end) stops them the same way
// and is no error.
func TestRunPartsStopsInOrder(t *testing.T) {
	boom := errors.New("boom")
	var r stopRecorder
	err := runParts(t.Context(), time.Minute, r.waiting("listener"), r.waiting("loop"),
		part{"worker", func(context.Context) error { return boom }}, r.waiting("journal"))
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"listener", "loop", "journal"}, r.order)

	var s stopRecorder
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, runParts(ctx, time.Minute, s.waiting("listener"), s.waiting("loop")))
	assert.Equal(t, []string{"listener", "loop"}, s.order)
}

// A part that does not return within the grace is left behind, and the
// error names it; the parts after it are still told to stop, no longer
// waited for.
func TestRunPartsBoundsTheStop(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var r stopRecorder
	err := runParts(ctx, 100*time.Millisecond, part{"stuck", func(context.Context) error { <-release; return nil }}, r.waiting("journal"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stuck")
	assert.Contains(t, err.Error(), "still running after 100ms")
	assert.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.order) == 1
	}, time.Minute, time.Millisecond, "the parts after it are still told to stop")
}
