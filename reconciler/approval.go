package reconciler

import (
	"slices"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// approve plans an item's approvals from GitHub (docs/design.md,
// "Approvals") before anything else is decided on it, and returns the
// record as the executor will leave it, its answers taken out of the
// pending events (desired.Status.AwaitsAnswer: an answer is never pasted
// as an event):
//   - on a route with approvals: github, a question the live agent's
//     screen asks (observed.Screen.Question) that is not the one open is
//     asked (ask_question, the next id, with the screen's block: one
//     write, one comment), the one open before it gone;
//   - the open question is gone (question_gone) once the screen read shows
//     none, the agent is not alive, the item is closed or held, or the
//     route's approvals are off; a screen not read keeps it;
//   - the first answer to the open question is answered (answer_question:
//     its choice, or the question's Differently choice for words, the
//     screen checked again by tmux with the keys); every other answer
//     (another question's, one to none, one after the first of this pass)
//     is refused question_gone, one with no such choice bad_choice;
//   - a question open past the route's approvalReminder is reminded once
//     (remind_question), and waits for it until then (wait
//     reason=awaiting_approval).
//
// loopd never picks a choice no person gave.
func approve(rp *desired.Record, obs *observed.Observation, p *Policy, now time.Time) ([]actions.Action, *desired.Record) {
	route, _ := p.route(rp.Key)
	on := route.ApprovalsFromGitHub()
	if rp.Status.Question == nil && !on && !slices.ContainsFunc(rp.Pending, hasAnswer) {
		return nil, rp // nothing asked, nothing answered: not copied
	}
	r := *rp
	st := r.Status
	var awaiting, pending []desired.Delivery
	for _, d := range r.Pending {
		if st.AwaitsAnswer(d) {
			awaiting = append(awaiting, d)
		} else {
			pending = append(pending, d)
		}
	}
	it := itemPlan{r: rp, st: st, session: desired.SessionName(r.Key), obs: obs, p: p, now: now, pending: pending}
	it.observe()
	sc, read := obs.Screens[r.Key]
	live := it.pane.alive && !r.Spec.Closed && !r.Spec.Held
	var out []actions.Action
	gone := func() {
		a := actions.QuestionGone{Key: r.Key, QuestionID: st.Question.ID}
		out, st = append(out, a), a.Apply(st)
	}
	switch {
	case on && live && read && sc.Question != nil:
		if st.Question != nil && st.Question.Same(*sc.Question) {
			break
		}
		if st.Question != nil {
			gone()
		}
		q := *sc.Question
		q.ID, q.AskedAt = desired.QuestionID(st.Questions+1), now
		a := actions.AskQuestion{Key: r.Key, Session: it.session, Question: q, Block: string(sc.Blocked)}
		out, st = append(out, a), a.Apply(st)
	case st.Question != nil && (!on || !live || (read && sc.Question == nil)):
		gone()
	}
	answered := false
	for _, d := range awaiting {
		a, q := *d.Answer, st.Question
		refuse := actions.RefuseAnswer{Key: r.Key, DeliveryID: d.ID, Sender: d.Sender, QuestionID: a.Question, Choice: a.Choice,
			Words: a.Words, Reason: actions.ReasonQuestionGone}
		if q == nil || a.Question != q.ID || answered {
			out = append(out, refuse)
			continue
		}
		choice := a.Choice
		if a.Words {
			choice = q.Differently
		}
		if choice < 1 || choice > len(q.Choices) {
			refuse.Reason = actions.ReasonBadChoice
			out = append(out, refuse)
			continue
		}
		out = append(out, actions.AnswerQuestion{Key: r.Key, Session: it.session, PaneID: it.pane.id, DeliveryID: d.ID, Sender: d.Sender,
			Question: *q, Choice: choice, Words: a.Words})
		answered = true
	}
	if q := st.Question; q != nil && !answered && !q.Reminded {
		at := q.AskedAt.Add(route.ReminderAfter())
		if now.Before(at) {
			out = append(out, actions.Wait{Key: r.Key, Until: at, Reason: actions.ReasonAwaitingApproval})
		} else {
			a := actions.RemindQuestion{Key: r.Key, QuestionID: q.ID}
			out, st = append(out, a), a.Apply(st)
		}
	}
	r.Status, r.Pending = st, pending
	return out, &r
}

// hasAnswer reports whether d carries an answer to a question, which only
// such a delivery can (desired.Status.AwaitsAnswer).
func hasAnswer(d desired.Delivery) bool { return d.Answer != nil }
