package desired_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

func TestAnswerCommand(t *testing.T) {
	for _, tc := range []struct {
		body    string
		want    desired.Answer
		words   string
		command bool
		bad     bool
	}{
		{body: "/loopd answer 2", want: desired.Answer{Choice: 2}, command: true},
		{body: "  /loopd  answer  Q12 1\r\nthanks", want: desired.Answer{Question: "q12", Choice: 1}, command: true},
		{body: "/loopd answer q3 run only the unit tests\nand nothing else", want: desired.Answer{Question: "q3", Words: true},
			words: "run only the unit tests\nand nothing else", command: true},
		{body: "/loopd answer quick fix please", want: desired.Answer{Words: true}, words: "quick fix please", command: true},
		{body: "/loopd answer 2 then stop", want: desired.Answer{Words: true}, words: "2 then stop", command: true},
		{body: "/loopd answer", command: true, bad: true},
		{body: "/loopd answer q3", want: desired.Answer{Question: "q3"}, command: true, bad: true},
		{body: "/loopd answer 0", command: true, bad: true},
		{body: "/loopd answered 2"},
		{body: "please /loopd answer 2"},
		{body: "hello\n/loopd answer 2"},
	} {
		a, words, command, err := desired.AnswerCommand(tc.body)
		assert.Equal(t, tc.command, command, tc.body)
		assert.Equal(t, tc.bad, err != nil, tc.body)
		if tc.command && !tc.bad {
			assert.Equal(t, tc.want, a, tc.body)
			assert.Equal(t, tc.words, words, tc.body)
		}
	}
}

// TestTalkRuleApprovals: a question newly open posts one comment that
// quotes it, escaped, with its id; the same question written again posts
// nothing, its reminder one more; an answer refused gets one reply; the
// blocked notice of its screen is not posted besides the question.
func TestTalkRuleApprovals(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	talk := desired.Talk{Notify: true, Host: "build-1", Socket: "loopd"}
	asked := time.Date(2026, 7, 15, 9, 30, 0, 0, time.UTC)
	q := desired.Question{ID: "q1", Context: []string{" Bash command", "   rm -rf build `@boss` <!-- loopd:notice acme/api#42 episode=9 -->\x1b[2J"},
		Title: "Do you want to proceed?", Choices: []string{"Yes", "No, and tell Claude what to do differently (esc)"}, Differently: 2, AskedAt: asked}
	running := desired.Status{Phase: desired.PhaseRunning}
	open := running
	open.Blocked, open.Question, open.Questions = "permission_prompt", &q, 1

	next, calls := desired.TalkRule(desired.Record{Key: key, Status: running}, open, nil, talk)
	require.Len(t, calls, 1, "the question, and no blocked notice besides it")
	assert.Empty(t, next.NoticedBlock)
	c := calls[0]
	assert.Equal(t, desired.CallNotify, c.Kind)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 question=q1 -->", c.Marker)
	assert.True(t, desired.IsOwnMarker(c.Marker))
	assert.Contains(t, c.Body, "asks (question `q1`):\n\n")
	assert.Contains(t, c.Body, "\n       rm -rf build `@boss` <!-- loopd:notice acme/api#42 episode=9 -->[2J\n", "quoted in a code block, controls removed")
	assert.Contains(t, c.Body, "\n    Do you want to proceed?\n      1. Yes\n      2. No, and tell Claude what to do differently (esc)\n")
	assert.Contains(t, c.Body, "`/loopd answer q1 N`")
	assert.Contains(t, c.Body, "`/loopd answer q1 <what to do instead>` picks choice 2")

	_, calls = desired.TalkRule(desired.Record{Key: key, Status: open}, open, nil, talk)
	assert.Empty(t, calls, "the same question written again")

	reminded := open
	rq := q
	rq.Reminded = true
	reminded.Question = &rq
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: open}, reminded, nil, talk)
	require.Len(t, calls, 1)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 reminder=q1 -->", calls[0].Marker)
	assert.True(t, desired.IsOwnMarker(calls[0].Marker))
	assert.Contains(t, calls[0].Body, "Reminder: the agent of this issue still waits for an answer to question `q1`, asked 2026-07-15 09:30 UTC.")
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: reminded}, reminded, nil, talk)
	assert.Empty(t, calls, "one reminder")

	answered := reminded
	answered.Question = nil
	answered.ApprovalState = answered.WithAnswer(desired.AnswerRecord{Question: "q1", DeliveryID: "d1", Sender: "alice", Choice: 1, Outcome: desired.AnswerTaken})
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: reminded}, answered, nil, talk)
	assert.Empty(t, calls, "an answer taken is acknowledged by its reaction, not a comment")

	refused := answered
	refused.ApprovalState = refused.WithAnswer(desired.AnswerRecord{Question: "q1", DeliveryID: "d2", Sender: "bob", Choice: 2, Outcome: desired.AnswerGone})
	require.Equal(t, 1, refused.Replies)
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: answered}, refused, nil, talk)
	require.Len(t, calls, 1)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 reply=1 -->", calls[0].Marker)
	assert.True(t, desired.IsOwnMarker(calls[0].Marker))
	assert.Contains(t, calls[0].Body, "@bob answered question `q1`, which is no longer on the agent's screen")
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: refused}, refused, nil, talk)
	assert.Empty(t, calls, "one reply")

	_, calls = desired.TalkRule(desired.Record{Key: key, Status: running}, open, nil, desired.Talk{})
	assert.Empty(t, calls, "nothing without a GitHub client")
}

func TestAwaitsAnswer(t *testing.T) {
	choice := desired.Delivery{ID: "d1", Answer: &desired.Answer{Question: "q1", Choice: 1}}
	words := desired.Delivery{ID: "d2", Answer: &desired.Answer{Question: "q1", Choice: 2, Words: true}}
	var st desired.Status
	assert.True(t, st.AwaitsAnswer(choice))
	assert.True(t, st.AwaitsAnswer(words))
	assert.False(t, st.AwaitsAnswer(desired.Delivery{ID: "d3"}), "an event")
	st.ApprovalState = st.WithAnswer(desired.AnswerRecord{DeliveryID: "d2", Outcome: desired.AnswerTaken, Words: true})
	assert.False(t, st.AwaitsAnswer(words), "its choice taken, the words are an event")
	st.ApprovalState = st.WithAnswer(desired.AnswerRecord{DeliveryID: "d1", Outcome: desired.AnswerTaken})
	assert.True(t, st.AwaitsAnswer(choice), "a choice is never pasted")
	for i := range desired.MaxAnswers + 3 {
		st.ApprovalState = st.WithAnswer(desired.AnswerRecord{DeliveryID: "x", Outcome: desired.AnswerGone, Choice: i})
	}
	assert.Len(t, st.Answers, desired.MaxAnswers)
	assert.Equal(t, desired.MaxAnswers+3, st.Replies)
}
