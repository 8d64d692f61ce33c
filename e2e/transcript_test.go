package e2e

import (
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
)

// workdir is where the route renders k's workdir.
func (e *env) workdir(k desired.Key) string {
	return filepath.Join(e.workRoot, k.Owner, k.Repo, strconv.Itoa(k.Number))
}

// transcriptPath returns where the harness keeps conversation id of k, by
// the adapter's own path rule.
func (e *env) transcriptPath(t testing.TB, k desired.Key, id string) string {
	t.Helper()
	ad, err := harness.New("claude-code", schema.Harness{Command: e.harnessCmd, Env: e.harnessEnv})
	require.NoError(t, err)
	tr, err := ad.Transcript(e.workdir(k), id)
	require.NoError(t, err)
	return tr.Path
}

// transcriptLines returns the parsed JSON lines of conversation id of k;
// none when the file does not exist yet.
func (e *env) transcriptLines(t testing.TB, k desired.Key, id string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(e.transcriptPath(t, k, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []map[string]any
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		// A line being written may be incomplete; the next read sees it whole.
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// userTurns returns the text of every user message of conversation id of
// k, in order. Content is a string, or text blocks that are joined.
func (e *env) userTurns(t testing.TB, k desired.Key, id string) []string {
	t.Helper()
	var out []string
	for _, l := range e.transcriptLines(t, k, id) {
		if l["type"] != "user" {
			continue
		}
		msg, _ := l["message"].(map[string]any)
		switch c := msg["content"].(type) {
		case string:
			out = append(out, c)
		case []any:
			var b strings.Builder
			for _, blk := range c {
				if m, ok := blk.(map[string]any); ok && m["type"] == "text" {
					s, _ := m["text"].(string)
					b.WriteString(s)
				}
			}
			out = append(out, b.String())
		}
	}
	return out
}

// countContaining returns how many of turns contain sub.
func countContaining(turns []string, sub string) int {
	n := 0
	for _, s := range turns {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// waitTurn waits until exactly one user turn of conversation id of k
// contains text, failing the test with msg after timeout.
func (e *env) waitTurn(t *testing.T, k desired.Key, id, text string, timeout time.Duration, msg string) {
	t.Helper()
	e.waitFor(t, func() bool { return countContaining(e.userTurns(t, k, id), text) == 1 }, timeout, msg)
}

// storeDB opens e's SQLite store beside its daemon; the caller closes it.
func (e *env) storeDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(e.stateDir, "loopd.db")+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	return db
}

// storedTranscriptSize returns how many bytes of conversation id of k e's
// SQLite store holds (the daemon ships them as the transcript grows).
func (e *env) storedTranscriptSize(t *testing.T, k desired.Key, id string) int64 {
	t.Helper()
	db := e.storeDB(t)
	defer db.Close()
	var n int64
	require.NoError(t, db.QueryRow(`SELECT coalesce(sum(length(data)), 0) FROM transcripts WHERE work_item = ? AND session_id = ?`,
		k.String(), id).Scan(&n))
	return n
}

// dropStoredTranscript waits until e's SQLite store holds a copy of
// conversation id of k, then deletes it, as a store that never got one
// would be: with the local file gone too, nothing can restore the
// conversation.
func (e *env) dropStoredTranscript(t *testing.T, k desired.Key, id string) {
	t.Helper()
	e.waitFor(t, func() bool { return e.storedTranscriptSize(t, k, id) > 0 }, waitLong, "the store never got a copy of the transcript")
	db := e.storeDB(t)
	defer db.Close()
	_, err := db.Exec(`DELETE FROM transcripts WHERE work_item = ? AND session_id = ?`, k.String(), id)
	require.NoError(t, err)
}
