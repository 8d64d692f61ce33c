package store

import (
	"context"
	"errors"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// Sentinel errors of a Fleet.
var (
	// ErrFenced means a write carried a fencing generation that is not the
	// item's current one: the lease moved to another host (or was
	// released) after the writer read it. Nothing of the write was applied.
	ErrFenced = errors.New("fenced: the work item's lease is held under another generation")
	// ErrTranscriptOffset means an append to a stored transcript did not
	// start at its stored size: the caller's idea of what is stored is
	// stale. Nothing was applied.
	ErrTranscriptOffset = errors.New("transcript append does not start at the stored size")
	// ErrNoTranscript means the store holds no transcript of the session.
	ErrNoTranscript = errors.New("no stored transcript")
	// ErrHostTaken means a heartbeat's host name is held by another
	// instance (another daemon, with another state dir) whose heartbeat
	// plus its lease TTL is still ahead of the store's clock: host names
	// are unique among live daemons. Nothing was written.
	ErrHostTaken = errors.New("host name is held by another live loopd instance")
	// ErrNoHost means no member of the fleet has the name given.
	ErrNoHost = errors.New("no such host")
	// ErrHostInUse means a member cannot be forgotten: it is live, or
	// still holds leases.
	ErrHostInUse = errors.New("host is live or holds leases")
)

// LeaseChange is one change of owner Assign made.
type LeaseChange struct {
	Key        desired.Key
	From, To   string // host names; From is "" for an item no host held
	Generation int64  // the new generation
}

// Fleet is the part of a store that lets several hosts share it: host
// membership, per-item leases with fencing, and the copies of each item's
// transcript that let its conversation move with it. Both stores
// implement it; with SQLite the fleet is the one host (and the cron pass
// that shares its state dir).
type Fleet interface {
	// Heartbeat writes h's membership row (Instance, Capacity, LeaseTTL;
	// Draining is kept as SetDraining left it) with Heartbeat set to the
	// store's clock, which renews every lease h.Name holds: a lease lasts
	// as long as its owner's heartbeats, so renewal costs one row whatever
	// the number of items. It fails with ErrHostTaken, writing nothing,
	// when the row names another Instance that is still live; a row whose
	// heartbeat lapsed is taken over, and every lease h.Name holds gets a
	// new Generation in the same transaction, so that the old instance's
	// writes are fenced. A row with no Instance (written before instances
	// existed) is adopted as is.
	Heartbeat(ctx context.Context, h desired.Host) error
	// Hosts returns every member, by name, with its Leases count and Live.
	Hosts(ctx context.Context) ([]desired.Host, error)
	// Assign gives every item that needs a host and has none live (no
	// owner, or an owner whose lease expired) to the live, non-draining
	// host with the most free capacity (Capacity less its leases on open
	// items; ties by name), bumping each one's Generation. An item
	// needs a host by desired.Record.NeedsHost. It returns
	// the changes made, in key order.
	Assign(ctx context.Context) ([]LeaseChange, error)
	// ReleaseLease gives up host's lease of k held under generation gen:
	// Owner becomes "" and Generation grows. It fails with ErrFenced when
	// k's lease is not host's under gen, and wraps ErrNotFound for an
	// unknown key.
	ReleaseLease(ctx context.Context, k desired.Key, host string, gen int64) error
	// SetDraining sets or clears host's Draining flag; the error wraps
	// ErrNoHost when no member has that name.
	SetDraining(ctx context.Context, host string, draining bool) error
	// ForgetHost removes host's membership row. It fails with
	// ErrHostInUse while the host is live or holds a lease, and wraps
	// ErrNoHost when no member has that name.
	ForgetHost(ctx context.Context, host string) error
	// FencedWrite is WriteStatus under a lease: the write is applied only
	// when k's lease Generation is gen (ErrFenced otherwise), and each of
	// w.Calls is stored with gen. WriteStatus and PutStatus are the
	// unfenced forms, for an item never leased (Generation 0).
	FencedWrite(ctx context.Context, k desired.Key, gen int64, w StatusWrite) error
	// DueCallsFor is DueCalls limited to the items host holds.
	DueCallsFor(ctx context.Context, host string, now time.Time, limit int) ([]desired.Call, error)
	// TranscriptSize returns how many bytes of k's transcript of harness
	// session id the store holds (0 when none).
	TranscriptSize(ctx context.Context, k desired.Key, id string) (int64, error)
	// AppendTranscript appends data to k's stored transcript of session
	// id, at offset off, under k's lease generation gen. It fails with
	// ErrTranscriptOffset when off is not the stored size, ErrFenced when
	// gen is not k's generation, and wraps ErrNotFound for an unknown key.
	AppendTranscript(ctx context.Context, k desired.Key, id string, off int64, data []byte, gen int64) error
	// Transcript returns k's stored transcript of session id, whole; the
	// error wraps ErrNoTranscript when there is none.
	Transcript(ctx context.Context, k desired.Key, id string) ([]byte, error)
}

// Listener is a store that tells its hosts, within milliseconds, that
// something they may act on changed in another process or on another
// host (PostgreSQL's LISTEN/NOTIFY; SQLite's wake file beside the store):
// an ingest, a change of lease, an operator's hold or release.
type Listener interface {
	// Listen calls wake after each such change until ctx ends, and
	// returns ctx's cause then. It reconnects, with backoff, when its
	// connection fails, and calls wake after each reconnect (a change
	// may have been missed); it journals each outage's start and end to
	// j (store.listen_lost, store.listen_restored).
	Listen(ctx context.Context, wake func(), j ListenJournal) error
	// ListenDown returns why Listen is not listening now (its connection
	// failed, or it has not connected yet), wrapping ErrListenDown; nil
	// while it listens. A host whose listener is down still reconciles on
	// its timer, but hears another host's changes only then: /readyz
	// says so, and /metrics (loopd_store_listening).
	ListenDown() error
}

// ErrListenDown is wrapped by Listener.ListenDown's error.
var ErrListenDown = errors.New("store listener down")

// ListenJournal is where a Listener journals its outages: Recorder, which
// logs each row at once and keeps it until the store takes it (RecordLater,
// then Flush), nil for nowhere; Host is the host the rows name (a shared
// store's journal is every host's).
type ListenJournal struct {
	Recorder *journal.Recorder
	Host     string
}
