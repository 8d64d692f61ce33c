package webhook

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/journal"
)

// TestBudgetCommandRaisesOnceAndReachesNoAgent: an authorized comment
// "/loopd budget +200k" raises the item's budget, queues nothing for its
// agent and needs no mention; its redelivery and its replay raise
// nothing more; a stranger's raises nothing; a bad count is ignored.
func TestBudgetCommandRaisesOnceAndReachesNoAgent(t *testing.T) {
	e := newEnv(t)
	code, _ := e.replay(t, "issue_comment", "d-open", fixture(t, "issue_comment.created.1.json"))
	require.Equal(t, http.StatusAccepted, code)
	cfg := *e.cfg.Load()
	mentionTrigger(&cfg)
	e.cfg.Store(&cfg)

	raise := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd budget +200k\nplease go on") })
	code, _ = e.replay(t, "issue_comment", "d-raise", raise)
	require.Equal(t, http.StatusAccepted, code)
	rec := e.onlyRecord(t)
	assert.Equal(t, int64(200_000), rec.Spec.BudgetRaise)
	assert.Len(t, rec.Pending, 1, "the command reaches no agent")
	accepted := e.logged(t, journal.DeliveryAccepted)
	assert.EqualValues(t, 200_000, accepted[len(accepted)-1][journal.KeyBudgetRaise])

	code, _ = e.replay(t, "issue_comment", "d-raise", raise)
	assert.Equal(t, http.StatusOK, code, "a redelivery")
	code, _ = e.replay(t, "issue_comment", "d-replay", raise)
	assert.Equal(t, http.StatusOK, code, "a replay under another id")

	stranger := derive(t, "issue_comment.created.1.json", func(m map[string]any) {
		newComment(t, m, "/loopd budget +1m")
		obj(t, m, "sender")["login"] = "passer-by"
	})
	code, _ = e.replay(t, "issue_comment", "d-stranger", stranger)
	assert.Equal(t, http.StatusAccepted, code)
	bad := derive(t, "issue_comment.created.1.json", func(m map[string]any) { newComment(t, m, "/loopd budget +lots") })
	code, _ = e.replay(t, "issue_comment", "d-bad", bad)
	assert.Equal(t, http.StatusAccepted, code)
	rec = e.onlyRecord(t)
	assert.Equal(t, int64(200_000), rec.Spec.BudgetRaise)
	assert.Len(t, rec.Pending, 1)
	ignored := e.logged(t, journal.DeliveryIgnored)
	assert.Equal(t, reasonBadCommand, ignored[len(ignored)-1]["reason"])
}
