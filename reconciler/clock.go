package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// SteadyClock returns the daemon's clock: wall is read once, at the call,
// and from then on that reading is advanced by elapsed, a monotonic clock
// (Elapsed in production). A step of the wall clock (settimeofday, an NTP
// step, a VM resumed from a snapshot) then moves none of the daemon's
// deadlines: every span between two of its readings, a probe's, a paste's
// or a backoff's, is monotonic time, as the records store them in wall
// time without Go's monotonic reading. Until the process restarts its
// readings differ from the wall clock by the steps since it started; times
// other processes stamp (the SessionStart hook's report, a transcript's
// modification time, a usage limit's reset) are off by as much, and only
// while such a step stands.
func SteadyClock(wall func() time.Time, elapsed func() time.Duration) func() time.Time {
	start, at := wall(), elapsed()
	return func() time.Time { return start.Add(elapsed() - at) }
}

// processStart anchors Elapsed; time.Now carries the monotonic reading
// time.Since measures from.
var processStart = time.Now()

// Elapsed returns how long the process has run, on the monotonic clock.
func Elapsed() time.Duration { return time.Since(processStart) }

// boundStatus returns st with each instant that lies further in the future
// than its rule allows brought back to that bound, and the names of the
// fields it changed. A daemon's clock never steps (SteadyClock), but the
// records outlive it: one restarted after the wall clock stepped back
// finds deadlines and stamps ahead of its clock, which would hold an item
// back for as long as the step. An instant that happened (a spawn, a
// paste, an exit, a queueing, a preparation, a delivery) lies at now at
// the latest; a probe deadline at most Probe ahead, a next attempt at most
// BackoffMax, and a usage limit's hold (LimitUntil, and a rate-limited
// item's next attempt) at most the longest of LimitMaxHold, LimitDefault
// and OverloadWait, plus LimitMargin (when LimitMaxHold bounds holds). A forward step needs no bound:
// it ends the waits in flight once, as a downtime as long would.
func boundStatus(st desired.Status, p Policy, now time.Time) (desired.Status, []string) {
	var changed []string
	bound := func(name string, t *time.Time, most time.Duration) {
		if limit := now.Add(most); t.After(limit) {
			*t = limit
			changed = append(changed, name)
		}
	}
	bound("SpawnedAt", &st.SpawnedAt, 0)
	bound("SentAt", &st.SentAt, 0)
	bound("LastExitAt", &st.LastExitAt, 0)
	bound("QueuedAt", &st.QueuedAt, 0)
	bound("ActiveSeenAt", &st.ActiveSeenAt, 0)
	bound("PrepareStarted", &st.PrepareStarted, 0)
	bound("ProbeDeadline", &st.ProbeDeadline, p.Probe)
	// A usage limit's hold is the longest of a named reset's bound and the
	// defaults that stand for an unnamed one, plus the margin; a
	// rate-limited item's next attempt is its hold's end.
	hold := max(p.LimitMaxHold, p.LimitDefault, p.OverloadWait) + p.LimitMargin
	if st.Phase == desired.PhaseRateLimited {
		if p.LimitMaxHold > 0 {
			bound("NextAttempt", &st.NextAttempt, hold)
		}
	} else {
		bound("NextAttempt", &st.NextAttempt, p.BackoffMax)
	}
	if p.LimitMaxHold > 0 {
		bound("LimitUntil", &st.LimitUntil, hold)
	}
	for i, t := range st.DeliveredAt {
		if t.After(now) {
			if len(changed) == 0 || changed[len(changed)-1] != "DeliveredAt" {
				st.DeliveredAt = append([]time.Time(nil), st.DeliveredAt...)
				changed = append(changed, "DeliveredAt")
			}
			st.DeliveredAt[i] = now
		}
	}
	return st, changed
}

// boundClock brings every record's instants within their bounds
// (boundStatus) before the pass plans on them, writes each changed status
// (not in a dry run) and journals clock.bounded with the fields. It
// returns the records as the pass is to see them.
func (r *Reconciler) boundClock(ctx context.Context, records []desired.Record, p Policy, now time.Time, dryRun bool) ([]desired.Record, error) {
	for i := range records {
		if !owns(records[i], p) {
			continue // another host's to bound
		}
		st, fields := boundStatus(records[i].Status, p, now)
		if len(fields) == 0 {
			continue
		}
		if !dryRun {
			// Through the executor's one home of status writes: fenced
			// by the item's lease, stamped with this host.
			if err := r.Executor.PutStatus(ctx, &records[i], st); err != nil {
				return nil, fmt.Errorf("bound clock %s: %w", records[i].Key, err)
			}
			r.Journal.Record(ctx, slog.LevelWarn, journal.ClockBounded, records[i].Key.String(),
				"fields", strings.Join(fields, ","))
		}
		records[i].Status = st
	}
	return records, nil
}
