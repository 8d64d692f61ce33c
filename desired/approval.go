package desired

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/journal"
)

// Question is a question the agent's screen asks a person, posted on the
// item's thread for an answer (a route's approvals: github;
// docs/design.md, "Approvals"): one instance of it, from the pass that
// first saw it to its answer or until the screen stops showing it. Its
// texts are the screen's, untrusted.
type Question struct {
	// ID names this instance on the item: "q" and the count of the
	// item's questions so far (Status.Questions), "q1", "q2", …; the same
	// text asked again is another instance with another id.
	ID string
	// Context, Title and Choices are the screen's (harness.Question):
	// what the prompt shows above the question, the question, and the
	// choices' labels, choice n being Choices[n-1]. Differently is the
	// choice after which the CLI takes a person's own words, 0 for none.
	Context     []string `json:",omitempty"`
	Title       string
	Choices     []string
	Differently int `json:",omitempty"`
	// AskedAt is when loopd first saw it; Reminded is set once the one
	// reminder was queued.
	AskedAt  time.Time
	Reminded bool `json:",omitempty"`
}

// Same reports whether q and o are the same question as a screen shows
// it: the same context, title and choices, whatever their ids.
func (q Question) Same(o Question) bool {
	return q.Title == o.Title && slices.Equal(q.Context, o.Context) && slices.Equal(q.Choices, o.Choices) && q.Differently == o.Differently
}

// QuestionID is the id of an item's n-th question.
func QuestionID(n int) string { return "q" + strconv.Itoa(n) }

// Answer is an authorized person's answer to a question of the item
// (Delivery.Answer), as their comment gave it ("/loopd answer …",
// AnswerCommand) and the webhook resolved it.
type Answer struct {
	// Question is the id of the question answered: the one the comment
	// named, or the one open when it named none; "" when it named none
	// and none was open. It is the answer's idempotency key with the
	// item: one answer per question instance (store.Ingest).
	Question string
	// Choice is the choice picked, 1-based; with the person's own words
	// (the delivery's prompt, framed and sanitized as a comment is), the
	// question's Differently choice.
	Choice int
	// Words is set when the answer is the person's own words: they are
	// the delivery's prompt, pasted once Choice was picked.
	Words bool `json:",omitempty"`
}

// The outcomes of an answer (AnswerRecord.Outcome).
const (
	// AnswerTaken: its keys reached the question, still on the screen.
	AnswerTaken = "answered"
	// AnswerGone: the question it answers was no longer on the screen
	// (answered at the terminal, gone, or never asked): nothing was sent,
	// and loopd replied so on the thread.
	AnswerGone = "gone"
	// AnswerBad: the question has no such choice, or takes no words;
	// nothing was sent, and loopd replied so.
	AnswerBad = "bad_choice"
)

// AnswerRecord is what became of one answer (Status.Answers).
type AnswerRecord struct {
	Question   string
	DeliveryID string
	Sender     string
	Choice     int
	Words      bool `json:",omitempty"`
	Outcome    string
	At         time.Time
	// Reply numbers the reply loopd queued for an answer it did not
	// take (Status.Replies), 0 for a taken one.
	Reply int `json:",omitempty"`
}

// MaxAnswers bounds the answers a status keeps (Status.Answers): the
// newest are kept.
const MaxAnswers = 16

// ApprovalState is what an item's approvals from GitHub stand at
// (Status.ApprovalState).
type ApprovalState struct {
	// Question is the question open on the item's thread, nil for none.
	Question *Question `json:",omitempty"`
	// Questions counts the questions asked (QuestionID).
	Questions int `json:",omitempty"`
	// Answers are the latest answers taken or refused, oldest first, at
	// most MaxAnswers.
	Answers []AnswerRecord `json:",omitempty"`
	// Replies counts the replies queued for answers not taken: each
	// reply's marker carries its number.
	Replies int `json:",omitempty"`
}

// Answered returns what became of the answer of delivery id, and false
// when the status keeps none.
func (s ApprovalState) Answered(id string) (AnswerRecord, bool) {
	for _, a := range s.Answers {
		if a.DeliveryID == id {
			return a, true
		}
	}
	return AnswerRecord{}, false
}

// WithAnswer returns s with a recorded, the oldest dropped past
// MaxAnswers; an answer that was not taken gets the next reply number.
func (s ApprovalState) WithAnswer(a AnswerRecord) ApprovalState {
	if a.Outcome != AnswerTaken {
		s.Replies++
		a.Reply = s.Replies
	}
	s.Answers = append(slices.Clone(s.Answers), a)
	if len(s.Answers) > MaxAnswers {
		s.Answers = s.Answers[len(s.Answers)-MaxAnswers:]
	}
	return s
}

// AwaitsAnswer reports whether d is an answer whose keys were not sent
// yet: the planner answers it, or refuses it, and never pastes it as an
// event. An answer of the person's own words whose choice was taken is an
// event from then on, pasted as any other.
func (s Status) AwaitsAnswer(d Delivery) bool {
	if d.Answer == nil {
		return false
	}
	a, ok := s.Answered(d.ID)
	return !ok || a.Outcome != AnswerTaken || !d.Answer.Words
}

// AwaitingApproval returns the id of the question the item's agent waits
// on a person's answer to from GitHub (ApprovalState.Question), "" for
// none or when the item is Stopped: the one test that get, describe and
// the status page show as AwaitingApproval.
func (s Status) AwaitingApproval() string {
	if s.Question == nil || s.Phase == PhaseStopped {
		return ""
	}
	return s.Question.ID
}

// ErrBadAnswer is returned by AnswerCommand for "/loopd answer" with
// nothing to answer.
var ErrBadAnswer = errors.New("an answer needs a choice's number or words")

// answerCommand is an authorized comment's answer: its first line is
// "/loopd answer", then an optional question id, then a choice's number
// or the start of the person's words (which may go on over the next
// lines).
var answerCommand = regexp.MustCompile(`(?i)^\s*/loopd\s+answer(?:\s+(q[0-9]{1,6}))?(?:\s+(.*?))?\s*$`)

// choiceNumber is an answer that is a choice's number.
var choiceNumber = regexp.MustCompile(`^[0-9]{1,2}$`)

// AnswerCommand reports the answer an issue or review comment's body
// gives ("/loopd answer 2", "/loopd answer q3 2" on its first line, or
// "/loopd answer [q3] <words>"), and whether it is such a command at all:
// its question id ("" when it names none), the choice (0 for words), the
// person's words ("" for a choice; the body from them on, as written: the
// caller frames and sanitizes them as a comment), with ErrBadAnswer for a
// command with neither.
func AnswerCommand(body string) (Answer, string, bool, error) {
	first, more, _ := strings.Cut(body, "\n")
	m := answerCommand.FindStringSubmatch(strings.TrimSuffix(first, "\r"))
	if m == nil {
		return Answer{}, "", false, nil
	}
	a, rest := Answer{Question: strings.ToLower(m[1])}, m[2]
	switch {
	case rest == "":
		return a, "", true, fmt.Errorf("%q: %w", journal.Clip(first, 80), ErrBadAnswer)
	case choiceNumber.MatchString(rest):
		// A choice: the lines after it are the person's, not the answer.
		a.Choice, _ = strconv.Atoi(rest)
		if a.Choice == 0 {
			return a, "", true, fmt.Errorf("%q: %w", journal.Clip(first, 80), ErrBadAnswer)
		}
		return a, "", true, nil
	}
	if more != "" {
		rest += "\n" + more
	}
	a.Words = true
	return a, rest, true, nil
}
