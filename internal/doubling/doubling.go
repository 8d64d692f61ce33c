// Package doubling is loopd's one shape of backoff: a wait that starts at
// an initial duration and doubles up to a maximum, with no jitter and no
// end, built on cenkalti/backoff. The restart policy, the retry of a
// failed pass, the outbox's retries of a GitHub call and serve's start
// check of the GitHub credentials all wait this way.
package doubling

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// New returns a backoff whose first wait is initial, each next one twice
// the last, at most max; it never stops (MaxElapsedTime 0) and has no
// jitter, so its sequence is deterministic.
func New(initial, max time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     initial,
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         max,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return b
}

// Nth returns the n-th wait of New(initial, max): initial for n = 1,
// doubling, at most max; 0 for n < 1.
func Nth(initial, max time.Duration, n int) time.Duration {
	b := New(initial, max)
	var d time.Duration
	for range n {
		d = b.NextBackOff()
	}
	return d
}
