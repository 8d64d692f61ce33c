package observed

import (
	"context"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/runner"
)

// Run is one run of the process runner as a pass sees it: running, or
// ended with its exit status and when (runner.Fact), and, read by the
// harness's adapter once it has ended, the conversation id its output
// names (harness.Headless.HeadlessSessionID), "" when none, and what it
// said last (Exit: its output's last line, and its refusal to resume the
// recorded conversation).
type Run struct {
	runner.Fact
	SessionID string
	Exit      Exit
}

// readRuns reads the run each record's status names into snap.Runs. A run
// whose files cannot be read is logged (run.unreadable) and left out: the
// planner then waits for it rather than judge it.
func (o *Observer) readRuns(ctx context.Context, records []desired.Record, snap *Snapshot) {
	if o.Runs == nil {
		return
	}
	for _, rec := range records {
		id := rec.Status.RunID
		if id == "" {
			continue
		}
		session := desired.SessionName(rec.Key)
		f, err := o.Runs.Read(session, id)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.RunUnreadable), "work_item", rec.Key.String(), "run", id, "err", err)
			continue
		}
		r := Run{Fact: f}
		ad := o.Harnesses[rec.Spec.Harness]
		if h, ok := ad.(harness.Headless); ok && f.Ended() {
			r.SessionID = h.HeadlessSessionID(f.Output)
			out := journal.StripControls(string(f.Output), journal.NewlineOrTab)
			status := f.ExitStatus
			if f.Signal != 0 || !f.StatusKnown {
				status = -1
			}
			r.Exit = Exit{Words: lastWords(out), Refusal: harness.ResumeRefusal(ad, out, status, rec.Status.HarnessSessionID)}
			if t, ok := ad.(harness.TurnFinder); ok && r.SessionID == "" && rec.Status.BootID != "" {
				// A run cut short says nothing: the transcript that holds
				// its boot line is the conversation its turn went into.
				id, err := t.TurnConversation(rec.Workdir(), f.StartedAt, desired.BootFrame(rec.Status.BootID))
				if err != nil {
					o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "run", rec.Status.RunID, "err", err)
				}
				r.SessionID = id
			}
		}
		if snap.Runs == nil {
			snap.Runs = map[string]Run{}
		}
		snap.Runs[session] = r
	}
}
