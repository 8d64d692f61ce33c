package webhook

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/desired"
)

// MaxCIOutput is the most of a check run's output text, in bytes, that a
// CI failure's prompt carries; the rest is left out and counted.
const MaxCIOutput = 4 << 10

// MaxCIChecks is the most failed checks one commit's prompt names; the
// others are counted.
const MaxCIChecks = 20

// check is what a check or workflow event says of one check of a commit.
type check struct {
	action     string // the payload's action
	status     string // queued, in_progress, completed…
	name       string // the check run's name, the workflow's, or the suite's app
	conclusion string // success, failure, timed_out… once completed
	commit     string // the head commit it ran on
	url        string // where its details are shown
	output     string // the check run's output (title, summary, text), uncut
	suite      int64  // the check suite it belongs to; 0 when unknown
	run        int64  // the check run; 0 for a check suite or a workflow run
	// tracked are the actions of the event that say something of the
	// commit's checks: the others (rerequested, requested_action) are
	// not handled.
	tracked []string
}

// failed reports whether a completed check's conclusion is a failure loopd
// tells the agent about (GitHub docs, "check_run": success, failure,
// neutral, cancelled, timed_out, action_required, stale, skipped).
func failed(conclusion string) bool { return conclusion == "failure" || conclusion == "timed_out" }

// done reports whether the event says its check completed.
func (k check) done() bool { return k.action == "completed" || k.status == "completed" }

// ciChange turns a check or workflow event of repository repo into the
// change of the pull request items it is about (desired.Ingest.CI): the
// first of prs whose base is repo and whose head is the check's commit,
// or, when GitHub names none (a fork's pull request: pull_requests is
// empty, and a check's head_branch is null), every open pull request item
// whose recorded head is the commit (byCommit, store.Store.Heads), never
// one found by a branch name. Every tracked action is recorded, so that
// the commit's prompt waits for its suites to complete; only a completed
// failure is named in it. It returns an ignore reason for an action that
// says nothing of the checks, and for a listed pull request whose head
// moved on.
func ciChange(k check, repo repository, sender user, prs []prRef) (change, string, error) {
	owner, name := repo.Owner.Login, repo.Name
	switch {
	case owner == "" || name == "":
		return change{}, "", fmt.Errorf("%w: no repository owner or name", errIncomplete)
	case !slices.Contains(k.tracked, k.action):
		return change{}, reasonActionNotHandled, nil
	case k.commit == "":
		return change{}, "", fmt.Errorf("%w: no head_sha", errIncomplete)
	}
	commit := strings.ToLower(k.commit)
	number, stale := 0, false
	for _, p := range prs {
		if p.Number <= 0 || !strings.EqualFold(p.Base.Repo.Name, name) {
			continue
		}
		if !strings.EqualFold(p.Head.SHA, commit) {
			stale = true
			continue
		}
		number = p.Number
		break
	}
	if number == 0 && stale {
		return change{}, reasonStaleCommit, nil
	}
	who := sender.Login
	if who == "" {
		who = k.name
	}
	ev := &desired.CI{Commit: commit, Suite: k.suite, Run: k.run, Done: k.done()}
	reason := reasonCINotCompleted
	if ev.Done {
		reason = reasonCINotFailed
	}
	if ev.Done && failed(k.conclusion) {
		out, cut := cutOutput(k.output)
		ev.Failure = &desired.CIFailure{Check: k.name, Conclusion: k.conclusion, URL: k.url, Output: out, OutputCut: cut,
			Suite: k.suite, Run: k.run, Rollup: k.run == 0, Sender: who}
		reason = ""
	}
	c := change{
		key:        desired.Key{Owner: owner, Repo: name, Number: number},
		byCommit:   number == 0,
		kind:       desired.KindPullRequest,
		sender:     who,
		senderType: sender.Type,
		commit:     commit,
		ci:         ev,
		ciQuiet:    reason,
	}
	return c, "", nil
}

// cutOutput returns the first MaxCIOutput bytes of s, cut at a character
// boundary, and how many bytes were left out.
func cutOutput(s string) (string, int) {
	if len(s) <= MaxCIOutput {
		return s, 0
	}
	end := MaxCIOutput
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], len(s) - end
}

func classifyCheckRun(e *payload) (change, string, error) {
	run := e.CheckRun
	var out []string
	for _, part := range []string{run.Output.Title, run.Output.Summary, run.Output.Text} {
		if part != "" {
			out = append(out, part)
		}
	}
	url := run.DetailsURL
	if url == "" {
		url = run.HTMLURL
	}
	k := check{action: e.Action, status: run.Status, name: run.Name, conclusion: run.Conclusion, commit: run.HeadSHA, url: url,
		output: strings.Join(out, "\n\n"), suite: run.CheckSuite.ID, run: run.ID, tracked: []string{"created", "completed"}}
	c, reason, err := ciChange(k, e.Repository, e.Sender, run.PullRequests)
	c.identity = identity("check_run", e.Action, id(run.ID), run.Status, run.Conclusion)
	return c, reason, err
}

func classifyCheckSuite(e *payload) (change, string, error) {
	s := e.CheckSuite
	name := s.App.Name
	if name == "" {
		name = s.App.Slug
	}
	k := check{action: e.Action, status: s.Status, name: name, conclusion: s.Conclusion, commit: s.HeadSHA, suite: s.ID,
		tracked: []string{"requested", "completed"}}
	if u := e.Repository.HTMLURL; u != "" && k.commit != "" {
		k.url = u + "/commit/" + k.commit + "/checks"
	}
	c, reason, err := ciChange(k, e.Repository, e.Sender, s.PullRequests)
	c.identity = identity("check_suite", e.Action, id(s.ID), s.Status, s.Conclusion, stamp(s.UpdatedAt))
	return c, reason, err
}

func classifyWorkflowRun(e *payload) (change, string, error) {
	w := e.WorkflowRun
	name := w.Name
	if name == "" {
		name = e.Workflow.Name
	}
	k := check{action: e.Action, status: w.Status, name: name, conclusion: w.Conclusion, commit: w.HeadSHA, url: w.HTMLURL,
		suite: w.CheckSuiteID, tracked: []string{"requested", "in_progress", "completed"}}
	c, reason, err := ciChange(k, e.Repository, e.Sender, w.PullRequests)
	c.identity = identity("workflow_run", e.Action, id(w.ID), strconv.Itoa(w.RunAttempt), w.Status, w.Conclusion)
	return c, reason, err
}
