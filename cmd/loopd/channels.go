package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/credential"
	"github.com/loopd/loopd/internal/journal"
)

// channelServer listens on the socket of each item's channel that loopd
// serve gave a spawn (channel.Listen), and answers its agent's requests
// with the broker until the daemon stops, when it removes the sockets.
type channelServer struct {
	ctx    context.Context
	broker *credential.Broker
	rec    *journal.Recorder
	log    *slog.Logger

	mu   sync.Mutex
	open map[string]*net.UnixListener // by channel directory
	wg   sync.WaitGroup
}

// newChannelServer returns a channelServer that serves until ctx ends.
func newChannelServer(ctx context.Context, broker *credential.Broker, rec *journal.Recorder, log *slog.Logger) *channelServer {
	return &channelServer{ctx: ctx, broker: broker, rec: rec, log: log, open: map[string]*net.UnixListener{}}
}

// Open listens on the channel directory dir of item k, unless it already
// does on a socket still there; it is the executor's OpenChannel. A
// failure is journaled (channel.failed) and leaves the agent without
// credentials until its next spawn.
func (s *channelServer) Open(k desired.Key, dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	if ln, ok := s.open[dir]; ok {
		if _, err := os.Stat(filepath.Join(dir, channel.SocketName)); err == nil {
			return
		}
		ln.Close() // its socket went with its directory (forget)
		delete(s.open, dir)
	}
	ln, err := channel.Listen(dir)
	if err != nil {
		s.rec.Record(s.ctx, slog.LevelWarn, journal.ChannelFailed, k.String(), "path", dir, "err", err)
		return
	}
	s.open[dir] = ln
	s.wg.Go(func() {
		channel.Serve(s.ctx, ln, s.broker.Handler(k), s.log)
		s.mu.Lock()
		if s.open[dir] == ln {
			delete(s.open, dir)
			_ = channel.Unlisten(dir)
		}
		s.mu.Unlock()
	})
}

// OpenAll opens the channels of the records whose current spawn was
// given one and whose directory is there under root: the agents a
// restarted daemon adopts ask it too.
func (s *channelServer) OpenAll(records []desired.Record, root string) {
	for _, r := range records {
		if r.Status.ChannelToken == "" {
			continue
		}
		dir := channel.Dir(root, desired.SessionName(r.Key))
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		s.Open(r.Key, dir)
	}
}

// Wait waits, once ctx ended, for the requests in flight and the removal
// of the sockets.
func (s *channelServer) Wait() { s.wg.Wait() }
