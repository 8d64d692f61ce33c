package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

func TestWebhookRefusesUnsignedBodyUnread(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start(t)

	// The headers of a 20 MiB delivery with no signature, and a few bytes
	// of a body that never comes.
	c, err := net.Dial("tcp", e.listen)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /webhook HTTP/1.1\r\nHost: loopd\r\nContent-Type: application/json\r\n"+
		"X-GitHub-Event: issue_comment\r\nX-GitHub-Delivery: "+uuid.NewString()+"\r\n"+
		"Content-Length: "+strconv.Itoa(20<<20)+"\r\n\r\n{\"action\":")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitShort)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)

	require.NoError(t, err, "no answer while the body is unsent")
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.True(t, resp.Close, "the connection is closed, not drained")
	lines := e.daemonLines(t, journal.DeliveryRejected)
	require.Len(t, lines, 1)
	assert.Contains(t, lines[0], "reason=missing_signature")
	evs := e.waitEvent(t, journal.DeliveryRejected, desired.Key{}, 1, waitShort)
	assert.Equal(t, "missing_signature", evs[0].Attrs["reason"])
	assert.Len(t, e.events(t), 1, "an unsigned request writes its rejection's row, and nothing else")
}

func TestWebhookAnswersWhileStoreLocked(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.start(t)
	// Another process's connection holds the store's write lock.
	db, err := sql.Open("sqlite", filepath.Join(e.stateDir, "loopd.db"))
	require.NoError(t, err)
	defer db.Close()
	locker, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = locker.ExecContext(context.Background(), "BEGIN IMMEDIATE")
	require.NoError(t, err)
	id := uuid.NewString()
	body := e.payload(t, "issue_comment.created.1.json", withComment("held behind a lock "+id))

	// As GitHub's client, which gives up after 10 s.
	code := e.post(t, "issue_comment", id, body, webhook.Sign([]byte(e.secret), body))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	lines := e.daemonLines(t, journal.DeliveryRejected)
	require.Len(t, lines, 1, "the rejection is logged though it cannot be journaled")
	assert.Contains(t, lines[0], "reason=store_failed")
	assert.Contains(t, lines[0], "delivery="+id)

	_, err = locker.ExecContext(context.Background(), "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, locker.Close())
	_, found := e.record(t, keyIssue)
	assert.False(t, found, "nothing half-stored")
	e.waitFor(t, func() bool {
		for _, ev := range e.eventsNamed(t, journal.DeliveryRejected, desired.Key{}) {
			if ev.Attrs["delivery"] == id && ev.Attrs["reason"] == "store_failed" {
				return true
			}
		}
		return false
	}, 15*time.Second, "the rejection reaches the journal once the store takes writes")
	assert.Equal(t, http.StatusAccepted, e.post(t, "issue_comment", id, body, webhook.Sign([]byte(e.secret), body)),
		"the delivery id was not claimed: the operator's redelivery is taken")
}

func TestRepeatedFailuresFolded(t *testing.T) {
	e := newEnv(t, envOpts{}) // a pass a second, each waiting a second for the lock
	e.start(t)
	// A cron pass that never ends: every daemon pass fails on the lock.
	store := e.openStore(t)
	defer store.Close()
	unlock, err := store.Lock(context.Background())
	require.NoError(t, err)
	e.waitEvent(t, journal.ReconcileFailed, desired.Key{}, 1, waitShort)
	// The condition, held: three or four more failed passes.
	time.Sleep(7 * time.Second)
	unlock()
	e.stop(t)

	lines := e.daemonLines(t, journal.ReconcileFailed)
	require.Len(t, lines, 2, "the first failure, then one summary:\n%s", strings.Join(lines, "\n"))
	assert.NotContains(t, lines[0], journal.KeyRepeated+"=")
	n := regexp.MustCompile(`\brepeated=(\d+)\b`).FindStringSubmatch(lines[1])
	require.NotNil(t, n, lines[1])
	repeated, err := strconv.Atoi(n[1])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, repeated, 2)
	rows := e.eventsNamed(t, journal.ReconcileFailed, desired.Key{})
	require.Len(t, rows, 2, "the journal is not flooded either")
	assert.Equal(t, n[1], rows[1].Attrs[journal.KeyRepeated])
}
