package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// route returns the config of the routes' "*" entry, for a test to edit
// before writeConfig.
func (e *env) route() map[string]any {
	return e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)
}

// ignoredReasons returns the reason of every delivery.ignored row.
func (e *env) ignoredReasons(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, ev := range e.events(t) {
		if ev.Name == journal.DeliveryIgnored {
			out = append(out, ev.Attrs["reason"])
		}
	}
	return out
}

// count returns how many of list equal s.
func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// TestOwnActionsNeverReachTheAgent reproduces the measured case of issue 9
// on a pull request whose agent works in a worktree: its own push
// (pull_request.synchronize to the commit it made there, sent as the
// operator, who is authorized), one comment of its own (the bot login,
// listed as authorized, sender.type Bot, performed_via_github_app) and a
// burst of 20 comments carrying its hidden marker. None reaches the agent;
// each is journaled with its reason. A person's comment after them does.
// The bot login is not configured: it is the login the GitHub token
// belongs to, which serve resolves at start.
func TestOwnActionsNeverReachTheAgent(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	// botLogin is left empty: the login is the one the token belongs to,
	// which serve asks the API for at start (GET /user: loopd-bot).
	srv, _ := e.withGitHub(t)
	require.Equal(t, "loopd-bot", srv.Login)
	e.ghWebhook()["authorizedUsers"] = []string{"Codertocat", "loopd-bot"}
	e.writeConfig(t)
	e.start(t)

	pr := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 5}
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(5), func(m map[string]any) {
		head := m["pull_request"].(map[string]any)["head"].(map[string]any)
		head["ref"], head["sha"] = r.PRBranch, r.PRHead
	}))
	id := e.waitPhase(t, pr, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitFor(t, func() bool { return len(e.userTurns(t, pr, id)) == 1 }, waitLong, "the opening prompt never arrived")
	assert.Contains(t, e.userTurns(t, pr, id)[0], desired.AgentMarker(pr), "the agent is told how to mark its comments")

	// The agent commits in its worktree and pushes (the push itself is
	// GitHub's business; its webhook comes back as the operator's).
	dir := e.workdir(pr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fix.txt"), []byte("fixed\n"), 0o644))
	gitIn(t, dir, "add", "fix.txt")
	gitIn(t, dir, "commit", "-q", "-m", "fix")
	pushed := gitIn(t, dir, "rev-parse", "HEAD")
	push := e.deliver(t, "pull_request.synchronize.1.json", all(withNumber(5), func(m map[string]any) {
		m["after"] = pushed
		head := m["pull_request"].(map[string]any)["head"].(map[string]any)
		head["ref"], head["sha"] = r.PRBranch, pushed
	}))
	onPR := func(body, login, typ string) func(map[string]any) {
		return all(withNumber(5), withComment(body), func(m map[string]any) {
			m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/5"}
			m["sender"].(map[string]any)["login"] = login
			m["sender"].(map[string]any)["type"] = typ
			m["comment"].(map[string]any)["performed_via_github_app"] = map[string]any{"id": 1, "slug": "loopd"}
		})
	}
	e.deliver(t, commentFixture, onPR("Pushed the fix.", "loopd-bot", "Bot"))
	for i := range 20 {
		e.deliver(t, commentFixture, onPR("Step "+strings.Repeat("!", i)+" done.\n\n"+desired.AgentMarker(pr), "Codertocat", "User"))
	}
	control := "please also update the changelog " + uuid.NewString()
	e.deliver(t, commentFixture, onPR(control, "Codertocat", "User"))
	e.waitTurn(t, pr, id, control, waitLong, "the person's comment never arrived")

	turns := e.userTurns(t, pr, id)
	assert.Len(t, turns, 2, "the opening prompt and the person's comment, nothing of the agent's own")
	assert.Zero(t, countContaining(turns, "Step"))
	assert.Zero(t, countContaining(turns, "Pushed the fix."))
	assert.Zero(t, countContaining(turns, "pull_request.synchronize"))
	dropped := e.eventsNamed(t, journal.DispatchDropped, pr)
	require.Len(t, dropped, 1)
	assert.Equal(t, push, dropped[0].Attrs["delivery"])
	assert.Equal(t, "own_push", dropped[0].Attrs["reason"])
	assert.Equal(t, pushed, dropped[0].Attrs["commit"])
	reasons := e.ignoredReasons(t)
	assert.Equal(t, 1, count(reasons, "own_login"))
	assert.Equal(t, 20, count(reasons, "agent_marker"))
	e.waitRecord(t, pr, func(r desired.Record) bool { return len(r.Pending) == 0 }, waitLong, "nothing is left pending once the comment is confirmed")
}

// TestCIFailureReachesThePullRequestsAgent: a failed check run on the head
// of a pull request that has an agent is one prompt to it once the
// commit's checks are done, naming the check, its conclusion, the commit
// and the details URL; a later success and the check suite of that
// commit, a replay of the failure under a new delivery id, a redelivery
// and a failure on a commit that is no longer the head send nothing, and
// a failure on a pull request without an agent starts none.
func TestCIFailureReachesThePullRequestsAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	e.deliver(t, "pull_request.opened.1.json", nil)
	id := e.waitPhase(t, keyPR, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitFor(t, func() bool { return len(e.userTurns(t, keyPR, id)) == 1 }, waitLong, "the opening prompt never arrived")

	const head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	ci := func(fixture, conclusion, sha string, number int) func(map[string]any) {
		event := eventOf(fixture)
		return func(m map[string]any) {
			o := m[event].(map[string]any)
			o["conclusion"], o["head_sha"] = conclusion, sha
			p := o["pull_requests"].([]any)[0].(map[string]any)
			p["number"] = number
			p["head"].(map[string]any)["sha"] = sha
			m["sender"] = map[string]any{"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
		}
	}
	e.deliver(t, "check_run.completed.1.json", ci("check_run.completed.1.json", "failure", head, 9))
	e.deliver(t, "check_run.completed.1.json", ci("check_run.completed.1.json", "failure", head, 2))
	prompt := desired.CIDeliveryID(keyPR, head)
	e.waitTurn(t, keyPR, id, "(delivery "+prompt+")", waitLong, "the CI failure never reached the agent")
	turn := e.userTurns(t, keyPR, id)[1]
	for _, want := range []string{"ci.failed on Codertocat/Hello-World#2 by github-actions[bot]", "failed_checks: 1",
		"check: Octocoders-linter", "conclusion: failure", "commit: " + head, "url: https://octocoders.io"} {
		assert.Contains(t, turn, want)
	}

	e.deliver(t, "check_run.completed.2.json", nil)                                                                                                    // a success of that commit
	e.deliver(t, "check_suite.completed.1.json", ci("check_suite.completed.1.json", "failure", head, 2))                                               // its suite
	require.Equal(t, http.StatusOK, e.replay(t, "check_run.completed.1.json", uuid.NewString(), ci("check_run.completed.1.json", "failure", head, 2))) // replayed under a new id
	const next = "4444444444444444444444444444444444444444"
	e.deliver(t, "pull_request.synchronize.1.json", func(m map[string]any) {
		m["after"] = next
		pr := m["pull_request"].(map[string]any)
		pr["head"].(map[string]any)["sha"] = next
		pr["updated_at"] = "2030-01-01T00:00:00Z"
	})
	e.deliver(t, "check_run.completed.1.json", func(m map[string]any) {
		ci("check_run.completed.1.json", "timed_out", head, 2)(m)
		m["check_run"].(map[string]any)["name"] = "tests"
	}) // on the old head
	control := "and the docs " + uuid.NewString()
	e.deliver(t, commentFixture, all(withNumber(2), withComment(control), func(m map[string]any) {
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
	}))
	e.waitTurn(t, keyPR, id, control, waitLong, "the comment after the checks never arrived")

	turns := e.userTurns(t, keyPR, id)
	assert.Equal(t, 1, countContaining(turns, "ci.failed"), "one prompt for the failure")
	assert.Zero(t, countContaining(turns, "check_suite"))
	assert.Len(t, turns, 4, "opening, the failure, the push, the comment")
	_, ok := e.record(t, desired.Key{Owner: keyPR.Owner, Repo: keyPR.Repo, Number: 9})
	assert.False(t, ok, "CI never starts an agent")
	reasons := e.ignoredReasons(t)
	for _, want := range []string{"no_work_item", "check_already_sent", "stale_commit"} {
		assert.Contains(t, reasons, want)
	}
	assert.Equal(t, 2, count(reasons, "check_already_sent"), "the success and the suite")
	assert.Len(t, e.eventsNamed(t, journal.DeliveryDuplicate, keyPR), 1, "the replay")
}

// TestForkCIReachesTheAgentByItsCommit: the checks of a fork's pull
// request, which GitHub sends with pull_requests empty (and a check's
// head_branch null), reach its agent by their commit, as one prompt once
// the workflow's suite completes; the workflow run's own completion after
// it sends nothing more, and checks of a commit no item has as its head
// are journaled with the commit.
func TestForkCIReachesTheAgentByItsCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	fork := desired.Key{Owner: keyPR.Owner, Repo: keyPR.Repo, Number: 3}
	e.deliver(t, "pull_request.opened.5.json", nil)
	id := e.waitPhase(t, fork, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitFor(t, func() bool { return len(e.userTurns(t, fork, id)) == 1 }, waitLong, "the opening prompt never arrived")

	for _, f := range []string{"workflow_run.requested.1.json", "check_run.created.1.json", "check_run.completed.3.json",
		"check_suite.completed.2.json", "workflow_run.completed.2.json"} {
		e.deliver(t, f, nil)
	}
	const sha = "d6fde92930d4715a2b49857d24b940956b26d2d3"
	prompt := desired.CIDeliveryID(fork, sha)
	e.waitTurn(t, fork, id, "(delivery "+prompt+")", waitLong, "the fork's CI failure never reached the agent")
	e.deliver(t, "check_run.completed.3.json", func(m map[string]any) {
		m["check_run"].(map[string]any)["head_sha"] = "5555555555555555555555555555555555555555"
	})
	control := "what failed? " + uuid.NewString()
	e.deliver(t, commentFixture, all(withNumber(3), withComment(control), func(m map[string]any) {
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/3"}
	}))
	e.waitTurn(t, fork, id, control, waitLong, "the comment after the checks never arrived")

	turns := e.userTurns(t, fork, id)
	assert.Len(t, turns, 3, "the opening, the one CI prompt, the comment")
	assert.Equal(t, 1, countContaining(turns, "ci.failed on Codertocat/Hello-World#3 by github-actions[bot]"))
	assert.Contains(t, turns[1], "check: test\nconclusion: failure")
	assert.Contains(t, turns[1], "1 test failed")
	var unmatched []journal.Event
	for _, ev := range e.events(t) {
		if ev.Name == journal.DeliveryIgnored && ev.Attrs["reason"] == "no_pull_request" {
			unmatched = append(unmatched, ev)
		}
	}
	require.Len(t, unmatched, 1)
	assert.Equal(t, "5555555555555555555555555555555555555555", unmatched[0].Attrs["commit"])
}

// TestForkThatCannotBePushedToIsToldOnce: a fork's pull request whose
// owner does not allow edits by maintainers reaches its agent with the
// fork named beside the head branch, and GitHub gets, besides the one
// announcement, one notice that the changes cannot be pushed to it; a
// later event and a restarted daemon post nothing more.
func TestForkThatCannotBePushedToIsToldOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv, _ := e.withGitHub(t)
	e.start(t)
	fork := desired.Key{Owner: keyPR.Owner, Repo: keyPR.Repo, Number: 3}
	e.deliver(t, "pull_request.opened.5.json", func(m map[string]any) {
		m["pull_request"].(map[string]any)["maintainer_can_modify"] = false
	})
	id := e.waitPhase(t, fork, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitTurn(t, fork, id, "head: patch-1\nhead_repo: Octocoders/Hello-World\n", waitLong, "the prompt never named the fork")
	notices := func() (announce, forks int) {
		for _, c := range srv.Comments(fork.Owner, fork.Repo, fork.Number) {
			switch {
			case strings.Contains(c.Body, "<!-- loopd:announce "+fork.String()+" -->"):
				announce++
			case strings.Contains(c.Body, "<!-- loopd:notice "+fork.String()+" fork -->"):
				forks++
				assert.Contains(t, c.Body, "the fork `Octocoders/Hello-World`")
				assert.Contains(t, c.Body, "cannot be pushed to this pull request")
			}
		}
		return announce, forks
	}
	e.waitFor(t, func() bool { a, f := notices(); return a == 1 && f == 1 }, waitLong, "no announcement and fork notice")

	control := "can you push? " + uuid.NewString()
	e.deliver(t, commentFixture, all(withNumber(3), withComment(control), func(m map[string]any) {
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/3"}
	}))
	e.waitTurn(t, fork, id, control, waitLong, "the comment never arrived")
	e.stop(t)
	e.start(t)
	e.waitPhase(t, fork, desired.PhaseRunning, waitLong)
	e.settle(t)
	announce, forks := notices()
	assert.Equal(t, 1, announce)
	assert.Equal(t, 1, forks, "told once")
}

// TestLoopBreakerHoldsAStormUntilRelease: with maxDeliveriesPerHour 3,
// the fourth event in an hour puts the item in NeedsAttention with
// reason=delivery_storm; a new event does not clear it, its events stay
// pending, and loopd release lets them through.
func TestLoopBreakerHoldsAStormUntilRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.route()["maxDeliveriesPerHour"] = 3
	e.writeConfig(t)
	id := e.bootRunning(t)
	var sent []string
	for range 3 {
		marker, _ := e.comment(t)
		sent = append(sent, marker)
	}
	e.waitTurn(t, keyIssue, id, sent[1], waitLong, "the second comment never arrived")
	r := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "delivery_storm", r.Status.Reason)
	require.Len(t, r.Pending, 1)
	assert.Len(t, e.userTurns(t, keyIssue, id), 3, "the opening and two comments: three deliveries")
	// The status is written before its journal row: wait for the row.
	ev := e.waitEvent(t, journal.SessionNeedsAttention, keyIssue, 1, waitShort)
	assert.Equal(t, "delivery_storm", ev[len(ev)-1].Attrs["reason"])
	assert.Equal(t, "loopd release "+keyIssue.String(), ev[len(ev)-1].Attrs["release"])

	late, _ := e.comment(t)
	e.settle(t)
	r = e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseNeedsAttention, r.Status.Phase, "a new event does not end a storm")
	assert.Len(t, r.Pending, 2)
	assert.Len(t, e.userTurns(t, keyIssue, id), 3)
	stdout, _, _ := e.run(t, "get")
	assert.Contains(t, stdout, "delivery_storm")

	e.mustRun(t, "release", keyIssue.String())
	e.waitTurn(t, keyIssue, id, late, waitLong, "the events held by the storm never arrived after the release")
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), sent[2]))
}

// TestMentionTrigger: with trigger.mention, an issue opened without it
// and comments without it start nothing (recorded as ignored); a comment
// that mentions it starts the agent, and later comments reach it only
// when they mention it too.
func TestMentionTrigger(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.route()["trigger"] = map[string]any{"mention": "@loopd"}
	e.writeConfig(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	e.deliver(t, commentFixture, withComment("I see it too"))
	_, ok := e.record(t, keyIssue)
	assert.False(t, ok)
	assert.Equal(t, []string{"no_mention", "no_mention"}, e.ignoredReasons(t))

	start := "@LoopD please fix the typo " + uuid.NewString()
	e.deliver(t, commentFixture, withComment(start))
	id := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitTurn(t, keyIssue, id, start, waitLong, "the mention never started the agent")
	e.deliver(t, commentFixture, withComment("thanks! `@loopd` is great"))
	follow := "@loopd and the second one " + uuid.NewString()
	e.deliver(t, commentFixture, withComment(follow))
	e.waitTurn(t, keyIssue, id, follow, waitLong, "the second mention never arrived")
	turns := e.userTurns(t, keyIssue, id)
	assert.Len(t, turns, 2)
	assert.Zero(t, countContaining(turns, "is great"))
}

// TestLabelTrigger: with trigger.labels, an issue opened without the
// label and its comments start nothing; adding another label neither; the
// label added by an authorized sender starts the agent, and its comments
// reach it from then on.
func TestLabelTrigger(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.route()["trigger"] = map[string]any{"labels": []string{"agent"}}
	e.writeConfig(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	e.deliver(t, commentFixture, withComment("before the label"))
	label := func(name string) func(map[string]any) {
		return func(m map[string]any) { m["label"].(map[string]any)["name"] = name }
	}
	e.deliver(t, "issues.labeled.1.json", label("bug"))
	_, ok := e.record(t, keyIssue)
	assert.False(t, ok)
	assert.Equal(t, []string{"not_labelled", "not_labelled", "action_not_handled"}, e.ignoredReasons(t))

	e.deliver(t, "issues.labeled.1.json", label("agent"))
	id := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong).Status.HarnessSessionID
	e.waitTurn(t, keyIssue, id, "issues.labeled on "+keyIssue.String(), waitLong, "the label never started the agent")
	after := "after the label " + uuid.NewString()
	e.deliver(t, commentFixture, withComment(after))
	e.waitTurn(t, keyIssue, id, after, waitLong, "a comment on the started item never arrived")
	assert.Zero(t, countContaining(e.userTurns(t, keyIssue, id), "before the label"))
}
