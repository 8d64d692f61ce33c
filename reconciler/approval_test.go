package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// approvalPolicy is limitPolicy with the item's route on approvals:
// github, reminded after reminder ("" for the default).
func approvalPolicy(on bool, reminder string) Policy {
	p := limitPolicy()
	r := schema.Route{Harness: "claude-code", Workdir: cwd, ApprovalReminder: reminder}
	if on {
		r.Approvals = schema.ApprovalsGitHub
	}
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/api": r}}
	return p
}

func TestPlanApprovals(t *testing.T) {
	shown := desired.Question{Context: []string{" Bash command", "   make test"}, Title: "Do you want to proceed?",
		Choices: []string{"Yes", "No, and tell Claude what to do differently (esc)"}, Differently: 2}
	other := shown
	other.Context = []string{" Bash command", "   rm -rf /"}
	open := func(q desired.Question, id string, asked time.Time, reminded bool) desired.Status {
		st := running()
		st.Blocked, st.Questions = harness.BlockPermission, 1
		q.ID, q.AskedAt, q.Reminded = id, asked, reminded
		st.Question = &q
		return st
	}
	asking := func(o observed.Observation) observed.Observation {
		return screen(o, observed.Screen{Blocked: harness.BlockPermission, Question: &shown})
	}
	answer := func(id, to string, choice int, words bool) desired.Delivery {
		d := desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "alice", Answer: &desired.Answer{Question: to, Choice: choice, Words: words}}
		if words {
			d = desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "alice", Prompt: "[loopd] issue_comment.created\ndo it in a branch",
				Answer: d.Answer}.Compact()
		}
		return d
	}
	q1 := shown
	q1.ID, q1.AskedAt = "q1", t0.Add(-time.Minute)
	reminded := func(st desired.Status) desired.Status {
		q := *st.Question
		q.Reminded = true
		st.Question = &q
		return st
	}
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"a_question_is_asked_once_with_its_block_and_waits_for_its_reminder", rec(running()), asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{
				actions.AskQuestion{Key: key, Session: sess, Question: func() desired.Question { q := shown; q.ID, q.AskedAt = "q1", t0; return q }(), Block: harness.BlockPermission},
				actions.Wait{Key: key, Until: t0.Add(schema.DefaultApprovalReminder), Reason: actions.ReasonAwaitingApproval}}},
		{"without_approvals_the_screen_is_only_blocked", rec(running()), asking(obs(alive())), approvalPolicy(false, ""),
			[]actions.Action{actions.MarkBlocked{Key: key, Session: sess, Block: harness.BlockPermission}}},
		{"the_same_question_open_is_not_asked_again", rec(open(shown, "q1", t0.Add(-time.Minute), false)), asking(obs(alive())), approvalPolicy(true, "10m"),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(9 * time.Minute), Reason: actions.ReasonAwaitingApproval}}},
		{"past_its_reminder_it_is_reminded_once", rec(open(shown, "q1", t0.Add(-time.Hour), false)), asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{actions.RemindQuestion{Key: key, QuestionID: "q1"}}},
		{"reminded_it_waits_and_nobody_answers_it", rec(open(shown, "q1", t0.Add(-time.Hour), true)), asking(obs(alive())), approvalPolicy(true, ""), nil},
		{"another_question_closes_the_first_and_is_asked_under_the_next_id", rec(open(other, "q1", t0.Add(-time.Minute), false)), asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{actions.QuestionGone{Key: key, QuestionID: "q1"},
				actions.AskQuestion{Key: key, Session: sess, Question: func() desired.Question { q := shown; q.ID, q.AskedAt = "q2", t0; return q }(), Block: harness.BlockPermission},
				actions.Wait{Key: key, Until: t0.Add(schema.DefaultApprovalReminder), Reason: actions.ReasonAwaitingApproval}}},
		{"a_question_that_left_the_screen_is_gone", rec(open(shown, "q1", t0.Add(-time.Minute), false)), screen(obs(alive()), observed.Screen{}), approvalPolicy(true, ""),
			[]actions.Action{actions.QuestionGone{Key: key, QuestionID: "q1"}, actions.MarkBlocked{Key: key, Session: sess}}},
		{"an_unread_screen_keeps_the_question", rec(open(shown, "q1", t0.Add(-time.Minute), true)), obs(alive()), approvalPolicy(true, ""), nil},
		{"the_answer_to_the_open_question_is_answered_with_its_choice", rec(open(shown, "q1", t0.Add(-time.Minute), false), answer("a1", "q1", 1, false)),
			asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{actions.AnswerQuestion{Key: key, Session: sess, PaneID: "%1", DeliveryID: "a1", Sender: "alice", Question: q1, Choice: 1}}},
		{"words_pick_the_differently_choice", rec(open(shown, "q1", t0.Add(-time.Minute), false), answer("a1", "q1", 0, true)),
			asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{actions.AnswerQuestion{Key: key, Session: sess, PaneID: "%1", DeliveryID: "a1", Sender: "alice", Question: q1, Choice: 2, Words: true}}},
		{"words_taken_are_pasted_as_an_event", rec(func() desired.Status {
			st := running()
			st.Questions = 1
			st.ApprovalState = st.WithAnswer(desired.AnswerRecord{Question: "q1", DeliveryID: "a1", Choice: 2, Words: true, Outcome: desired.AnswerTaken})
			return st
		}(), answer("a1", "q1", 0, true)), screen(obs(alive()), observed.Screen{Ready: true}), approvalPolicy(true, ""),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "a1"}}},
		{"a_choice_the_question_lacks_is_refused", rec(open(shown, "q1", t0.Add(-time.Minute), false), answer("a1", "q1", 3, false)),
			asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{actions.RefuseAnswer{Key: key, DeliveryID: "a1", Sender: "alice", QuestionID: "q1", Choice: 3, Reason: actions.ReasonBadChoice},
				actions.Wait{Key: key, Until: t0.Add(59 * time.Minute), Reason: actions.ReasonAwaitingApproval}}},
		{"an_answer_to_a_question_gone_is_refused_and_the_next_one_answered", rec(open(shown, "q2", t0.Add(-time.Minute), true),
			answer("a1", "q1", 1, false), answer("a2", "q2", 2, false), answer("a3", "", 1, false)),
			asking(obs(alive())), approvalPolicy(true, ""),
			[]actions.Action{
				actions.RefuseAnswer{Key: key, DeliveryID: "a1", Sender: "alice", QuestionID: "q1", Choice: 1, Reason: actions.ReasonQuestionGone},
				actions.AnswerQuestion{Key: key, Session: sess, PaneID: "%1", DeliveryID: "a2", Sender: "alice",
					Question: func() desired.Question { q := q1; q.ID, q.Reminded = "q2", true; return q }(), Choice: 2},
				actions.RefuseAnswer{Key: key, DeliveryID: "a3", Sender: "alice", Choice: 1, Reason: actions.ReasonQuestionGone}}},
		{"an_answer_after_the_question_left_is_refused", rec(reminded(open(shown, "q1", t0.Add(-time.Minute), false)), answer("a1", "q1", 1, false)),
			screen(obs(alive()), observed.Screen{Ready: true}), approvalPolicy(true, ""),
			[]actions.Action{actions.QuestionGone{Key: key, QuestionID: "q1"},
				actions.RefuseAnswer{Key: key, DeliveryID: "a1", Sender: "alice", QuestionID: "q1", Choice: 1, Reason: actions.ReasonQuestionGone},
				actions.MarkBlocked{Key: key, Session: sess}}},
		{"a_dead_agent_closes_its_question_and_refuses_its_answers_before_its_restart", rec(open(shown, "q1", t0.Add(-time.Minute), true), answer("a1", "q1", 1, false)),
			obs(dead(1)), approvalPolicy(true, ""),
			[]actions.Action{actions.QuestionGone{Key: key, QuestionID: "q1"},
				actions.RefuseAnswer{Key: key, DeliveryID: "a1", Sender: "alice", QuestionID: "q1", Choice: 1, Reason: actions.ReasonQuestionGone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0)
			if tt.obs.Snapshot.Panes[sess].Dead {
				// What follows (the restart) is the restart policy's.
				require.GreaterOrEqual(t, len(got), len(tt.want))
				got = got[:len(tt.want)]
			}
			require.Equal(t, tt.want, got)
		})
	}
}
