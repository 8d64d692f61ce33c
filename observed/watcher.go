package observed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
)

// Watcher supervises loopd's tmux server for the reconcile loop: it starts
// and claims the server, and turns pane deaths into wake-ups.
type Watcher struct {
	Tmux tmux.Client
	// Server are the options the server is started with and claimed under;
	// its PaneDiedChannel is the channel Watch waits on.
	Server tmux.ServerOptions
	// KickEvery, when not zero, is how often Watch kicks the server
	// (tmux.Client.Kick) while it waits. tmux up to 3.4 sometimes fails to
	// reap a pane's exited child and then fires no pane-died hook until
	// another child of the server exits (see TakeSnapshot); the kick is
	// such a child, so such a death wakes the loop within KickEvery
	// instead of after the loop's resync interval.
	KickEvery time.Duration
	Log       *slog.Logger
}

// waitRetry is how long Watch waits before it waits on the pane-died
// channel again after a failed wait (no server yet, say); the loop's
// resync interval covers the gap.
const waitRetry = time.Second

// EnsureServer starts the tmux server with w.Server and claims it for
// w.Server.Owner (tmux.Client.EnsureServer). It returns tmux.ErrServerOwned,
// naming the other state dir, when another loopd holds the server.
func (w *Watcher) EnsureServer(ctx context.Context) error {
	return w.Tmux.EnsureServer(ctx, w.Server)
}

// Watch calls wake after each pane death, until ctx ends; then it returns.
// It waits on the pane-died channel (tmux wait-for) and, with KickEvery
// set, kicks the server meanwhile, so that a death tmux failed to reap
// fires its hook. With no PaneDiedChannel it only waits for ctx. A failed
// wait is retried after a second and a failed kick at the next tick; both
// are logged at debug level, since the loop's resync interval covers them.
func (w *Watcher) Watch(ctx context.Context, wake func()) {
	ch := w.Server.PaneDiedChannel
	if ch == "" {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	if w.KickEvery > 0 {
		wg.Go(func() { w.kick(ctx) })
	}
	defer wg.Wait()
	for ctx.Err() == nil {
		if err := w.Tmux.WaitFor(ctx, ch); err != nil {
			if ctx.Err() != nil {
				return
			}
			w.Log.Debug(string(journal.PaneDiedWaitFailed), "err", err)
			t := time.NewTimer(waitRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		wake()
	}
}

// kick kicks the server every KickEvery until ctx ends.
func (w *Watcher) kick(ctx context.Context) {
	t := time.NewTicker(w.KickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := w.Tmux.Kick(ctx); err != nil && ctx.Err() == nil {
				w.Log.Debug(string(journal.TmuxKickFailed), "err", err)
			}
		}
	}
}
