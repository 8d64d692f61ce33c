package webhook

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

// TestFilter is the table of the rules that keep loopd from talking to
// itself and of the route's triggers.
func TestFilter(t *testing.T) {
	authorized := func(login string) bool {
		return strings.EqualFold(login, "alice") || login == "ci-bot[bot]" || login == "loopd-bot"
	}
	comment := func(sender, senderType, text string) change {
		return change{sender: sender, senderType: senderType, text: text, prompt: &PromptInput{}}
	}
	mention := schema.Route{Trigger: &schema.Trigger{Mention: "@loopd"}}
	labels := schema.Route{Trigger: &schema.Trigger{Labels: []string{"agent"}}}
	off := false
	for _, tc := range []struct {
		name  string
		c     change
		route schema.Route
		want  verdict
	}{
		{"authorized_comment_passes", comment("Alice", "User", "please fix"), schema.Route{}, verdict{}},
		{"bot_login_never_even_when_authorized", comment("LOOPD-bot", "User", "done"), schema.Route{}, verdict{drop: reasonOwnLogin}},
		{"bot_login_app_never", comment("loopd-bot", "Bot", "done"), schema.Route{}, verdict{drop: reasonOwnLogin}},
		{"unlisted_bot_is_a_bot", comment("dependabot[bot]", "Bot", "bump"), schema.Route{}, verdict{drop: reasonBotSender}},
		{"listed_bot_passes", comment("ci-bot[bot]", "Bot", "flaky"), schema.Route{}, verdict{}},
		{"stranger", comment("mallory", "User", "hi"), schema.Route{}, verdict{drop: reasonUnauthorizedSender}},
		{"agent_marker", comment("alice", "User", "Pushed the fix.\n\n<!-- loopd:agent o/r#1 -->"), schema.Route{}, verdict{drop: reasonAgentMarker}},
		{"agent_marker_of_another_item", comment("alice", "User", "See o/r#2.\n<!--LOOPD:Agent   o/other#9-->"), schema.Route{}, verdict{drop: reasonAgentMarker}},
		{"announce_marker_is_loopds_own", comment("alice", "User", "An agent is working on this issue.\n\n<!-- loopd:announce o/r#1 -->"), schema.Route{}, verdict{drop: reasonOwnMarker}},
		{"notice_marker_is_loopds_own", comment("alice", "User", "needs attention\n<!--LOOPD:notice o/r#1 episode=2-->"), schema.Route{}, verdict{drop: reasonOwnMarker}},
		{"own_marker_quoted_by_a_person_is_theirs", comment("alice", "User", "> An agent is working on this issue.\n> <!-- loopd:announce o/r#1 -->\n\nwhy?"), schema.Route{}, verdict{}},
		{"own_marker_shown_in_code_is_not_one", comment("alice", "User", "loopd ends with `<!-- loopd:announce o/r#1 -->`"), schema.Route{}, verdict{}},
		{"marker_shown_in_code_is_not_one", comment("alice", "User", "agents end with `<!-- loopd:agent o/r#1 -->`"), schema.Route{}, verdict{}},
		{"mention_present", comment("alice", "User", "@LoopD please look"), mention, verdict{}},
		{"mention_missing", comment("alice", "User", "please look"), mention, verdict{drop: reasonNoMention}},
		{"mention_in_code_only", comment("alice", "User", "run `@loopd`"), mention, verdict{drop: reasonNoMention}},
		{"push_with_mention_trigger_reaches_a_running_agent_only", change{sender: "alice", prompt: &PromptInput{}}, mention, verdict{noCreate: true, unknown: reasonNoMention}},
		{"opened_without_mention", change{sender: "alice", text: "Bug\n\nit breaks", opening: true, prompt: &PromptInput{}}, mention, verdict{drop: reasonNoMention}},
		{"opened_with_label", change{sender: "alice", text: "Bug", opening: true, labels: []string{"Agent"}, prompt: &PromptInput{}}, labels, verdict{}},
		{"opened_without_label", change{sender: "alice", text: "Bug", opening: true, labels: []string{"bug"}, prompt: &PromptInput{}}, labels, verdict{noCreate: true, unknown: reasonNotLabelled}},
		{"comment_on_unlabelled_item", comment("alice", "User", "go"), labels, verdict{noCreate: true, unknown: reasonNotLabelled}},
		{"trigger_label_added_starts", change{sender: "alice", labeled: "agent", opening: true, prompt: &PromptInput{}}, labels, verdict{newOnly: true}},
		{"other_label_added_is_state_only", change{sender: "alice", labeled: "bug", opening: true, prompt: &PromptInput{}}, labels, verdict{unhandled: true}},
		{"label_added_by_a_stranger", change{sender: "mallory", labeled: "agent", prompt: &PromptInput{}}, labels, verdict{drop: reasonUnauthorizedSender}},
		{"ci_ignores_senders", change{sender: "github-actions[bot]", senderType: "Bot", ci: &ciFailure{}}, schema.Route{}, verdict{noCreate: true, unknown: reasonNoWorkItem}},
		{"ci_with_triggers_still_reaches_its_item", change{sender: "mallory", ci: &ciFailure{}}, mention, verdict{noCreate: true, unknown: reasonNoWorkItem}},
		{"ci_reaction_off", change{sender: "x", ci: &ciFailure{}}, schema.Route{Reactions: schema.Reactions{CIFailure: &off}}, verdict{drop: reasonCIReactionOff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, filter(tc.c, tc.route, authorized, "loopd-bot"))
		})
	}
}

// TestMentions: a mention is a whole word a reader sees.
func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{"@loopd fix this", true},
		{"hey @LOOPD, fix this", true},
		{"(@loopd)", true},
		{"**@loopd** please", true},
		{"[@loopd](https://example.com)", true},
		{"> @loopd said", true},
		{"line one\n@loopd", true},
		{"@loopd-bot fix this", false},
		{"@loopdx", false},
		{"mail me@loopd.example", false},
		{"`@loopd`", false},
		{"```\n@loopd\n```", false},
		{"    @loopd indented code", false},
		{"<!-- @loopd -->", false},
		{"![@loopd](x.png)", false},
		{"@loo\u200bpd", false},
		{"nothing here", false},
	} {
		assert.Equal(t, tc.want, mentions(tc.body, "@loopd"), "%q", tc.body)
	}
}

// TestAgentMarked: the marker counts in a hidden HTML comment only, in
// any case and spacing, and for any item.
func TestAgentMarked(t *testing.T) {
	for _, tc := range []struct {
		body string
		want bool
	}{
		{"done\n\n" + desired.AgentMarker(issue1), true},
		{"done <!--loopd:agent o/r#1-->", true},
		{"<!--\n  Loopd : AGENT\to/r#12\n-->", true},
		// A marker in a block quote is someone quoting the agent.
		{"done\n> quoted <!-- loopd:agent o/r#1 -->", false},
		{"> quoted agent\n> <!-- loopd:agent Codertocat/Hello-World#1 -->\n\nreal question from me", false},
		{"> quoted agent\n>\n> <!-- loopd:agent o/r#1 -->\n\nwhy?", false},
		{"> - list in a quote <!-- loopd:agent o/r#1 -->", false},
		{"> > nested\n> > <!-- loopd:agent o/r#1 -->\n\nok", false},
		// The agent's own comment that ends with a quote still counts:
		// the marker's line ends the quote (an HTML comment starts an
		// HTML block, which is no lazy continuation of the quote).
		{"> you asked for this\n\nDone.\n\n" + desired.AgentMarker(issue1), true},
		{"> you asked for this\n" + desired.AgentMarker(issue1), true},
		{"> quoted <!-- loopd:agent o/r#1 -->\n\nmine <!-- loopd:agent o/r#1 -->", true},
		{"`<!-- loopd:agent o/r#1 -->`", false},
		{"```\n<!-- loopd:agent o/r#1 -->\n```", false},
		{"<!-- loopd:agent o/r#1 and more -->", false},
		{"<!-- loopd:agent -->", false},
		{"<!-- loopd:agent o/r#1", false},
		{"loopd:agent o/r#1", false},
	} {
		assert.Equal(t, tc.want, agentMarked(tc.body), "%q", tc.body)
	}
}

// TestCIClaims: a check run, its suite and its workflow run give one
// prompt; two failed checks of one suite give two; a redelivery none.
func TestCIClaims(t *testing.T) {
	type event struct {
		name string
		f    ciFailure
		want bool // prompted
	}
	run := func(name string) ciFailure { return ciFailure{check: name, commit: "abc", suite: 7} }
	rollup := func(name string) ciFailure { return ciFailure{check: name, commit: "abc", suite: 7, rollup: true} }
	for _, tc := range []struct {
		name   string
		events []event
	}{
		{"run_then_suite_then_workflow", []event{{"run", run("build"), true}, {"suite", rollup("GitHub Actions"), false}, {"workflow", rollup("CI"), false}}},
		{"suite_first", []event{{"suite", rollup("GitHub Actions"), true}, {"run", run("build"), false}}},
		{"two_jobs_of_one_workflow", []event{{"build", run("build"), true}, {"test", run("test"), true}, {"workflow", rollup("CI"), false}}},
		{"redelivery_under_a_new_id", []event{{"run", run("build"), true}, {"again", run("build"), false}}},
		{"another_commit", []event{{"run", run("build"), true}, {"next", ciFailure{check: "build", commit: "def", suite: 8}, true}}},
		{"a_suite_of_another_app", []event{{"run", run("build"), true}, {"other", ciFailure{check: "lint", commit: "abc", suite: 9, rollup: true}, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claimed := map[string]bool{}
			for _, ev := range tc.events {
				claims, conflicts := ev.f.claims()
				dup := false
				for _, c := range conflicts {
					dup = dup || claimed[c]
				}
				assert.Equal(t, ev.want, !dup, ev.name)
				if !dup {
					for _, c := range claims {
						claimed[c] = true
					}
				}
			}
		})
	}
}

// TestOwnCommentsNeverQueued: loopd's own login (even when authorized), an
// unlisted bot and a comment carrying the agent marker queue nothing; each
// is journaled with its reason. A comment by a listed bot is queued.
func TestOwnCommentsNeverQueued(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.BotLogin = func() string { return "loopd-bot" } })
	cfg := defaultConfig()
	cfg.AuthorizedUsers = append(cfg.AuthorizedUsers, "loopd-bot", "helper[bot]")
	e.cfg.Store(&cfg)
	code, _ := e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	from := func(login, typ, body string) []byte {
		return derive(t, "issue_comment.created.1.json", func(m map[string]any) {
			s := obj(t, m, "sender")
			s["login"], s["type"] = login, typ
			obj(t, m, "comment")["body"] = body
			obj(t, m, "comment")["performed_via_github_app"] = map[string]any{"id": 1, "slug": "loopd"}
		})
	}
	for id, body := range map[string][]byte{
		"d-own":    from("loopd-bot", "Bot", "Working on it."),
		"d-bot":    from("dependabot[bot]", "Bot", "Bump"),
		"d-marker": from("Codertocat", "User", "Pushed.\n\n"+desired.AgentMarker(issue1)),
		"d-helper": from("helper[bot]", "Bot", "Benchmarks regressed"),
	} {
		code, _ := e.replay(t, "issue_comment", id, body)
		assert.Equal(t, http.StatusAccepted, code, id)
	}
	var ids []string
	for _, d := range e.onlyRecord(t).Pending {
		ids = append(ids, d.ID)
	}
	assert.Equal(t, []string{"d-open", "d-helper"}, ids)
	reasons := map[string]string{}
	for _, ev := range e.events(t) {
		if ev.Name == journal.DeliveryIgnored {
			reasons[ev.Attrs["delivery"]] = ev.Attrs["reason"]
		}
	}
	assert.Equal(t, map[string]string{"d-own": reasonOwnLogin, "d-bot": reasonBotSender, "d-marker": reasonAgentMarker}, reasons)
}

// TestTriggers: with a mention trigger, only comments that mention it
// start or reach an agent; with a label trigger, an issue starts once it
// carries the label, and its earlier comments are ignored.
func TestTriggers(t *testing.T) {
	withTrigger := func(e *env, tr schema.Trigger) {
		cfg := defaultConfig()
		r := cfg.Routing.Repos["Codertocat/Hello-World"]
		r.Trigger = &tr
		cfg.Routing.Repos["Codertocat/Hello-World"] = r
		e.cfg.Store(&cfg)
	}
	comment := func(body string) []byte {
		return derive(t, "issue_comment.created.1.json", func(m map[string]any) { obj(t, m, "comment")["body"] = body })
	}
	lastReason := func(e *env) string { evs := e.events(t); return evs[len(evs)-1].Attrs["reason"] }

	t.Run("mention", func(t *testing.T) {
		e := newEnv(t)
		withTrigger(e, schema.Trigger{Mention: "@loopd"})
		e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
		assert.Empty(t, e.records(t))
		assert.Equal(t, reasonNoMention, lastReason(e))
		e.replay(t, "issue_comment", "d-1", comment("Nice catch"))
		assert.Empty(t, e.records(t))
		e.replay(t, "issue_comment", "d-2", comment("@loopd please fix the typo"))
		e.replay(t, "issue_comment", "d-3", comment("thanks all"))
		assert.Equal(t, reasonNoMention, lastReason(e))
		e.replay(t, "issue_comment", "d-4", comment("```\n@loopd\n```"))
		e.replay(t, "issue_comment", "d-5", comment("@LoopD and the title too"))
		var ids []string
		for _, d := range e.onlyRecord(t).Pending {
			ids = append(ids, d.ID)
		}
		assert.Equal(t, []string{"d-2", "d-5"}, ids)
	})
	t.Run("labels", func(t *testing.T) {
		e := newEnv(t)
		withTrigger(e, schema.Trigger{Labels: []string{"Agent"}})
		e.replay(t, "issues", "d-open", fixture(t, "issues.opened.1.json"))
		e.replay(t, "issue_comment", "d-1", comment("before the label"))
		assert.Empty(t, e.records(t))
		assert.Equal(t, reasonNotLabelled, lastReason(e))
		labeled := func(label string) []byte {
			return derive(t, "issues.labeled.1.json", func(m map[string]any) { obj(t, m, "label")["name"] = label })
		}
		e.replay(t, "issues", "d-bug", labeled("bug"))
		assert.Empty(t, e.records(t))
		code, _ := e.replay(t, "issues", "d-agent", labeled("agent"))
		assert.Equal(t, http.StatusAccepted, code)
		rec := e.onlyRecord(t)
		require.Len(t, rec.Pending, 1)
		assert.Contains(t, e.prompt(t, rec, 0), "issues.labeled on Codertocat/Hello-World#1")
		e.replay(t, "issues", "d-again", labeled("agent"))
		assert.Equal(t, reasonStarted, lastReason(e))
		e.replay(t, "issue_comment", "d-2", comment("after the label"))
		var ids []string
		for _, d := range e.onlyRecord(t).Pending {
			ids = append(ids, d.ID)
		}
		assert.Equal(t, []string{"d-agent", "d-2"}, ids, "an item that runs gets its comments, label or not")
	})
	t.Run("opened_with_the_label", func(t *testing.T) {
		e := newEnv(t)
		withTrigger(e, schema.Trigger{Labels: []string{"agent"}})
		body := derive(t, "pull_request.opened.1.json", func(m map[string]any) {
			obj(t, m, "pull_request")["labels"] = []any{map[string]any{"name": "agent"}}
		})
		code, _ := e.replay(t, "pull_request", "d-open", body)
		assert.Equal(t, http.StatusAccepted, code)
		assert.Len(t, e.onlyRecord(t).Pending, 1)
	})
}

// ciPayload derives a failed check of event for pull request 2 on commit
// sha, whose head the payload says is head.
func ciPayload(t *testing.T, event, conclusion, sha, head string) []byte {
	t.Helper()
	fixtures := map[string]string{"check_run": "check_run.completed.1.json", "check_suite": "check_suite.completed.1.json", "workflow_run": "workflow_run.completed.1.json"}
	return derive(t, fixtures[event], func(m map[string]any) {
		o := obj(t, m, event)
		o["conclusion"], o["head_sha"] = conclusion, sha
		if event == "workflow_run" {
			o["name"] = "CI"
			o["check_suite_id"] = 118578147
			m["repository"] = fixtureRepository(t)
		}
		prs := o["pull_requests"].([]any)
		require.NotEmpty(t, prs)
		pr := prs[0].(map[string]any)
		obj(t, pr, "head")["sha"] = head
		obj(t, obj(t, pr, "base"), "repo")["name"] = "Hello-World"
		m["sender"] = map[string]any{"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
	})
}

// fixtureRepository returns the repository object of the fixtures' pull
// request.
func fixtureRepository(t *testing.T) any {
	var repo any
	derive(t, "pull_request.opened.1.json", func(m map[string]any) { repo = m["repository"] })
	return repo
}

const headSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"

// TestCIFailures: a failed check on the head of a pull request loopd holds
// becomes one prompt (naming the check, its conclusion, the commit and
// the details URL, the output framed and cut at 4 KiB), whoever sent it;
// a success, a check on an older commit, the suite of a prompted run and a
// redelivery under a new id queue nothing, and CI never creates an item.
func TestCIFailures(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "check_run", "c-0", ciPayload(t, "check_run", "failure", headSHA, headSHA))
	assert.Equal(t, http.StatusAccepted, code)
	assert.Empty(t, e.records(t), "CI never creates an item")

	e.replay(t, "pull_request", "d-open", fixture(t, "pull_request.opened.1.json"))
	require.Equal(t, headSHA, e.onlyRecord(t).Spec.HeadSHA)
	failedRun := derive(t, "check_run.completed.1.json", func(m map[string]any) {
		o := obj(t, m, "check_run")
		o["conclusion"] = "timed_out"
		obj(t, o, "output")["text"] = strings.Repeat("é", MaxCIOutput) + "\x1b[201~"
		m["sender"] = map[string]any{"login": "github-actions[bot]", "type": "Bot", "id": 41898282}
	})
	code, _ = e.replay(t, "check_run", "c-1", failedRun)
	assert.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	require.Len(t, rec.Pending, 2)
	d := rec.Pending[1]
	d.Prompt = e.prompt(t, rec, 1)
	assert.Equal(t, headSHA, d.Commit)
	assert.True(t, strings.HasPrefix(d.Prompt, "[loopd] check_run.completed on Codertocat/Hello-World#2 by github-actions[bot] (delivery c-1)\n"), d.Prompt)
	for _, want := range []string{"check: Octocoders-linter\n", "conclusion: timed_out\n", "commit: " + headSHA + "\n", "url: https://octocoders.io\n", "output_cut: "} {
		assert.Contains(t, d.Prompt, want)
	}
	assert.NotContains(t, d.Prompt, "\x1b")
	assert.Less(t, len(d.Prompt), MaxCIOutput+1024)
	assert.Equal(t, desired.SeenWhole, desired.FrameOf(d).Check(d.Prompt), "the prompt is one whole frame")

	for _, tc := range []struct {
		name, event, id string
		body            []byte
		reason          string
	}{
		{"success", "check_run", "c-2", ciPayload(t, "check_run", "success", headSHA, headSHA), reasonCINotFailed},
		{"its_suite", "check_suite", "c-3", ciPayload(t, "check_suite", "failure", headSHA, headSHA), reasonCIDuplicate},
		{"its_workflow_run", "workflow_run", "c-4", ciPayload(t, "workflow_run", "failure", headSHA, headSHA), reasonCIDuplicate},
		{"redelivered_under_a_new_id", "check_run", "c-5", failedRun, reasonCIDuplicate},
		{"older_commit_per_payload", "check_run", "c-6", ciPayload(t, "check_run", "failure", "1111111111111111111111111111111111111111", headSHA), reasonStaleCommit},
		{"another_pull_request", "check_run", "c-7", ciPayload(t, "check_run", "failure", "2222222222222222222222222222222222222222", "2222222222222222222222222222222222222222"), reasonNoWorkItem},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.name == "another_pull_request" {
				body = derive(t, "check_run.completed.1.json", func(m map[string]any) {
					o := obj(t, m, "check_run")
					o["conclusion"], o["head_sha"] = "failure", "2222222222222222222222222222222222222222"
					pr := o["pull_requests"].([]any)[0].(map[string]any)
					pr["number"] = 99
					obj(t, pr, "head")["sha"] = "2222222222222222222222222222222222222222"
				})
			}
			code, _ := e.replay(t, tc.event, tc.id, body)
			assert.Equal(t, http.StatusAccepted, code)
			evs := e.events(t)
			assert.Equal(t, tc.reason, evs[len(evs)-1].Attrs["reason"])
			assert.Len(t, e.onlyRecord(t).Pending, 2)
		})
	}

	// A push moves the head: a failure on the old head is stale even when
	// the check's payload still lists it as the pull request's head.
	push := derive(t, "pull_request.synchronize.1.json", func(m map[string]any) {
		obj(t, obj(t, m, "pull_request"), "head")["sha"] = "3333333333333333333333333333333333333333"
		m["after"] = "3333333333333333333333333333333333333333"
		obj(t, m, "pull_request")["updated_at"] = "2030-01-01T00:00:00Z"
	})
	e.replay(t, "pull_request", "d-push", push)
	require.Equal(t, "3333333333333333333333333333333333333333", e.onlyRecord(t).Spec.HeadSHA)
	body := derive(t, "check_run.completed.1.json", func(m map[string]any) {
		o := obj(t, m, "check_run")
		o["conclusion"], o["name"] = "failure", "tests"
	})
	e.replay(t, "check_run", "c-8", body)
	evs := e.events(t)
	assert.Equal(t, reasonStaleCommit, evs[len(evs)-1].Attrs["reason"])

	off := false
	cfg := defaultConfig()
	r := cfg.Routing.Repos["Codertocat/Hello-World"]
	r.Reactions.CIFailure = &off
	cfg.Routing.Repos["Codertocat/Hello-World"] = r
	e.cfg.Store(&cfg)
	e.replay(t, "check_run", "c-9", ciPayload(t, "check_run", "failure", "3333333333333333333333333333333333333333", "3333333333333333333333333333333333333333"))
	evs = e.events(t)
	assert.Equal(t, reasonCIReactionOff, evs[len(evs)-1].Attrs["reason"])
}
