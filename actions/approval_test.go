package actions_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
)

// permissionScreen is Claude Code's permission prompt as the pane shows
// it.
var permissionScreen = strings.Join([]string{strings.Repeat("─", 40), " Bash command", "", "   make test", "",
	" Do you want to proceed?", " ❯ 1. Yes", "   2. No, and tell Claude what to do differently (esc)", "", " Esc to cancel"}, "\n")

// TestAnswerQuestionOnlyWhileItIsOnTheScreen: the question asked is
// written with its block and posted once; an answer sends its choice's
// number behind a guard that the screen still shows the question, is
// delivered and journaled with who answered what; an answer once the
// screen changed sends nothing, and is refused with one reply.
func TestAnswerQuestionOnlyWhileItIsOnTheScreen(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.exec.Talk = func(desired.Record) desired.Talk { return desired.Talk{Notify: true, Acknowledge: true} }
	r.ingest(t, "d-1", "hello")
	session, pane := r.livePane(t)
	r.tmux.SetScreen(session, permissionScreen)
	st := r.get(t).Status
	st.Phase = desired.PhaseRunning
	require.NoError(t, r.store.PutStatus(ctx, r.key, st, "d-1"))
	q := desired.Question{ID: "q1", Context: []string{" Bash command", "   make test"}, Title: "Do you want to proceed?",
		Choices: []string{"Yes", "No, and tell Claude what to do differently (esc)"}, Differently: 2, AskedAt: r.now}

	res := r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{actions.AskQuestion{Key: r.key, Session: session, Question: q, Block: "permission_prompt"}})
	require.Zero(t, res.Failed, r.log.String())
	got := r.get(t)
	require.NotNil(t, got.Status.Question)
	assert.Equal(t, "q1", got.Status.Question.ID)
	assert.Equal(t, 1, got.Status.Questions)
	assert.Equal(t, "permission_prompt", got.Status.Blocked)

	answer := func(id string, a desired.Answer) {
		_, err := r.store.Ingest(ctx, store.Ingest{DeliveryID: id, Key: r.key, Kind: desired.KindIssue, NoCreate: true,
			Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "alice", Answer: &a,
				Source: desired.Source{Kind: desired.SourceIssueComment, ID: 5}}})
		require.NoError(t, err)
	}
	answer("a-1", desired.Answer{Question: "q1", Choice: 1})
	res = r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{actions.AnswerQuestion{Key: r.key, Session: session, PaneID: pane,
		DeliveryID: "a-1", Sender: "alice", Question: q, Choice: 1}})
	require.Zero(t, res.Failed, r.log.String())
	assert.Equal(t, []string{"1"}, r.tmux.Keys(session))
	got = r.get(t)
	assert.Nil(t, got.Status.Question)
	assert.Empty(t, got.Pending, "the answer is delivered")
	require.Len(t, got.Status.Answers, 1)
	assert.Equal(t, desired.AnswerTaken, got.Status.Answers[0].Outcome)

	// The person answered at the terminal meanwhile: the screen moved on.
	r.tmux.SetScreen(session, "❯ \n")
	q2 := q
	q2.ID = "q2"
	answer("a-2", desired.Answer{Question: "q2", Choice: 2})
	res = r.exec.Execute(ctx, []desired.Record{r.get(t)}, []actions.Action{actions.AnswerQuestion{Key: r.key, Session: session, PaneID: pane,
		DeliveryID: "a-2", Sender: "bob", Question: q2, Choice: 2}})
	require.Zero(t, res.Failed, r.log.String())
	assert.Equal(t, []string{"1"}, r.tmux.Keys(session), "nothing sent to a screen that changed")
	got = r.get(t)
	assert.Empty(t, got.Pending, "the refused answer is not pending")
	require.Len(t, got.Status.Answers, 2)
	assert.Equal(t, desired.AnswerGone, got.Status.Answers[1].Outcome)

	calls, err := r.store.Calls(ctx, store.CallFilter{WorkItem: r.key.String()})
	require.NoError(t, err)
	var markers []string
	for _, c := range calls {
		markers = append(markers, string(c.Kind)+" "+c.Marker)
	}
	assert.Equal(t, []string{"notify <!-- loopd:notice octo-org/api#7 question=q1 -->", "react ", "notify <!-- loopd:notice octo-org/api#7 reply=1 -->"}, markers,
		"one question, the answer's eyes, one reply")

	evs, err := r.store.Events(ctx, store.EventFilter{})
	require.NoError(t, err)
	i := slices.IndexFunc(evs, func(ev journal.Event) bool { return ev.Name == journal.QuestionAnswered })
	require.GreaterOrEqual(t, i, 0)
	a := evs[i].Attrs
	assert.Equal(t, []string{"q1", "alice", "1", "Yes"}, []string{a[journal.KeyQuestionID], a[journal.KeySender], a[journal.KeyChoice], a[journal.KeyAnswer]},
		"who answered what")
	i = slices.IndexFunc(evs, func(ev journal.Event) bool { return ev.Name == journal.QuestionRefused })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "question_gone", evs[i].Attrs[journal.KeyReason])
	assert.Equal(t, "bob", evs[i].Attrs[journal.KeySender])
}
