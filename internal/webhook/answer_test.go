package webhook

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestAnswerCommandAnswersOncePerQuestion: on a route with approvals:
// github, an authorized "/loopd answer 2" answers the question open on
// the item (its id resolved), queued as an answer with no text for the
// agent and needing no mention; its redelivery and its replay are
// duplicates, a second answer to the same question is ignored
// already_answered; words are the answer's prompt, framed and sanitized
// as a comment; a stranger's answer and a bad one are ignored; a route
// without approvals takes none.
func TestAnswerCommandAnswersOncePerQuestion(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "issue_comment", "d-open", fixture(t, "issue_comment.created.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)

	off := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd answer 1") })
	code, _ = e.replay(t, "issue_comment", "d-off", off)
	assert.Equal(t, http.StatusAccepted, code)
	ignored := e.logged(t, journal.DeliveryIgnored)
	assert.Equal(t, reasonNoApprovals, ignored[len(ignored)-1]["reason"])

	cfg := *e.cfg.Load()
	mentionTrigger(&cfg)
	r := cfg.Routing.Repos["Codertocat/Hello-World"]
	r.Approvals = "github"
	cfg.Routing.Repos["Codertocat/Hello-World"] = r
	e.cfg.Store(&cfg)
	st := rec.Status
	st.Question, st.Questions = &desired.Question{ID: "q1", Title: "Do you want to proceed?", Choices: []string{"Yes", "No"}}, 1
	require.NoError(t, e.store.PutStatus(context.Background(), rec.Key, st))

	answer := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd answer 2\nthanks") })
	code, _ = e.replay(t, "issue_comment", "d-answer", answer)
	require.Equal(t, http.StatusAccepted, code)
	rec = e.onlyRecord(t)
	require.Len(t, rec.Pending, 2)
	got := rec.Pending[1]
	assert.Equal(t, &desired.Answer{Question: "q1", Choice: 2}, got.Answer)
	assert.Zero(t, got.Size, "a choice reaches the agent as keys, no text")
	accepted := e.logged(t, journal.DeliveryAccepted)
	assert.Equal(t, "q1", accepted[len(accepted)-1][journal.KeyQuestionID])

	code, _ = e.replay(t, "issue_comment", "d-answer", answer)
	assert.Equal(t, http.StatusOK, code, "a redelivery")
	code, _ = e.replay(t, "issue_comment", "d-answer-replay", answer)
	assert.Equal(t, http.StatusOK, code, "a replay under another id")
	second := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd answer q1 1") })
	code, _ = e.replay(t, "issue_comment", "d-second", second)
	assert.Equal(t, http.StatusAccepted, code)
	ignored = e.logged(t, journal.DeliveryIgnored)
	assert.Equal(t, reasonAlreadyAnswered, ignored[len(ignored)-1]["reason"])

	stranger := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		newComment(t, m, "/loopd answer q2 1")
		obj(t, m, "sender")["login"] = "passer-by"
	})
	code, _ = e.replay(t, "issue_comment", "d-stranger", stranger)
	assert.Equal(t, http.StatusAccepted, code)
	bad := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd answer") })
	code, _ = e.replay(t, "issue_comment", "d-bad", bad)
	assert.Equal(t, http.StatusAccepted, code)
	ignored = e.logged(t, journal.DeliveryIgnored)
	assert.Equal(t, reasonBadCommand, ignored[len(ignored)-1]["reason"])
	assert.Len(t, e.onlyRecord(t).Pending, 2, "neither is queued")

	words := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		newComment(t, m, "/loopd answer q2 run only the unit tests\x1b[201~\nthen stop")
	})
	code, _ = e.replay(t, "issue_comment", "d-words", words)
	require.Equal(t, http.StatusAccepted, code)
	rec = e.onlyRecord(t)
	require.Len(t, rec.Pending, 3)
	assert.Equal(t, &desired.Answer{Words: true}, rec.Pending[2].Answer, "q2 was never asked: it answers none")
	prompt, err := e.store.Prompt(context.Background(), rec.Key, "d-words")
	require.NoError(t, err)
	assert.Contains(t, prompt, "body:\nrun only the unit tests[201~\nthen stop\n", "the words as a comment's body, sanitized")
	assert.NotContains(t, prompt, "/loopd answer")

	// A comment written before loopd saw the question open now was meant
	// for an earlier one: naming none, it answers none.
	st = e.onlyRecord(t).Status
	st.Question, st.Questions = &desired.Question{ID: "q2", Title: "Do you want to proceed?", Choices: []string{"Yes"}, AskedAt: time.Now()}, 2
	require.NoError(t, e.store.PutStatus(context.Background(), rec.Key, st))
	early := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		newComment(t, m, "/loopd answer 1")
		obj(t, m, "comment")["updated_at"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	})
	code, _ = e.replay(t, "issue_comment", "d-early", early)
	require.Equal(t, http.StatusAccepted, code)
	rec = e.onlyRecord(t)
	require.Len(t, rec.Pending, 4)
	assert.Equal(t, &desired.Answer{Choice: 1}, rec.Pending[3].Answer)
}
