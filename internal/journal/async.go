package journal

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
)

// DefaultAsyncQueue is the queue length of an Async when NewAsync is given
// none: the rows an Async holds while its store is slow. Behind a Limiter,
// which folds a flood of one failure into one row a window, it is far more
// than a flood can fill.
const DefaultAsyncQueue = 1024

// ErrQueueFull is returned by Async.AppendEvent when its queue is full: the
// row is dropped and counted (Async.Dropped).
var ErrQueueFull = errors.New("journal queue full")

// Async is an Appender that never waits on its store: AppendEvent puts the
// row on a bounded queue and returns, and Run appends the queued rows to
// the store from its own goroutine. It is for rows whose writer must not
// wait (a webhook's answer to an unauthenticated request, which must not
// be slowed down by, nor fill the disk with, a flood of them: put a
// Limiter's Appender in front of it). A full queue drops the row and
// counts it.
type Async struct {
	next    Appender
	log     *slog.Logger
	queue   chan Event
	dropped atomic.Uint64
}

// NewAsync returns an Async over next holding at most size rows
// (DefaultAsyncQueue when size ≤ 0), logging to log the rows next refuses.
// Nothing is written until Run or Drain runs.
func NewAsync(next Appender, size int, log *slog.Logger) *Async {
	if size <= 0 {
		size = DefaultAsyncQueue
	}
	return &Async{next: next, log: log, queue: make(chan Event, size)}
}

// AppendEvent queues e and returns at once. When the queue is full, e is
// dropped, counted in Dropped, and ErrQueueFull returned.
func (a *Async) AppendEvent(_ context.Context, e Event) error {
	select {
	case a.queue <- e:
		return nil
	default:
		a.dropped.Add(1)
		return ErrQueueFull
	}
}

// Run appends the queued rows to the store until ctx ends; a row the store
// refuses is dropped, counted and logged (journal.append_failed): its
// writer has long been answered.
// Drain writes what is left after Run returns.
func (a *Async) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-a.queue:
			a.append(ctx, e)
		}
	}
}

// Drain appends the rows queued now, and returns when the queue is empty
// or ctx ends; serve calls it at shutdown, before the store closes.
func (a *Async) Drain(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case e := <-a.queue:
			a.append(ctx, e)
		default:
			return
		}
	}
}

func (a *Async) append(ctx context.Context, e Event) {
	if err := a.next.AppendEvent(ctx, e); err != nil {
		a.dropped.Add(1)
		a.log.Warn(string(JournalAppendFailed), "name", string(e.Name), "err", err)
	}
}

// Dropped returns how many rows were dropped since NewAsync: refused by a
// full queue or by the store.
func (a *Async) Dropped() uint64 { return a.dropped.Load() }
