package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/fsnotify/fsnotify"

	"github.com/loopd/loopd/store"
)

// wakeSuffix names the file, beside the store's, that each process which
// committed a change another may act on writes to (sqliteDialect.notify),
// and whose writes Listen watches (inotify): SQLite's LISTEN/NOTIFY. A
// `loopd release` or `hold` then reaches the running serve within
// milliseconds, not on its resync timer. (A file, not a socket: a socket's
// path is limited to 108 bytes, a state dir's is not.)
const wakeSuffix = ".wake"

// wake is what one SQLite store knows of its wake file: the change its
// current write transaction will announce once it commits (pending), and
// why its Listen does not listen now (down).
type wake struct {
	path    string
	pending atomic.Bool
	down    atomic.Pointer[error]
}

// announce writes one byte to the wake file when the transaction that has
// just committed asked for it (notify), creating the file 0600. An error
// is not the write's: the change is committed, and the listener's resync
// timer still finds it.
func (w *wake) announce() {
	if !w.pending.Swap(false) {
		return
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	_, _ = f.Write([]byte{'\n'})
	_ = f.Close()
}

// Listen implements store.Listener: it calls wake within milliseconds of
// each committed write of any process on this store that another may act
// on (an ingest that changed something, an operator's hold or release, a
// lease change), its own included, as PostgreSQL's NOTIFY does. It
// watches the wake file, which it creates (0600) when missing; when the
// watch fails (ListenDown says why) it is made again, and its outages
// journaled to j, as relisten says. It returns ctx's cause when ctx ends.
func (s *SQLite) Listen(ctx context.Context, wake func(), j store.ListenJournal) error {
	w := s.wake
	return relisten(ctx, wake, j, func(ctx context.Context, connected func()) error {
		return w.listen(ctx, wake, connected)
	}, func(err error) {
		if err == nil {
			w.down.Store(nil)
			return
		}
		w.setDown(err)
	})
}

// listen watches the wake file, calls watching once it does, then wake
// on each write of the file until the watch or ctx fails, or the file is
// removed or renamed.
func (w *wake) listen(ctx context.Context, wake, watching func()) error {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	watch, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer watch.Close()
	if err := watch.Add(w.path); err != nil {
		return err
	}
	watching()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case ev, ok := <-watch.Events:
			if !ok {
				return errors.New("watch closed")
			}
			if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				return fmt.Errorf("%s removed", w.path)
			}
			if ev.Op&fsnotify.Write != 0 {
				wake()
			}
		case err, ok := <-watch.Errors:
			if !ok {
				return errors.New("watch closed")
			}
			// An overflowed queue lost some wakes: one now stands for them.
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				wake()
				continue
			}
			return err
		}
	}
}

// ListenDown implements store.Listener: why Listen does not listen now,
// wrapping store.ErrListenDown; nil while it does.
func (s *SQLite) ListenDown() error {
	if e := s.wake.down.Load(); e != nil {
		return *e
	}
	return nil
}

func (w *wake) setDown(cause error) {
	err := fmt.Errorf("%w: %w", store.ErrListenDown, cause)
	w.down.Store(&err)
}
