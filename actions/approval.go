package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
)

// Why a question of an item's agent waits, or an answer is not taken
// (docs/design.md, "Approvals").
const (
	// ReasonAwaitingApproval: the agent's screen asks a question posted
	// on GitHub; the item waits for a person's answer, and is reminded
	// once.
	ReasonAwaitingApproval Reason = "awaiting_approval"
	// ReasonQuestionGone: the question an answer names is no longer on
	// the agent's screen, or was never open.
	ReasonQuestionGone Reason = "question_gone"
	// ReasonBadChoice: the question has no such choice, or takes no
	// words.
	ReasonBadChoice Reason = "bad_choice"
)

// AskQuestion opens Question, which the agent's screen asks, on the
// item's thread: the status keeps it (with the screen's Block, so that
// one write records both) and TalkRule queues the one comment that quotes
// it. Question.ID is the item's next (desired.QuestionID).
type AskQuestion struct {
	Key      desired.Key
	Session  string
	Question desired.Question
	Block    string
}

// Apply returns st with the question open.
func (a AskQuestion) Apply(st desired.Status) desired.Status {
	q := a.Question
	st.Question, st.Questions, st.Blocked = &q, st.Questions+1, a.Block
	return st
}

// Item implements Action.
func (a AskQuestion) Item() desired.Key { return a.Key }

// Name implements Action.
func (AskQuestion) Name() string { return "ask_question" }

// Mutates implements Action.
func (AskQuestion) Mutates() bool { return true }

// Fields implements Action.
func (a AskQuestion) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {journal.KeyQuestionID, a.Question.ID},
		{journal.KeyTitle, journal.Clip(a.Question.Title, 200)}, {"reason", string(ReasonAwaitingApproval)}}
}

func (a AskQuestion) String() string { return Format(a) }

// RemindQuestion sets the open question's one reminder: TalkRule queues
// it.
type RemindQuestion struct {
	Key        desired.Key
	QuestionID string
}

// Apply returns st with its question reminded, when it is still the one
// open.
func (a RemindQuestion) Apply(st desired.Status) desired.Status {
	if st.Question != nil && st.Question.ID == a.QuestionID {
		q := *st.Question
		q.Reminded = true
		st.Question = &q
	}
	return st
}

// Item implements Action.
func (a RemindQuestion) Item() desired.Key { return a.Key }

// Name implements Action.
func (RemindQuestion) Name() string { return "remind_question" }

// Mutates implements Action.
func (RemindQuestion) Mutates() bool { return true }

// Fields implements Action.
func (a RemindQuestion) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {journal.KeyQuestionID, a.QuestionID}, {"reason", string(ReasonAwaitingApproval)}}
}

func (a RemindQuestion) String() string { return Format(a) }

// QuestionGone closes the open question that the screen no longer shows
// with no answer from GitHub (a person answered at the terminal, the
// agent died): an answer that comes for it is refused.
type QuestionGone struct {
	Key        desired.Key
	QuestionID string
}

// Apply returns st with no question open.
func (a QuestionGone) Apply(st desired.Status) desired.Status {
	if st.Question != nil && st.Question.ID == a.QuestionID {
		st.Question = nil
	}
	return st
}

// Item implements Action.
func (a QuestionGone) Item() desired.Key { return a.Key }

// Name implements Action.
func (QuestionGone) Name() string { return "question_gone" }

// Mutates implements Action.
func (QuestionGone) Mutates() bool { return true }

// Fields implements Action.
func (a QuestionGone) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {journal.KeyQuestionID, a.QuestionID}}
}

func (a QuestionGone) String() string { return Format(a) }

// AnswerQuestion sends the keys of choice Choice of Question, the one
// open, to the item's pane, answering it with the delivery DeliveryID of
// Sender: only if the screen still shows Question (its lines, checked by
// tmux in the same invocation as the keys: tmux.Guard.Shows); otherwise
// the answer is refused as gone. A choice's delivery is then delivered;
// Words leaves it pending, an event from then on, pasted as any other.
type AnswerQuestion struct {
	Key        desired.Key
	Session    string
	PaneID     string
	DeliveryID string
	Sender     string
	Question   desired.Question
	Choice     int
	Words      bool
}

// Item implements Action.
func (a AnswerQuestion) Item() desired.Key { return a.Key }

// Name implements Action.
func (AnswerQuestion) Name() string { return "answer_question" }

// Mutates implements Action.
func (AnswerQuestion) Mutates() bool { return true }

// Fields implements Action.
func (a AnswerQuestion) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"pane_id", a.PaneID}, {journal.KeyQuestionID, a.Question.ID},
		{"delivery", a.DeliveryID}, {"sender", a.Sender}, {journal.KeyChoice, a.Choice}, {journal.KeyAnswer, answerLabel(a.Question, a.Choice, a.Words)}}
}

func (a AnswerQuestion) String() string { return Format(a) }

// RefuseAnswer takes the answer of delivery DeliveryID out of the
// pending ones unsent, for Reason (ReasonQuestionGone, ReasonBadChoice),
// and TalkRule queues the one reply that says so.
type RefuseAnswer struct {
	Key        desired.Key
	DeliveryID string
	Sender     string
	QuestionID string
	Choice     int
	Words      bool
	Reason     Reason
}

// Item implements Action.
func (a RefuseAnswer) Item() desired.Key { return a.Key }

// Name implements Action.
func (RefuseAnswer) Name() string { return "refuse_answer" }

// Mutates implements Action.
func (RefuseAnswer) Mutates() bool { return true }

// Fields implements Action.
func (a RefuseAnswer) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {journal.KeyQuestionID, a.QuestionID}, {"delivery", a.DeliveryID}, {"sender", a.Sender},
		{journal.KeyChoice, a.Choice}, {"reason", string(a.Reason)}}
}

func (a RefuseAnswer) String() string { return Format(a) }

// answerLabel is what an answer picks, as the journal says it: the
// choice's label, cut to 200 bytes, or "words" for a person's own words.
func answerLabel(q desired.Question, choice int, words bool) string {
	switch {
	case words:
		return "words"
	case choice >= 1 && choice <= len(q.Choices):
		return journal.Clip(q.Choices[choice-1], 200)
	}
	return ""
}

// askQuestion records the question open, with the block its screen shows.
func (e *Executor) askQuestion(ctx context.Context, r *desired.Record, a AskQuestion) error {
	was := r.Status.Blocked
	if err := e.put(ctx, r, a.Apply(r.Status)); err != nil {
		return err
	}
	if a.Block != "" && a.Block != was {
		e.recordBlocked(ctx, r, a.Session, a.Block)
	}
	e.record(ctx, slog.LevelWarn, journal.QuestionAsked, r.Key, "session", a.Session, journal.KeyQuestionID, a.Question.ID,
		journal.KeyTitle, journal.Clip(a.Question.Title, 200))
	return nil
}

// remindQuestion records the reminder set.
func (e *Executor) remindQuestion(ctx context.Context, r *desired.Record, a RemindQuestion) error {
	if err := e.put(ctx, r, a.Apply(r.Status)); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.QuestionReminded, r.Key, journal.KeyQuestionID, a.QuestionID)
	return nil
}

// questionGone records the question closed.
func (e *Executor) questionGone(ctx context.Context, r *desired.Record, a QuestionGone) error {
	if err := e.put(ctx, r, a.Apply(r.Status)); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.QuestionGone, r.Key, journal.KeyQuestionID, a.QuestionID)
	return nil
}

// answerQuestion sends the answer's keys behind the guard that the screen
// still shows the question, then records the answer taken; a screen that
// changed refuses it as gone. Any other failure of the keys is the
// action's error, and the answer stays pending for the next pass.
func (e *Executor) answerQuestion(ctx context.Context, r *desired.Record, a AnswerQuestion) error {
	ad, err := e.adapter(r.Spec.Harness)
	if err != nil {
		return fmt.Errorf("answer question %s: %w", r.Key, err)
	}
	asker, ok := ad.(harness.Asker)
	if !ok {
		return fmt.Errorf("answer question %s: harness %s reads no questions", r.Key, r.Spec.Harness)
	}
	q := a.Question
	hq := harness.Question{Context: q.Context, Title: q.Title, Choices: q.Choices, Differently: q.Differently}
	keys := asker.AnswerKeys(hq, a.Choice)
	if keys == nil {
		return e.refuseAnswer(ctx, r, RefuseAnswer{Key: a.Key, DeliveryID: a.DeliveryID, Sender: a.Sender, QuestionID: q.ID,
			Choice: a.Choice, Words: a.Words, Reason: ReasonBadChoice})
	}
	g := e.guard(ad)
	g.Shows = hq.Lines()
	err = e.Tmux.SendKeys(ctx, paneTarget(a.PaneID, a.Session), g, keys...)
	switch {
	case errors.Is(err, tmux.ErrScreenChanged):
		return e.refuseAnswer(ctx, r, RefuseAnswer{Key: a.Key, DeliveryID: a.DeliveryID, Sender: a.Sender, QuestionID: q.ID,
			Choice: a.Choice, Words: a.Words, Reason: ReasonQuestionGone})
	case err != nil:
		return fmt.Errorf("answer question %s: %w", r.Key, err) // send keys to <target>: …
	}
	st := r.Status
	if st.Question != nil && st.Question.ID == q.ID {
		st.Question = nil
	}
	st.ApprovalState = st.WithAnswer(desired.AnswerRecord{Question: q.ID, DeliveryID: a.DeliveryID, Sender: a.Sender, Choice: a.Choice,
		Words: a.Words, Outcome: desired.AnswerTaken, At: e.Now()})
	m := mark{}
	if !a.Words {
		// The keys were the whole answer: it is delivered, and its
		// comment acknowledged. Words are pasted as an event next.
		m = mark{id: a.DeliveryID, via: "answer", session: a.Session, verified: true}
	}
	if err := e.putDelivered(ctx, r, st, m); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.QuestionAnswered, r.Key, "session", a.Session, journal.KeyQuestionID, q.ID,
		"delivery", a.DeliveryID, "sender", a.Sender, journal.KeyChoice, a.Choice, journal.KeyAnswer, answerLabel(q, a.Choice, a.Words),
		"keys", strings.Join(keys, " "))
	return nil
}

// refuseAnswer records the answer not taken, its delivery no longer
// pending; TalkRule queues the reply.
func (e *Executor) refuseAnswer(ctx context.Context, r *desired.Record, a RefuseAnswer) error {
	outcome := desired.AnswerGone
	if a.Reason == ReasonBadChoice {
		outcome = desired.AnswerBad
	}
	st := r.Status
	st.ApprovalState = st.WithAnswer(desired.AnswerRecord{Question: a.QuestionID, DeliveryID: a.DeliveryID, Sender: a.Sender, Choice: a.Choice,
		Words: a.Words, Outcome: outcome, At: e.Now()})
	if err := e.putDelivered(ctx, r, st, mark{id: a.DeliveryID, via: "refused"}); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.QuestionRefused, r.Key, journal.KeyQuestionID, a.QuestionID, "delivery", a.DeliveryID,
		"sender", a.Sender, journal.KeyChoice, a.Choice, "reason", string(a.Reason))
	return nil
}
