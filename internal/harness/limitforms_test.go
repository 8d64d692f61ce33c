package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// limitForm is one row of the parser tables: a screen of the CLI, read at
// now by an adapter whose pane has the host zone tz (its TZ), and the
// limit it shows. want.Reset zero is "limited, reset unknown"; found
// false is "no limit" (a quoted banner).
type limitForm struct {
	name   string
	screen string
	now    time.Time
	tz     string
	found  bool
	kind   LimitKind
	window LimitWindow
	reset  time.Time
}

func checkLimitForms(t *testing.T, adapter string, rows []limitForm) {
	t.Helper()
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAdapter(t, adapter, schema.Harness{Env: map[string]string{"TZ": tc.tz}})
			l, ok := a.Limit(tc.screen, tc.now)
			require.Equal(t, tc.found, ok, "%+v", l)
			if !tc.found {
				return
			}
			assert.Equal(t, tc.kind, l.Kind)
			assert.Equal(t, tc.window, l.Window)
			if tc.reset.IsZero() {
				assert.True(t, l.Reset.IsZero(), "reset unknown, got %v", l.Reset)
				return
			}
			assert.True(t, tc.reset.Equal(l.Reset), "want %v, got %v", tc.reset, l.Reset)
			assert.False(t, l.Reset.Before(tc.now.Add(-schema.ResetClockGrace)), "never a wait in the past")
		})
	}
}

// at is a time in zone.
func at(t *testing.T, zone string, y int, mon time.Month, d, h, m, s int) time.Time {
	t.Helper()
	return time.Date(y, mon, d, h, m, s, 0, mustZone(t, zone))
}

func TestClaudeLimitForms(t *testing.T) {
	prompt := "❯ fix the flaky test\n"
	noCursor := strings.ReplaceAll(menuScreen(1), "❯ 1.", "  1.")
	checkLimitForms(t, AdapterClaudeCode, []limitForm{
		{"session_reset_passed_today_is_tomorrow", prompt + "  ⎿  You've hit your session limit · resets 9am (Asia/Tokyo)",
			at(t, "Asia/Tokyo", 2026, 7, 14, 13, 0, 0), "Europe/Berlin", true, LimitUsage, WindowSession, at(t, "Asia/Tokyo", 2026, 7, 15, 9, 0, 0)},
		{"session_later_today", prompt + "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)",
			at(t, "Europe/Paris", 2026, 7, 14, 15, 0, 0), "Asia/Tokyo", true, LimitUsage, WindowSession, at(t, "Europe/Paris", 2026, 7, 14, 17, 10, 0)},
		{"rounded_down_minute_stays", prompt + "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)",
			at(t, "Europe/Paris", 2026, 7, 14, 17, 10, 40), "UTC", true, LimitUsage, WindowSession, at(t, "Europe/Paris", 2026, 7, 14, 17, 10, 0)},
		{"met_again_after_the_margin_stays", prompt + "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)",
			at(t, "Europe/Paris", 2026, 7, 14, 17, 19, 0), "UTC", true, LimitUsage, WindowSession, at(t, "Europe/Paris", 2026, 7, 14, 17, 10, 0)},
		{"past_the_grace_is_tomorrow", prompt + "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)",
			at(t, "Europe/Paris", 2026, 7, 14, 17, 21, 0), "UTC", true, LimitUsage, WindowSession, at(t, "Europe/Paris", 2026, 7, 15, 17, 10, 0)},
		{"five_hour_host_zone", prompt + "  ⎿  5-hour limit reached ∙ resets 4am",
			at(t, "America/New_York", 2026, 7, 14, 5, 0, 0), "America/New_York", true, LimitUsage, WindowSession, at(t, "America/New_York", 2026, 7, 15, 4, 0, 0)},
		{"etc_gmt_plus_5_is_utc_minus_5", prompt + "  ⎿  You've hit your limit · resets 3pm (Etc/GMT+5)",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "Asia/Tokyo", true, LimitUsage, "", at(t, "UTC", 2026, 7, 14, 20, 0, 0)},
		{"utc_named", prompt + "  ⎿  You've hit your session limit · resets 3:04pm (UTC)",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "Australia/Sydney", true, LimitUsage, WindowSession, at(t, "UTC", 2026, 7, 14, 15, 4, 0)},
		{"weekly_dated", prompt + "  ⎿  You've hit your weekly limit · resets Jul 18 at 4am (Europe/Vienna)",
			at(t, "Europe/Vienna", 2026, 7, 14, 15, 0, 0), "UTC", true, LimitUsage, WindowWeekly, at(t, "Europe/Vienna", 2026, 7, 18, 4, 0, 0)},
		{"weekly_by_date_alone", prompt + "  ⎿  You've hit your limit · resets Jul 16, 5:59am (America/Los_Angeles)",
			at(t, "UTC", 2026, 7, 14, 15, 0, 0), "UTC", true, LimitUsage, WindowWeekly, at(t, "America/Los_Angeles", 2026, 7, 16, 5, 59, 0)},
		{"weekly_date_passed_is_next_year", prompt + "  ⎿  You've hit your weekly limit · resets Jan 2 at 4am (Europe/Vienna)",
			at(t, "Europe/Vienna", 2026, 12, 30, 12, 0, 0), "UTC", true, LimitUsage, WindowWeekly, at(t, "Europe/Vienna", 2027, 1, 2, 4, 0, 0)},
		{"epoch_taken_as_given", prompt + "  ⎿  Claude AI usage limit reached|1784030400",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "Asia/Kolkata", true, LimitUsage, "", time.Unix(1784030400, 0)},
		{"unknown_zone_reset_unknown", prompt + "  ⎿  You've hit your session limit · resets 5:10pm (Mars/Olympus)",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "UTC", true, LimitUsage, WindowSession, time.Time{}},
		{"wrapped_banner", prompt + "  ⎿  You've hit your session limit ·\n     resets 11pm (Europe/Lisbon)",
			at(t, "Europe/Lisbon", 2026, 7, 14, 20, 0, 0), "UTC", true, LimitUsage, WindowSession, at(t, "Europe/Lisbon", 2026, 7, 14, 23, 0, 0)},
		{"menu_without_cursor_still_a_limit", noCursor,
			at(t, "Europe/Paris", 2026, 7, 14, 15, 0, 0), "UTC", true, LimitUsage, WindowSession, at(t, "Europe/Paris", 2026, 7, 14, 17, 10, 0)},
		{"agent_quotes_the_banner", "❯ what does the limit banner look like?\n⏺ It reads: You've hit your session limit · resets 5:10pm (Europe/Paris)",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "UTC", false, "", "", time.Time{}},
		{"tool_output_shows_the_banner", prompt + "⏺ Bash(grep -r limit logs/)\n  ⎿  logs/a.txt: You've hit your session limit · resets 5pm (UTC)",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "UTC", false, "", "", time.Time{}},
		{"comment_quotes_the_banner", "❯ the bot wrote \"You've hit your session limit · resets 5pm (UTC)\", why?\n  and then stopped\n⏺ Because its account ran out.",
			at(t, "UTC", 2026, 7, 14, 12, 0, 0), "UTC", false, "", "", time.Time{}},
		{"banner_in_history_only", prompt + "  ⎿  You've hit your session limit · resets 5pm (UTC)\n\n❯ continue\n⏺ Done.",
			at(t, "UTC", 2026, 7, 14, 18, 0, 0), "UTC", false, "", "", time.Time{}},
	})
	c := newTestAdapter(t, AdapterClaudeCode, schema.Harness{})
	l, _ := c.Limit(noCursor, time.Now())
	assert.False(t, l.Menu, "a menu whose cursor is not seen is not answered")
	assert.Nil(t, c.LimitMenuKeys(noCursor))
	assert.Equal(t, BlockUsageLimitMenu, c.Blocked(noCursor), "it is shown as blocked")
	noWait := strings.ReplaceAll(menuScreen(2), "Stop and wait for limit to reset", "Wait")
	assert.Nil(t, c.LimitMenuKeys(noWait), "no wait choice seen: nothing is sent")
}

func TestCodexLimitForms(t *testing.T) {
	turn := "› fix the flaky test\n\n"
	box := "\n\n› Ask Codex to do anything\n"
	checkLimitForms(t, AdapterCodex, []limitForm{
		{"contraction_dated_wrapped", turn + "■ You’ve hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at Dec\n1st, 2026 1:09 AM." + box,
			at(t, "Asia/Kolkata", 2026, 11, 30, 20, 0, 0), "Asia/Kolkata", true, LimitUsage, "", at(t, "Asia/Kolkata", 2026, 12, 1, 1, 9, 0)},
		{"no_contraction_clock_passed", turn + "■ You have hit your usage limit. Upgrade to Pro or try again at 3:15 PM." + box,
			at(t, "America/Chicago", 2026, 11, 30, 16, 0, 0), "America/Chicago", true, LimitUsage, "", at(t, "America/Chicago", 2026, 12, 1, 15, 15, 0)},
		{"no_contraction_dated", turn + "■ You have hit your usage limit. Try again at Dec 3rd, 2026 9:30 AM." + box,
			at(t, "UTC", 2026, 11, 30, 16, 0, 0), "Europe/Madrid", true, LimitUsage, "", at(t, "Europe/Madrid", 2026, 12, 3, 9, 30, 0)},
		{"weekly_named", turn + "■ You've reached your usage limit for the weekly window. Try again at 8:00 AM." + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", true, LimitUsage, WindowWeekly, at(t, "UTC", 2026, 11, 30, 8, 0, 0)},
		{"resets_at_taken_as_given", turn + `■ unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","message":"The usage limit has been reached","plan_type":"plus","resets_at":1796043600}}` + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "Asia/Tokyo", true, LimitUsage, "", time.Unix(1796043600, 0)},
		{"resets_in_seconds_from_now", turn + `■ unexpected status 429 Too Many Requests: {"error":{"type":"usage_limit_reached","resets_in_seconds":5400}}` + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", true, LimitUsage, "", at(t, "UTC", 2026, 11, 30, 7, 30, 0)},
		{"date_unparsed_reset_unknown", turn + "■ You have hit your usage limit. Try again later." + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", true, LimitUsage, "", time.Time{}},
		{"rate_limit_no_reset", turn + "■ exceeded retry limit, last status: 429 Too Many Requests" + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", true, LimitRate, "", time.Time{}},
		{"agent_quotes_it", turn + "• The log says: You have hit your usage limit. Try again at 3:15 PM." + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", false, "", "", time.Time{}},
		{"comment_quotes_it", "› a user wrote: You’ve hit your usage limit, try again at 1:09 AM\n\n• Noted." + box,
			at(t, "UTC", 2026, 11, 30, 6, 0, 0), "UTC", false, "", "", time.Time{}},
	})
}

func TestGeminiLimitForms(t *testing.T) {
	turn := " > fix the flaky test\n\n"
	box := "\n" + strings.Repeat("─", 40) + "\n >   Type your message or @path/to/file\n"
	perDay := `✕ [API Error: {"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests",` +
		`"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}]`
	perMinute := `✕ [API Error: {"error":{"code":429,"message":"You exceeded your current quota. Please retry in 12.6s.","status":"RESOURCE_EXHAUSTED",` +
		`"details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}]`
	checkLimitForms(t, AdapterGemini, []limitForm{
		{"access_resets_utc_not_host_zone", turn + "ℹ Usage limit reached for gemini-2.5-pro.\n  Access resets at 5:10 PM UTC.\n  /stats model for usage details" + box,
			at(t, "UTC", 2026, 11, 30, 14, 0, 0), "Asia/Tokyo", true, LimitUsage, WindowDaily, at(t, "UTC", 2026, 11, 30, 17, 10, 0)},
		{"access_resets_passed_is_tomorrow", turn + "ℹ Usage limit reached for gemini-2.5-pro.\n  Access resets at 5:10 PM UTC." + box,
			at(t, "UTC", 2026, 11, 30, 18, 0, 0), "UTC", true, LimitUsage, WindowDaily, at(t, "UTC", 2026, 12, 1, 17, 10, 0)},
		{"access_resets_no_zone_host_zone", turn + "ℹ Usage limit reached for gemini-2.5-flash.\n  Access resets at 9:45 AM." + box,
			at(t, "Europe/Paris", 2026, 11, 30, 8, 0, 0), "Europe/Paris", true, LimitUsage, WindowDaily, at(t, "Europe/Paris", 2026, 11, 30, 9, 45, 0)},
		{"access_resets_unknown_zone", turn + "ℹ Usage limit reached for gemini-2.5-pro.\n  Access resets at 5:10 PM PST." + box,
			at(t, "UTC", 2026, 11, 30, 14, 0, 0), "UTC", true, LimitUsage, WindowDaily, time.Time{}},
		{"usage_limit_no_reset_midnight_pacific", turn + "ℹ Usage limit reached for gemini-2.5-pro." + box,
			at(t, "UTC", 2026, 11, 30, 14, 0, 0), "Asia/Tokyo", true, LimitUsage, WindowDaily, at(t, "America/Los_Angeles", 2026, 12, 1, 0, 0, 0)},
		{"quota_reset_after_duration", turn + "✕ [API Error: You have exhausted your capacity on this model. Your quota will reset after 2h52m39s.]" + box,
			at(t, "UTC", 2026, 11, 30, 14, 0, 0), "UTC", true, LimitUsage, WindowDaily, at(t, "UTC", 2026, 11, 30, 16, 52, 39)},
		{"per_day_quota_midnight_pacific", turn + perDay + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "Europe/Berlin", true, LimitUsage, WindowDaily, at(t, "America/Los_Angeles", 2026, 12, 1, 0, 0, 0)},
		{"per_day_quota_before_pacific_midnight", turn + perDay + box,
			at(t, "UTC", 2026, 11, 30, 7, 0, 0), "UTC", true, LimitUsage, WindowDaily, at(t, "America/Los_Angeles", 2026, 11, 30, 0, 0, 0)},
		{"per_minute_retry_delay", turn + perMinute + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", true, LimitUsage, WindowMinute, at(t, "UTC", 2026, 11, 30, 9, 0, 37)},
		{"per_minute_retry_in_message", turn + strings.ReplaceAll(perMinute, `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}`, "") + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", true, LimitUsage, WindowMinute, at(t, "UTC", 2026, 11, 30, 9, 0, 13)},
		{"per_minute_no_delay_a_minute", turn + `✕ [API Error: {"error":{"code":429,"message":"Quota exceeded for quota metric 'Generate Content API requests per minute'","status":"RESOURCE_EXHAUSTED"}}]` + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", true, LimitUsage, WindowMinute, at(t, "UTC", 2026, 11, 30, 9, 1, 0)},
		{"bare_resource_exhausted_reset_unknown", turn + `✕ [API Error: {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]` + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", true, LimitRate, "", time.Time{}},
		{"model_quotes_it", turn + "✦ The error RESOURCE_EXHAUSTED means a quota ran out; \"Usage limit reached for gemini-2.5-pro.\" is its notice." + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", false, "", "", time.Time{}},
		{"comment_quotes_it", " > the CI said: Usage limit reached for gemini-2.5-pro. Access resets at 5:10 PM UTC.\n\n✦ I will look." + box,
			at(t, "UTC", 2026, 11, 30, 9, 0, 0), "UTC", false, "", "", time.Time{}},
	})
}
