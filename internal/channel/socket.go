package channel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

// SocketName is the unix socket loopd serve listens on in each channel
// directory.
const SocketName = "loopd.sock"

// The operations a Request asks for.
const (
	// OpGit asks for a git credential for the remote Protocol://Host/Path
	// (git's credential-helper attributes).
	OpGit = "git"
	// OpToken asks for a token for the item's own repository, for gh.
	OpToken = "token"
)

// ErrNoDaemon means nothing listens on the channel's socket: no loopd
// serve runs (a cron pass hands out no credential), or it has not opened
// this item's channel.
var ErrNoDaemon = errors.New("no loopd serve answers on this channel")

// Request is one request over a channel's socket, one JSON line.
type Request struct {
	// Token is the spawn's token ($LOOPD_CHANNEL_TOKEN).
	Token string `json:"token"`
	Op    string `json:"op"`
	// Protocol, Host and Path are git's attributes of the remote (OpGit):
	// "https", "github.com", "octo-org/api.git".
	Protocol string `json:"protocol,omitempty"`
	Host     string `json:"host,omitempty"`
	Path     string `json:"path,omitempty"`
}

// Answer is the answer to a Request, one JSON line: a credential, or the
// reason there is none (Refused).
type Answer struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Expires is when the credential stops working; zero when it does not
	// say.
	Expires time.Time `json:"expires,omitzero"`
	Refused string    `json:"refused,omitempty"`
}

// maxRequest caps a request line, in bytes.
const maxRequest = 4 << 10

// inDir calls f with a path that names name in the directory dir, short
// whatever dir's length: a unix socket's path is at most 107 bytes
// (sockaddr_un), and a channel directory under a deep state dir, named
// after a long repository, is longer. The path goes through dir's open
// file descriptor (/proc/self/fd/N), which holds the directory for as long
// as f runs.
func inDir(dir, name string, f func(path string) error) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return f(fmt.Sprintf("/proc/self/fd/%d/%s", fd, name))
}

// Listen listens on the socket of the channel directory dir (SocketName,
// mode 0600), replacing one an earlier daemon left. Closing the listener
// does not remove the socket (Unlisten does).
func Listen(dir string) (*net.UnixListener, error) {
	if err := Unlisten(dir); err != nil {
		return nil, err
	}
	var ln *net.UnixListener
	err := inDir(dir, SocketName, func(path string) error {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			return err
		}
		// Its name holds a descriptor number that is closed once bound.
		l.SetUnlinkOnClose(false)
		ln = l
		return nil
	})
	if err == nil {
		if err = os.Chmod(filepath.Join(dir, SocketName), 0o600); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listen on channel %s: %w", dir, err)
	}
	return ln, nil
}

// Unlisten removes the socket of the channel directory dir; none is no
// error.
func Unlisten(dir string) error {
	if err := os.Remove(filepath.Join(dir, SocketName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove channel socket: %w", err)
	}
	return nil
}

// Ask sends req to the loopd serve that listens on the channel directory
// dir and returns its answer. The error wraps ErrNoDaemon when nothing
// listens there.
func Ask(ctx context.Context, dir string, req Request) (Answer, error) {
	var conn net.Conn
	err := inDir(dir, SocketName, func(path string) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		conn = c
		return err
	})
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return Answer{}, fmt.Errorf("ask %s: %w", dir, ErrNoDaemon)
	}
	if err != nil {
		return Answer{}, fmt.Errorf("ask %s: %w", dir, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Answer{}, fmt.Errorf("ask %s: %w", dir, err)
	}
	var a Answer
	if err := json.NewDecoder(io.LimitReader(conn, maxRequest)).Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("ask %s: answer: %w", dir, err)
	}
	return a, nil
}

// Handler answers one request that came in on a channel's socket.
type Handler func(ctx context.Context, req Request) Answer

// Serve answers the requests on ln with handle, each connection in its
// own goroutine and within schema.ChannelRequestTimeout, until ctx ends or ln is
// closed; it closes ln and waits for the requests in flight before it
// returns. A request that is not one JSON line of at most 4 KiB is
// answered Refused and not handed on.
func Serve(ctx context.Context, ln net.Listener, handle Handler, log *slog.Logger) {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				log.Warn(string(journal.ChannelFailed), "addr", ln.Addr().String(), "err", err)
			}
			return
		}
		wg.Go(func() { answer(ctx, conn, handle) })
	}
}

// answer reads one request from conn and writes handle's answer.
func answer(ctx context.Context, conn net.Conn, handle Handler) {
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, schema.ChannelRequestTimeout)
	defer cancel()
	_ = conn.SetDeadline(time.Now().Add(schema.ChannelRequestTimeout))
	line, err := bufio.NewReaderSize(io.LimitReader(conn, maxRequest), maxRequest).ReadBytes('\n')
	var req Request
	a := Answer{Refused: "malformed request"}
	if err == nil && json.Unmarshal(line, &req) == nil {
		a = handle(ctx, req)
	}
	_ = json.NewEncoder(conn).Encode(a)
}
