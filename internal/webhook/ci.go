package webhook

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loopd/loopd/desired"
)

// MaxCIOutput is the most of a check run's output text, in bytes, that a
// CI failure's prompt carries; the rest is left out and counted.
const MaxCIOutput = 4 << 10

// ciFailure is a check that failed on a pull request's head commit.
type ciFailure struct {
	check      string // the check run's name, the workflow's, or the suite's app
	conclusion string // failure or timed_out
	commit     string // the head commit it ran on
	url        string // where its details are shown
	output     string // the check run's output (title, summary, text), uncut
	suite      int64  // the check suite it belongs to; 0 when unknown
	// rollup is true for a check suite or a workflow run, which sum up
	// the check runs of one suite.
	rollup bool
}

// failed reports whether a completed check's conclusion is a failure loopd
// tells the agent about (GitHub docs, "check_run": success, failure,
// neutral, cancelled, timed_out, action_required, stale, skipped).
func failed(conclusion string) bool { return conclusion == "failure" || conclusion == "timed_out" }

// claims returns the keys that make f one prompt per (item, head commit,
// check name), the rule of desired.Check: a check run is a duplicate of an
// earlier one of the same name, or of a roll-up of its suite (a check
// suite or a workflow run) already prompted; a roll-up is a duplicate of
// any prompt of its suite. So GitHub Actions' check run, check suite and
// workflow run of one failed job give one prompt, two failed jobs of one
// workflow two, and a redelivery under a new id none. Every key names the
// commit, since the claims are per item.
func (f ciFailure) claims() (claims, conflicts []string) {
	check := f.commit + " check " + f.check
	ran, rolled := "", ""
	if f.suite != 0 {
		id := strconv.FormatInt(f.suite, 10)
		ran, rolled = f.commit+" suite-ran "+id, f.commit+" suite "+id
	}
	if f.rollup {
		if f.suite == 0 {
			return []string{check}, []string{check}
		}
		return []string{rolled}, []string{ran, rolled}
	}
	claims, conflicts = []string{check}, []string{check}
	if f.suite != 0 {
		claims, conflicts = append(claims, ran), append(conflicts, rolled)
	}
	return claims, conflicts
}

// ciChange turns a completed check of repository repo into the change of
// the pull request it ran for: the first of prs whose base is repo and
// whose head is the check's commit. It returns an ignore reason for a
// check still running, one that did not fail, one with no such pull
// request (GitHub lists none for a fork's), and one that ran on a commit
// that is no longer its pull request's head.
func ciChange(action string, repo repository, sender user, prs []prRef, f ciFailure) (change, string, error) {
	owner, name := repo.Owner.Login, repo.Name
	switch {
	case owner == "" || name == "":
		return change{}, "", fmt.Errorf("%w: no repository owner or name", errIncomplete)
	case action != "completed":
		return change{}, reasonActionNotHandled, nil
	case !failed(f.conclusion):
		return change{}, reasonCINotFailed, nil
	case f.commit == "":
		return change{}, "", fmt.Errorf("%w: no head_sha", errIncomplete)
	}
	var pr *prRef
	stale := false
	for i, p := range prs {
		if p.Number <= 0 || !strings.EqualFold(p.Base.Repo.Name, name) {
			continue
		}
		if !strings.EqualFold(p.Head.SHA, f.commit) {
			stale = true
			continue
		}
		pr = &prs[i]
		break
	}
	switch {
	case pr == nil && stale:
		return change{}, reasonStaleCommit, nil
	case pr == nil:
		return change{}, reasonNoPullRequest, nil
	}
	who := sender.Login
	if who == "" {
		who = f.check
	}
	out, cut := cutOutput(f.output)
	c := change{
		key:        desired.Key{Owner: owner, Repo: name, Number: pr.Number},
		kind:       desired.KindPullRequest,
		sender:     who,
		senderType: sender.Type,
		commit:     f.commit,
		ci:         &f,
		prompt: &PromptInput{
			Check: f.check, Conclusion: f.conclusion, Commit: f.commit, Head: pr.Head.Ref,
			URL: f.url, Body: out, OutputCut: cut,
		},
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
	f := ciFailure{check: run.Name, conclusion: run.Conclusion, commit: run.HeadSHA, url: url,
		output: strings.Join(out, "\n\n"), suite: run.CheckSuite.ID}
	return ciChange(e.Action, e.Repository, e.Sender, run.PullRequests, f)
}

func classifyCheckSuite(e *payload) (change, string, error) {
	s := e.CheckSuite
	name := s.App.Name
	if name == "" {
		name = s.App.Slug
	}
	f := ciFailure{check: name, conclusion: s.Conclusion, commit: s.HeadSHA, suite: s.ID, rollup: true}
	if u := e.Repository.HTMLURL; u != "" && f.commit != "" {
		f.url = u + "/commit/" + f.commit + "/checks"
	}
	return ciChange(e.Action, e.Repository, e.Sender, s.PullRequests, f)
}

func classifyWorkflowRun(e *payload) (change, string, error) {
	w := e.WorkflowRun
	name := w.Name
	if name == "" {
		name = e.Workflow.Name
	}
	f := ciFailure{check: name, conclusion: w.Conclusion, commit: w.HeadSHA, url: w.HTMLURL,
		suite: w.CheckSuiteID, rollup: true}
	return ciChange(e.Action, e.Repository, e.Sender, w.PullRequests, f)
}
