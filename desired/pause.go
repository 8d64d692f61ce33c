package desired

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PauseKind is which of an installation's GitHub calls a pause holds.
type PauseKind string

// The kinds of pause (GitHub's REST API docs, "Rate limits for the REST
// API").
const (
	// PauseSecondary holds every content write (a comment, a reaction):
	// GitHub answered one with its secondary rate limit.
	PauseSecondary PauseKind = "secondary"
	// PausePrimary holds every call until the installation's hourly
	// budget resets (x-ratelimit-reset).
	PausePrimary PauseKind = "primary"
)

// Pause is a pause of the GitHub calls of one installation, which GitHub
// asked for by a rate limit. It is kept in the store, so that every loopd
// sharing it, and loopd get, sees it, and a restart still honours it.
type Pause struct {
	// Installation names whose calls pause: "installation <id>" for a
	// GitHub App's, "token" for a token's.
	Installation string
	Kind         PauseKind
	// Until is when calls may go again (the next is a probe); Since is
	// when the limit was first met, Streak how many limits in a row it has
	// met since without a call going through.
	Until, Since time.Time
	Streak       int
	// HTTPStatus and Message are GitHub's last answer.
	HTTPStatus int
	Message    string
}

// Holds reports whether p still holds its installation's calls at now.
func (p Pause) Holds(now time.Time) bool { return now.Before(p.Until) }

// PutPause implements Store.
func (s *sqlStore) PutPause(ctx context.Context, p Pause) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if p.Streak == 0 && p.Until.IsZero() {
			_, err := tx.ExecContext(ctx, `DELETE FROM github_pauses WHERE installation = ? AND kind = ?`, p.Installation, string(p.Kind))
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO github_pauses (installation, kind, until, since, streak, http_status, message)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (installation, kind) DO UPDATE SET until = excluded.until, since = excluded.since,
			streak = excluded.streak, http_status = excluded.http_status, message = excluded.message`,
			p.Installation, string(p.Kind), timeToDB(p.Until), timeToDB(p.Since), p.Streak, p.HTTPStatus, p.Message)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s put pause %s %s: %w", s.name, p.Installation, p.Kind, err)
	}
	return nil
}

// Pauses implements Store.
func (s *sqlStore) Pauses(ctx context.Context) ([]Pause, error) {
	var out []Pause
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT installation, kind, until, since, streak, http_status, message
			FROM github_pauses ORDER BY installation, kind`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				p            Pause
				until, since sql.NullInt64
			)
			if err := rows.Scan(&p.Installation, &p.Kind, &until, &since, &p.Streak, &p.HTTPStatus, &p.Message); err != nil {
				return err
			}
			p.Until, p.Since = timeFromDB(until), timeFromDB(since)
			out = append(out, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("%s pauses: %w", s.name, err)
	}
	return out, nil
}
