package e2e

import (
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// transcriptUsage sums the usage of conversation id of k as its
// transcript records it, each message once by its id with its largest
// usage: what loopd must have counted, no more.
func (e *env) transcriptUsage(t *testing.T, k desired.Key, id string) (desired.Tokens, int) {
	t.Helper()
	return sumUsage(e.messageUsage(t, k, id))
}

// messageUsage returns the usage of each message of conversation id of k
// as its transcript records it, by message id, each with its largest
// usage over the lines that write it; into, when given, gets them too
// (the larger of the two, kind by kind).
func (e *env) messageUsage(t *testing.T, k desired.Key, id string, into ...map[string]desired.Tokens) map[string]desired.Tokens {
	t.Helper()
	byID := map[string]desired.Tokens{}
	if len(into) > 0 {
		byID = into[0]
	}
	for _, l := range e.transcriptLines(t, k, id) {
		msg, _ := l["message"].(map[string]any)
		u, _ := msg["usage"].(map[string]any)
		mid, _ := msg["id"].(string)
		if l["type"] != "assistant" || u == nil || mid == "" {
			continue
		}
		n := func(key string) int64 { f, _ := u[key].(float64); return int64(f) }
		byID[mid] = byID[mid].Top(desired.Tokens{Input: n("input_tokens"), Output: n("output_tokens"),
			CacheWrite: n("cache_creation_input_tokens"), CacheRead: n("cache_read_input_tokens")})
	}
	return byID
}

// sumUsage returns the sum of byID's usage and how many messages it holds.
func sumUsage(byID map[string]desired.Tokens) (desired.Tokens, int) {
	var sum desired.Tokens
	for _, tk := range byID {
		sum = sum.Add(tk)
	}
	return sum, len(byID)
}

// TestBudgetRunsOutMidTurnAndTheSameConversationGoesOn: each message of
// the fake CLI uses 1,300 weighted tokens, written in two lines as the
// real CLI writes a message's blocks, and a long turn writes one every
// 400 ms. The route allows 5,000 a day. The budget runs out mid-turn:
// loopd sends Escape, the CLI records the interruption, the item is held
// BudgetExhausted with no failure, one notice with the figures is posted,
// a comment sent meanwhile stays pending, and a daemon restarted during
// the hold keeps it. An authorized comment raises the budget: the same
// conversation is resumed and the pending comment delivered once. A
// second long turn runs it out again, and loopd release --budget raises
// it: the same conversation again. What loopd counted is, at each hold
// and at the end, what the transcript holds, each message once.
func TestBudgetRunsOutMidTurnAndTheSameConversationGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{
		"FAKECLAUDE_USAGE":       "100,200,0,1000",
		"FAKECLAUDE_LONG_TURN":   "200",
		"FAKECLAUDE_REPLY_DELAY": "400ms",
	}})
	e.route()["budget"] = map[string]any{"tokens": 5000, "window": "24h",
		"weights": map[string]any{"input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1}}
	e.writeConfig(t)
	srv, _ := e.withGitHub(t)
	e.start(t)

	commentOn(t, e, keyIssue.Number, "LONG TURN "+uuid.NewString())
	held := e.waitPhase(t, keyIssue, desired.PhaseBudgetExhausted, waitLong)
	id := held.Status.HarnessSessionID
	ev := e.waitEvent(t, journal.SessionBudgetExhausted, keyIssue, 1, waitShort)[0]
	assert.Equal(t, "Escape", ev.Attrs["keys"], "the turn in flight is interrupted the way the CLI's own key does")
	e.waitFor(t, func() bool {
		return countContaining(e.userTurns(t, keyIssue, id), "[Request interrupted by user]") == 1
	}, waitShort, "the CLI never recorded the interruption")
	assert.GreaterOrEqual(t, held.Status.BudgetUsed, int64(5000))
	assert.Equal(t, int64(5000), held.Status.BudgetLimit)
	assert.Zero(t, held.Status.Failures, "a hold is no failure")

	// Held: a comment waits, and a restart keeps the hold.
	later := "later " + uuid.NewString()
	d2 := commentOn(t, e, keyIssue.Number, later)
	e.kill9(t)
	e.start(t)
	e.settle(t)
	r := e.mustRecord(t, keyIssue)
	require.Equal(t, desired.PhaseBudgetExhausted, r.Status.Phase)
	require.Len(t, r.Pending, 1)
	assert.Equal(t, d2, r.Pending[0].ID)
	counted, messages := e.transcriptUsage(t, keyIssue, id)
	assert.Equal(t, counted, r.Status.UsageTotal, "each of the %d messages counted once, across the restart", messages)
	assert.Equal(t, r.Status.UsageWeighted, counted.Input+counted.Output+counted.CacheWrite+counted.CacheRead)
	assert.Less(t, messages, 200, "the long turn stopped")
	out := e.mustRun(t, "get")
	assert.Regexp(t, `BudgetExhausted\s.*budget_exhausted budget=[0-9.]+k/5\.0k budget_which=window`, out)
	assert.Regexp(t, `(?m)^wait work_item=`+keyIssue.String()+` until=\S+ reason=budget_exhausted$`, e.mustRun(t, "reconcile", "--once", "--dry-run"))
	assert.Equal(t, 1.0, e.metric(t, `loopd_budget_exhausted_work_items{route="*"}`))
	assert.Equal(t, float64(r.Status.UsageWeighted), e.metric(t, `loopd_budget_used_tokens{budget="window",work_item="`+keyIssue.String()+`"}`))
	e.waitFor(t, func() bool { return len(notices(srv)) == 1 }, waitLong, "the budget notice was never posted")
	assert.Contains(t, notices(srv)[0].Body, "token budget of 5.0k (weighted)")

	// Raised by an authorized comment: the same conversation goes on, and
	// the comment that waited is delivered once.
	raise := r.Status.UsageWeighted - 5000 + 3000
	commentOn(t, e, keyIssue.Number, "/loopd budget +"+strconv.FormatInt(raise, 10))
	waitDelivered(t, e, d2, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, raise, r.Spec.BudgetRaise)
	turns := e.userTurns(t, keyIssue, id)
	assert.Equal(t, 1, countContaining(turns, "token budget raised"), "%q", turns)
	assert.Equal(t, 1, countContaining(turns, later), "the waiting comment once")
	assert.Zero(t, countContaining(turns, "/loopd budget"), "the command reaches no agent")

	// A second long turn runs it out again; loopd release --budget raises it.
	commentOn(t, e, keyIssue.Number, "LONG TURN again "+uuid.NewString())
	e.waitEvent(t, journal.SessionBudgetExhausted, keyIssue, 2, waitLong)
	r = e.waitPhase(t, keyIssue, desired.PhaseBudgetExhausted, waitShort)
	more := r.Status.UsageWeighted - (5000 + raise) + 3000
	e.mustRun(t, "release", "--budget", "+"+strconv.FormatInt(more, 10), keyIssue.String())
	e.waitEvent(t, journal.ItemBudgetRaised, keyIssue, 1, waitShort)
	r = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation again")
	e.waitFor(t, func() bool {
		return countContaining(e.userTurns(t, keyIssue, id), "token budget raised") == 2
	}, waitLong, "the second resume's prompt never reached the conversation")
	e.waitFor(t, func() bool { return len(notices(srv)) == 2 }, waitLong, "one notice per hold")

	e.settle(t)
	r = e.mustRecord(t, keyIssue)
	counted, messages = e.transcriptUsage(t, keyIssue, id)
	assert.Equal(t, counted, r.Status.UsageTotal, "each of the %d messages counted once, over two holds, a restart and two resumes", messages)
	assert.Zero(t, r.Status.Failures)
	assert.Empty(t, e.eventsNamed(t, journal.SessionExited, keyIssue), "no crash")
	for _, s := range e.starts(t)[1:] {
		flag, resumed := s.mode()
		assert.Equal(t, "--resume", flag)
		assert.Equal(t, id, resumed)
	}
}

// TestBudgetOfAProcessRunnerGeminiRoute: a Gemini route of the process
// runner whose items may use 1,000 weighted tokens a day; each message of
// the fake Gemini uses 1,100 and is written twice in its chat file, as
// Gemini writes a message again with its tool calls. The first event's run
// spends the budget: the item is held BudgetExhausted with one notice, the
// run judged by the hold; a second event starts no run and waits. loopd release
// --budget raises it: a run resumes the same conversation with the
// budget-raised prompt, and the pending event runs after, once. What loopd
// counted is what the chat file holds, each message once.
func TestBudgetOfAProcessRunnerGeminiRoute(t *testing.T) {
	t.Parallel()
	g := geminiProcessEnv(t, map[string]string{"FAKEGEMINI_USAGE": "1000,90,0,10,0"})
	g.route()["budget"] = map[string]any{"tokens": 1000, "window": "24h",
		"weights": map[string]any{"input": 1, "output": 1, "cacheWrite": 1, "cacheRead": 1}}
	g.writeConfig(t)
	srv, _ := g.withGitHub(t)
	g.start(t)

	d1 := commentOn(t, g.env, keyIssue.Number, "first event "+uuid.NewString())
	waitDelivered(t, g.env, d1, waitLong)
	r := g.waitPhase(t, keyIssue, desired.PhaseBudgetExhausted, waitLong)
	id := r.Status.HarnessSessionID
	assert.Equal(t, int64(1100), r.Status.BudgetUsed)
	assert.Empty(t, r.Status.RunID, "the run is judged by the hold")
	g.waitFor(t, func() bool { return len(notices(srv)) == 1 }, waitLong, "the budget notice was never posted")

	later := "later " + uuid.NewString()
	d2 := commentOn(t, g.env, keyIssue.Number, later)
	g.waitFor(t, func() bool { return len(g.mustRecord(t, keyIssue).Pending) == 1 }, waitLong, "the event never queued")
	g.settle(t)
	r = g.mustRecord(t, keyIssue)
	require.Equal(t, desired.PhaseBudgetExhausted, r.Status.Phase)
	require.Len(t, r.Pending, 1)
	assert.Equal(t, d2, r.Pending[0].ID)
	assert.Len(t, g.starts(t), 1, "the event past the budget started no run")
	assert.Zero(t, r.Status.Failures)
	assert.Len(t, notices(srv), 1, "one notice per hold")

	g.mustRun(t, "release", "--budget", "+5000", keyIssue.String())
	waitDelivered(t, g.env, d2, waitLong)
	g.waitFor(t, func() bool {
		r = g.mustRecord(t, keyIssue)
		return r.Status.Phase == desired.PhaseExited && len(g.starts(t)) == 3
	}, waitLong, "the raised item never ran its resume and its event")
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	turns := g.turns(t, keyIssue, id)
	assert.Equal(t, 1, countContaining(turns, "token budget raised"), "%q", turns)
	assert.Equal(t, 1, countContaining(turns, later), "the waiting event once")
	for _, s := range g.starts(t)[1:] {
		flag, resumed := geminiStart(t, s)
		assert.Equal(t, "--resume "+id, flag+" "+resumed)
	}
	g.settle(t)
	r = g.mustRecord(t, keyIssue)
	counted, messages := g.chatUsage(t, keyIssue, id)
	assert.Equal(t, 3, messages)
	assert.Equal(t, counted, r.Status.UsageTotal, "each of the %d messages counted once, though written twice", messages)
	assert.Len(t, waitDeliveries(t, g.env, journal.DispatchDelivered, d2, 1), 1)
}
