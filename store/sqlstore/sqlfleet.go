package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

var _ store.Fleet = (*sqlStore)(nil)

// Heartbeat writes h's membership row with its heartbeat at the store's
// clock (dialect.clock), which renews every lease h.Name holds: an item's
// lease expires at its owner's heartbeat plus the owner's LeaseTTL, so a
// renewal is one row whatever the number of items. Draining stays as
// SetDraining left it (false for a new member). h.Name must not be empty,
// h.LeaseTTL must be positive and h.Capacity not negative.
//
// A row of another Instance is refused while it is live (ErrHostTaken,
// with how long until it lapses) and taken over once it lapsed: every
// lease of h.Name then gets a new generation, fencing the old instance,
// and the other hosts are notified (Listener).
func (s *sqlStore) Heartbeat(ctx context.Context, h desired.Host) error {
	err := checkHost(h)
	if err == nil {
		err = s.write(ctx, func(tx *sql.Tx) error {
			now, err := s.d.clock(ctx, tx)
			if err != nil {
				return err
			}
			var (
				instance   string
				hb, ttl    int64
				takingOver bool
			)
			err = tx.QueryRowContext(ctx, `SELECT instance, heartbeat, lease_ttl FROM hosts WHERE name = ?`, h.Name).Scan(&instance, &hb, &ttl)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return err
			case instance != h.Instance && instance != "":
				if lapses := time.Unix(0, hb).Add(time.Duration(ttl)); lapses.After(now) {
					return fmt.Errorf("%w: instance %s heartbeats under it; its lease lapses in %s unless it heartbeats again",
						store.ErrHostTaken, instance, lapses.Sub(now).Round(100*time.Millisecond))
				}
				takingOver = true
			}
			if _, err = tx.ExecContext(ctx, `INSERT INTO hosts (name, instance, capacity, lease_ttl, draining, heartbeat) VALUES (?, ?, ?, ?, FALSE, ?)
				ON CONFLICT (name) DO UPDATE SET instance = excluded.instance, capacity = excluded.capacity, lease_ttl = excluded.lease_ttl,
				heartbeat = excluded.heartbeat`, h.Name, h.Instance, h.Capacity, int64(h.LeaseTTL), now.UnixNano()); err != nil {
				return err
			}
			if !takingOver {
				return nil
			}
			if _, err := tx.ExecContext(ctx, `UPDATE work_items SET lease_generation = lease_generation + 1 WHERE lease_owner = ?`,
				h.Name); err != nil {
				return err
			}
			return s.d.notify(ctx, tx)
		})
	}
	if err != nil {
		return fmt.Errorf("%s heartbeat %s: %w", s.name, h.Name, err)
	}
	return nil
}

// checkHost reports what makes h unusable as a membership row.
func checkHost(h desired.Host) error {
	switch {
	case h.Name == "":
		return errors.New("empty host name")
	case h.LeaseTTL <= 0:
		return fmt.Errorf("lease TTL %s is not positive", h.LeaseTTL)
	case h.Capacity < 0:
		return fmt.Errorf("capacity %d is negative", h.Capacity)
	}
	return nil
}

// Hosts returns every member by name, with how many items it holds and
// whether its heartbeat plus its LeaseTTL is still ahead of the store's
// clock.
func (s *sqlStore) Hosts(ctx context.Context) ([]desired.Host, error) {
	var hosts []desired.Host
	err := s.read(ctx, func(tx *sql.Tx) error {
		now, err := s.d.clock(ctx, tx)
		if err != nil {
			return err
		}
		hosts, err = loadHosts(ctx, tx, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s hosts: %w", s.name, err)
	}
	return hosts, nil
}

// loadHosts reads every member by name, Live as of now.
func loadHosts(ctx context.Context, tx *sql.Tx, now time.Time) ([]desired.Host, error) {
	rows, err := tx.QueryContext(ctx, `SELECT h.name, h.instance, h.capacity, h.lease_ttl, h.draining, h.heartbeat,
		(SELECT count(*) FROM work_items WHERE lease_owner = h.name) FROM hosts h ORDER BY h.name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hosts []desired.Host
	for rows.Next() {
		var (
			h   desired.Host
			ttl int64
			hb  sql.NullInt64
		)
		if err := rows.Scan(&h.Name, &h.Instance, &h.Capacity, &ttl, &h.Draining, &hb, &h.Leases); err != nil {
			return nil, err
		}
		h.LeaseTTL = time.Duration(ttl)
		h.Heartbeat = timeFromDB(hb)
		h.Live = h.Heartbeat.Add(h.LeaseTTL).After(now)
		hosts = append(hosts, h)
	}
	return hosts, rows.Err()
}

// Assign gives every item that needs a host (desired.Record.NeedsHost) and has no live
// owner (none, or one whose lease expired schema.TakeoverMargin ago) to the
// live, non-draining member with the most free capacity: its Capacity
// less the open items it holds, a member with no limit (Capacity 0)
// before any with one and by its open items, ties by name; each item
// given counts at once, so that the items are spread. Each
// change of owner bumps the item's lease generation, and notifies the
// other hosts (Listener). It returns the changes, in key order; none when
// no member is live and not draining.
func (s *sqlStore) Assign(ctx context.Context) ([]store.LeaseChange, error) {
	var changes []store.LeaseChange
	err := s.write(ctx, func(tx *sql.Tx) error {
		changes = nil
		now, err := s.d.clock(ctx, tx)
		if err != nil {
			return err
		}
		hosts, err := loadHosts(ctx, tx, now)
		if err != nil {
			return err
		}
		// holding are the hosts whose leases still hold: live, or lapsed
		// less than TakeoverMargin ago.
		holding := []string{}
		var takers []*desired.Host
		for i, h := range hosts {
			if h.Live || h.Heartbeat.Add(h.LeaseTTL+schema.TakeoverMargin).After(now) {
				holding = append(holding, h.Name)
			}
			if h.Live && !h.Draining {
				takers = append(takers, &hosts[i])
			}
		}
		if len(takers) == 0 {
			return nil
		}
		open := map[string]int{} // open items each member holds
		rows, err := tx.QueryContext(ctx, `SELECT lease_owner, count(*) FROM work_items
			WHERE closed = FALSE AND lease_owner <> '' GROUP BY lease_owner`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				owner string
				n     int
			)
			if err := rows.Scan(&owner, &n); err != nil {
				rows.Close()
				return err
			}
			open[owner] = n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		names, err := json.Marshal(holding)
		if err != nil {
			return err
		}
		type orphan struct {
			key, status, from string
			closed            bool
			gen, specGen      int64
		}
		var orphans []orphan
		rows, err = tx.QueryContext(ctx, `SELECT key, closed, status, generation, lease_owner, lease_generation FROM work_items
			WHERE lease_owner NOT IN (`+s.d.jsonList()+`) ORDER BY owner, repo, number`, string(names))
		if err != nil {
			return err
		}
		for rows.Next() {
			var o orphan
			if err := rows.Scan(&o.key, &o.closed, &o.status, &o.specGen, &o.from, &o.gen); err != nil {
				rows.Close()
				return err
			}
			orphans = append(orphans, o)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// A member with no limit (Capacity 0) has more room than any
		// with one, and less the more items it holds: several of them
		// share the items out as their loads allow.
		free := func(h *desired.Host) int {
			if h.Capacity == 0 {
				return math.MaxInt - open[h.Name]
			}
			return h.Capacity - open[h.Name]
		}
		for _, o := range orphans {
			item := desired.Record{Spec: desired.Spec{Closed: o.closed}, Status: s.statuses.decode(o.key, o.status, o.specGen)}
			if !item.NeedsHost() {
				continue
			}
			to := takers[0]
			for _, h := range takers[1:] {
				if c := cmp.Compare(free(h), free(to)); c > 0 || (c == 0 && h.Name < to.Name) {
					to = h
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE work_items SET lease_owner = ?, lease_generation = lease_generation + 1
				WHERE key = ?`, to.Name, o.key); err != nil {
				return err
			}
			if !o.closed {
				open[to.Name]++
			}
			k, err := desired.ParseKey(o.key)
			if err != nil {
				return err
			}
			changes = append(changes, store.LeaseChange{Key: k, From: o.from, To: to.Name, Generation: o.gen + 1})
		}
		if len(changes) > 0 {
			return s.d.notify(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s assign: %w", s.name, err)
	}
	return changes, nil
}

// ReleaseLease gives up host's lease of k held under generation gen: the
// item has no owner and its generation grows, and the other hosts are
// notified (Listener). It fails with ErrFenced when the lease is not
// host's under gen, and wraps ErrNotFound for an unknown key.
func (s *sqlStore) ReleaseLease(ctx context.Context, k desired.Key, host string, gen int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		var (
			owner string
			cur   int64
		)
		err := tx.QueryRowContext(ctx, `SELECT lease_owner, lease_generation FROM work_items WHERE key = ?`, k.String()).Scan(&owner, &cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return store.ErrNotFound
		case err != nil:
			return err
		case owner != host || cur != gen:
			return store.ErrFenced
		}
		if _, err := tx.ExecContext(ctx, `UPDATE work_items SET lease_owner = '', lease_generation = lease_generation + 1 WHERE key = ?`,
			k.String()); err != nil {
			return err
		}
		return s.d.notify(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("%s release lease %s by %s at generation %d: %w", s.name, k, host, gen, err)
	}
	return nil
}

// SetDraining sets or clears host's Draining flag and notifies the other
// hosts (Listener); the error wraps ErrNoHost when no member has that
// name.
func (s *sqlStore) SetDraining(ctx context.Context, host string, draining bool) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE hosts SET draining = ? WHERE name = ?`, draining, host)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNoHost
		}
		return s.d.notify(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("%s set draining %s: %w", s.name, host, err)
	}
	return nil
}

// ForgetHost removes host's membership row: refused (ErrHostInUse) while
// its heartbeat plus its TTL is ahead of the store's clock or it holds a
// lease; the error wraps ErrNoHost when no member has that name.
func (s *sqlStore) ForgetHost(ctx context.Context, host string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		now, err := s.d.clock(ctx, tx)
		if err != nil {
			return err
		}
		hosts, err := loadHosts(ctx, tx, now)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(hosts, func(h desired.Host) bool { return h.Name == host })
		switch {
		case i < 0:
			return store.ErrNoHost
		case hosts[i].Live:
			return fmt.Errorf("%w: its heartbeat is %s old, within its lease TTL %s", store.ErrHostInUse,
				now.Sub(hosts[i].Heartbeat).Round(100*time.Millisecond), hosts[i].LeaseTTL)
		case hosts[i].Leases > 0:
			return fmt.Errorf("%w: it holds %d lease(s); loopd assigns them to a live host first", store.ErrHostInUse, hosts[i].Leases)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM hosts WHERE name = ?`, host)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s forget host %s: %w", s.name, host, err)
	}
	return nil
}

// fenced returns ErrFenced when k's lease generation is not gen, and
// ErrNotFound when the store holds no work item k.
func fenced(ctx context.Context, tx *sql.Tx, k desired.Key, gen int64) error {
	var cur int64
	err := tx.QueryRowContext(ctx, `SELECT lease_generation FROM work_items WHERE key = ?`, k.String()).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	case cur != gen:
		return store.ErrFenced
	}
	return nil
}

// TranscriptSize returns how many bytes of k's transcript of session id
// the store holds: 0 when none.
func (s *sqlStore) TranscriptSize(ctx context.Context, k desired.Key, id string) (int64, error) {
	var n int64
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = transcriptSize(ctx, tx, k, id)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s transcript size %s %s: %w", s.name, k, id, err)
	}
	return n, nil
}

// transcriptSize is the end of the last stored chunk of k's transcript of
// session id.
func transcriptSize(ctx context.Context, tx *sql.Tx, k desired.Key, id string) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT coalesce(max(off + length(data)), 0) FROM transcripts
		WHERE work_item = ? AND session_id = ?`, k.String(), id).Scan(&n)
	return n, err
}

// AppendTranscript stores data as the chunk of k's transcript of session
// id that starts at off, under k's lease generation gen. It fails with
// ErrFenced when gen is not k's generation, with ErrTranscriptOffset when
// off is not the stored size, and wraps ErrNotFound for an unknown key;
// nothing is stored then. An empty data stores nothing.
func (s *sqlStore) AppendTranscript(ctx context.Context, k desired.Key, id string, off int64, data []byte, gen int64) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if id == "" {
			return errors.New("empty session id")
		}
		if err := fenced(ctx, tx, k, gen); err != nil {
			return err
		}
		size, err := transcriptSize(ctx, tx, k, id)
		if err != nil {
			return err
		}
		if off != size {
			return fmt.Errorf("%w: offset %d, stored %d", store.ErrTranscriptOffset, off, size)
		}
		if len(data) == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO transcripts (work_item, session_id, off, data) VALUES (?, ?, ?, ?)`,
			k.String(), id, off, data)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s append transcript %s %s at %d: %w", s.name, k, id, off, err)
	}
	return nil
}

// Transcript returns k's stored transcript of session id, whole; the
// error wraps ErrNoTranscript when there is none.
func (s *sqlStore) Transcript(ctx context.Context, k desired.Key, id string) ([]byte, error) {
	var out []byte
	err := s.read(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT data FROM transcripts WHERE work_item = ? AND session_id = ? ORDER BY off`,
			k.String(), id)
		if err != nil {
			return err
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			var chunk []byte
			if err := rows.Scan(&chunk); err != nil {
				return err
			}
			out, found = append(out, chunk...), true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !found {
			return store.ErrNoTranscript
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s transcript %s %s: %w", s.name, k, id, err)
	}
	return out, nil
}
