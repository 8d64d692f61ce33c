package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
)

// Why a report in an item's channel is refused (RefuseReport), besides the
// problems the channel finds in a report by itself (channel.Problem…).
const (
	// ReasonWrongWorkItem: the report names another work item than the
	// one whose channel it is in (or none).
	ReasonWrongWorkItem Reason = "wrong_work_item"
	// ReasonNotThisSpawn: the report carries no token, or another than
	// the current spawn's: another item's, or an earlier spawn's.
	ReasonNotThisSpawn Reason = "not_this_spawn"
	// ReasonInvalidSessionID: the id is not one the item's harness
	// accepts.
	ReasonInvalidSessionID Reason = "invalid_session_id"
)

// TakeReport records a report the item's harness made about itself (its
// SessionStart hook, through the item's channel) as the item's latest
// report, and removes its file from the channel.
type TakeReport struct {
	Key     desired.Key
	Session string
	// File is the report's file name in the item's channel.
	File   string
	Report desired.SessionReport
}

// Item implements Action.
func (a TakeReport) Item() desired.Key { return a.Key }

// Name implements Action.
func (TakeReport) Name() string { return "take_report" }

// Mutates implements Action.
func (TakeReport) Mutates() bool { return true }

// Fields implements Action.
func (a TakeReport) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyReport, a.File},
		{journal.KeyHarnessSessionID, a.Report.SessionID}, {journal.KeySource, a.Report.Source}}
}

func (a TakeReport) String() string { return Format(a) }

// RefuseReport removes a report from the item's channel that is not the
// item's current spawn's own, or not a report at all, and journals why
// (session.report_rejected). Nothing else changes.
type RefuseReport struct {
	Key     desired.Key
	Session string
	File    string
	Reason  Reason
	// Detail says what failed; SessionID and Source are what the report
	// said, for the journal (cut to journal.Clip's bound).
	Detail            string
	SessionID, Source string
}

// Item implements Action.
func (a RefuseReport) Item() desired.Key { return a.Key }

// Name implements Action.
func (RefuseReport) Name() string { return "refuse_report" }

// Mutates implements Action.
func (RefuseReport) Mutates() bool { return true }

// Fields implements Action.
func (a RefuseReport) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyReport, a.File},
		{journal.KeyReason, string(a.Reason)}}
}

func (a RefuseReport) String() string { return Format(a) }

// maxShownValue caps, in bytes, a value of a refused report quoted in the
// journal.
const maxShownValue = 200

// takeReport records a.Report, journals session.reported, and removes
// the report's file; a file that cannot be removed is taken again by the
// next pass, which records the same report once more.
func (e *Executor) takeReport(ctx context.Context, r *desired.Record, a TakeReport) error {
	if err := e.Store.ReportSession(ctx, r.Key, a.Report); err != nil {
		return err // the store names the operation and the item
	}
	rep := a.Report
	r.Report = &rep
	e.record(ctx, slog.LevelInfo, journal.SessionReported, r.Key, "session", a.Session,
		"harness_session_id", rep.SessionID, "source", rep.Source)
	return e.removeReport(r, a.Session, a.File)
}

// refuseReport journals session.report_rejected and removes the report's
// file. The journal row is a failure (warning, with err) whose identity is
// the item and the reason, so that a flood of forged reports is folded
// into one row a window with its count (journal.Limiter).
func (e *Executor) refuseReport(ctx context.Context, r *desired.Record, a RefuseReport) error {
	e.record(ctx, slog.LevelWarn, journal.SessionReportRejected, r.Key, "session", a.Session, "reason", string(a.Reason),
		"attempted_session_id", journal.Clip(a.SessionID, maxShownValue), "source", journal.Clip(a.Source, maxShownValue),
		"detail", journal.Clip(a.Detail, maxShownValue), "err", errReportRefused)
	return e.removeReport(r, a.Session, a.File)
}

// errReportRefused is the err of every session.report_rejected row: one
// failure, whatever the report said (the Limiter tells repeats apart by
// work item, reason and err).
var errReportRefused = errors.New("report refused")

// removeReport removes the file of a report of r that was handled.
func (e *Executor) removeReport(r *desired.Record, session, file string) error {
	if e.Channels == "" {
		return nil
	}
	if err := channel.RemoveReport(channel.Dir(e.Channels, session), file); err != nil {
		return fmt.Errorf("report of %s: %w", r.Key, err)
	}
	return nil
}
