package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// compactColumns are the columns of a pending delivery that Records and Get
// read (readPending), in its order: all but the prompt.
const compactColumns = `id, event, action, sender, received_at, commit_sha, source_kind, source_id,
	prompt_bytes, prompt_header, frame_digest, answer`

// busyTimeout is how long a write waits at most for a writer of another
// process or host to finish (SQLite's busy_timeout, PostgreSQL's
// lock_timeout on the writers' advisory lock). A write whose context has a
// deadline sooner than that waits only until the deadline (busyFor).
const busyTimeout = 5000 * time.Millisecond

// sqlStore is the store's logic over database/sql, shared by both backends
// (SQLite, Postgres): every method runs the same SQL text, written with ?
// placeholders, booleans, integers, text and blobs only, and times as Unix
// nanoseconds (UTC) in BIGINT columns, a zero time as NULL, so times
// between the years 1678 and 2262 round-trip and zero stays zero. Times
// come back in UTC. What differs between the backends is its dialect.
// Every method is safe for concurrent use.
type sqlStore struct {
	db *sql.DB
	d  dialect
	// name prefixes every error: "sqlite" or "postgres".
	name     string
	lockPath string
	// writeSem serializes this process's write transactions, so that they
	// queue in order instead of waiting on the database's lock; another
	// process or host is still waited for, at most busyTimeout.
	writeSem chan struct{}
	// group commits Ingest and AppendEvent in batches (commit.go).
	group *committer
	now   func() time.Time
	// statuses holds the status each item's row last decoded to
	// (statusCache), pending each item's pending deliveries as last read
	// (pendingCache).
	statuses statusCache
	pending  pendingCache
}

// dialect is what one backend does its own way; the SQL of every query is
// the core's.
type dialect interface {
	// writeTx runs fn in a transaction that no other writer of the store
	// (this process or another, on this host or another) runs beside:
	// what fn reads stays true until it commits. It waits for another
	// writer at most busy, and commits when fn returns nil.
	writeTx(ctx context.Context, db *sql.DB, busy time.Duration, fn func(*sql.Tx) error) error
	// readOpts are the options of a read transaction, which must see one
	// snapshot.
	readOpts() *sql.TxOptions
	// alive returns why the store can no longer be read or written as
	// opened (SQLite's ErrFileGone; writeTx checks it too), nil while it can.
	alive() error
	// clock returns the store's clock, which leases expire by (Fleet).
	clock(ctx context.Context, tx *sql.Tx) (time.Time, error)
	// notify tells the other hosts, once tx commits, that something
	// changed they may act on (Listener); a no-op where no other host
	// listens.
	notify(ctx context.Context, tx *sql.Tx) error
	// jsonList is a subquery of the strings of the JSON array bound to
	// its one placeholder.
	jsonList() string
	// vacuum gives back at most pages free pages of the store's file in
	// tx, and returns how many bytes that was (Retention.Vacuum).
	vacuum(ctx context.Context, tx *sql.Tx, pages int) (int64, error)
}

// newSQLStore returns the core over db, with its group commit started.
func newSQLStore(db *sql.DB, d dialect, name, lockPath string) *sqlStore {
	s := &sqlStore{db: db, d: d, name: name, lockPath: lockPath, writeSem: make(chan struct{}, 1), now: time.Now}
	s.startCommitter()
	return s
}

// write runs fn in a write transaction (dialect.writeTx) and commits it
// when fn returns nil; it rolls back otherwise. It waits for another
// writer at most busyTimeout, and never past ctx's deadline.
func (s *sqlStore) write(ctx context.Context, fn func(*sql.Tx) error) error {
	release, err := s.takeWriters(ctx)
	if err != nil {
		return err
	}
	defer release()
	return s.d.writeTx(ctx, s.db, busyFor(ctx), fn)
}

// takeWriters waits for this process's turn of the writers (writeSem) and
// returns the func that ends it, which the caller must call once; it
// returns ctx's cause instead when ctx ends first.
func (s *sqlStore) takeWriters(ctx context.Context) (release func(), err error) {
	select {
	case s.writeSem <- struct{}{}:
		return func() { <-s.writeSem }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// read runs fn in a read transaction, which sees one snapshot of the store.
func (s *sqlStore) read(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := s.d.alive(); err != nil {
		return err
	}
	return inTx(ctx, s.db, s.d.readOpts(), fn)
}

// inTx runs fn in a transaction begun on db (the pool or one connection of
// it), committing when fn returns nil and rolling back otherwise.
func inTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, opts *sql.TxOptions, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Ingest claims in.DeliveryID and applies in, in one transaction:
//   - a delivery id already claimed, or an in.Identity the item already
//     holds (a replay under another delivery id), makes Duplicate true and
//     changes nothing;
//   - an unknown key creates the item (in.Kind, in.Harness, in.Cwd, open,
//     Generation 1, Status{Phase: PhaseIdle}); an existing item keeps its own
//     kind, harness and cwd;
//   - in.Closed, when set, is ignored (StaleState) if in.StateAt is before the
//     recorded Spec.StateChangedAt (a zero StateAt is before any recorded
//     time), or, for a snapshot (in.Snapshot), if it would flip the state
//     and in.StateAt is not after the recorded time (a snapshot of the
//     recorded state that is not newer is simply not applied); otherwise
//     Closed and StateChangedAt take the new values, and StateChanged
//     reports whether Closed flipped (a new item starts open);
//   - a snapshot with no in.Delivery, an in.NoCreate and an in.CI for an
//     unknown key change nothing and claim nothing (Unknown);
//   - in.Delivery, when set, is queued as pending (Queued); its ID must be
//     in.DeliveryID or empty. It is not queued, and the id is claimed
//     alone, for an in.NewOnly on an item that existed (Exists), and for a
//     payload older than the item's last open/closed change (Outdated: an
//     old event, replayed or late, brings no text). Without a delivery,
//     the id is still claimed;
//   - in.CI is recorded with the commit's checks (ingestCI: Collected,
//     CIReady, StaleCommit, Deduplicated); it queues nothing itself;
//   - in.HeadSHA, when set, becomes Spec.HeadSHA unless in.StateAt is
//     before the time of the payload that named the recorded one, and
//     Spec.HeadPusher becomes in.HeadPusher, or "" when the head moved
//     without one (recordHead); in.HeadRepo and in.Author, when set,
//     replace Spec.HeadRepo and Spec.Author, and in.CanModify, when set,
//     Spec.MaintainerCanModify.
//
// When in.Journal is set, the events it returns for the result are
// appended in the same transaction. An ingest that created an item, queued
// a delivery or flipped the state notifies the other hosts (Listener).
//
// Generation grows by one when the open/closed state flips or a delivery is
// queued on an existing item; a repeated state only moves StateChangedAt.
// Reopening a Stopped item is the reconciler's business, not Ingest's. The
// error wraps ErrBadKey when in.Key does not round-trip through ParseKey.
func (s *sqlStore) Ingest(ctx context.Context, in store.Ingest) (store.IngestResult, error) {
	var res store.IngestResult
	err := checkIngest(in)
	if err == nil {
		err = s.batched(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := s.ingest(ctx, tx, in, &res); err != nil {
				return err
			}
			if res.Created || res.Queued || res.StateChanged {
				if err := s.d.notify(ctx, tx); err != nil {
					return err
				}
			}
			if in.Journal == nil {
				return nil
			}
			for _, e := range in.Journal(res) {
				if err := appendEvent(ctx, tx, e); err != nil {
					return fmt.Errorf("append event %s: %w", e.Name, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		return store.IngestResult{}, fmt.Errorf("%s ingest %s %s: %w", s.name, in.Key, in.DeliveryID, err)
	}
	return res, nil
}

// checkIngest reports what makes in unusable, before any transaction.
func checkIngest(in store.Ingest) error {
	if k, err := desired.ParseKey(in.Key.String()); err != nil {
		return err
	} else if k != in.Key {
		return fmt.Errorf("%w: %+v does not round-trip as %q", desired.ErrBadKey, in.Key, in.Key.String())
	}
	if in.DeliveryID == "" {
		return errors.New("empty delivery id")
	}
	if in.Delivery != nil && in.Delivery.ID != "" && in.Delivery.ID != in.DeliveryID {
		return fmt.Errorf("delivery carries id %q", in.Delivery.ID)
	}
	return nil
}

// ingest is Ingest's transaction; it records what it did in res.
func (s *sqlStore) ingest(ctx context.Context, tx *sql.Tx, in store.Ingest, res *store.IngestResult) error {
	key := in.Key.String()
	var claimed bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE id = ?)
		OR EXISTS (SELECT 1 FROM deliveries WHERE work_item = ? AND identity = ? AND identity <> '')`,
		in.DeliveryID, key, in.Identity).Scan(&claimed)
	if err != nil {
		return err
	}
	if claimed {
		res.Duplicate = true
		return nil
	}
	now := s.now()

	var (
		closed                bool
		at, headAt, flippedAt sql.NullInt64
		head, pusher          string
	)
	err = tx.QueryRowContext(ctx, `SELECT closed, state_changed_at, head_sha, head_at, head_pusher, flipped_at FROM work_items WHERE key = ?`, key).
		Scan(&closed, &at, &head, &headAt, &pusher, &flippedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows) && ((in.Snapshot && in.Delivery == nil) || in.NoCreate || in.CI != nil):
		res.Unknown = true
		return nil
	case errors.Is(err, sql.ErrNoRows):
		res.Created = true
		st, err := json.Marshal(desired.Status{Phase: desired.PhaseIdle})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO work_items
			(key, owner, repo, number, kind, harness, cwd, closed, state_changed_at, held, generation, status, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, FALSE, NULL, FALSE, 1, ?, ?)`,
			key, in.Key.Owner, in.Key.Repo, in.Key.Number, string(in.Kind), in.Harness, in.Cwd, string(st), timeToDB(now))
		if err != nil {
			return err
		}
	case err != nil:
		return err
	}

	changed := false
	if in.Closed != nil {
		recorded := timeFromDB(at)
		flips := *in.Closed != closed
		switch {
		case in.Snapshot && !in.StateAt.After(recorded) && !flips:
			// The state the record already holds, seen no later: nothing new.
		case in.StateAt.Before(recorded) || (in.Snapshot && !in.StateAt.After(recorded)):
			res.StaleState = true
		default:
			res.StateChanged = flips
			changed = flips
			var set columnSet
			set.add("closed = ?", *in.Closed)
			set.add("state_changed_at = ?", timeToDB(in.StateAt))
			set.add("updated_at = ?", timeToDB(now))
			if flips {
				set.add("flipped_at = ?", timeToDB(in.StateAt))
			}
			if err := set.update(ctx, tx, key); err != nil {
				return err
			}
		}
	}
	if in.CI != nil {
		if err := ingestCI(ctx, tx, in, key, head, now, res); err != nil {
			return err
		}
	}

	d := desired.Delivery{ID: in.DeliveryID}
	state := "state_only"
	if in.Delivery != nil {
		d = *in.Delivery
		d.ID = in.DeliveryID
		if queues(in, flippedAt, res) {
			state = "pending"
			res.Queued = true
			changed = true
		}
	}
	answer, answerTo, err := s.answerOf(ctx, tx, key, d, res)
	if err != nil {
		return err
	}
	if res.Answered {
		// Nothing queued: only the state it carried can change the item.
		state, res.Queued, changed = "state_only", false, res.StateChanged
	}
	c := desired.Delivery{ID: d.ID, Prompt: d.Prompt}.Compact() // what Records reads instead of the prompt
	_, err = tx.ExecContext(ctx, `INSERT INTO deliveries
		(id, work_item, event, action, sender, prompt, received_at, state, commit_sha, source_kind, source_id,
		prompt_bytes, prompt_header, frame_digest, identity, answer, answer_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, key, d.Event, d.Action, d.Sender, d.Prompt, timeToDB(d.ReceivedAt), state, d.Commit, string(d.Source.Kind), d.Source.ID,
		c.Size, c.Header, c.Digest, in.Identity, answer, answerTo)
	if err != nil {
		return err
	}
	if err := recordHead(ctx, tx, in, key, head, pusher, headAt); err != nil {
		return err
	}
	// What else the delivery says of the item, in one statement.
	var set columnSet
	if in.Installation != 0 {
		// The latest delivery that names one wins: an App reinstalled on
		// the organization gets a new id.
		set.add("installation = ?", in.Installation)
	}
	if in.CanModify != nil {
		set.add("maintainer_can_modify = ?", *in.CanModify)
	}
	for _, kv := range [][2]string{{"head_repo", in.HeadRepo}, {"author", in.Author}, {"title", in.Title}, {"url", in.URL}} {
		if kv[1] != "" {
			// The latest payload that names them wins.
			set.add(kv[0]+" = ?", kv[1])
		}
	}
	if in.BudgetRaise > 0 && !res.Created {
		set.add("budget_raise = budget_raise + ?", in.BudgetRaise)
		changed = true
	}
	if in.HeadRef != "" {
		// The latest payload that names the head branch wins; it only
		// matters until the item's worktree is made.
		set.add("head_ref = ?", in.HeadRef)
	}
	if changed && !res.Created {
		set.add("generation = generation + ?", 1)
		set.add("updated_at = ?", timeToDB(now))
	}
	return set.update(ctx, tx, key)
}

// columnSet is the SET list of one UPDATE of a work_items row: the
// assignments, each with one "?" for its argument, in order.
type columnSet struct {
	cols []string
	args []any
}

func (c *columnSet) add(col string, arg any) {
	c.cols = append(c.cols, col)
	c.args = append(c.args, arg)
}

// update applies the set to the row of key, in one statement; an empty
// set sends none.
func (c *columnSet) update(ctx context.Context, tx *sql.Tx, key string) error {
	if len(c.cols) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE work_items SET `+strings.Join(c.cols, ", ")+` WHERE key = ?`, append(c.args, key)...)
	return err
}

// answerOf returns the answer columns of the delivery d of the item key:
// its answer as JSON and the question it answers, "" for an event. An
// answer to a question the item already holds an answer to is no answer:
// res.Answered is set and the delivery is stored with no answer, its id
// and identity claimed, so that it takes nothing (one answer per question
// instance; the unique index deliveries_by_answer holds to it).
func (s *sqlStore) answerOf(ctx context.Context, tx *sql.Tx, key string, d desired.Delivery, res *store.IngestResult) (string, string, error) {
	if d.Answer == nil || !res.Queued {
		return "", "", nil
	}
	if to := d.Answer.Question; to != "" {
		var taken bool
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM deliveries WHERE work_item = ? AND answer_to = ?)`, key, to).Scan(&taken)
		if err != nil {
			return "", "", err
		}
		if taken {
			res.Answered = true
			return "", "", nil
		}
	}
	b, err := json.Marshal(d.Answer)
	if err != nil {
		return "", "", err
	}
	return string(b), d.Answer.Question, nil
}

// recordHead records in's head commit on the item key, whose recorded
// head is head, pushed by pusher, named by a payload of headAt: the
// commit replaces head unless in.StateAt is before headAt, and its pusher
// is in.HeadPusher, else the recorded one for the same commit, else none
// (the head moved without a push loopd saw). A push of the recorded head
// that arrives late still names its pusher.
func recordHead(ctx context.Context, tx *sql.Tx, in store.Ingest, key, head, pusher string, headAt sql.NullInt64) error {
	if in.HeadSHA == "" {
		return nil
	}
	same := strings.EqualFold(in.HeadSHA, head)
	if headAt.Valid && in.StateAt.Before(timeFromDB(headAt)) {
		if !same || in.HeadPusher == "" {
			return nil
		}
		_, err := tx.ExecContext(ctx, `UPDATE work_items SET head_pusher = ? WHERE key = ?`, in.HeadPusher, key)
		return err
	}
	switch {
	case in.HeadPusher != "":
		pusher = in.HeadPusher
	case !same:
		pusher = ""
	}
	_, err := tx.ExecContext(ctx, `UPDATE work_items SET head_sha = ?, head_at = ?, head_pusher = ? WHERE key = ?`,
		in.HeadSHA, timeToDB(in.StateAt), pusher, key)
	return err
}

// queues reports whether in's delivery is queued, by the NewOnly rule and
// the rule of an old event (a payload older than flippedAt, the item's
// last open/closed change), and records in res why not.
func queues(in store.Ingest, flippedAt sql.NullInt64, res *store.IngestResult) bool {
	switch {
	case in.NewOnly && !res.Created:
		res.Exists = true
		return false
	case flippedAt.Valid && !in.StateAt.IsZero() && in.StateAt.Before(timeFromDB(flippedAt)):
		res.Outdated = true
		return false
	}
	return true
}

// Records returns every work item with its pending deliveries in arrival
// order, compact (Delivery.Compact: no prompt), ordered by owner, repo and
// then number (numerically). An item whose status cannot be decoded is
// still returned, in PhaseNeedsAttention (see Get). The pending slices are
// shared with later calls (pendingCache): an append copies them, and a
// delivery in them must not be changed in place.
func (s *sqlStore) Records(ctx context.Context) ([]desired.Record, error) {
	var recs []desired.Record
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		recs, err = s.loadRecords(ctx, tx, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s records: %w", s.name, err)
	}
	return recs, nil
}

// Get returns the work item k with its pending deliveries in arrival order,
// compact (Delivery.Compact), shared as Records' are; the error wraps
// ErrNotFound when there is none. A status that cannot be
// decoded (a record edited by hand) is reported, not returned as an error:
// the item comes back with Status{Phase: PhaseNeedsAttention, Reason:
// "status unreadable: …"}, AttentionGeneration set to its generation, and
// whatever status fields did decode, so an operator can see and release it.
func (s *sqlStore) Get(ctx context.Context, k desired.Key) (desired.Record, error) {
	var recs []desired.Record
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		recs, err = s.loadRecords(ctx, tx, k.String())
		return err
	})
	if err == nil && len(recs) == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return desired.Record{}, fmt.Errorf("%s get %s: %w", s.name, k, err)
	}
	return recs[0], nil
}

// Prompt returns the prompt of delivery id of k, whatever its state: the
// body Records and Get leave out. The error wraps ErrNotFound for an
// unknown key and ErrNoDelivery when k has no delivery id.
func (s *sqlStore) Prompt(ctx context.Context, k desired.Key, id string) (string, error) {
	var prompt string
	err := s.read(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT prompt FROM deliveries WHERE id = ? AND work_item = ?`, id, k.String()).Scan(&prompt)
		if errors.Is(err, sql.ErrNoRows) {
			if err := itemExists(ctx, tx, k); err != nil {
				return err
			}
			return store.ErrNoDelivery
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("%s prompt %s %s: %w", s.name, k, id, err)
	}
	return prompt, nil
}

// loadRecords reads the work item key, or all of them when key is "". A
// status is decoded only when its text changed since s last decoded it
// (statusCache), and an item's pending deliveries are read only when their
// set changed (pendingCache). They come compact, from the columns the index
// deliveries_pending holds: no body is read. A read of all items lets both
// caches forget the items it did not find.
func (s *sqlStore) loadRecords(ctx context.Context, tx *sql.Tx, key string) ([]desired.Record, error) {
	var (
		itemsWhere string
		args       []any
	)
	if key != "" {
		itemsWhere = "WHERE key = ?"
		args = append(args, key)
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM work_items `+itemsWhere, args...).Scan(&n); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT key, owner, repo, number, kind, harness, cwd,
		closed, state_changed_at, held, generation, release_generation, release_fresh, head_ref, head_sha, head_repo, author, head_pusher,
		maintainer_can_modify, title, url, installation, budget_raise, status, r.session_id, r.source, r.at,
		lease_owner, lease_generation, h.heartbeat + h.lease_ttl
		FROM work_items LEFT JOIN session_reports r ON r.work_item = key LEFT JOIN hosts h ON h.name = lease_owner
		`+itemsWhere+` ORDER BY owner, repo, number`, args...)
	if err != nil {
		return nil, err
	}
	recs := make([]desired.Record, 0, n)
	var read map[string]bool // the items a read of all found
	if key == "" {
		read = make(map[string]bool, n)
	}
	for rows.Next() {
		recs = append(recs, desired.Record{})
		var (
			r                   = &recs[len(recs)-1]
			k                   string
			at, reportAt, exp   sql.NullInt64
			status              string
			reportID, reportSrc sql.NullString
		)
		err := rows.Scan(&k, &r.Key.Owner, &r.Key.Repo, &r.Key.Number, &r.Spec.Kind, &r.Spec.Harness, &r.Spec.Cwd,
			&r.Spec.Closed, &at, &r.Spec.Held, &r.Spec.Generation, &r.Spec.ReleaseGeneration, &r.Spec.ReleaseFresh, &r.Spec.HeadRef, &r.Spec.HeadSHA,
			&r.Spec.HeadRepo, &r.Spec.Author, &r.Spec.HeadPusher, &r.Spec.MaintainerCanModify, &r.Spec.Title, &r.Spec.URL, &r.Spec.Installation, &r.Spec.BudgetRaise, &status, &reportID, &reportSrc, &reportAt,
			&r.Lease.Owner, &r.Lease.Generation, &exp)
		if err != nil {
			rows.Close()
			return nil, err
		}
		r.Spec.StateChangedAt = timeFromDB(at)
		if r.Lease.Owner != "" {
			r.Lease.Expires = timeFromDB(exp)
		}
		if reportID.Valid {
			r.Report = &desired.SessionReport{SessionID: reportID.String, Source: reportSrc.String, At: timeFromDB(reportAt)}
		}
		r.Status = s.statuses.decode(k, status, r.Spec.Generation)
		if read != nil {
			read[k] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if read != nil {
		s.statuses.keepOnly(read)
	}

	pending, err := s.pending.load(ctx, tx, s.d, key)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Pending = pending[recs[i].Key.String()]
	}
	return recs, nil
}

// pendingCache keeps each work item's pending deliveries, compact, as they
// were last read, with the mark of the set they were read as: how many
// there were and the greatest seq among them. A delivery row only ever
// leaves 'pending' (it is inserted pending or not at all), and seq only
// grows (AUTOINCREMENT: never reused), so two sets of an item that share
// the mark are the same set: one that gained a delivery has a greater
// seq, and one that only lost some has fewer. A pass reads the marks from
// the index (one row per item with pending deliveries) and the deliveries
// of the items whose mark changed only (issue 12: a pass reads what
// changed). Safe for concurrent use.
type pendingCache struct {
	mu sync.Mutex
	m  map[string]pendingEntry
}

type pendingEntry struct {
	count, last int64
	list        []desired.Delivery
}

// load returns the pending deliveries of the work item key, or of every
// item when key is "", by item in arrival order; items with none are left
// out. The lists are the cache's, shared with every caller, and capped: an
// append copies, and no caller changes a delivery in place.
func (c *pendingCache) load(ctx context.Context, tx *sql.Tx, d dialect, key string) (map[string][]desired.Delivery, error) {
	where, args := "", []any{}
	if key != "" {
		where, args = "AND work_item = ?", append(args, key)
	}
	rows, err := tx.QueryContext(ctx, `SELECT work_item, count(*), max(seq) FROM deliveries WHERE state = 'pending' `+where+`
		GROUP BY work_item`, args...)
	if err != nil {
		return nil, err
	}
	marks := map[string]pendingEntry{}
	for rows.Next() {
		var (
			item string
			e    pendingEntry
		)
		if err := rows.Scan(&item, &e.count, &e.last); err != nil {
			rows.Close()
			return nil, err
		}
		marks[item] = e
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}

	c.mu.Lock()
	var (
		changed []string
		n       int64
	)
	for item, m := range marks {
		if e, ok := c.m[item]; ok && e.count == m.count && e.last == m.last {
			marks[item] = e
		} else {
			changed = append(changed, item)
			n += m.count
		}
	}
	c.mu.Unlock()
	if len(changed) > 0 {
		lists, err := readPending(ctx, tx, d, changed, int(n))
		if err != nil {
			return nil, err
		}
		for _, item := range changed {
			e := marks[item]
			e.list = lists[item]
			marks[item] = e
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if key == "" || c.m == nil {
		c.m = map[string]pendingEntry{} // items with none left go
	} else {
		delete(c.m, key)
	}
	out := make(map[string][]desired.Delivery, len(marks))
	for item, e := range marks {
		c.m[item] = e
		out[item] = e.list
	}
	return out, nil
}

// readPending reads the pending deliveries of items, n of them, compact, by
// item in arrival order (seq order within an item, the index's own order),
// from the index deliveries_pending alone. They share one array, each
// item's part of it capped.
func readPending(ctx context.Context, tx *sql.Tx, d dialect, items []string, n int) (map[string][]desired.Delivery, error) {
	keys, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT work_item, `+compactColumns+` FROM deliveries
		WHERE state = 'pending' AND work_item IN (`+d.jsonList()+`) ORDER BY work_item, seq`, string(keys))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all, owner := make([]desired.Delivery, 0, n), make([]string, 0, n)
	for rows.Next() {
		var (
			item string
			d    desired.Delivery
			at   sql.NullInt64
		)
		var answer string
		if err := rows.Scan(&item, &d.ID, &d.Event, &d.Action, &d.Sender, &at, &d.Commit, &d.Source.Kind, &d.Source.ID,
			&d.Size, &d.Header, &d.Digest, &answer); err != nil {
			return nil, err
		}
		if answer != "" {
			d.Answer = new(desired.Answer)
			if err := json.Unmarshal([]byte(answer), d.Answer); err != nil {
				return nil, fmt.Errorf("delivery %s answer: %w", d.ID, err)
			}
		}
		d.ReceivedAt = timeFromDB(at)
		all = append(all, d)
		owner = append(owner, item)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[string][]desired.Delivery, len(items))
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && owner[j] == owner[i] {
			j++
		}
		out[owner[i]] = all[i:j:j]
		i = j
	}
	return out, nil
}

// decodeStatus decodes a status column. A column that does not decode, or
// names an unknown phase, yields PhaseNeedsAttention with the reason, keeping
// the fields that did decode.
func decodeStatus(text string, gen int64) desired.Status {
	st, err := parseStatus(text)
	if err != nil {
		st.Phase = desired.PhaseNeedsAttention
		st.Reason = "status unreadable: " + err.Error()
		st.AttentionGeneration = gen
	}
	return st
}

// parseStatus decodes a status column; the error says why it is not a
// status, and the fields that did decode come with it.
func parseStatus(text string) (desired.Status, error) {
	var st desired.Status
	err := json.Unmarshal([]byte(text), &st)
	if err == nil && !st.Phase.Known() {
		err = fmt.Errorf("unknown phase %q", st.Phase)
	}
	return st, err
}

// statusCache keeps, per work item, the status text its row held when
// it was last decoded and what it decoded to, so that a pass decodes only
// the statuses written since the previous one: decoding every item's
// status on every pass was about half a pass at N = 1,000 (issue 12). A
// status is known by its whole text, so a write by another process or by
// hand is decoded like any other. About 2 KB an item: a read of all items
// drops the entries of the items it did not find (keepOnly), so that an
// item another process forgot (Retention.Forget, `loopd forget`) is not
// kept for the life of the daemon. Safe for concurrent use.
type statusCache struct {
	mu sync.Mutex
	m  map[string]cachedStatus
}

type cachedStatus struct {
	text string
	st   desired.Status
}

// decode returns decodeStatus(text, gen) for the item key, decoding text
// only when it is not the text last decoded for key. Each caller gets its
// own copy (Status.clone). A status that does not decode is not kept.
func (c *statusCache) decode(key, text string, gen int64) desired.Status {
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && e.text == text {
		return e.st.Clone()
	}
	st, err := parseStatus(text)
	if err != nil {
		return decodeStatus(text, gen)
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]cachedStatus{}
	}
	c.m[key] = cachedStatus{text: text, st: st}
	c.mu.Unlock()
	return st.Clone()
}

// keepOnly removes the entries of the items not in read, the items a read
// of all of them found. An entry an item made after that read's snapshot
// may go too; it is decoded again when next read.
func (c *statusCache) keepOnly(read map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.m {
		if !read[key] {
			delete(c.m, key)
		}
	}
}

// ReportSession records the session id the harness of k reported about
// itself, replacing the previous report. The error wraps ErrNotFound for an
// unknown key.
func (s *sqlStore) ReportSession(ctx context.Context, k desired.Key, r desired.SessionReport) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := itemExists(ctx, tx, k); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO session_reports (work_item, session_id, source, at) VALUES (?, ?, ?, ?)
			ON CONFLICT (work_item) DO UPDATE SET session_id = excluded.session_id, source = excluded.source, at = excluded.at`,
			k.String(), r.SessionID, r.Source, timeToDB(r.At))
		return err
	})
	if err != nil {
		return fmt.Errorf("%s report session %s: %w", s.name, k, err)
	}
	return nil
}

// PutStatus writes the status of k and, in the same transaction, marks the
// listed deliveries of k as delivered (with the time). An id that is not a
// pending delivery of k is skipped, not an error. The error wraps
// ErrNotFound for an unknown key.
func (s *sqlStore) PutStatus(ctx context.Context, k desired.Key, st desired.Status, delivered ...string) error {
	return s.WriteStatus(ctx, k, store.StatusWrite{Status: st, Delivered: delivered})
}

// WriteStatus writes w.Status of k, marks w.Delivered as PutStatus does,
// and queues w.Calls, all in one transaction. The error wraps ErrNotFound
// for an unknown key; it is ErrFenced, and nothing is written, when k was
// ever leased (its lease Generation is not 0: only FencedWrite writes it).
func (s *sqlStore) WriteStatus(ctx context.Context, k desired.Key, w store.StatusWrite) error {
	return s.writeStatus(ctx, k, 0, w)
}

// FencedWrite is WriteStatus under k's lease generation gen: nothing is
// written, and the error is ErrFenced, unless k's lease Generation is gen;
// each of w.Calls is stored with gen. The error wraps ErrNotFound for an
// unknown key.
func (s *sqlStore) FencedWrite(ctx context.Context, k desired.Key, gen int64, w store.StatusWrite) error {
	return s.writeStatus(ctx, k, gen, w)
}

// writeStatus is WriteStatus and FencedWrite: the status write of k under
// lease generation gen (0: never leased).
func (s *sqlStore) writeStatus(ctx context.Context, k desired.Key, gen int64, w store.StatusWrite) error {
	text, err := json.Marshal(w.Status)
	if err == nil {
		err = s.write(ctx, func(tx *sql.Tx) error {
			if err := fenced(ctx, tx, k, gen); err != nil {
				return err
			}
			now := timeToDB(s.now())
			if err := updateItem(ctx, tx, `UPDATE work_items SET status = ?, updated_at = ? WHERE key = ?`,
				string(text), now, k.String()); err != nil {
				return err
			}
			for _, id := range w.Delivered {
				_, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'delivered', delivered_at = ?
					WHERE id = ? AND work_item = ? AND state = 'pending'`, now, id, k.String())
				if err != nil {
					return err
				}
			}
			for _, c := range w.Calls {
				_, err := tx.ExecContext(ctx, `INSERT INTO outbox (work_item, kind, body, marker, target_kind, target_id,
					state, attempts, next_attempt, created_at, http_status, error, url, generation)
					VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, 0, '', '', ?)`,
					k.String(), string(c.Kind), c.Body, c.Marker, string(c.Target.Kind), c.Target.ID, timeToDB(c.NextAttempt), now, gen)
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("%s put status %s: %w", s.name, k, err)
	}
	return nil
}

// itemExists returns ErrNotFound when the store holds no work item k.
func itemExists(ctx context.Context, tx *sql.Tx, k desired.Key) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM work_items WHERE key = ?`, k.String()).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Drop records that the pending delivery id of k will never be sent: its
// row stays (the id stays claimed) as one with nothing to send, so it is
// neither pending nor part of History. An id that is not a pending
// delivery of k is skipped. The error wraps ErrNotFound for an unknown
// key.
func (s *sqlStore) Drop(ctx context.Context, k desired.Key, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := itemExists(ctx, tx, k); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'state_only' WHERE id = ? AND work_item = ? AND state = 'pending'`, id, k.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("%s drop %s %s: %w", s.name, k, id, err)
	}
	return nil
}

// callColumns are the columns scanCall reads, in its order.
const callColumns = `id, work_item, kind, body, marker, target_kind, target_id, state, attempts,
	next_attempt, created_at, done_at, http_status, error, url, generation,
	COALESCE((SELECT installation FROM work_items WHERE key = outbox.work_item), 0)`

// DueCalls returns the pending calls due at now (next attempt NULL or not
// after it), oldest first, at most limit (all when limit <= 0).
func (s *sqlStore) DueCalls(ctx context.Context, now time.Time, limit int) ([]desired.Call, error) {
	calls, err := s.dueCalls(ctx, nil, now, limit)
	if err != nil {
		return nil, fmt.Errorf("%s due calls: %w", s.name, err)
	}
	return calls, nil
}

// DueCallsFor is DueCalls limited to the items whose lease host holds,
// whatever the generation each call was queued under: the calls a former
// owner queued are the new owner's to make.
func (s *sqlStore) DueCallsFor(ctx context.Context, host string, now time.Time, limit int) ([]desired.Call, error) {
	calls, err := s.dueCalls(ctx, &host, now, limit)
	if err != nil {
		return nil, fmt.Errorf("%s due calls for %s: %w", s.name, host, err)
	}
	return calls, nil
}

// dueCalls is DueCalls, of the items *host holds when host is not nil.
func (s *sqlStore) dueCalls(ctx context.Context, host *string, now time.Time, limit int) ([]desired.Call, error) {
	query := `SELECT ` + callColumns + ` FROM outbox WHERE state = 'pending' AND (next_attempt IS NULL OR next_attempt <= ?)`
	args := []any{now.UnixNano()}
	if host != nil {
		query += ` AND work_item IN (SELECT key FROM work_items WHERE lease_owner = ?)`
		args = append(args, *host)
	}
	query += ` ORDER BY id`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	return s.queryCalls(ctx, query, args...)
}

// Calls returns the calls f selects, oldest first.
func (s *sqlStore) Calls(ctx context.Context, f store.CallFilter) ([]desired.Call, error) {
	var (
		where []string
		args  []any
	)
	if f.WorkItem != "" {
		where = append(where, "work_item = ?")
		args = append(args, f.WorkItem)
	}
	if f.State != "" {
		where = append(where, "state = ?")
		args = append(args, string(f.State))
	}
	query := `SELECT ` + callColumns + ` FROM outbox`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	calls, err := s.queryCalls(ctx, query+" ORDER BY id", args...)
	if err != nil {
		return nil, fmt.Errorf("%s calls: %w", s.name, err)
	}
	return calls, nil
}

func (s *sqlStore) queryCalls(ctx context.Context, query string, args ...any) ([]desired.Call, error) {
	var calls []desired.Call
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				c              desired.Call
				key            string
				next, at, done sql.NullInt64
			)
			if err := rows.Scan(&c.ID, &key, &c.Kind, &c.Body, &c.Marker, &c.Target.Kind, &c.Target.ID, &c.State, &c.Attempts,
				&next, &at, &done, &c.HTTPStatus, &c.Error, &c.URL, &c.Generation, &c.Installation); err != nil {
				return err
			}
			if c.Key, err = desired.ParseKey(key); err != nil {
				return err
			}
			c.NextAttempt, c.CreatedAt, c.DoneAt = timeFromDB(next), timeFromDB(at), timeFromDB(done)
			calls = append(calls, c)
		}
		return rows.Err()
	})
	return calls, err
}

// UpdateCall records the outcome of a try at c. The error wraps
// ErrNotFound when no call has c.ID.
func (s *sqlStore) UpdateCall(ctx context.Context, c desired.Call) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE outbox SET state = ?, attempts = ?, next_attempt = ?, done_at = ?,
			http_status = ?, error = ?, url = ? WHERE id = ?`,
			string(c.State), c.Attempts, timeToDB(c.NextAttempt), timeToDB(c.DoneAt), c.HTTPStatus, c.Error, c.URL, c.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s update call %d: %w", s.name, c.ID, err)
	}
	return nil
}

// SetHeld sets or clears the operator hold of k. It bumps the generation
// even when held is unchanged, so the reconciler looks at the item again.
// The error wraps ErrNotFound for an unknown key.
func (s *sqlStore) SetHeld(ctx context.Context, k desired.Key, held bool) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := updateItem(ctx, tx, `UPDATE work_items SET held = ?, generation = generation + 1, updated_at = ?
			WHERE key = ?`, held, timeToDB(s.now()), k.String()); err != nil {
			return err
		}
		return s.d.notify(ctx, tx) // the owning host's serve carries it out
	})
	if err != nil {
		return fmt.Errorf("%s set held %s: %w", s.name, k, err)
	}
	return nil
}

// Release records an operator's release of k as a spec change: it clears
// the hold, bumps the generation, and sets Spec.ReleaseGeneration to the new
// generation and Spec.ReleaseFresh to fresh, in one transaction. The
// reconciler carries the release out once, under its lock (the status is
// not touched here). The error wraps ErrNotFound for an unknown key.
func (s *sqlStore) Release(ctx context.Context, k desired.Key, fresh bool) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := updateItem(ctx, tx, `UPDATE work_items SET held = FALSE, generation = generation + 1,
			release_generation = generation + 1, release_fresh = ?, updated_at = ? WHERE key = ?`,
			fresh, timeToDB(s.now()), k.String()); err != nil {
			return err
		}
		return s.d.notify(ctx, tx) // the owning host's serve carries it out
	})
	if err != nil {
		return fmt.Errorf("%s release %s: %w", s.name, k, err)
	}
	return nil
}

// RaiseBudget adds tokens to k's budget raise (desired.Spec.BudgetRaise)
// and bumps the generation, in one transaction; the reconciler holds the
// item no longer once its usage is under the raised budget. The error
// wraps ErrNotFound for an unknown key.
func (s *sqlStore) RaiseBudget(ctx context.Context, k desired.Key, tokens int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := updateItem(ctx, tx, `UPDATE work_items SET budget_raise = budget_raise + ?, generation = generation + 1,
			updated_at = ? WHERE key = ?`, tokens, timeToDB(s.now()), k.String()); err != nil {
			return err
		}
		return s.d.notify(ctx, tx) // the owning host's serve carries it out
	})
	if err != nil {
		return fmt.Errorf("%s raise budget %s: %w", s.name, k, err)
	}
	return nil
}

// History returns what k's agent was already given: its opening delivery
// (the first one with a prompt) and its latest deliveries, at most latest
// of them, all delivered ones, in arrival order and each once. Pending
// deliveries are not history: they are still to be sent. The error wraps
// ErrNotFound for an unknown key.
func (s *sqlStore) History(ctx context.Context, k desired.Key, latest int) ([]desired.Delivery, error) {
	var out []desired.Delivery
	err := s.read(ctx, func(tx *sql.Tx) error {
		if err := itemExists(ctx, tx, k); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, event, action, sender, prompt, received_at FROM deliveries
			WHERE work_item = ? AND state = 'delivered' AND seq IN (
				SELECT min(seq) FROM deliveries WHERE work_item = ?1 AND state <> 'state_only'
				UNION SELECT seq FROM (SELECT seq FROM deliveries WHERE work_item = ?1 AND state = 'delivered'
					ORDER BY seq DESC LIMIT ?2) AS latest)
			ORDER BY seq`, k.String(), latest)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				d  desired.Delivery
				at sql.NullInt64
			)
			if err := rows.Scan(&d.ID, &d.Event, &d.Action, &d.Sender, &d.Prompt, &at); err != nil {
				return err
			}
			d.ReceivedAt = timeFromDB(at)
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s history %s: %w", s.name, k, err)
	}
	return out, nil
}

// updateItem runs an UPDATE of one work_items row and returns ErrNotFound
// when it matched none.
func updateItem(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// AppendEvent adds e to the journal.
func (s *sqlStore) AppendEvent(ctx context.Context, e journal.Event) error {
	err := s.batched(ctx, func(ctx context.Context, tx *sql.Tx) error { return appendEvent(ctx, tx, e) })
	if err != nil {
		return fmt.Errorf("%s append event %s: %w", s.name, e.Name, err)
	}
	return nil
}

// appendEvent inserts the journal row e in tx.
func appendEvent(ctx context.Context, tx *sql.Tx, e journal.Event) error {
	attrs, err := json.Marshal(e.Attrs)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (time, name, level, work_item, attrs) VALUES (?, ?, ?, ?, ?)`,
		timeToDB(e.Time), string(e.Name), int64(e.Level), e.WorkItem, string(attrs))
	return err
}

// Events returns the journal rows f selects, oldest first (by time, then by
// order of appending): those of f.WorkItem when set, at or after f.Since when
// set, of f.Names when set, appended after f.AfterID when positive, and
// only the newest f.Limit when it is positive.
func (s *sqlStore) Events(ctx context.Context, f store.EventFilter) ([]journal.Event, error) {
	var (
		where []string
		args  []any
	)
	if f.WorkItem != "" {
		where = append(where, "work_item = ?")
		args = append(args, f.WorkItem)
	}
	if !f.Since.IsZero() {
		where = append(where, "time >= ?")
		args = append(args, timeToDB(f.Since))
	}
	if len(f.Names) > 0 {
		where = append(where, "name IN (?"+strings.Repeat(", ?", len(f.Names)-1)+")")
		for _, n := range f.Names {
			args = append(args, n)
		}
	}
	if f.AfterID > 0 {
		where = append(where, "id > ?")
		args = append(args, f.AfterID)
	}
	query := `SELECT id, time, name, level, work_item, attrs FROM events`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY time DESC, id DESC"
	if f.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, f.Limit)
	}
	events, err := queryEvents(ctx, s.db, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s events: %w", s.name, err)
	}
	slices.Reverse(events)
	return events, nil
}

func queryEvents(ctx context.Context, db *sql.DB, query string, args ...any) ([]journal.Event, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []journal.Event
	for rows.Next() {
		var (
			e     journal.Event
			at    sql.NullInt64
			level int64
			attrs string
		)
		if err := rows.Scan(&e.ID, &at, &e.Name, &level, &e.WorkItem, &attrs); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(attrs), &e.Attrs); err != nil {
			return nil, fmt.Errorf("attrs of %s at %s: %w", e.Name, timeFromDB(at), err)
		}
		e.Time = timeFromDB(at)
		e.Level = slog.Level(level)
		events = append(events, e)
	}
	return events, rows.Err()
}

// Lock takes the cross-process reconcile lock, an exclusive flock(2) on
// the file path+".lock", retrying every 50 ms until ctx ends; the error then
// wraps ErrLocked (and ctx's cause). A second Lock in the same process is
// excluded as well. unlock releases the lock and may be called more than
// once; the kernel releases it if the process dies.
func (s *sqlStore) Lock(ctx context.Context) (unlock func(), err error) {
	unlock, err = flock.Lock(ctx, s.lockPath)
	if errors.Is(err, flock.ErrLocked) {
		return nil, fmt.Errorf("%s lock %s: %w: %w", s.name, s.lockPath, store.ErrLocked, context.Cause(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("%s lock %s: %w", s.name, s.lockPath, err)
	}
	return unlock, nil
}

// Close closes the database, once the group commit in progress is done;
// an Ingest or AppendEvent still waiting for one fails with ErrClosed.
// Locks taken with Lock stay held until their unlock.
func (s *sqlStore) Close() error {
	s.stopCommitter()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%s close: %w", s.name, err)
	}
	return nil
}

// timeToDB returns t as Unix nanoseconds, or nil (NULL) for the zero time.
func timeToDB(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// timeFromDB is the inverse of timeToDB, in UTC.
func timeFromDB(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}
