package desired_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/desired"
)

func TestStatusLastExit(t *testing.T) {
	one, zero := 1, 0
	for _, tc := range []struct {
		name string
		st   desired.Status
		want string
	}{
		{name: "no_run_ended", st: desired.Status{Phase: desired.PhaseRunning}, want: ""},
		{name: "exit_status", st: desired.Status{Reason: "crash", RestartHistory: desired.RestartHistory{LastExitReason: "crash", LastExitStatus: &one}}, want: "exit_status=1"},
		{name: "clean_exit", st: desired.Status{Reason: "clean_exit", RestartHistory: desired.RestartHistory{LastExitReason: "clean_exit", LastExitStatus: &zero}}, want: "exit_status=0"},
		{name: "signal_not_exit_status", st: desired.Status{Reason: "crash", RestartHistory: desired.RestartHistory{LastExitReason: "crash", LastExitSignal: 9}}, want: "signal=9"},
		{name: "session_missing_has_neither", st: desired.Status{Reason: "session_missing", RestartHistory: desired.RestartHistory{LastExitReason: "session_missing"}}, want: ""},
		{name: "stale_after_a_later_reason", st: desired.Status{Reason: "confirmed", RestartHistory: desired.RestartHistory{LastExitReason: "crash", LastExitSignal: 9}}, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.st.LastExit()) })
	}
}

// TestNoticeCommentNamesTheSignal: the notice of an agent a signal ended
// says so, not "exit status 0".
func TestNoticeCommentNamesTheSignal(t *testing.T) {
	r := desired.Record{Key: desired.Key{Owner: "o", Repo: "r", Number: 1}, Spec: desired.Spec{Kind: desired.KindIssue}}
	next := desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "restart_budget_exhausted", RestartHistory: desired.RestartHistory{Failures: 10, LastExitReason: "restart_budget_exhausted", LastExitSignal: 9}}
	body := desired.NoticeComment(r, next, desired.Talk{Notify: true}, "<!-- m -->")
	assert.Contains(t, body, "The last run was ended by signal 9 (restart_budget_exhausted).")
	assert.NotContains(t, body, "exit status")
}
