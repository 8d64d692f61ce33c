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
		{"ci_ignores_senders", change{sender: "github-actions[bot]", senderType: "Bot", ci: &desired.CI{}}, schema.Route{}, verdict{noCreate: true, unknown: reasonNoWorkItem}},
		{"ci_with_triggers_still_reaches_its_item", change{sender: "mallory", ci: &desired.CI{}}, mention, verdict{noCreate: true, unknown: reasonNoWorkItem}},
		{"ci_reaction_off", change{sender: "x", ci: &desired.CI{}}, schema.Route{Reactions: schema.Reactions{CIFailure: &off}}, verdict{drop: reasonCIReactionOff}},
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
			newComment(t, m, body)
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
		return derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, body) })
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
		labeled := func(label, at string) []byte {
			return derive(t, "issues.labeled.1.json", func(m map[string]any) {
				obj(t, m, "label")["name"] = label
				obj(t, m, "issue")["updated_at"] = at
			})
		}
		e.replay(t, "issues", "d-bug", labeled("bug", "2030-01-01T00:00:00Z"))
		assert.Empty(t, e.records(t))
		code, _ := e.replay(t, "issues", "d-agent", labeled("agent", "2030-01-01T00:00:01Z"))
		assert.Equal(t, http.StatusAccepted, code)
		rec := e.onlyRecord(t)
		require.Len(t, rec.Pending, 1)
		assert.Contains(t, e.prompt(t, rec, 0), "issues.labeled on Codertocat/Hello-World#1")
		// Labelled again (after the label was taken off).
		e.replay(t, "issues", "d-again", labeled("agent", "2030-01-01T00:00:02Z"))
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
