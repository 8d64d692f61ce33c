package sqlstore

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

var (
	keyAPI = desired.Key{Owner: "acme", Repo: "api", Number: 42}
	t0     = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

// openStore opens a store on a fresh file in a directory OpenSQLite must
// create, and closes it at the end of the test.
func openStore(t testing.TB) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "loopd.db")
	s, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

// comment is an Ingest that queues one issue_comment delivery on k.
func comment(k desired.Key, id string, at time.Time) store.Ingest {
	return store.Ingest{
		DeliveryID: id,
		Key:        k,
		Kind:       desired.KindIssue,
		Harness:    "claude-code",
		Cwd:        "/src/" + k.Repo,
		Delivery: &desired.Delivery{
			ID: id, Event: "issue_comment", Action: "created", Sender: "octocat",
			Prompt: "event=issue_comment delivery=" + id + "\nplease look", ReceivedAt: at,
		},
	}
}

func TestOpenSQLite(t *testing.T) {
	s, path := openStore(t)
	ctx := context.Background()

	info, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())

	pragmas := []struct {
		name string
		want string
	}{
		{name: "journal_mode", want: "wal"},
		{name: "synchronous", want: "2"}, // FULL
		{name: "foreign_keys", want: "1"},
		{name: "busy_timeout", want: "5000"},
		{name: "user_version", want: strconv.Itoa(schemaVersion)},
	}
	for _, p := range pragmas {
		var got string
		require.NoError(t, s.db.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got))
		assert.Equal(t, p.want, got, p.name)
	}

	_, err = OpenSQLite(ctx, filepath.Join(t.TempDir(), "a?b.db"))
	assert.Error(t, err)
}

func TestOpenSQLiteRefusesNewerSchema(t *testing.T) {
	s, path := openStore(t)
	_, err := s.db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion+1))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	_, err = OpenSQLite(context.Background(), path)
	assert.ErrorContains(t, err, fmt.Sprintf("schema version %d", schemaVersion+1))
}

func TestPutStatusIsAtomic(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	for _, id := range []string{"d1", "d2"} {
		_, err := s.Ingest(ctx, comment(keyAPI, id, t0))
		require.NoError(t, err)
	}
	// Make the second mark fail after the status and the first mark were
	// written in the transaction.
	_, err := s.db.Exec(`CREATE TRIGGER fail_d2 BEFORE UPDATE ON deliveries WHEN NEW.id = 'd2'
		BEGIN SELECT RAISE(ABORT, 'injected'); END`)
	require.NoError(t, err)

	err = s.PutStatus(ctx, keyAPI, desired.Status{Phase: desired.PhaseRunning}, "d1", "d2")
	require.ErrorContains(t, err, "injected")

	got, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Equal(t, desired.Status{Phase: desired.PhaseIdle}, got.Status)
	assert.Len(t, got.Pending, 2)
}

// TestLockAcrossProcesses holds the lock in a child process (this test
// binary, re-run as lockHolder) and checks that this process waits for it.
func TestLockAcrossProcesses(t *testing.T) {
	if os.Getenv("LOOPD_TEST_LOCK_HOLDER") != "" {
		lockHolder(os.Getenv("LOOPD_TEST_LOCK_HOLDER"))
		return
	}
	s, path := openStore(t)
	ctx := context.Background()

	cmd := exec.Command(os.Args[0], "-test.run=^TestLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "LOOPD_TEST_LOCK_HOLDER="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "locked\n", line)

	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond) // three of flock.Lock's polls
	defer cancel()
	_, err = s.Lock(short)
	assert.ErrorIs(t, err, store.ErrLocked)

	stdin.Close() // the child exits, and the kernel drops its lock
	unlock, err := s.Lock(ctx)
	require.NoError(t, err)
	unlock()
}

// lockHolder takes the lock of the store at path, says "locked" on stdout
// and holds the lock until stdin closes.
func lockHolder(path string) {
	s, err := OpenSQLite(context.Background(), path)
	if err != nil {
		fmt.Fprintln(os.Stdout, err)
		os.Exit(1)
	}
	if _, err := s.Lock(context.Background()); err != nil {
		fmt.Fprintln(os.Stdout, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stdout, "locked")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestSQLiteFilesArePrivate: the store's files (the database, its -wal
// and -shm, the reconcile lock) are readable by their owner alone, made so
// and, for a store made before, tightened so at the next open.
func TestSQLiteFilesArePrivate(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state", "loopd.db")
	use := func() {
		s, err := OpenSQLite(ctx, path)
		require.NoError(t, err)
		_, err = s.Ingest(ctx, comment(keyAPI, "d-"+strconv.Itoa(int(time.Now().UnixNano())), t0))
		require.NoError(t, err)
		unlock, err := s.Lock(ctx)
		require.NoError(t, err)
		unlock()
		// Checked while the store is open, so that -wal and -shm exist.
		for _, suffix := range sqliteFiles {
			st, err := os.Stat(path + suffix)
			require.NoError(t, err, suffix)
			assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "loopd.db%s", suffix)
		}
		require.NoError(t, s.Close())
	}
	use()

	// A store left readable by others (before this rule, the database was
	// made with the umask's 0644).
	for _, suffix := range sqliteFiles {
		if _, err := os.Stat(path + suffix); err == nil {
			require.NoError(t, os.Chmod(path+suffix, 0o644))
		}
	}
	use()
}

func TestHandEditedSpecRefused(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	_, err := s.Ingest(ctx, comment(keyAPI, "d1", t0))
	require.NoError(t, err)
	before, err := s.Records(ctx)
	require.NoError(t, err)

	edits := []struct {
		name string
		sql  string
	}{
		{name: "text_generation", sql: `UPDATE work_items SET generation = 'abc'`},
		{name: "closed_not_bool", sql: `UPDATE work_items SET closed = 2`},
		{name: "null_kind", sql: `UPDATE work_items SET kind = NULL`},
		{name: "key_not_parts", sql: `UPDATE work_items SET number = 43`},
		{name: "zero_number", sql: `UPDATE work_items SET number = 0, key = 'acme/api#0'`},
		{name: "text_time", sql: `UPDATE work_items SET state_changed_at = 'yesterday'`},
		{name: "orphan_delivery", sql: `INSERT INTO deliveries (id, work_item, event, action, sender, prompt, state)
			VALUES ('x', 'acme/none#1', '', '', '', '', 'pending')`},
		{name: "unknown_delivery_state", sql: `UPDATE deliveries SET state = 'sent'`},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			_, err := s.db.Exec(e.sql)
			assert.Error(t, err)
		})
	}
	after, err := s.Records(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func BenchmarkIngest(b *testing.B) {
	s, _ := openStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		k := desired.Key{Owner: "acme", Repo: "api", Number: 1 + i%16}
		if _, err := s.Ingest(ctx, comment(k, fmt.Sprintf("d%d", i), t0)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkBareSQLite32 is the reference for ingest's group commit: bare
// SQLite with the store's durability (sqliteParams: WAL, synchronous=FULL)
// on a file in a test temp dir, inserting 32 rows of 1 KiB a commit (a
// delivery's prompt is about that size) from one connection. It reports
// rows/s: what a commit of 32 deliveries costs with nothing of loopd's
// around it.
func BenchmarkBareSQLite32(b *testing.B) {
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "bare.db")+"?"+sqliteParams)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL) STRICT`); err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("x", 1<<10)
	for b.Loop() {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for range 32 {
			if _, err := tx.Exec(`INSERT INTO rows (body) VALUES (?)`, body); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(32*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// TestIngestCommitsItsJournalRows: an ingest and the journal rows of
// Ingest.Journal commit together: a row that cannot be written leaves no
// delivery behind, and a delivery that cannot be written leaves no row.
func TestIngestCommitsItsJournalRows(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	withRow := func(id string) store.Ingest {
		in := comment(keyAPI, id, t0)
		in.Journal = func(store.IngestResult) []journal.Event {
			return []journal.Event{{Time: t0, Name: journal.DeliveryAccepted, WorkItem: keyAPI.String(),
				Attrs: map[string]string{"delivery": id}}}
		}
		return in
	}
	events := func() []journal.Event {
		evs, err := s.Events(ctx, store.EventFilter{})
		require.NoError(t, err)
		return evs
	}

	_, err := s.db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'journal refused'); END`)
	require.NoError(t, err)
	_, err = s.Ingest(ctx, withRow("d1"))
	require.ErrorContains(t, err, "journal refused")
	_, err = s.Get(ctx, keyAPI)
	require.ErrorIs(t, err, store.ErrNotFound, "no delivery without its row")

	_, err = s.db.Exec(`DROP TRIGGER refuse; CREATE TRIGGER refuse BEFORE INSERT ON deliveries BEGIN SELECT RAISE(ABORT, 'delivery refused'); END`)
	require.NoError(t, err)
	_, err = s.Ingest(ctx, withRow("d1"))
	require.ErrorContains(t, err, "delivery refused")
	assert.Empty(t, events(), "no row without its delivery")

	_, err = s.db.Exec(`DROP TRIGGER refuse`)
	require.NoError(t, err)
	_, err = s.Ingest(ctx, withRow("d1"))
	require.NoError(t, err)
	r, err := s.Get(ctx, keyAPI)
	require.NoError(t, err)
	assert.Len(t, r.Pending, 1)
	assert.Len(t, events(), 1)
}

// TestFileGoneRefusesEveryRead: once the store's file is removed or
// replaced under an open store (a state dir deleted under a running
// serve), no ingest is acknowledged into the unlinked file, and reads say
// why instead of serving what it held.
func TestFileGoneRefusesEveryRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, path string)
	}{
		{"removed", func(t *testing.T, path string) { require.NoError(t, os.RemoveAll(filepath.Dir(path))) }},
		{"replaced", func(t *testing.T, path string) {
			other, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "other.db"))
			require.NoError(t, err)
			require.NoError(t, other.Close())
			require.NoError(t, os.Rename(filepath.Join(filepath.Dir(other.lockPath), "other.db"), path))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, path := openStore(t)
			_, err := s.Ingest(ctx, comment(keyAPI, "d-1", t0))
			require.NoError(t, err)

			tc.lose(t, path)
			_, err = s.Ingest(ctx, comment(keyAPI, "d-2", t0))
			require.ErrorIs(t, err, ErrFileGone)
			assert.Contains(t, err.Error(), path, "the error names the file")
			_, err = s.Records(ctx)
			require.ErrorIs(t, err, ErrFileGone)
			require.ErrorIs(t, s.AppendEvent(ctx, journal.Event{Name: journal.ItemHeld, WorkItem: keyAPI.String(), Time: t0}), ErrFileGone)
		})
	}
}
