package reconciler

import (
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/observed"
)

// takeReports judges the reports the pass found in r's channel
// (observed.Observation.Reports), oldest first, and returns what becomes of
// each, with r as it then is. A report is the item's own (judgeReport)
// only when it is from the item's current spawn: it is recorded
// (TakeReport), and the latest one is r's Report from here on, as the
// store will hold it. Any other is refused (RefuseReport, with its
// reason) and changes nothing. Both remove the file, so that a report is
// judged once.
func takeReports(r desired.Record, obs observed.Observation, p Policy, now time.Time) ([]actions.Action, desired.Record) {
	var out []actions.Action
	session := desired.SessionName(r.Key)
	for _, f := range obs.Reports[r.Key] {
		reason, detail := judgeReport(r, f.WorkItem, f.TokenDigest, f.SessionID, f.Problem, f.Detail, p)
		if reason != "" {
			out = append(out, actions.RefuseReport{Key: r.Key, Session: session, File: f.Name, Reason: reason, Detail: detail,
				SessionID: f.SessionID, Source: f.Source})
			continue
		}
		rep := desired.SessionReport{SessionID: f.SessionID, Source: f.Source, At: reportAt(f.ModTime, r.Status.SpawnedAt, now)}
		out = append(out, actions.TakeReport{Key: r.Key, Session: session, File: f.Name, Report: rep})
		r.Report = &rep
	}
	return out, r
}

// judgeReport returns why a report in r's channel is not r's current
// spawn's own, "" when it is: it must be whole (problem, what the channel
// found wrong with it by itself, is ""), name r (item), carry the token r's
// current spawn was given (digest, against Status.ChannelToken:
// channel.Matches), and name an id r's harness accepts. The channel's
// directory is r's alone (inside a sandbox no other item sees it), and the
// token tells r's current spawn from an earlier one and from another
// item's agent where the directory is in reach (no sandbox).
func judgeReport(r desired.Record, item, digest, id, problem, detail string, p Policy) (actions.Reason, string) {
	switch {
	case problem != "":
		return actions.Reason(problem), detail
	case item != r.Key.String():
		return actions.ReasonWrongWorkItem, "the report names " + item
	case !channel.Matches(digest, r.Status.ChannelToken):
		return actions.ReasonNotThisSpawn, "the token is not the current spawn's"
	case !p.Harnesses[r.Spec.Harness].AcceptsSessionID(id):
		return actions.ReasonInvalidSessionID, "not an id harness " + r.Spec.Harness + " accepts"
	}
	return "", ""
}

// reportAt is when a report of the spawn made at spawned counts as made:
// its file's mtime as the writer stamped it, brought within [spawned,
// now], since its token already shows it is that spawn's.
func reportAt(mtime, spawned, now time.Time) time.Time {
	switch {
	case mtime.Before(spawned):
		return spawned
	case mtime.After(now):
		return now
	}
	return mtime
}
