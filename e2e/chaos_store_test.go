package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // the driver desired registers, for the second connection

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

// The store-fault half of the chaos suite: the store is locked by another
// process, and the disk under it fills. A delivery the store cannot take
// must be refused with a 5xx within GitHub's deadline (githubTimeout), so
// GitHub shows it failed and it can be redelivered; none that was answered
// 2xx may be lost; and once the fault ends the daemon takes deliveries
// again, delivers them, and journals the refusals.

// storeFault is one way the store fails: begin starts it on a running
// daemon and returns the func that ends it.
type storeFault struct {
	name string
	// setup prepares the env before the daemon first starts; may be nil.
	setup func(t *testing.T, e *env)
	begin func(t *testing.T, e *env) (end func())
	// untilRefused sends deliveries one at a time until the first is
	// refused (the disk's last free pages may still take a few), instead
	// of refusedAtOnce at once.
	untilRefused bool
}

// refusedAtOnce is how many deliveries a held lock gets at once.
const refusedAtOnce = 3

func TestChaosStoreFaults(t *testing.T) {
	chaosRun(t)
	for _, f := range []storeFault{
		{name: "locked_by_another_process", begin: holdStoreLock},
		{name: "disk_full", setup: mountSmallDisk, begin: fillDisk, untilRefused: true},
	} {
		t.Run(f.name, func(t *testing.T) { runStoreFault(t, f) })
	}
}

// faultAnswer is one delivery sent during a fault, and its answer.
type faultAnswer struct {
	id   string
	code int
	took time.Duration
	err  error
}

func runStoreFault(t *testing.T, f storeFault) {
	e := newEnv(t, envOpts{})
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["maxDeliveriesPerHour"] = 1000
	e.writeConfig(t)
	if f.setup != nil {
		f.setup(t, e)
	}
	e.start(t)
	accepted := []string{e.deliver(t, "issues.opened.1.json", nil)}
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	_, id := e.comment(t)
	accepted = append(accepted, id)

	end := f.begin(t, e)
	var answers []faultAnswer
	if f.untilRefused {
		for range 40 {
			a := e.faultSend(t)
			answers = append(answers, a)
			if a.code/100 != 2 {
				answers = append(answers, e.faultSend(t))
				break
			}
		}
	} else {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range refusedAtOnce {
			wg.Go(func() {
				a := e.faultSend(t)
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	end()

	var refused []faultAnswer
	for _, a := range answers {
		require.NoError(t, a.err, "delivery %s got no answer", a.id)
		assert.Less(t, a.took, githubTimeout, "delivery %s answered %d after %s, past GitHub's deadline", a.id, a.code, a.took)
		switch {
		case a.code/100 == 2:
			accepted = append(accepted, a.id)
		case a.code == http.StatusServiceUnavailable:
			refused = append(refused, a)
		default:
			t.Errorf("delivery %s: %d, neither accepted nor 503", a.id, a.code)
		}
	}
	require.NotEmpty(t, refused, "the fault refused no delivery: it did not bite")
	t.Logf("%s: %d deliveries during the fault, %d refused (slowest answer %s)", f.name, len(answers), len(refused), slowest(answers))

	// The fault is over: the operator redelivers the refused deliveries
	// under their own ids, and a new one comes.
	for _, a := range refused {
		var code int
		e.waitFor(t, func() bool {
			body := a.body(t, e)
			code = e.post(t, "issue_comment", a.id, body, webhook.Sign([]byte(e.secret), body))
			return code/100 == 2
		}, waitShort, "redelivery of %s after the fault: %d", a.id, code)
		accepted = append(accepted, a.id)
	}
	_, id = e.comment(t)
	accepted = append(accepted, id)

	conv := e.mustRecord(t, keyIssue).Status.HarnessSessionID
	for _, id := range accepted {
		e.waitTurn(t, keyIssue, conv, desired.FrameBegin(id), waitLong, "accepted delivery "+id+" is in exactly one user turn")
	}
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return len(r.Pending) == 0 }, waitLong, "events still pending")
	assert.Equal(t, conv, r.Status.HarnessSessionID, "the item kept its conversation")

	// Each refusal was logged at once and reaches the journal once the
	// store takes writes again.
	for _, a := range refused {
		var rows []journal.Event
		e.waitFor(t, func() bool {
			rows = deliveriesOf(t, e, journal.DeliveryRejected, a.id)
			return len(rows) > 0
		}, waitShort+journalFlush, "delivery.rejected of %s never reached the journal", a.id)
		assert.Equal(t, "store_failed", rows[0].Attrs[journal.KeyReason])
	}
	// A pass the fault failed was retried within the resync interval,
	// never given up.
	for _, l := range e.daemonLines(t, journal.ReconcileFailed) {
		wait, err := time.ParseDuration(logField(l, "retry_after"))
		require.NoError(t, err, "%s", l)
		assert.LessOrEqual(t, wait, time.Second, "retry_after past the interval: %s", l)
	}
}

// journalFlush bounds how long a deferred journal row waits for the store
// (serve's journalFlushEvery, and one flush's own time).
const journalFlush = 10 * time.Second

// body is the signed payload of the comment a sent.
func (a faultAnswer) body(t *testing.T, e *env) []byte {
	return e.payload(t, commentFixture, withComment("during the fault "+a.id))
}

// faultSend sends a new comment on issue 1 and returns its answer, or the
// error when none came within twice GitHub's deadline.
func (e *env) faultSend(t *testing.T) faultAnswer {
	a := faultAnswer{id: uuid.NewString()}
	body := a.body(t, e)
	req, err := http.NewRequest(http.MethodPost, e.webhookURL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", a.id)
	req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte(e.secret), body))
	start := time.Now()
	resp, err := (&http.Client{Timeout: 2 * githubTimeout}).Do(req)
	a.took, a.err = time.Since(start), err
	if err == nil {
		a.code = resp.StatusCode
		resp.Body.Close()
	}
	return a
}

func slowest(answers []faultAnswer) time.Duration {
	var most time.Duration
	for _, a := range answers {
		most = max(most, a.took)
	}
	return most.Round(time.Millisecond)
}

// holdStoreLock opens a second connection to the store and holds an
// exclusive transaction on it, as another process writing the database
// (a cron reconcile, a backup, sqlite3 by hand) would: every write of the
// daemon waits for it until its busy timeout.
func holdStoreLock(t *testing.T, e *env) func() {
	db, err := sql.Open("sqlite", filepath.Join(e.stateDir, "loopd.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE")
	require.NoError(t, err)
	var once sync.Once
	end := func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), "ROLLBACK")
			assert.NoError(t, err)
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(end)
	return end
}

// smallDisk is the size of the tmpfs the disk-full fault puts the state
// directory on.
const smallDisk = "4m"

// mountSmallDisk puts the env's state directory on a tmpfs of smallDisk,
// unmounted at cleanup; it skips the test where mount is not permitted
// (not root, or no CAP_SYS_ADMIN in a container).
func mountSmallDisk(t *testing.T, e *env) {
	require.NoError(t, os.MkdirAll(e.stateDir, 0o700))
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+smallDisk+",mode=0700", "tmpfs", e.stateDir).CombinedOutput()
	if err != nil {
		t.Skipf("disk full: cannot mount a tmpfs for the store (%v: %s); run as root to include it", err, strings.TrimSpace(string(out)))
	}
	// Lazy: the daemon may still hold the store open when this runs (the
	// env's own cleanup stops it after).
	t.Cleanup(func() { _ = exec.Command("umount", "-l", e.stateDir).Run() })
}

// fillDisk empties the store's write-ahead log into the database (so the
// next write needs new pages) and then fills the rest of the tmpfs; its
// end removes the filler.
func fillDisk(t *testing.T, e *env) func() {
	db, err := sql.Open("sqlite", filepath.Join(e.stateDir, "loopd.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	filler := filepath.Join(e.stateDir, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	// The checkpoint may find a pass reading; it is retried until it
	// truncates the log.
	e.waitFor(t, func() bool {
		var busy, logged, moved int
		return db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved) == nil && busy == 0
	}, waitShort, "the write-ahead log was never truncated")
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			require.True(t, errors.Is(err, syscall.ENOSPC), "fill: %v", err)
			break
		}
	}
	// Fill the last partial chunk too.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			break
		}
	}
	require.NoError(t, f.Close())
	return func() { require.NoError(t, os.Remove(filler), fmt.Sprintf("remove %s", filler)) }
}
