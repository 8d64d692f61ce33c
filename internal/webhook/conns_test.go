package webhook

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// guarded is a server behind ServerLimits.Listener, with the guard, the
// refusals it reported and the connections it took from the kernel.
type guarded struct {
	addr     string
	guard    *connGuard
	accepted atomic.Int32
	mu       sync.Mutex
	cut      map[string]int // refusals by reason
}

// counting is a listener that counts the connections accepted from it.
type counting struct {
	net.Listener
	n *atomic.Int32
}

func (c counting) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.n.Add(1)
	}
	return conn, err
}

// serveGuarded runs h behind NewServer(h, l) and l.Listener on loopback.
func serveGuarded(t *testing.T, h http.Handler, l ServerLimits) *guarded {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &guarded{addr: ln.Addr().String(), cut: map[string]int{}}
	gl := l.Listener(counting{ln, &s.accepted}, func(reason, _ string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cut[reason]++
	})
	s.guard = gl.(*connGuard)
	srv := NewServer(h, l)
	go func() { _ = srv.Serve(gl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// refused returns how many connections were refused for reason.
func (s *guarded) refused(reason string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut[reason]
}

// heldFrom returns how many connections the guard holds from the local
// address from.
func (s *guarded) heldFrom(from string) int {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	return s.guard.byAddr[netip.MustParseAddr(from)]
}

// held returns how many connections the guard holds.
func (s *guarded) held() int {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	return len(s.guard.open)
}

// stalled opens a connection to addr from the local address from and
// sends one byte of a request's headers; the test closes it at its end.
func stalled(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Write([]byte("P"))
	require.NoError(t, err)
	return c
}

// cuts counts the connections of conns the server closes: a read of a
// stalled connection ends only then.
func cuts(conns []net.Conn) *atomic.Int32 {
	var n atomic.Int32
	for _, c := range conns {
		go func() {
			_, _ = io.Copy(io.Discard, c)
			n.Add(1)
		}()
	}
	return &n
}

// deliver posts a signed delivery to addr on a connection of its own, as
// GitHub does, and returns its status; it fails the test when no answer
// comes within a minute.
func deliver(t *testing.T, addr, id string) int {
	t.Helper()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := Replay(context.Background(), client, "http://"+addr, testSecret, "issue_comment", id, fixture(t, "issue_comment.created.1.json"))
	require.NoError(t, err, "no answer")
	resp.Body.Close()
	return resp.StatusCode
}

// noHeaderTimeout is limits whose header timeout never cuts a stalled
// connection within a test: only the guard can free its slot.
func noHeaderTimeout(l ServerLimits) ServerLimits {
	l.ReadHeader, l.Idle = time.Hour, time.Hour
	return l
}

func TestConnsPerAddressBound(t *testing.T) {
	l := noHeaderTimeout(DefaultServerLimits)
	l.MaxConnsPerAddress = 4
	s := serveGuarded(t, floodHandler(t, t.TempDir()), l)

	var conns []net.Conn
	for range 10 {
		conns = append(conns, stalled(t, s.addr, "127.0.0.2"))
	}
	cut := cuts(conns)
	require.Eventually(t, func() bool { return cut.Load() == 6 }, time.Minute, 10*time.Millisecond,
		"the connections past the bound are closed")
	assert.Equal(t, 6, s.refused(ReasonConnsPerAddress))
	assert.Equal(t, 4, s.heldFrom("127.0.0.2"), "the address holds its bound, none of it cut")

	assert.Equal(t, http.StatusAccepted, deliver(t, s.addr, "d-1"), "another address is served")
	stalled(t, s.addr, "127.0.0.3")
	require.Eventually(t, func() bool { return s.heldFrom("127.0.0.3") == 1 }, time.Minute, 10*time.Millisecond)
	assert.Equal(t, 6, s.refused(ReasonConnsPerAddress))

	// Closed by their client, the connections free their slots.
	for _, c := range conns {
		c.Close()
	}
	require.Eventually(t, func() bool { return s.heldFrom("127.0.0.2") == 0 }, time.Minute, 10*time.Millisecond)
}

func TestShedUnderPressure(t *testing.T) {
	l := noHeaderTimeout(DefaultServerLimits)
	l.MaxConns, l.MaxConnsPerAddress, l.ShedAfter = 4, 0, 50*time.Millisecond
	s := serveGuarded(t, floodHandler(t, t.TempDir()), l)

	// Four stalled connections hold every slot, the first the oldest.
	var conns []net.Conn
	for i := range 4 {
		conns = append(conns, stalled(t, s.addr, "127.0.0."+strconv.Itoa(i+2)))
		require.Eventually(t, func() bool { return s.held() == i+1 }, time.Minute, time.Millisecond)
	}
	oldest := cuts(conns[:1])

	assert.Equal(t, http.StatusAccepted, deliver(t, s.addr, "d-1"), "a slot was shed for the delivery")
	assert.GreaterOrEqual(t, s.refused(ReasonShed), 1)
	require.Eventually(t, func() bool { return oldest.Load() == 1 }, time.Minute, time.Millisecond,
		"the oldest stalled connection is the one cut")
}

func TestShedNeverCutsARequestBeingServed(t *testing.T) {
	l := noHeaderTimeout(DefaultServerLimits)
	l.MaxConns, l.MaxConnsPerAddress, l.ShedAfter = 2, 0, time.Millisecond
	entered, release := make(chan struct{}, 2), make(chan struct{})
	s := serveGuarded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	}), l)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string, codes chan<- error) {
		resp, err := client.Get("http://" + s.addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				err = io.ErrUnexpectedEOF
			}
		}
		codes <- err
	}

	held := make(chan error, 2)
	go get("/hold", held)
	go get("/hold", held)
	<-entered
	<-entered
	// Both slots are held by requests being served: the third waits for
	// one of them, which is never cut for it.
	third := make(chan error, 1)
	go get("/quick", third)
	require.Eventually(t, func() bool { return s.accepted.Load() == 3 }, time.Minute, time.Millisecond,
		"the third connection waits in the guard")
	assert.Equal(t, 2, s.held())
	close(release)
	require.NoError(t, <-held)
	require.NoError(t, <-held)
	require.NoError(t, <-third)
	assert.Zero(t, s.refused(ReasonShed))
}

// TestDeliveryAnsweredUnderAStalledFlood is the flood of loopd issue 20:
// 1,000 connections that send one byte of headers and stall, each opened
// again as soon as it is cut, hold the server, whose header timeout never
// frees a slot here. A signed delivery from another address is answered
// while the flood runs: the flood from one address holds only its bound of
// slots; the flood from 100 addresses (10 each, under the bound) is shed.
// Without the guard, the kernel's accept queue hands the delivery over only
// once a header timeout freed a slot for every connection queued before
// it: with the default 10 s, after 20 s and more.
func TestDeliveryAnsweredUnderAStalledFlood(t *testing.T) {
	for _, addresses := range []int{1, 100} {
		t.Run("from_"+strconv.Itoa(addresses)+"_addresses", func(t *testing.T) {
			s := serveGuarded(t, floodHandler(t, t.TempDir()), noHeaderTimeout(DefaultServerLimits))
			f := startFlood(t, s.addr, 1000, floodFrom(addresses))
			// The flood holds every slot it can before the delivery.
			require.Eventually(t, func() bool {
				if addresses == 1 {
					return s.heldFrom("127.0.0.2") == DefaultServerLimits.MaxConnsPerAddress
				}
				return s.held() == DefaultServerLimits.MaxConns
			}, time.Minute, 10*time.Millisecond)

			assert.Equal(t, http.StatusAccepted, deliver(t, s.addr, "d-1"))

			if addresses == 1 {
				assert.Equal(t, DefaultServerLimits.MaxConnsPerAddress, s.heldFrom("127.0.0.2"), "the flood still holds its slots")
				assert.Positive(t, s.refused(ReasonConnsPerAddress))
			} else {
				assert.Positive(t, s.refused(ReasonShed))
			}
			assert.Positive(t, f.cuts.Load(), "the flood was cut and came back")
		})
	}
}

// TestListenerRefusalsJournaledFolded: the connections a flood from one
// address gets cut reach the journal as serve wires it (Refusals through
// the Limiter and the queue of unauthenticated rejections): one
// listener.refused row, then one with the count of its repeats, and the
// counter of loopd_listener_refused_total.
func TestListenerRefusalsJournaledFolded(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	repeats := journal.NewLimiter(journal.DefaultRepeatWindow, journal.DefaultMaxFailures, time.Now)
	queue := journal.NewAsync(st, 0, log)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); queue.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	m := NewMetrics(prometheus.NewRegistry())
	refused := Refusals(journal.NewRecorder(slog.New(repeats.Handler(log.Handler())), repeats.Appender(queue), time.Now), m)

	l := noHeaderTimeout(DefaultServerLimits)
	l.MaxConnsPerAddress = 2
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := NewServer(http.NotFoundHandler(), l)
	go func() { _ = srv.Serve(l.Listener(ln, refused)) }()
	t.Cleanup(func() { _ = srv.Close() })
	var conns []net.Conn
	for range 50 {
		conns = append(conns, stalled(t, ln.Addr().String(), "127.0.0.2"))
	}
	cut := cuts(conns)
	require.Eventually(t, func() bool { return cut.Load() == 48 }, time.Minute, 10*time.Millisecond)
	events := func() []journal.Event {
		evs, err := st.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		return evs
	}
	require.Eventually(t, func() bool { return len(events()) == 1 }, time.Minute, 5*time.Millisecond)
	// The client sees a cut before the server has journaled it: the
	// counter, bumped after the row, says when all 48 went through.
	require.Eventually(t, func() bool { return testutil.ToFloat64(m.refused.WithLabelValues(ReasonConnsPerAddress)) == 48 },
		time.Minute, 5*time.Millisecond)
	repeats.FlushAll(ctx)
	require.Eventually(t, func() bool { return len(events()) == 2 }, time.Minute, 5*time.Millisecond)
	evs := events()
	for _, ev := range evs {
		assert.Equal(t, journal.ListenerRefused, ev.Name)
		assert.Equal(t, ReasonConnsPerAddress, ev.Attrs["reason"])
		assert.Contains(t, ev.Attrs["remote_addr"], "127.0.0.2:")
	}
	assert.Equal(t, "47", evs[1].Attrs[journal.KeyRepeated])
	assert.Equal(t, 48.0, testutil.ToFloat64(m.refused.WithLabelValues(ReasonConnsPerAddress)))
}
