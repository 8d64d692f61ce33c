package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// CI is one check or workflow event of a pull request item's commit
// (Ingest.CI): what it says of the commit's checks. The store keeps, per
// item and commit, which check runs and which check suites (from a check
// suite's or a workflow run's own events) it has seen and whether each
// completed, and the failures among them; the failures of one commit
// become one prompt (store.Store.SendCI), once every suite and run seen has
// completed or the commit has been quiet for a while (webhook's CI rule).
// The item must exist (Ingest.NoCreate applies), and Commit must be its
// recorded head when one is recorded (StaleCommit).
type CI struct {
	Commit string
	// Run is the check run the event is about, 0 for a check suite or a
	// workflow run; Suite the check suite it is about or belongs to. A
	// check run's suite is not seen by its event: a suite completes by
	// its own (check_suite, workflow_run).
	Suite, Run int64
	// Done is true when the event says its run or suite completed.
	Done bool
	// Failure, when set, is a failure the commit's prompt names.
	Failure *CIFailure
}

// CIFailure is one failed check of a commit, as its prompt names it.
type CIFailure struct {
	Check      string `json:"check"`      // the check run's name, the workflow's, or the suite's app
	Conclusion string `json:"conclusion"` // failure or timed_out
	URL        string `json:"url,omitempty"`
	// Output is the check run's output (title, summary, text), bounded by
	// the caller; OutputCut how many bytes of it were left out.
	Output    string `json:"output,omitempty"`
	OutputCut int    `json:"output_cut,omitempty"`
	Suite     int64  `json:"suite,omitempty"`
	Run       int64  `json:"run,omitempty"`
	// Rollup is true for a check suite or a workflow run, which sum up
	// the check runs of one suite.
	Rollup bool   `json:"rollup,omitempty"`
	Sender string `json:"sender,omitempty"` // who sent the event (GitHub's app, e.g. github-actions[bot])
	Head   string `json:"head,omitempty"`   // the pull request's head branch, when the event named it
}

// CICommit is the CI of one pull request item's commit that collects
// failures and has not become a prompt yet (store.Store.CICommits).
type CICommit struct {
	Key    Key
	Commit string
	// Failures are the failures recorded, in arrival order, each check
	// run once (its latest event) and each roll-up once.
	Failures []CIFailure
	// Complete is true when every check suite and check run seen for the
	// commit has completed.
	Complete bool
	// LastAt is when the store recorded the commit's latest event.
	LastAt time.Time
}

// CIFailures returns the failures a prompt names: every check run that
// failed, and the roll-up of a suite (a check suite, a workflow run) only
// when no check run of that suite failed (the webhook may not be sent
// check runs), each check name once (its latest).
func (c CICommit) CIFailures() []CIFailure {
	ran := map[int64]bool{}
	for _, f := range c.Failures {
		if !f.Rollup && f.Suite != 0 {
			ran[f.Suite] = true
		}
	}
	var out []CIFailure
	seen := map[string]int{}
	for _, f := range c.Failures {
		if f.Rollup && ran[f.Suite] {
			continue
		}
		if i, ok := seen[f.Check]; ok {
			out[i] = f
			continue
		}
		seen[f.Check] = len(out)
		out = append(out, f)
	}
	return out
}

// CIDeliveryID is the id of the delivery that carries the prompt of the
// failed checks of item k's commit: "ci-", the commit's first 12 hex
// digits and a digest of the key, so that it is one per (item, commit)
// and never an X-GitHub-Delivery (whose GUID has no such form).
func CIDeliveryID(k Key, commit string) string {
	sum := sha256.Sum256([]byte(k.String()))
	c := strings.ToLower(commit)
	if len(c) > 12 {
		c = c[:12]
	}
	return "ci-" + c + "-" + hex.EncodeToString(sum[:4])
}
