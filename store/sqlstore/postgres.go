package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// pgMaxConns bounds a handle's connection pool: reads run concurrently;
// writes are serialized by sqlStore.writeSem and, across processes and
// hosts, by the writers' advisory lock (pgWriters).
const pgMaxConns = 8

// pgWriters is the key of the transaction-scoped advisory lock
// (pg_advisory_xact_lock, PostgreSQL's "Advisory Lock Functions") every
// write transaction takes at its start: the hosts' writes run one at a
// time, so what a write reads stays true until it commits, as under
// SQLite's one write lock, and rows are inserted in commit order (the
// pending deliveries' seq only grows, which pendingCache relies on). It
// also makes several hosts starting at once migrate the schema once.
// Advisory locks are per database, so two fleets on one server do not
// share it. The value is arbitrary: "loopd" in ASCII.
const pgWriters int64 = 0x6c6f6f7064

// pgChannel is the LISTEN/NOTIFY channel of a store's hosts (Listener).
const pgChannel = "loopd"

// pgMigrations holds the schema's numbered migrations, NNN_name.sql, each
// run once, in order, in the transaction that records its number in
// loopd_schema.
//
//go:embed pgschema/*.sql
var pgMigrations embed.FS

// Postgres is the Store and Fleet that several hosts share: a PostgreSQL
// database reached through pgx, opened with OpenPostgres, with the logic
// every backend shares (sqlStore). Its lease clock is the database's, so
// the hosts' clocks may disagree. It is a Listener: writes another host
// may act on are announced with NOTIFY.
type Postgres struct {
	*sqlStore
	cfg *pgx.ConnConfig // for Listen's own connection
	// secret is the URL's password, scrubbed from every error text.
	secret string
	// down is why Listen does not listen now (ListenDown); nil while it
	// does.
	down atomic.Pointer[error]
}

var (
	_ store.Store    = (*Postgres)(nil)
	_ store.Fleet    = (*Postgres)(nil)
	_ store.Listener = (*Postgres)(nil)
)

// OpenPostgres connects to the PostgreSQL database at rawURL (a
// postgres:// URL, pgx's connection string) and migrates its schema to the
// current version. The reconcile lock (Lock) is the file lockPath, on this
// host: each host reconciles its own items. No error text holds the URL's
// password (RedactURL).
func OpenPostgres(ctx context.Context, rawURL, lockPath string) (*Postgres, error) {
	shown, secret := RedactURL(rawURL), urlPassword(rawURL)
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres open %s: %w", shown, scrub(err, secret))
	}
	// A write waits for another host's at most busyTimeout (a shorter
	// deadline sets its own, pgDialect.writeTx).
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(busyTimeout.Milliseconds(), 10)
	db := sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)})
	db.SetMaxOpenConns(pgMaxConns)
	db.SetMaxIdleConns(pgMaxConns)
	p := &Postgres{sqlStore: newSQLStore(db, pgDialect{notifying: new(atomic.Bool)}, "postgres", lockPath), cfg: cfg, secret: secret}
	p.setDown(errors.New("not listening yet"))
	if err := db.PingContext(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres open %s: %w", shown, scrub(err, secret))
	}
	if err := p.write(ctx, migratePostgres); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres migrate %s: %w", shown, scrub(err, secret))
	}
	return p, nil
}

// migratePostgres runs the migrations of pgMigrations past the version
// loopd_schema records, in the caller's write transaction (which holds
// pgWriters): a failed step leaves the schema as it was.
func migratePostgres(tx *sql.Tx) error {
	if _, err := tx.Exec(`CREATE TABLE IF NOT EXISTS loopd_schema (version INTEGER PRIMARY KEY)`); err != nil {
		return err
	}
	var v int
	if err := tx.QueryRow(`SELECT coalesce(max(version), 0) FROM loopd_schema`).Scan(&v); err != nil {
		return err
	}
	names, err := fs.Glob(pgMigrations, "pgschema/*.sql")
	if err != nil {
		return err
	}
	if v > len(names) {
		return fmt.Errorf("schema version %d is newer than this loopd's %d", v, len(names))
	}
	for i, name := range names { // fs.Glob sorts: NNN_ orders them
		n := i + 1
		if want := fmt.Sprintf("%03d_", n); !strings.HasPrefix(path.Base(name), want) {
			return fmt.Errorf("migration %s is not number %d", name, n)
		}
		if n <= v {
			continue
		}
		text, err := pgMigrations.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(string(text)); err != nil {
			return fmt.Errorf("to version %d (%s): %w", n, path.Base(name), err)
		}
		if _, err := tx.Exec(`INSERT INTO loopd_schema (version) VALUES (?)`, n); err != nil {
			return err
		}
	}
	return nil
}

// pgDialect is PostgreSQL's way with what the backends do differently.
type pgDialect struct {
	// notifying is set by notify during a writeTx, which then sends the
	// one NOTIFY before it commits (writes take turns, writeSem).
	notifying *atomic.Bool
}

// writeTx runs fn in a READ COMMITTED transaction, ended by the server
// once it sits idle for schema.PostgresIdleInWrite, that first takes the
// writers' advisory lock (pgWriters), waiting for it at most busy
// (lock_timeout; PostgreSQL answers SQLSTATE 55P03 past it): each
// statement of fn sees every write committed before, and no other write
// runs until this one commits or rolls back. When fn called notify, one
// NOTIFY on pgChannel is queued before the commit, which sends it.
func (d pgDialect) writeTx(ctx context.Context, db *sql.DB, busy time.Duration, fn func(*sql.Tx) error) error {
	d.notifying.Store(false)
	return inTx(ctx, db, nil, func(tx *sql.Tx) error {
		idle := strconv.FormatInt(schema.PostgresIdleInWrite.Milliseconds(), 10)
		if busy < busyTimeout {
			// 0 would mean no timeout at all. It is set before the
			// lock is asked for, in a statement of its own.
			ms := max(busy.Milliseconds(), 1)
			if _, err := tx.ExecContext(ctx, `SELECT set_config('lock_timeout', ?, true)`, strconv.FormatInt(ms, 10)); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `SELECT set_config('idle_in_transaction_session_timeout', ?, true), pg_advisory_xact_lock(?)`,
			idle, pgWriters); err != nil {
			return fmt.Errorf("writers' lock: %w", err)
		}
		if err := fn(tx); err != nil {
			return err
		}
		if !d.notifying.Load() {
			return nil
		}
		_, err := tx.ExecContext(ctx, `SELECT pg_notify(?, '')`, pgChannel)
		return err
	})
}

// readOpts: REPEATABLE READ, so that every statement of a read sees the
// snapshot of its first (READ COMMITTED, the default, takes one per
// statement).
func (pgDialect) readOpts() *sql.TxOptions {
	return &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead}
}

// alive: a PostgreSQL store is what its server serves; an error of
// reaching it comes from the transaction itself.
func (pgDialect) alive() error { return nil }

// clock is the database server's clock (clock_timestamp(), exact to the
// microsecond), which every host shares whatever its own clock says.
func (pgDialect) clock(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	var ns int64
	err := tx.QueryRowContext(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint`).Scan(&ns)
	return time.Unix(0, ns).UTC(), err
}

// notify asks writeTx to queue a NOTIFY on pgChannel before tx commits,
// which PostgreSQL sends when it does: one per transaction, however many
// of its writes ask, in one round trip.
func (d pgDialect) notify(context.Context, *sql.Tx) error {
	d.notifying.Store(true)
	return nil
}

// jsonList is PostgreSQL's json_array_elements_text.
func (pgDialect) jsonList() string {
	return `SELECT json_array_elements_text(CAST(CAST(? AS text) AS json))`
}

// Listen calls wake within milliseconds of each write of another handle
// (any host) that it may act on: an ingest that changed something, an
// Assign that moved items, a ReleaseLease, a SetDraining, a SetHeld or a
// Release. It holds its own connection, LISTENing on pgChannel, and
// reconnects and journals its outages to j as relisten says. It returns
// ctx's cause when ctx ends.
func (p *Postgres) Listen(ctx context.Context, wake func(), j store.ListenJournal) error {
	return relisten(ctx, wake, j, func(ctx context.Context, connected func()) error {
		return scrub(p.listen(ctx, wake, connected), p.secret)
	}, func(err error) {
		if err == nil {
			p.down.Store(nil)
			return
		}
		p.setDown(err)
	})
}

// ListenDown implements store.Listener: why Listen does not listen now,
// wrapping store.ErrListenDown; nil while it does.
func (p *Postgres) ListenDown() error {
	if e := p.down.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *Postgres) setDown(cause error) {
	err := fmt.Errorf("%w: %w", store.ErrListenDown, cause)
	p.down.Store(&err)
}

// listen connects, LISTENs, calls connected, then wake on every
// notification until the connection or ctx fails.
func (p *Postgres) listen(ctx context.Context, wake, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, p.cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgChannel); err != nil {
		return err
	}
	connected()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// RedactURL returns rawURL with its password, if any, replaced by
// "xxxxx", for error texts and logs: the user info's, and the password
// query parameter's (pgx reads both). A URL that does not parse comes back
// as "(unparsable URL)", since its password cannot be found.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// urlPassword returns the password rawURL holds: in its user info, or as
// its password query parameter (pgx reads both). "" when none.
func urlPassword(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return pw
	}
	return u.Query().Get("password")
}

// scrub returns err with every occurrence of secret in its text replaced,
// keeping err for errors.Is and errors.As; nil for nil.
func scrub(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return scrubbed{err: err, text: strings.ReplaceAll(err.Error(), secret, "xxxxx")}
}

type scrubbed struct {
	err  error
	text string
}

func (e scrubbed) Error() string { return e.text }
func (e scrubbed) Unwrap() error { return e.err }

// rebindConnector makes the connections of a Postgres handle: pgx's
// database/sql connections (stdlib.Conn) that take the core's SQL, written
// with SQLite's ? and ?N placeholders, and run it with PostgreSQL's $N
// (rebind), so that both backends run one text.
type rebindConnector struct{ driver.Connector }

func (c rebindConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := conn.(*stdlib.Conn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("pgx connector made a %T, not a *stdlib.Conn", conn)
	}
	return &rebindConn{sc}, nil
}

// rebindConn is a stdlib.Conn whose statements are rebound; everything
// else (transactions, pings, session resets) is pgx's own.
type rebindConn struct{ *stdlib.Conn }

func (c *rebindConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c *rebindConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c *rebindConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c *rebindConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// rebound caches rebind's answers by query text: the core's texts are a
// few dozen constants and combinations of filters.
var rebound sync.Map

// rebind rewrites SQLite's placeholders in query to PostgreSQL's: ?N
// becomes $N, and a bare ? the number after the largest so far, as SQLite
// numbers them (https://sqlite.org/lang_expr.html#parameters). A ? inside
// a quoted literal or identifier is left alone.
func rebind(query string) string {
	if v, ok := rebound.Load(query); ok {
		return v.(string)
	}
	if !strings.Contains(query, "?") {
		return query
	}
	var (
		b     strings.Builder
		last  int
		quote byte
	)
	b.Grow(len(query) + 8)
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
			b.WriteByte(c)
		case c == '\'' || c == '"':
			quote = c
			b.WriteByte(c)
		case c == '?':
			j := i + 1
			for j < len(query) && query[j] >= '0' && query[j] <= '9' {
				j++
			}
			n := last + 1
			if j > i+1 {
				n, _ = strconv.Atoi(query[i+1 : j])
			}
			last = max(last, n)
			b.WriteString("$" + strconv.Itoa(n))
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	out := b.String()
	rebound.Store(query, out)
	return out
}
