package sqlstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// relisten is the one home of a store listener's reconnects
// (Postgres.Listen, SQLite.Listen). It runs listen until ctx ends: listen
// calls connected once it listens, and returns when it stops; after a
// failure it runs again with exponential backoff (100 ms to 5 s). down is
// told each failure, and nil once it listens again. The first failure
// since it last listened is journaled to j (store.listen_lost), and the
// next connection (store.listen_restored, with the tries it took) after a
// wake, since a change may have been missed: one row each per outage. A
// row the store cannot take (the outage is the whole store's) waits,
// timed when it happened, in j's Recorder, and is written at the next try
// that can. It returns ctx's cause.
func relisten(ctx context.Context, wake func(), j store.ListenJournal, listen func(ctx context.Context, connected func()) error, down func(error)) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 100*time.Millisecond, 5*time.Second, 0
	var (
		lost     error // the first failure since it last listened, nil while it listens
		attempts int
	)
	defer down(errors.New("not listening"))
	for {
		err := listen(ctx, func() {
			down(nil)
			if lost != nil {
				wake()
				listenRecord(ctx, j, journal.StoreListenRestored, lost, attempts)
			}
			listenFlush(ctx, j)
			lost, attempts = nil, 0
			b.Reset()
		})
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if lost == nil {
			lost = err
			listenRecord(ctx, j, journal.StoreListenLost, lost, 0)
		}
		listenFlush(ctx, j)
		down(err)
		attempts++
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(b.NextBackOff()):
		}
	}
}

// listenRecord journals a change of a listener's connection to j: name
// store.listen_lost or store.listen_restored, after the failure lost (and
// attempts tries, for a restore), logged now and written when the store
// takes it.
func listenRecord(ctx context.Context, j store.ListenJournal, name journal.Name, lost error, attempts int) {
	if j.Recorder == nil {
		return
	}
	kv := []any{journal.KeyReason, "listen_connection_lost", journal.KeyErr, lost}
	if j.Host != "" {
		kv = append(kv, journal.KeyHost, j.Host)
	}
	if name == journal.StoreListenRestored {
		kv = append(kv, journal.KeyAttempt, attempts)
	}
	j.Recorder.RecordLater(ctx, slog.LevelWarn, name, "", kv...)
}

// listenFlush writes the rows j's Recorder keeps; those the store refuses
// wait for the next try.
func listenFlush(ctx context.Context, j store.ListenJournal) {
	if j.Recorder != nil {
		_ = j.Recorder.Flush(ctx) // the rows it could not write wait
	}
}
