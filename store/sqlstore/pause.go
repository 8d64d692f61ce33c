package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/loopd/loopd/desired"
)

// PutPause implements store.Store.
func (s *sqlStore) PutPause(ctx context.Context, p desired.Pause) error {
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

// Pauses implements store.Store.
func (s *sqlStore) Pauses(ctx context.Context) ([]desired.Pause, error) {
	var out []desired.Pause
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT installation, kind, until, since, streak, http_status, message
			FROM github_pauses ORDER BY installation, kind`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				p            desired.Pause
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
