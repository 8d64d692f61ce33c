package observed

import (
	"context"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/runner"
)

// Run is one run of the process runner as a pass sees it: running, or
// ended with its exit status and when (runner.Fact), and the conversation
// id its output names, read by the harness's adapter once it has ended
// (harness.Headless.HeadlessSessionID), "" when none.
type Run struct {
	runner.Fact
	SessionID string
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
		if h, ok := o.Harnesses[rec.Spec.Harness].(harness.Headless); ok && f.Ended() {
			r.SessionID = h.HeadlessSessionID(f.Output)
		}
		if snap.Runs == nil {
			snap.Runs = map[string]Run{}
		}
		snap.Runs[session] = r
	}
}
