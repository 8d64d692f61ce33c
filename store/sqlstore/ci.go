package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// ciChecks is what the store keeps of one commit's checks (the checks
// column of ci_commits, JSON): each suite and run seen by id, true once
// completed, and the failures.
type ciChecks struct {
	Suites   map[string]bool     `json:"suites,omitempty"`
	Runs     map[string]bool     `json:"runs,omitempty"`
	Failures []desired.CIFailure `json:"failures,omitempty"`
}

// complete reports whether every suite and run seen has completed.
func (c ciChecks) complete() bool {
	for _, m := range []map[string]bool{c.Suites, c.Runs} {
		for _, done := range m {
			if !done {
				return false
			}
		}
	}
	return true
}

// add records e in c: the suite and run it names, completed or not (a
// completion is never undone), and its failure, which replaces an earlier
// one of the same run or roll-up.
func (c *ciChecks) add(e desired.CI) {
	mark := func(m *map[string]bool, id int64, done bool) {
		if id == 0 {
			return
		}
		if *m == nil {
			*m = map[string]bool{}
		}
		k := strconv.FormatInt(id, 10)
		(*m)[k] = (*m)[k] || done
	}
	if e.Run != 0 {
		mark(&c.Runs, e.Run, e.Done)
	} else {
		mark(&c.Suites, e.Suite, e.Done)
	}
	if f := e.Failure; f != nil {
		for i, old := range c.Failures {
			if old.Rollup == f.Rollup && ((f.Run != 0 && old.Run == f.Run) || (f.Rollup && f.Suite != 0 && old.Suite == f.Suite)) {
				c.Failures = append(c.Failures[:i], c.Failures[i+1:]...)
				break
			}
		}
		c.Failures = append(c.Failures, *f)
	}
}

// The states of a commit's CI (ci_commits.state).
const (
	ciCollecting = "collecting" // its events are recorded; no prompt yet
	ciSent       = "sent"       // its one prompt was queued
	ciStale      = "stale"      // it stopped being the head before its prompt went out
)

// ingestCI records the CI event of in on the item key, whose recorded head
// is head, in tx (store.Ingest's rule for in.CI): a commit that is not the head
// is StaleCommit, one whose prompt was sent Deduplicated; otherwise the
// event is recorded (Collected), and CIReady says the commit's failures
// can become its prompt now (every suite and run seen has completed).
// Recording a commit of a known head forgets the CI of the item's other
// commits: they are no longer its head, and never prompted again.
func ingestCI(ctx context.Context, tx *sql.Tx, in store.Ingest, key, head string, now time.Time, res *store.IngestResult) error {
	commit := strings.ToLower(in.CI.Commit)
	if head != "" && !strings.EqualFold(head, commit) {
		res.StaleCommit = true
		return nil
	}
	var (
		state, text string
		found       = true
	)
	err := tx.QueryRowContext(ctx, `SELECT state, checks FROM ci_commits WHERE work_item = ? AND commit_sha = ?`, key, commit).
		Scan(&state, &text)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		found = false
	case err != nil:
		return err
	case state != ciCollecting:
		res.Deduplicated = true
		return nil
	}
	var c ciChecks
	if found {
		if err := json.Unmarshal([]byte(text), &c); err != nil {
			return fmt.Errorf("ci of %s %s: %w", key, commit, err)
		}
	}
	c.add(*in.CI)
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if head != "" {
		if _, err := tx.ExecContext(ctx, `DELETE FROM ci_commits WHERE work_item = ? AND commit_sha <> ?`, key, commit); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO ci_commits (work_item, commit_sha, state, checks, failed, last_at, delivery)
		VALUES (?, ?, ?, ?, ?, ?, '')
		ON CONFLICT (work_item, commit_sha) DO UPDATE SET checks = excluded.checks, failed = excluded.failed, last_at = excluded.last_at`,
		key, commit, ciCollecting, string(b), len(c.Failures), timeToDB(now))
	if err != nil {
		return err
	}
	res.Collected = true
	res.CIReady = len(c.Failures) > 0 && c.complete()
	return nil
}

// CICommits implements store.Store.
func (s *sqlStore) CICommits(ctx context.Context) ([]desired.CICommit, error) {
	var out []desired.CICommit
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT w.owner, w.repo, w.number, c.commit_sha, c.checks, c.last_at
			FROM ci_commits c JOIN work_items w ON w.key = c.work_item
			WHERE c.state = ? AND c.failed > 0 ORDER BY c.last_at, c.work_item`, ciCollecting)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				cc   desired.CICommit
				text string
				at   sql.NullInt64
				c    ciChecks
			)
			if err := rows.Scan(&cc.Key.Owner, &cc.Key.Repo, &cc.Key.Number, &cc.Commit, &text, &at); err != nil {
				return err
			}
			if err := json.Unmarshal([]byte(text), &c); err != nil {
				return fmt.Errorf("ci of %s %s: %w", cc.Key, cc.Commit, err)
			}
			cc.Failures, cc.Complete, cc.LastAt = c.Failures, c.complete(), timeFromDB(at)
			out = append(out, cc)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s ci commits: %w", s.name, err)
	}
	return out, nil
}

// SendCI implements store.Store.
func (s *sqlStore) SendCI(ctx context.Context, k desired.Key, commit string, d desired.Delivery) (store.CISent, error) {
	key := k.String()
	commit = strings.ToLower(commit)
	var out store.CISent
	err := s.write(ctx, func(tx *sql.Tx) error {
		var state, head string
		err := tx.QueryRowContext(ctx, `SELECT c.state, w.head_sha FROM ci_commits c JOIN work_items w ON w.key = c.work_item
			WHERE c.work_item = ? AND c.commit_sha = ?`, key, commit).Scan(&state, &head)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = store.CIGone
			return nil
		case err != nil:
			return err
		case state != ciCollecting:
			out = store.CIGone
			return nil
		case head != "" && !strings.EqualFold(head, commit):
			out = store.CINotHead
			_, err := tx.ExecContext(ctx, `UPDATE ci_commits SET state = ? WHERE work_item = ? AND commit_sha = ?`, ciStale, key, commit)
			return err
		}
		c := d.Compact()
		_, err = tx.ExecContext(ctx, `INSERT INTO deliveries
			(id, work_item, event, action, sender, prompt, received_at, state, commit_sha, source_kind, source_id,
			prompt_bytes, prompt_header, frame_digest) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, '', 0, ?, ?, ?)`,
			d.ID, key, d.Event, d.Action, d.Sender, d.Prompt, timeToDB(d.ReceivedAt), commit, c.Size, c.Header, c.Digest)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ci_commits SET state = ?, delivery = ? WHERE work_item = ? AND commit_sha = ?`,
			ciSent, d.ID, key, commit); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE work_items SET generation = generation + 1, updated_at = ? WHERE key = ?`,
			timeToDB(s.now()), key); err != nil {
			return err
		}
		out = store.CIQueued
		return s.d.notify(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("%s send ci %s %s: %w", s.name, k, commit, err)
	}
	return out, nil
}

// Heads implements store.Store.
func (s *sqlStore) Heads(ctx context.Context, owner, repo, commit string) ([]desired.Key, error) {
	var out []desired.Key
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT owner, repo, number FROM work_items
			WHERE head_sha = ? AND kind = ? AND closed = ?`, strings.ToLower(commit), string(desired.KindPullRequest), false)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k desired.Key
			if err := rows.Scan(&k.Owner, &k.Repo, &k.Number); err != nil {
				return err
			}
			if strings.EqualFold(k.Owner, owner) && strings.EqualFold(k.Repo, repo) {
				out = append(out, k)
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s heads %s/%s %s: %w", s.name, owner, repo, commit, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}
