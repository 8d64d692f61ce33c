package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// socketLockSuffix names the flock file that sits beside the tmux socket,
// in tmux's own 0700 directory: <socket path>.loopd-lock.
const socketLockSuffix = ".loopd-lock"

// errServerTaken means the tmux server (its socket lock, or its owner mark)
// belongs to the loopd of another state dir; the message names it.
var errServerTaken = errors.New("tmux server belongs to another loopd")

// lockSocket takes the exclusive lock keyed by the path of the tmux socket
// cfg names, waiting up to wait (zero: one try), and writes owner's state
// dir into it for whoever finds it held. A held lock gives an error
// wrapping errServerTaken and naming the holder's state dir, with holder
// set to it ("" when the holder wrote none yet).
//
// The lock file lives as long as its server or its holder: unlock removes
// it, still holding the lock, when no server runs on the socket
// (tmux.ServerListening), with the socket file a stopped server left
// (tmux.RemoveStaleSocket), and a loopd waiting for it then locks a new
// file (flock.Take). A server that stops while no loopd runs leaves both
// files until the next loopd on its socket releases them; that loopd
// starts as it would without them.
func lockSocket(ctx context.Context, cfg *schema.Config, owner tmux.Owner, wait time.Duration) (unlock func(), holder string, err error) {
	socket, err := tmux.SocketPath(cfg.Tmux.Socket)
	if err != nil {
		return nil, "", fmt.Errorf("tmux socket %s: %w", cfg.Tmux.Socket, err)
	}
	path := socket + socketLockSuffix
	// An ended ctx still gets one try (flock.Lock).
	lockCtx, cancel := context.WithTimeout(ctx, wait)
	lock, err := flock.Take(lockCtx, path)
	cancel()
	if errors.Is(err, flock.ErrLocked) {
		b, _ := os.ReadFile(path)
		holder = strings.TrimSpace(string(b))
		named := holder
		if named == "" {
			named = "(starting)"
		}
		return nil, holder, fmt.Errorf("%w: tmux socket %s is in use by the loopd of state dir %s; give this one another tmux.socket",
			errServerTaken, socket, named)
	}
	if err != nil {
		return nil, "", fmt.Errorf("lock tmux socket %s: %w", socket, err)
	}
	unlock = func() {
		if !tmux.ServerListening(cfg.Tmux.Socket) {
			// Files left are only untidy: the next loopd takes them.
			_, _ = tmux.RemoveStaleSocket(cfg.Tmux.Socket)
			_ = lock.Remove()
		}
		lock.Unlock()
	}
	if err := os.WriteFile(path, []byte(owner.StateDir+"\n"), 0o600); err != nil {
		unlock()
		return nil, "", fmt.Errorf("lock tmux socket %s: %w", socket, err)
	}
	return unlock, "", nil
}

// serverTaken is the error for a server whose owner mark names the loopd of
// another state dir.
func serverTaken(cfg *schema.Config, other string) error {
	return fmt.Errorf("%w: tmux server %s is owned by the loopd of state dir %s; give this one another tmux.socket, "+
		"or stop that loopd and end its server (tmux -L %s kill-server)", errServerTaken, cfg.Tmux.Socket, other, cfg.Tmux.Socket)
}

// stopEmptyServer ends the tmux server when it holds no session and
// carries this loopd's mark (tmux.Client.StopEmptyServer), within
// schema.ShutdownGrace, even when ctx has ended: what a serve that failed to
// start leaves of its own start.
func (a *app) stopEmptyServer(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), schema.ShutdownGrace)
	defer cancel()
	if _, err := a.tmux.StopEmptyServer(ctx, a.owner); err != nil {
		a.log.Warn(string(journal.TmuxUnavailable), "err", err)
	}
}
