package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/loopd/loopd/schema"
)

// GitHub waits 10 s for the answer to a delivery, then records it as failed
// (GitHub webhook docs, "Best practices for using webhooks": respond within
// 10 seconds) and does not redeliver it by itself ("Handling failed webhook
// deliveries"). The limits below are chosen against that deadline.

// DefaultBodyBudget is the default of Options.BodyBudget in bytes: 16 MiB.
// The deliveries loopd handles are far smaller: an issue, comment or
// review body holds at most 65,536 characters (GitHub's limit), so such a
// delivery, escapes and all, stays well under 1 MiB, and the budget holds
// many at once. A body larger than the whole budget is refused with 413
// like one over MaxBody: in practice it is an event loopd ignores. The
// budget bounds what a flood of unverified bodies costs: 100 stalled
// connections keep the process under 64 MB resident (docs/performance.md).
const DefaultBodyBudget int64 = 16 << 20

// bodyBudgetRetryAfter is the Retry-After of a request refused because the
// body budget is spent, in seconds: by then every body that held budget has
// been verified or cut by DefaultServerLimits.Read.
const bodyBudgetRetryAfter = "15"

// Chunk sizes of a body being read: a small first chunk, so that a request
// that stalls early holds little, then chunks of one size, so that the
// chunks of a refused body serve the next one (chunkPools).
const (
	bodyChunkFirst = 4 << 10
	bodyChunk      = 64 << 10
)

// ServerLimits bounds every connection of the HTTP server (see NewServer).
// Durations are time.Duration; MaxHeaderBytes is in bytes.
type ServerLimits struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, headers and body, from its
	// first byte.
	Read time.Duration
	// Write bounds the handler's answer, from the end of the headers.
	Write time.Duration
	// Idle bounds the wait for the next request on a kept-alive
	// connection.
	Idle time.Duration
	// MaxHeaderBytes caps a request's headers.
	MaxHeaderBytes int
	// MaxConns caps the connections served at once (Listener); a
	// connection past it waits for a slot, or takes one of a connection
	// that has waited ShedAfter for its headers.
	MaxConns int
	// MaxConnsPerAddress caps the connections open at once from one
	// address (an IPv4 address, an IPv6 /64); one past it is closed at its
	// accept. 0: no bound.
	MaxConnsPerAddress int
	// ShedAfter is how long a connection may wait for a request's headers
	// (from its accept, or the end of its last request) before it is cut
	// for a new connection while MaxConns are open: the header timeout
	// under pressure, where ReadHeader is the one without.
	ShedAfter time.Duration
}

// DefaultServerLimits are the limits of `loopd serve`:
//   - ReadHeader 10 s: GitHub's whole delivery has 10 s;
//   - Read 15 s: an honest delivery has been sent within GitHub's 10 s, or
//     GitHub has given up on it. A 25 MB payload (GitHub's cap) arrives in
//     15 s on a link of 14 Mbit/s or more; on a slower link GitHub records
//     it as failed whatever loopd does. A client that trickles a body
//     (one byte every few seconds) is cut 15 s after its first byte;
//   - Write 20 s: the longest handler (a body read up to the Read bound,
//     then at most schema.WebhookAnswerTimeout of store work counted from the
//     headers) plus room to write a one-line answer;
//   - Idle 30 s: GitHub opens a connection per delivery; a kept-alive
//     connection that sends nothing is closed;
//   - MaxHeaderBytes 16 KiB: GitHub's headers take well under 8 KiB; a
//     reverse proxy adds a few;
//   - MaxConns 256: what a client may make loopd hold before any request is
//     authenticated (headers read, body chunks, a goroutine each) is bounded
//     by connections × (MaxHeaderBytes + net/http's 4 KiB of slack and
//     buffers), about 10 MB, however many connections it opens; GitHub
//     opens one per delivery, so 256 at once is far beyond a real burst;
//   - MaxConnsPerAddress schema.DefaultMaxConnsPerAddress, 32 (serve takes
//     webhooks.ghWebhook.maxConnsPerAddress): one address holds an eighth
//     of the slots;
//   - ShedAfter 1 s: GitHub sends a delivery's headers with its first
//     bytes, a round trip after it connects, so under pressure a
//     connection that has sent none for a second is a stalled one, and
//     1,000 stalled connections from many addresses cost a real delivery
//     a few rounds of 256 (docs/performance.md).
var DefaultServerLimits = ServerLimits{
	ReadHeader:         10 * time.Second,
	Read:               15 * time.Second,
	Write:              20 * time.Second,
	Idle:               30 * time.Second,
	MaxHeaderBytes:     16 << 10,
	MaxConns:           256,
	MaxConnsPerAddress: schema.DefaultMaxConnsPerAddress,
	ShedAfter:          time.Second,
}

// Listener returns ln within l's bounds of connections (MaxConns,
// MaxConnsPerAddress, ShedAfter; connGuard); with MaxConns 0 and
// MaxConnsPerAddress 0, ln itself. A flood of connections then costs the
// slots it may hold, never the process's memory, and a real delivery from
// another address gets a slot while it lasts. refused, when not nil, is
// called with the reason and the remote address of each connection the
// bounds cut (Refusals). Serve it with a server of NewServer, whose
// ConnState hook tells the guard which connections wait for headers.
func (l ServerLimits) Listener(ln net.Listener, refused func(reason, remoteAddr string)) net.Listener {
	if l.MaxConns <= 0 && l.MaxConnsPerAddress <= 0 {
		return ln
	}
	return &connGuard{Listener: ln, limits: l, refused: refused, now: time.Now,
		open: map[*guardedConn]struct{}{}, byAddr: map[netip.Addr]int{},
		changed: make(chan struct{}, 1), closed: make(chan struct{})}
}

// NewServer returns an http.Server that serves h within limits l; its
// BaseContext is net/http's default.
func NewServer(h http.Handler, l ServerLimits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ConnState:         connState,
	}
}

// errOverBudget is returned by readSigned when the body budget cannot hold
// the next chunk of a body.
var errOverBudget = errors.New("body budget spent: too many request bodies are being read at once")

// signedBody is a body read, not yet verified: its chunks, and the
// HMAC-SHA256 of every byte in them.
type signedBody struct {
	chunks [][]byte
	size   int64
	mac    hash.Hash
}

// chunkPools recycle the chunks of bodies (of bodyChunkFirst and of
// bodyChunk bytes): those of a refused body serve the next one instead of
// waiting, as garbage, for a collection, so that under a flood the heap
// stays near the bytes the budget admits.
var chunkPools = map[int]*sync.Pool{bodyChunkFirst: {}, bodyChunk: {}}

// getChunk returns a chunk of size bytes, from a pool when it has one of
// that size.
func getChunk(size int) []byte {
	if p, ok := chunkPools[size]; ok {
		if c, ok := p.Get().(*[]byte); ok {
			return *c
		}
	}
	return make([]byte, size)
}

// putChunk gives c back to its pool, when there is one for its capacity.
func putChunk(c []byte) {
	c = c[:cap(c)]
	if p, ok := chunkPools[cap(c)]; ok {
		p.Put(&c)
	}
}

// readSigned reads exactly n bytes of r into chunks and the HMAC of secret
// over them. The chunks' capacity is held on budget from before it is
// allocated; the returned release gives it back with the chunks, and must
// be called once the chunks are no longer needed, also on error. A chunk
// budget cannot hold fails with errOverBudget at once, without waiting.
func readSigned(r io.Reader, n int64, secret []byte, budget *semaphore.Weighted) (*signedBody, func(), error) {
	b := &signedBody{mac: hmac.New(sha256.New, secret)}
	var held int64
	release := func() {
		for _, c := range b.chunks {
			putChunk(c)
		}
		budget.Release(held)
		held = 0
		b.chunks = nil
	}
	size := int64(bodyChunkFirst)
	for b.size < n {
		// The last chunk is cut to what is left of the body.
		size = min(size, n-b.size)
		if !budget.TryAcquire(size) {
			return nil, release, errOverBudget
		}
		held += size
		chunk := getChunk(int(size))
		k, err := io.ReadFull(r, chunk)
		b.mac.Write(chunk[:k])
		b.chunks = append(b.chunks, chunk[:k])
		b.size += int64(k)
		if err != nil {
			return nil, release, err
		}
		size = bodyChunk
	}
	return b, release, nil
}

// verify reports whether want is the body's HMAC, in constant time.
func (b *signedBody) verify(want []byte) bool { return hmac.Equal(b.mac.Sum(nil), want) }

// bytes returns the body as one slice.
func (b *signedBody) bytes() []byte {
	out := make([]byte, 0, b.size)
	for _, c := range b.chunks {
		out = append(out, c...)
	}
	return out
}

// readErrText describes a body read error without the connection's
// addresses, so that identical failures log identically (journal.Limiter)
// whatever port the client used.
func readErrText(err error) string {
	if ne, ok := errors.AsType[*net.OpError](err); ok && ne.Err != nil {
		return ne.Err.Error()
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "body ended before its Content-Length"
	}
	return err.Error()
}
