package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// sqliteParams configures every connection (modernc.org/sqlite DSN keys; the
// pragmas are documented at https://sqlite.org/pragma.html):
//   - busy_timeout 5000 ms: a writer in another process (the daemon and a cron
//     `reconcile --once`) is waited for, not reported as SQLITE_BUSY;
//   - journal_mode WAL: readers never block the writer, nor it them;
//   - synchronous FULL: with WAL, each commit fsyncs the log before it
//     returns, so a delivery acknowledged to GitHub after Ingest committed
//     survives a power loss too, not only a killed daemon (NORMAL could lose
//     the last commits on an OS crash). It costs one fsync per write;
//   - foreign_keys on: a delivery always belongs to a stored work item;
//   - _txlock immediate: a write transaction takes the write lock at BEGIN,
//     so it never fails with SQLITE_BUSY halfway when another process wrote
//     after it read (https://sqlite.org/lang_transaction.html).
const sqliteParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"

// sqliteMaxConns bounds the connection pool. Reads run concurrently under
// WAL; writes are serialized by sqlStore.writeSem before they take one.
const sqliteMaxConns = 4

// schemaVersion is the PRAGMA user_version the migrations below reach.
const schemaVersion = 18

// vacuumVersion is the schema version from which the file is in
// auto_vacuum INCREMENTAL mode (incrementalVacuum).
const vacuumVersion = 10

// migrations[i] takes the schema from user_version i to i+1. The tables are
// STRICT and constrained so that a hand edit with a wrong type or shape is
// refused by SQLite itself; only the status JSON can be unreadable.
//
// A deliveries row is 'pending' (queued for the agent), 'delivered' (handed
// to the harness, see PutStatus) or 'state_only' (nothing to send: an
// open/closed change, an event Ingest did not queue, a delivery dropped by
// Drop; kept so that its id stays claimed). seq is arrival order.
var migrations = []string{
	`CREATE TABLE work_items (
		key              TEXT PRIMARY KEY,
		owner            TEXT NOT NULL CHECK (owner <> ''),
		repo             TEXT NOT NULL CHECK (repo <> ''),
		number           INTEGER NOT NULL CHECK (number > 0),
		kind             TEXT NOT NULL,
		harness          TEXT NOT NULL,
		cwd              TEXT NOT NULL,
		closed           INTEGER NOT NULL CHECK (closed IN (0, 1)),
		state_changed_at INTEGER,
		held             INTEGER NOT NULL CHECK (held IN (0, 1)),
		generation       INTEGER NOT NULL,
		status           TEXT NOT NULL,
		updated_at       INTEGER NOT NULL,
		CHECK (key = owner || '/' || repo || '#' || number)
	) STRICT;
	CREATE INDEX work_items_by_key_parts ON work_items (owner, repo, number);

	CREATE TABLE deliveries (
		seq          INTEGER PRIMARY KEY AUTOINCREMENT,
		id           TEXT NOT NULL UNIQUE,
		work_item    TEXT NOT NULL REFERENCES work_items (key),
		event        TEXT NOT NULL,
		action       TEXT NOT NULL,
		sender       TEXT NOT NULL,
		prompt       TEXT NOT NULL,
		received_at  INTEGER,
		state        TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'state_only')),
		delivered_at INTEGER
	) STRICT;
	CREATE INDEX deliveries_pending ON deliveries (work_item, seq) WHERE state = 'pending';

	CREATE TABLE events (
		id        INTEGER PRIMARY KEY AUTOINCREMENT,
		time      INTEGER,
		name      TEXT NOT NULL,
		level     INTEGER NOT NULL,
		work_item TEXT NOT NULL,
		attrs     TEXT NOT NULL
	) STRICT;
	CREATE INDEX events_by_work_item ON events (work_item, time);
	CREATE INDEX events_by_time ON events (time);`,

	// v2: the latest session id each item's harness reported about itself.
	`CREATE TABLE session_reports (
		work_item  TEXT PRIMARY KEY REFERENCES work_items (key),
		session_id TEXT NOT NULL,
		source     TEXT NOT NULL,
		at         INTEGER
	) STRICT;`,

	// v3: loopd release as a spec change (Spec.ReleaseGeneration,
	// Spec.ReleaseFresh).
	`ALTER TABLE work_items ADD COLUMN release_generation INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE work_items ADD COLUMN release_fresh INTEGER NOT NULL DEFAULT 0 CHECK (release_fresh IN (0, 1));`,

	// v4: a pull request's head branch in its own repository
	// (Spec.HeadRef), which its worktree checks out.
	`ALTER TABLE work_items ADD COLUMN head_ref TEXT NOT NULL DEFAULT '';`,

	// v5: a pull request's head commit and the time of the payload that
	// named it (Spec.HeadSHA), the commit a delivery is about
	// (Delivery.Commit), and the CI failures already prompted per item
	// (the claims that v11 replaces).
	`ALTER TABLE work_items ADD COLUMN head_sha TEXT NOT NULL DEFAULT '';
	ALTER TABLE work_items ADD COLUMN head_at INTEGER;
	ALTER TABLE deliveries ADD COLUMN commit_sha TEXT NOT NULL DEFAULT '';
	CREATE TABLE check_claims (
		work_item TEXT NOT NULL REFERENCES work_items (key),
		claim     TEXT NOT NULL,
		delivery  TEXT NOT NULL,
		PRIMARY KEY (work_item, claim)
	) STRICT;`,
	// v6: what on GitHub a delivery came from (Delivery.Source), and the
	// outbox of calls to GitHub's REST API (Call), each written in the
	// transaction of the status change that caused it.
	`ALTER TABLE deliveries ADD COLUMN source_kind TEXT NOT NULL DEFAULT '';
	ALTER TABLE deliveries ADD COLUMN source_id INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE outbox (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		work_item    TEXT NOT NULL REFERENCES work_items (key),
		kind         TEXT NOT NULL CHECK (kind IN ('announce', 'react', 'notify')),
		body         TEXT NOT NULL,
		marker       TEXT NOT NULL,
		target_kind  TEXT NOT NULL,
		target_id    INTEGER NOT NULL,
		state        TEXT NOT NULL CHECK (state IN ('pending', 'posted', 'failed')),
		attempts     INTEGER NOT NULL CHECK (attempts >= 0),
		next_attempt INTEGER,
		created_at   INTEGER,
		done_at      INTEGER,
		http_status  INTEGER NOT NULL,
		error        TEXT NOT NULL,
		url          TEXT NOT NULL
	) STRICT;
	CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending';
	CREATE INDEX outbox_by_work_item ON outbox (work_item, id);`,

	// v7: what the planner reads of a delivery instead of its body
	// (Delivery.Compact): the prompt's length in bytes, its header line
	// and its frame's digest, filled for the pending rows already stored
	// (backfills). The index of pending deliveries holds every column
	// Records reads of them, so that a pass reads the index alone, never
	// a row with its body.
	`ALTER TABLE deliveries ADD COLUMN prompt_bytes INTEGER NOT NULL DEFAULT 0 CHECK (prompt_bytes >= 0);
	ALTER TABLE deliveries ADD COLUMN prompt_header TEXT NOT NULL DEFAULT '';
	ALTER TABLE deliveries ADD COLUMN frame_digest TEXT NOT NULL DEFAULT '';
	DROP INDEX deliveries_pending;
	CREATE INDEX deliveries_pending ON deliveries (work_item, seq, id, event, action, sender, received_at, commit_sha,
		source_kind, source_id, prompt_bytes, prompt_header, frame_digest) WHERE state = 'pending';`,

	// v8: the Fleet (fleet.go): the members sharing the store, each item's
	// lease (its owner host and fencing generation), the generation each
	// outbox row was written under, and the copies of the transcripts.
	// Times are Unix nanoseconds, lease_ttl nanoseconds.
	`CREATE TABLE hosts (
		name      TEXT PRIMARY KEY CHECK (name <> ''),
		capacity  INTEGER NOT NULL CHECK (capacity >= 0),
		lease_ttl INTEGER NOT NULL CHECK (lease_ttl > 0),
		draining  INTEGER NOT NULL CHECK (draining IN (0, 1)),
		heartbeat INTEGER NOT NULL
	) STRICT;
	ALTER TABLE work_items ADD COLUMN lease_owner TEXT NOT NULL DEFAULT '';
	ALTER TABLE work_items ADD COLUMN lease_generation INTEGER NOT NULL DEFAULT 0 CHECK (lease_generation >= 0);
	CREATE INDEX work_items_by_lease_owner ON work_items (lease_owner);
	ALTER TABLE outbox ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
	CREATE TABLE transcripts (
		work_item  TEXT NOT NULL REFERENCES work_items (key),
		session_id TEXT NOT NULL,
		off        INTEGER NOT NULL CHECK (off >= 0),
		data       BLOB NOT NULL,
		PRIMARY KEY (work_item, session_id, off)
	) STRICT;`,

	// v9: the instance (Host.Instance) that heartbeats under each host
	// name, so that two live daemons never share one; '' for a row
	// written before.
	`ALTER TABLE hosts ADD COLUMN instance TEXT NOT NULL DEFAULT '';`,

	// v10: the file is in auto_vacuum INCREMENTAL mode, so that
	// Retention.Vacuum can give the pages of pruned and forgotten rows
	// back. No SQL here: the mode is switched by a VACUUM, which cannot
	// run in a transaction, before this step (incrementalVacuum).
	``,

	// v11: what decides whether an item's harness may read its workdir's
	// own settings (reconciler.ProjectSettingsOf): a pull request's head
	// repository (Spec.HeadRepo), who opened the item (Spec.Author) and who
	// pushed its head commit (Spec.HeadPusher).
	`ALTER TABLE work_items ADD COLUMN head_repo TEXT NOT NULL DEFAULT '';
	ALTER TABLE work_items ADD COLUMN author TEXT NOT NULL DEFAULT '';
	ALTER TABLE work_items ADD COLUMN head_pusher TEXT NOT NULL DEFAULT '';`,

	// v12: GitHub as it behaves. Each delivery's own identity
	// (store.Ingest.Identity), one per item, so that a replay under another
	// delivery id changes nothing; the time of each item's last
	// open/closed change (store.Ingest's old events); the items by head commit
	// (store.Store.Heads); and the CI of each pull request item's commit
	// (store.Ingest.CI), which replaces the claims of one prompt per check.
	`ALTER TABLE deliveries ADD COLUMN identity TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX deliveries_by_identity ON deliveries (work_item, identity) WHERE identity <> '';
	ALTER TABLE work_items ADD COLUMN flipped_at INTEGER;
	CREATE INDEX work_items_by_head ON work_items (head_sha) WHERE head_sha <> '';
	DROP TABLE check_claims;
	CREATE TABLE ci_commits (
		work_item  TEXT NOT NULL REFERENCES work_items (key),
		commit_sha TEXT NOT NULL,
		state      TEXT NOT NULL CHECK (state IN ('collecting', 'sent', 'stale')),
		checks     TEXT NOT NULL,
		failed     INTEGER NOT NULL CHECK (failed >= 0),
		last_at    INTEGER,
		delivery   TEXT NOT NULL,
		PRIMARY KEY (work_item, commit_sha)
	) STRICT;
	CREATE INDEX ci_commits_collecting ON ci_commits (last_at) WHERE state = 'collecting' AND failed > 0;`,

	// v13: the pauses of each installation's GitHub calls that its rate
	// limits asked for (desired.Pause).
	`CREATE TABLE github_pauses (
		installation TEXT NOT NULL CHECK (installation <> ''),
		kind         TEXT NOT NULL CHECK (kind IN ('secondary', 'primary')),
		until        INTEGER,
		since        INTEGER,
		streak       INTEGER NOT NULL CHECK (streak >= 0),
		http_status  INTEGER NOT NULL,
		message      TEXT NOT NULL,
		PRIMARY KEY (installation, kind)
	) STRICT;`,

	// v14: whether a fork's pull request lets the base repository's
	// maintainers push to its head (desired.Spec.MaintainerCanModify).
	`ALTER TABLE work_items ADD COLUMN maintainer_can_modify INTEGER NOT NULL DEFAULT 0 CHECK (maintainer_can_modify IN (0, 1));`,

	// v15: the or pull request's title and page (desired.Spec.Title,
	// URL).
	`ALTER TABLE work_items ADD COLUMN title TEXT NOT NULL DEFAULT '';
	ALTER TABLE work_items ADD COLUMN url TEXT NOT NULL DEFAULT '';`,

	// v16: the GitHub App installation the item's deliveries came through
	// (desired.Spec.Installation), 0 for none named.
	`ALTER TABLE work_items ADD COLUMN installation INTEGER NOT NULL DEFAULT 0;`,

	// v17 (budget raise): the tokens operators added to the item's token
	// budget (desired.Spec.BudgetRaise).
	`ALTER TABLE work_items ADD COLUMN budget_raise INTEGER NOT NULL DEFAULT 0 CHECK (budget_raise >= 0);`,

	// v18 (approvals): a delivery that answers a question of the item's
	// agent (desired.Delivery.Answer, as JSON; '' for an event), and the
	// question it answers, one answer per question instance (the unique
	// index: a second answer, a replay or a redelivery takes nothing). The
	// index of pending deliveries holds the answer too (compactColumns).
	`ALTER TABLE deliveries ADD COLUMN answer TEXT NOT NULL DEFAULT '';
	ALTER TABLE deliveries ADD COLUMN answer_to TEXT NOT NULL DEFAULT '';
	CREATE UNIQUE INDEX deliveries_by_answer ON deliveries (work_item, answer_to) WHERE answer_to <> '';
	DROP INDEX deliveries_pending;
	CREATE INDEX deliveries_pending ON deliveries (work_item, seq, ` + compactColumns + `) WHERE state = 'pending';`,
}

// backfills[v] runs right after migrations[v-1] took the schema to version
// v, in the same transaction: what SQL alone cannot fill in.
var backfills = map[int]func(*sql.Tx) error{7: fillCompact}

// fillCompact fills the compact columns of the pending deliveries stored
// before version 7 from their prompts (Delivery.Compact). Delivered rows
// keep zeros: nothing reads them compact (History reads the prompt).
func fillCompact(tx *sql.Tx) error {
	rows, err := tx.Query(`SELECT seq, id, prompt FROM deliveries WHERE state = 'pending'`)
	if err != nil {
		return err
	}
	type fill struct {
		seq int64
		d   desired.Delivery
	}
	var fills []fill
	for rows.Next() {
		var f fill
		if err := rows.Scan(&f.seq, &f.d.ID, &f.d.Prompt); err != nil {
			rows.Close()
			return err
		}
		f.d = f.d.Compact() // only the compact form is kept
		fills = append(fills, f)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, f := range fills {
		if _, err := tx.Exec(`UPDATE deliveries SET prompt_bytes = ?, prompt_header = ?, frame_digest = ? WHERE seq = ?`,
			f.d.Size, f.d.Header, f.d.Digest, f.seq); err != nil {
			return err
		}
	}
	return nil
}

// SQLite is the embedded Store: one SQLite file in WAL mode, opened with
// OpenSQLite, with the logic every backend shares (sqlStore). The fleet it
// serves is one host and the cron passes that share its state dir: its
// lease clock is this process's.
type SQLite struct {
	*sqlStore
	wake *wake
}

var (
	_ store.Store    = (*SQLite)(nil)
	_ store.Fleet    = (*SQLite)(nil)
	_ store.Listener = (*SQLite)(nil)
)

// OpenSQLite opens (creating when missing) the store at path, a file name,
// and migrates its schema to the current version. The directory of path is
// created with mode 0700 when missing. The store's files are its owner's
// alone (privateFiles). The reconcile lock (Lock) is the file path+".lock".
// path must not contain '?'.
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	if strings.Contains(path, "?") {
		return nil, fmt.Errorf("sqlite open %s: path must not contain '?'", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite open %s: %w", path, err)
	}
	if err := privateFiles(path); err != nil {
		return nil, fmt.Errorf("sqlite open %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", path+"?"+sqliteParams)
	if err != nil {
		return nil, fmt.Errorf("sqlite open %s: %w", path, err)
	}
	db.SetMaxOpenConns(sqliteMaxConns)
	db.SetMaxIdleConns(sqliteMaxConns)
	// Open the whole pool now: a connection runs sqliteParams' pragmas when
	// it opens, and journal_mode(WAL) waits for another process's lock
	// without looking at any context. Opened here, none opens later under
	// someone else's lock, past a delivery's deadline.
	conns := make([]*sql.Conn, 0, sqliteMaxConns)
	for range sqliteMaxConns {
		c, err := db.Conn(ctx)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	opened, err := os.Stat(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite open %s: %w", path, err)
	}
	w := &wake{path: path + wakeSuffix}
	w.setDown(errors.New("not listening"))
	s := &SQLite{sqlStore: newSQLStore(db, sqliteDialect{path: path, opened: opened, wake: w}, "sqlite", path+".lock"), wake: w}
	// A file already at this schema needs no write: a reader (loopd get,
	// loopd events) opens it while another process holds the write lock.
	var v int
	if err := s.read(ctx, func(tx *sql.Tx) error { return tx.QueryRow(`PRAGMA user_version`).Scan(&v) }); err != nil || v != schemaVersion {
		if v < vacuumVersion {
			if err := s.incrementalVacuum(ctx); err != nil {
				s.Close()
				return nil, fmt.Errorf("sqlite migrate %s: auto_vacuum: %w", path, err)
			}
		}
		if err := s.write(ctx, migrate); err != nil {
			s.Close()
			return nil, fmt.Errorf("sqlite migrate %s: %w", path, err)
		}
	}
	return s, nil
}

// sqliteFiles are the suffixes of the files of the store at a path: the
// database, its write-ahead log and shared-memory index (WAL mode), the
// reconcile lock, and the wake file (Listen).
var sqliteFiles = []string{"", "-wal", "-shm", ".lock", wakeSuffix}

// privateFiles makes the store at path readable and writable by its owner
// alone: the database file is created with mode 0600 when missing, so that
// SQLite, which makes the -wal and -shm files with the database file's
// mode (its unix VFS, findCreateFileMode and unixOpenSharedMemory), makes
// them 0600 too; each of the store's files that exists with more is
// tightened to 0600. The store holds every event's text and the
// transcripts copied between hosts.
func privateFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrExist):
		return err
	}
	for _, suffix := range sqliteFiles {
		st, err := os.Stat(path + suffix)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path+suffix, st.Mode().Perm()&0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

// incrementalVacuum puts the file in auto_vacuum INCREMENTAL mode
// (https://sqlite.org/pragma.html#pragma_auto_vacuum) unless it is: the
// mode applies at once to a file with no table yet, and takes a VACUUM,
// which rewrites the whole file, for one made before schema version 10.
// VACUUM cannot run in a transaction: it runs on a connection of its own,
// in this process's turn of the writers, and waits for another process's
// writer as any write does (busy_timeout).
func (s *SQLite) incrementalVacuum(ctx context.Context) error {
	release, err := s.takeWriters(ctx)
	if err != nil {
		return err
	}
	defer release()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode int
	if err := conn.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return err
	}
	const incremental = 2 // PRAGMA auto_vacuum's value for INCREMENTAL
	if mode == incremental {
		return nil
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, `VACUUM`)
	return err
}

// migrate applies the migrations past the file's user_version. It runs in
// a write transaction, so two processes opening a new file at once create
// the schema once, and a failed step leaves the file as it was.
func migrate(tx *sql.Tx) error {
	var v int
	if err := tx.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this loopd's %d", v, schemaVersion)
	}
	for ; v < schemaVersion; v++ {
		if migrations[v] == "" {
			continue // a step done outside the transaction
		}
		if _, err := tx.Exec(migrations[v]); err != nil {
			return fmt.Errorf("to version %d: %w", v+1, err)
		}
		if fill := backfills[v+1]; fill != nil {
			if err := fill(tx); err != nil {
				return fmt.Errorf("fill version %d: %w", v+1, err)
			}
		}
	}
	// PRAGMA takes no bound parameters; v is an int.
	_, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v))
	return err
}

// ErrFileGone is wrapped by every read and write of a SQLite store whose
// file is no longer the one OpenSQLite opened: removed (a state dir
// deleted under a running serve), or replaced by another file. What such
// a store wrote would go to an unlinked file and be lost with it, so it
// writes nothing: an ingest fails (the webhook answers 503, and GitHub
// keeps the delivery to redeliver), and /readyz says why.
var ErrFileGone = errors.New("store file removed or replaced since it was opened")

// sqliteDialect is SQLite's way with what the backends do differently.
type sqliteDialect struct {
	// path is the store's file, and opened what it was when OpenSQLite
	// opened it (its device and inode: os.SameFile).
	path   string
	opened os.FileInfo
	// wake announces this process's committed changes to the store's
	// listeners (notify, then writeTx once committed).
	wake *wake
}

// alive returns an error wrapping ErrFileGone when the file at d.path is
// not the one the store opened: its connections read and write that one.
func (d sqliteDialect) alive() error {
	now, err := os.Stat(d.path)
	if err != nil || !os.SameFile(now, d.opened) {
		return fmt.Errorf("%s: %w", d.path, ErrFileGone)
	}
	return nil
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE: sqliteParams'
// _txlock takes SQLite's one write lock at BEGIN) on a connection whose
// busy_timeout is busy. SQLite's busy handler sleeps without looking at
// the context, so a deadline sooner than busyTimeout lowers the
// connection's busy_timeout to the time left.
func (d sqliteDialect) writeTx(ctx context.Context, db *sql.DB, busy time.Duration, fn func(*sql.Tx) error) error {
	if err := d.alive(); err != nil {
		return err
	}
	// This process's writes take turns (sqlStore.writeSem), so what
	// notify asked for is this transaction's alone.
	d.wake.pending.Store(false)
	if err := d.inWriteTx(ctx, db, busy, fn); err != nil {
		return err
	}
	d.wake.announce()
	return nil
}

// inWriteTx runs fn in a write transaction on a connection whose
// busy_timeout is busy (writeTx).
func (sqliteDialect) inWriteTx(ctx context.Context, db *sql.DB, busy time.Duration, fn func(*sql.Tx) error) error {
	if busy == busyTimeout {
		return inTx(ctx, db, nil, fn)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// PRAGMA takes no bound parameters; the value is an int.
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, busy.Milliseconds())); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf(`PRAGMA busy_timeout = %d`, busyTimeout.Milliseconds()))
	return inTx(ctx, conn, nil, fn)
}

// readOpts: a read transaction of SQLite sees one snapshot of the file.
func (sqliteDialect) readOpts() *sql.TxOptions { return &sql.TxOptions{ReadOnly: true} }

// clock is this process's clock: the hosts sharing a SQLite file share
// the machine's clock.
func (sqliteDialect) clock(context.Context, *sql.Tx) (time.Time, error) { return time.Now(), nil }

// notify asks writeTx to announce the change once tx commits (wake): the
// processes on one SQLite file share a host, and its listener watches the
// wake file beside the store's.
func (d sqliteDialect) notify(context.Context, *sql.Tx) error {
	d.wake.pending.Store(true)
	return nil
}

// jsonList is SQLite's json_each (https://sqlite.org/json1.html).
func (sqliteDialect) jsonList() string { return `SELECT value FROM json_each(?)` }
