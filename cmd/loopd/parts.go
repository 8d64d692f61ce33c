package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	oklog "github.com/oklog/run"
)

// stage is one named step of serve's start-up. The stages run one after
// the other before any part starts; a refusal among them (another serve on
// the state dir, the tmux socket or server taken, the host name taken, the
// port taken) is its error. What a stage holds (a lock, the store, the
// listening socket) it hands to the daemon's releases, which serve runs in
// reverse order when it returns.
type stage struct {
	name string
	run  func(ctx context.Context) error
}

// runStages runs stages in order and calls reached, when not nil, with the
// name of each that passed (the seam a test stops the daemon at). It
// reports whether ctx ended before the last passed: then the rest do not
// run, and serve stops without starting its parts.
func runStages(ctx context.Context, stages []stage, reached func(name string)) (stopped bool, err error) {
	for _, s := range stages {
		if ctx.Err() != nil {
			return true, nil
		}
		if err := s.run(ctx); err != nil {
			return false, err
		}
		if reached != nil {
			reached(s.name)
		}
	}
	return ctx.Err() != nil, nil
}

// part is one long-running piece of the daemon. Its run returns once its
// ctx ends, or earlier with the error that stops the daemon.
type part struct {
	name string
	run  func(ctx context.Context) error
}

// runParts runs parts as one group (oklog/run): each in its goroutine,
// until ctx ends or one of them returns. Then it stops them one by one in
// the order given: each part's ctx ends and runParts waits for it to
// return before it stops the next, so that the first ones (the listener,
// then the loop) are gone before the ones they use. It returns the error
// of the part that returned first (nil when ctx ended). The whole stop is
// bounded by grace: a part still running then is left behind, the ones
// after it are told to stop but no longer waited for, and the error names
// those still running.
func runParts(ctx context.Context, grace time.Duration, parts ...part) error {
	var g oklog.Group
	var (
		once     sync.Once
		stopping = make(chan struct{})
		bound    context.Context
		cancel   context.CancelFunc
	)
	// The interrupts run one after the other on g.Run's goroutine; the
	// first starts the stop's clock.
	begin := func() {
		once.Do(func() {
			bound, cancel = context.WithTimeout(context.Background(), grace)
			close(stopping)
		})
	}
	quit := make(chan struct{})
	g.Add(func() error {
		select {
		case <-ctx.Done():
		case <-quit:
		}
		return nil
	}, func(error) { begin(); close(quit) })
	done := make([]chan struct{}, len(parts))
	for i, p := range parts {
		// Its own ctx, which only its interrupt ends: a signal stops the
		// parts in order, not all at once.
		pctx, end := context.WithCancel(context.WithoutCancel(ctx))
		done[i] = make(chan struct{})
		g.Add(func() error {
			defer close(done[i])
			return p.run(pctx)
		}, func(error) {
			begin()
			end()
			select {
			case <-done[i]:
			case <-bound.Done():
			}
		})
	}
	result := make(chan error, 1)
	go func() { result <- g.Run() }()
	// g.Run interrupts every part before it returns.
	<-stopping
	defer cancel()
	select {
	case err := <-result:
		return err
	case <-bound.Done():
	}
	var left []string
	for i, p := range parts {
		select {
		case <-done[i]:
		default:
			left = append(left, p.name)
		}
	}
	return fmt.Errorf("stop: %s still running after %s", strings.Join(left, ", "), grace)
}
