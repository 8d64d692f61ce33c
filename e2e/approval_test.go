package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

// TestApprovalAnsweredFromGitHub: on a route with approvals: github, the
// fake Claude's permission prompt is posted once, quoting its command and
// choices with its id, and get shows the item AwaitingApproval; an
// authorized comment "/loopd answer 1" answers it once (the CLI records
// the choice); its redelivery, its replay under another delivery id and a
// second answer change nothing. The next question, answered at the
// terminal, is gone: an answer to it from GitHub is refused with one
// reply and sends nothing. Words answer the third: the choice that asks
// what to do instead is picked, and the words reach the conversation.
func TestApprovalAnsweredFromGitHub(t *testing.T) {
	t.Parallel()
	menuDir := t.TempDir() // the sandbox shows it (Binds)
	menuLog := filepath.Join(menuDir, "menu.log")
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_PERMISSION_PROMPT": "1", "FAKECLAUDE_MENU_LOG": menuLog}, Binds: []string{menuDir}})
	e.route()["approvals"] = "github"
	e.writeConfig(t)
	srv, _ := e.withGitHub(t)
	e.start(t)
	choices := func() []map[string]string { return readJSONLines[map[string]string](t, menuLog) }

	commentOn(t, e, keyIssue.Number, "run the tests "+uuid.NewString())
	asked := e.waitEvent(t, journal.QuestionAsked, keyIssue, 1, waitLong)[0]
	assert.Equal(t, "q1", asked.Attrs[journal.KeyQuestionID])
	e.waitFor(t, func() bool { return len(commentsWith(srv, "question=q1 -->")) == 1 }, waitLong, "the question was never posted")
	body := commentsWith(srv, "question=q1 -->")[0].Body
	assert.Contains(t, body, "asks (question `q1`)")
	assert.Contains(t, body, "\n       make test-1\n")
	assert.Contains(t, body, "\n      1. Yes\n      2. Yes, and don't ask again for make commands\n      3. No\n")
	assert.Empty(t, notices(srv), "the question is the one comment of its screen")
	assert.Regexp(t, `(?m)^`+keyIssue.String()+`\s.*(Spawning|Running)/AwaitingApproval\s.*awaiting_approval question_id=q1`, e.mustRun(t, "get"))
	assert.Empty(t, choices(), "nobody answered: loopd sent nothing")

	answer := e.payload(t, commentFixture, all(withNumber(keyIssue.Number), withComment("/loopd answer 1")))
	sig := webhook.Sign([]byte(e.secret), answer)
	require.Equal(t, http.StatusAccepted, e.post(t, "issue_comment", "answer-1", answer, sig))
	answered := e.waitEvent(t, journal.QuestionAnswered, keyIssue, 1, waitLong)[0]
	assert.Equal(t, []string{"q1", "1", "Yes", "Codertocat"}, []string{answered.Attrs[journal.KeyQuestionID], answered.Attrs[journal.KeyChoice],
		answered.Attrs[journal.KeyAnswer], answered.Attrs[journal.KeySender]}, "who answered what")
	e.waitFor(t, func() bool { return len(choices()) == 1 }, waitShort, "the CLI never took the answer")
	assert.Equal(t, map[string]string{"choice": "Yes", "command": "make test-1"}, choices()[0])

	assert.Equal(t, http.StatusOK, e.post(t, "issue_comment", "answer-1", answer, sig), "a redelivery")
	assert.Equal(t, http.StatusOK, e.post(t, "issue_comment", "answer-1-replayed", answer, sig), "a replay under another id")
	second := e.payload(t, commentFixture, all(withNumber(keyIssue.Number), withComment("/loopd answer q1 3")))
	require.Equal(t, http.StatusAccepted, e.post(t, "issue_comment", "answer-2", second, webhook.Sign([]byte(e.secret), second)))
	assert.Contains(t, e.ignoredReasons(t), "already_answered")
	e.settle(t)
	assert.Len(t, choices(), 1, "the second answer and the replay changed nothing")
	assert.Len(t, e.eventsNamed(t, journal.QuestionAnswered, keyIssue), 1)
	assert.Len(t, commentsWith(srv, "question=q1 -->"), 1, "posted once")
	assert.Empty(t, commentsWith(srv, "reply="), "a second answer gets no reply")

	// The next prompt asks q2; a person answers it at the terminal, and
	// then an answer from GitHub comes too late.
	commentOn(t, e, keyIssue.Number, "next step "+uuid.NewString())
	e.waitEvent(t, journal.QuestionAsked, keyIssue, 2, waitLong)
	e.waitFor(t, func() bool { return len(commentsWith(srv, "question=q2 -->")) == 1 }, waitLong, "q2 was never posted")
	e.sendKeys(t, keyIssue, "2")
	e.waitFor(t, func() bool { return len(choices()) == 2 }, waitShort, "the terminal's answer never reached the CLI")
	late := e.payload(t, commentFixture, all(withNumber(keyIssue.Number), withComment("/loopd answer q2 1")))
	require.Equal(t, http.StatusAccepted, e.post(t, "issue_comment", "answer-late", late, webhook.Sign([]byte(e.secret), late)))
	refused := e.waitEvent(t, journal.QuestionRefused, keyIssue, 1, waitLong)[0]
	assert.Equal(t, "question_gone", refused.Attrs[journal.KeyReason])
	e.waitFor(t, func() bool { return len(commentsWith(srv, "reply=1 -->")) == 1 }, waitLong, "the refusal was never replied")
	assert.Contains(t, commentsWith(srv, "reply=1 -->")[0].Body, "answered question `q2`, which is no longer on the agent's screen")
	assert.Equal(t, map[string]string{"choice": "Yes, and don't ask again for make commands", "command": "make test-2"}, choices()[1],
		"the late answer sent nothing")

	// Words answer q3: "what to do differently", then the words.
	commentOn(t, e, keyIssue.Number, "third step "+uuid.NewString())
	e.waitEvent(t, journal.QuestionAsked, keyIssue, 3, waitLong)
	words := "run only the unit tests " + uuid.NewString()
	commentOn(t, e, keyIssue.Number, "/loopd answer q3 "+words)
	e.waitEvent(t, journal.QuestionAnswered, keyIssue, 2, waitLong)
	e.waitFor(t, func() bool { return len(choices()) >= 3 }, waitShort, "the CLI never took q3's answer")
	assert.Equal(t, map[string]string{"choice": "No", "command": "make test-3"}, choices()[2])
	r := e.mustRecord(t, keyIssue)
	e.waitFor(t, func() bool { return countContaining(e.userTurns(t, keyIssue, r.Status.HarnessSessionID), words) == 1 }, waitLong,
		"the words never reached the conversation")
	turns := e.userTurns(t, keyIssue, r.Status.HarnessSessionID)
	assert.Zero(t, countContaining(turns, "/loopd answer"), "the command reaches no agent")
	for _, turn := range turns {
		assert.False(t, strings.Contains(turn, "answer q1") || strings.Contains(turn, "answer q2"), "%q", turn)
	}
	assert.Len(t, choices(), 3, "nobody's answer was made up")
	e.settle(t)
	r = e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
	assert.Zero(t, r.Status.Failures)
}
