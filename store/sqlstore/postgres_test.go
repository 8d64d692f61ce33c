package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/pgtest"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
	"github.com/loopd/loopd/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// postgresBackend opens handles on a new database of the test binary's
// throwaway cluster (pgtest), each with the same host-local lock file.
var postgresBackend = storetest.Backend{
	New: func(t *testing.T) func(*testing.T) store.Store {
		url, lock := pgtest.URL(t), filepath.Join(t.TempDir(), "loopd.lock")
		return func(t *testing.T) store.Store {
			s, err := sqlstore.OpenPostgres(t.Context(), url, lock)
			require.NoError(t, err)
			return s
		}
	},
	EditStatus: func(t *testing.T, s store.Store, k desired.Key, text string) {
		require.NoError(t, sqlstore.EditStatus(s, k, text))
	},
}

// TestPostgresConformance runs the Store contract against the PostgreSQL
// store, on a new database for each case.
func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, postgresBackend)
}

// TestPostgresFleet runs the Fleet contract against the PostgreSQL store,
// a Listener.
func TestPostgresFleet(t *testing.T) {
	b := postgresBackend
	b.Listens = true
	storetest.RunFleet(t, b)
}

// TestPostgresListenReconnects: when the listening connection is killed
// (pg_terminate_backend, as a server restart or a dropped link would),
// Listen reconnects, wakes its caller at once (a notification may have
// been missed), journals store.listen_restored with the reason, and
// notifications wake it again.
func TestPostgresListenReconnects(t *testing.T) {
	url := pgtest.URL(t)
	lock := filepath.Join(t.TempDir(), "loopd.lock")
	open := func() *sqlstore.Postgres {
		s, err := sqlstore.OpenPostgres(t.Context(), url, lock)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	listener, writer := open(), open()
	require.ErrorIs(t, listener.ListenDown(), store.ErrListenDown, "not listening before Listen")
	ctx, cancel := context.WithCancel(context.Background())
	wakes := make(chan struct{}, 64)
	done := make(chan error, 1)
	rec := journal.NewRecorder(slog.New(slog.DiscardHandler), listener, time.Now)
	go func() {
		done <- listener.Listen(ctx, func() { wakes <- struct{}{} }, store.ListenJournal{Recorder: rec, Host: "host-a"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	k := desired.Key{Owner: "acme", Repo: "api", Number: 1}
	n := 0
	ingestUntilWoken := func(what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			n++
			_, err := writer.Ingest(context.Background(), store.Ingest{DeliveryID: fmt.Sprintf("d-%d", n), Key: k,
				Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/src/api",
				Delivery: &desired.Delivery{Event: "issue_comment", Action: "created", Prompt: "event=issue_comment\nhi"}})
			require.NoError(t, err)
			select {
			case <-wakes:
				return true
			case <-time.After(100 * time.Millisecond):
				return false
			}
		}, 10*time.Second, 10*time.Millisecond, what)
	}
	ingestUntilWoken("the listener connected")
	assert.NoError(t, listener.ListenDown(), "listening")

	admin, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	for len(wakes) > 0 {
		<-wakes
	}
	var killed int
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN loopd'`).Scan(&killed))
	require.Equal(t, 1, killed, "the listening connection")
	select {
	case <-wakes:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake after the reconnect")
	}
	ingestUntilWoken("notifications after the reconnect")
	assert.NoError(t, listener.ListenDown(), "listening again")

	evs, err := writer.Events(context.Background(), store.EventFilter{})
	require.NoError(t, err)
	var restored []journal.Event
	for _, e := range evs {
		if e.Name == journal.StoreListenRestored {
			restored = append(restored, e)
		}
	}
	require.Len(t, restored, 1)
	assert.Equal(t, "listen_connection_lost", restored[0].Attrs[journal.KeyReason])
	assert.Equal(t, "host-a", restored[0].Attrs[journal.KeyHost], "the host whose listener it was")
	assert.NotEmpty(t, restored[0].Attrs[journal.KeyErr])

	// While no connection can be made, ListenDown says why; once one can,
	// it is nil again.
	var db string
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db))
	other, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	other.Database = "postgres" // a database may not close its own door
	outside, err := pgx.ConnectConfig(context.Background(), other)
	require.NoError(t, err)
	defer outside.Close(context.Background())
	_, err = outside.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH ALLOW_CONNECTIONS false`)
	require.NoError(t, err)
	allow := func() {
		_, err := outside.Exec(context.Background(), `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH ALLOW_CONNECTIONS true`)
		require.NoError(t, err)
	}
	defer allow()
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN loopd'`).Scan(&killed))
	require.Eventually(t, func() bool { return errors.Is(listener.ListenDown(), store.ErrListenDown) }, 10*time.Second, 10*time.Millisecond,
		"down while it cannot connect")
	allow()
	require.Eventually(t, func() bool { return listener.ListenDown() == nil }, 15*time.Second, 10*time.Millisecond, "up once it can")
}

// TestPostgresURLPasswordNeverShown: an error of OpenPostgres names the
// URL with its password redacted, whether the password is in the user
// info or a query parameter, and the URL parses or not.
func TestPostgresURLPasswordNeverShown(t *testing.T) {
	const pw = "s3cret-Pa55"
	port := closedPort(t)
	lock := filepath.Join(t.TempDir(), "loopd.lock")
	for _, url := range []string{
		fmt.Sprintf("postgres://loopd:%s@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2", pw, port),
		fmt.Sprintf("postgres://loopd@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2&password=%s", port, pw),
		fmt.Sprintf("postgres://loopd:%s@127.0.0.1:%d/db?sslmode=bogus", pw, port),
		fmt.Sprintf("postgres://loopd:%s@127.0.0.1:notaport/db", pw),
		fmt.Sprintf("postgres://loopd:%s@[::1/db", pw),
	} {
		_, err := sqlstore.OpenPostgres(context.Background(), url, lock)
		require.Error(t, err, url)
		assert.NotContains(t, err.Error(), pw, "the error of %s", sqlstore.RedactURL(url))
	}
	assert.Equal(t, "postgres://loopd:xxxxx@h:5432/db", sqlstore.RedactURL("postgres://loopd:"+pw+"@h:5432/db"))
}

// closedPort returns a TCP port of 127.0.0.1 nobody listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestPostgresHostsShareOneClock: leases expire by the database's clock,
// not the host's: a member's heartbeat is the server's clock_timestamp().
func TestPostgresHostsShareOneClock(t *testing.T) {
	url := pgtest.URL(t)
	s, err := sqlstore.OpenPostgres(t.Context(), url, filepath.Join(t.TempDir(), "loopd.lock"))
	require.NoError(t, err)
	defer s.Close()
	admin, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var before, after time.Time
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&before))
	require.NoError(t, s.Heartbeat(context.Background(), desired.Host{Name: "a", LeaseTTL: time.Minute}))
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&after))
	hosts, err := s.Hosts(context.Background())
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	hb := hosts[0].Heartbeat
	assert.False(t, hb.Before(before.Truncate(time.Microsecond)) || hb.After(after), "%s within [%s, %s]", hb, before, after)
}

// TestPostgresFrozenWriterFreesTheWritersLock: a writer that stops inside
// its transaction, holding the writers' lock, does not stop the other
// hosts' writes: PostgreSQL ends its session once it sat idle in the
// transaction for idleInTxTimeout, and another host's heartbeat goes
// through well within its lock wait; the frozen writer's write fails.
func TestPostgresFrozenWriterFreesTheWritersLock(t *testing.T) {
	url := pgtest.URL(t)
	open := func() *sqlstore.Postgres {
		s, err := sqlstore.OpenPostgres(t.Context(), url, filepath.Join(t.TempDir(), "loopd.lock"))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	frozen, other := open(), open()
	admin, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	release := make(chan struct{})
	held := make(chan error, 1)
	go func() { held <- sqlstore.HoldWrite(frozen, release) }()
	defer close(release)
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted`).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the writers' lock is held")
	require.NoError(t, other.Heartbeat(context.Background(), desired.Host{Name: "b", LeaseTTL: time.Minute}),
		"another host's write goes through")
	release <- struct{}{}
	assert.Error(t, <-held, "the frozen writer's transaction was ended")
}
