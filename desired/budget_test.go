package desired

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountCountsEachMessageOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	w := Weights{Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1}
	msg := func(id string, at time.Duration, in, out int64) UsageMessage {
		return UsageMessage{ID: id, At: t0.Add(at), Tokens: Tokens{Input: in, Output: out}}
	}
	first := UsageRead{Path: "a", To: 100, Messages: []UsageMessage{msg("m1", 0, 10, 1), msg("m1", time.Second, 10, 4), msg("m2", 2*time.Second, 20, 2)}}
	cases := []struct {
		name     string
		reads    []UsageRead
		weighted int64
		total    Tokens
	}{
		{name: "lines_of_one_message_count_their_largest_usage", reads: []UsageRead{first}, weighted: 10 + 20 + 5*(4+2), total: Tokens{Input: 30, Output: 6}},
		{name: "a_re_read_from_the_start_adds_nothing", reads: []UsageRead{first, {Path: "a", To: 100, Messages: first.Messages}}, weighted: 60, total: Tokens{Input: 30, Output: 6}},
		{name: "a_moved_transcript_adds_only_its_new_messages", reads: []UsageRead{first, {Path: "b", To: 150, Messages: append(first.Messages[:3:3], msg("m3", 3*time.Second, 1, 0))}},
			weighted: 61, total: Tokens{Input: 31, Output: 6}},
		{name: "a_resume_that_copied_history_adds_nothing_old", reads: []UsageRead{first, {Path: "a", From: 100, To: 200, Messages: []UsageMessage{msg("m0", -time.Hour, 99, 99), msg("m2", 2*time.Second, 20, 2)}}},
			weighted: 60, total: Tokens{Input: 30, Output: 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s BudgetState
			for _, r := range tc.reads {
				s, _ = s.Count(r, w, 24*time.Hour, t0.Add(time.Minute))
			}
			assert.Equal(t, tc.weighted, s.UsageWeighted)
			assert.Equal(t, tc.total, s.UsageTotal)
			assert.Equal(t, tc.weighted, s.InWindow(24*time.Hour, t0.Add(time.Minute)))
		})
	}
}

func TestCountReportsNoChangeForNothingNew(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	s, changed := BudgetState{}.Count(UsageRead{Path: "a", To: 10, Messages: []UsageMessage{{ID: "m", At: t0, Tokens: Tokens{Output: 3}}}}, Weights{Output: 1}, time.Hour, t0)
	require.True(t, changed)
	_, changed = s.Count(UsageRead{Path: "a", From: 10, To: 10}, Weights{Output: 1}, time.Hour, t0)
	assert.False(t, changed)
}

func TestBudgetSpentWindowSlidesAndRaiseAdds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)
	s := BudgetState{UsageWeighted: 1500, Hours: []UsageHour{{Hour: t0.Add(-30 * time.Hour).Truncate(time.Hour), Tokens: 500}, {Hour: t0.Truncate(time.Hour), Tokens: 1000}}}
	cases := []struct {
		name  string
		b     Budget
		raise int64
		want  Spent
	}{
		{name: "window_past", b: Budget{Tokens: 1000, Window: 24 * time.Hour}, want: Spent{WindowUsed: 1000, WindowLimit: 1000, Past: BudgetWindow}},
		{name: "window_raised", b: Budget{Tokens: 1000, Window: 24 * time.Hour}, raise: 200, want: Spent{WindowUsed: 1000, WindowLimit: 1200}},
		{name: "total_past", b: Budget{Total: 1500}, want: Spent{TotalUsed: 1500, TotalLimit: 1500, Past: BudgetTotal}},
		{name: "both_window_first", b: Budget{Tokens: 900, Window: 48 * time.Hour, Total: 1000}, want: Spent{WindowUsed: 1500, WindowLimit: 900, TotalUsed: 1500, TotalLimit: 1000, Past: BudgetWindow}},
		{name: "none", b: Budget{}, want: Spent{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.b.Spent(s, tc.raise, t0))
		})
	}
}

func TestBudgetCommand(t *testing.T) {
	cases := []struct {
		body    string
		n       int64
		command bool
		bad     bool
	}{
		{body: "/loopd budget +200k", n: 200_000, command: true},
		{body: "  /loopd   budget +1.5M\r\nthanks", n: 1_500_000, command: true},
		{body: "/loopd budget +50000", n: 50_000, command: true},
		{body: "/loopd budget +lots", command: true, bad: true},
		{body: "/loopd budget +0", command: true, bad: true},
		{body: "/loopd budget 200k"},
		{body: "please /loopd budget +200k"},
		{body: "hello"},
	}
	for _, tc := range cases {
		n, command, err := BudgetCommand(tc.body)
		assert.Equal(t, tc.n, n, tc.body)
		assert.Equal(t, tc.command, command, tc.body)
		assert.Equal(t, tc.bad, err != nil, tc.body)
	}
}
