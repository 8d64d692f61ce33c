package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	require.NoError(t, err)
	return l
}

func TestParseReset(t *testing.T) {
	paris, vienna, la := mustZone(t, "Europe/Paris"), mustZone(t, "Europe/Vienna"), mustZone(t, "America/Los_Angeles")
	utc := time.UTC
	// 2026-07-14 15:00 in Paris (CEST, UTC+2).
	now := time.Date(2026, 7, 14, 15, 0, 0, 0, paris)
	for _, tc := range []struct {
		name string
		text string
		now  time.Time
		loc  *time.Location
		want time.Time // zero: unreadable
	}{
		{"session_limit_clock_named_zone", "You've hit your session limit · resets 5:10pm (Europe/Paris)", now, utc, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"limit_hour_only", "You've hit your limit · resets 8pm (Africa/Cairo)", now, utc, time.Date(2026, 7, 14, 20, 0, 0, 0, mustZone(t, "Africa/Cairo"))},
		{"weekly_date_at", "You've hit your weekly limit · resets Jul 18 at 4am (Europe/Vienna)", now, utc, time.Date(2026, 7, 18, 4, 0, 0, 0, vienna)},
		{"date_with_comma", "Resets Jul 26, 5:59am (America/Los_Angeles)", now, utc, time.Date(2026, 7, 26, 5, 59, 0, 0, la)},
		{"older_will_reset_at", "Claude usage limit reached. Your limit will reset at 5pm (America/Los_Angeles).", now, utc, time.Date(2026, 7, 14, 17, 0, 0, 0, la)},
		{"rolls_over_to_next_day", "You've hit your session limit · resets 1:20am (Europe/Vienna)", time.Date(2026, 7, 14, 23, 0, 0, 0, vienna), utc, time.Date(2026, 7, 15, 1, 20, 0, 0, vienna)},
		{"zone_rollover_differs_from_utc", "resets 12:30am (Asia/Tokyo)", time.Date(2026, 7, 14, 15, 0, 0, 0, utc), utc, time.Date(2026, 7, 15, 0, 30, 0, 0, mustZone(t, "Asia/Tokyo"))},
		{"banner_just_past_stays_today", "You've hit your session limit · resets 5:10pm (Europe/Paris)", time.Date(2026, 7, 14, 17, 11, 0, 0, paris), utc, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"no_zone_uses_loc", "5-hour limit reached ∙ resets 4am", time.Date(2026, 7, 14, 1, 0, 0, 0, vienna), vienna, time.Date(2026, 7, 14, 4, 0, 0, 0, vienna)},
		{"twelve_am_is_midnight", "resets 12am (Europe/Paris)", now, utc, time.Date(2026, 7, 15, 0, 0, 0, 0, paris)},
		{"twelve_pm_is_noon", "resets 12pm (Europe/Paris)", time.Date(2026, 7, 14, 9, 0, 0, 0, paris), utc, time.Date(2026, 7, 14, 12, 0, 0, 0, paris)},
		{"24_hour_clock", "resets 17:10 (Europe/Paris)", now, utc, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"date_across_new_year", "resets Jan 2 at 4am (Europe/Vienna)", time.Date(2026, 12, 30, 12, 0, 0, 0, vienna), utc, time.Date(2027, 1, 2, 4, 0, 0, 0, vienna)},
		{"unknown_zone", "resets 5:10pm (Mars/Olympus)", now, utc, time.Time{}},
		{"hour_out_of_range", "resets 13pm (Europe/Paris)", now, utc, time.Time{}},
		{"no_time", "You've hit your session limit", now, utc, time.Time{}},
		{"bare_number", "resets 5", now, utc, time.Time{}},
		{"relative_duration", "resets in 4hr 29min", now, utc, time.Time{}},
		{"impossible_date", "resets Feb 30 at 4am (Europe/Paris)", now, utc, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseReset(tc.text, tc.now, tc.loc)
			if tc.want.IsZero() {
				assert.False(t, ok, "parsed %v", got)
				return
			}
			require.True(t, ok)
			assert.True(t, tc.want.Equal(got), "want %v, got %v", tc.want, got)
		})
	}
}

func claudeWithEnv(t *testing.T, env map[string]string) Adapter {
	t.Helper()
	a, err := New(AdapterClaudeCode, schema.Harness{Command: "claude", Env: env})
	require.NoError(t, err)
	return a
}

// menuScreen is the usage-limit menu with the cursor on choice cursor.
func menuScreen(cursor int) string {
	choices := []string{"Stop and wait for limit to reset", "Switch to extra usage", "Upgrade your plan"}
	lines := []string{"❯ fix the bug", "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)", "",
		strings.Repeat("─", 40), " What do you want to do?"}
	for i, c := range choices {
		mark := "  "
		if i+1 == cursor {
			mark = "❯ "
		}
		lines = append(lines, " "+mark+string(rune('1'+i))+". "+c)
	}
	return strings.Join(append(lines, " Enter to confirm · Esc to cancel"), "\n")
}

func chatScreen(history ...string) string {
	rule := strings.Repeat("─", 40)
	return strings.Join(append(history, "", rule, "❯\u00a0", rule, "  ? for shortcuts"), "\n")
}

func TestClaudeLimitOnScreen(t *testing.T) {
	c := claudeWithEnv(t, nil)
	paris := mustZone(t, "Europe/Paris")
	now := time.Date(2026, 7, 14, 15, 0, 0, 0, paris)
	for _, tc := range []struct {
		name   string
		screen string
		found  bool
		menu   bool
		reset  time.Time
	}{
		{"session_banner", chatScreen("❯ fix it", "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)"), true, false, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"weekly_banner_with_date", chatScreen("❯ fix it", "  ⎿  You've hit your weekly limit · resets Jul 18 at 4am (Europe/Vienna)"), true, false, time.Date(2026, 7, 18, 4, 0, 0, 0, mustZone(t, "Europe/Vienna"))},
		{"five_hour_limit_reached", chatScreen("❯ fix it", "  ⎿  5-hour limit reached ∙ resets 4pm (Europe/Paris)"), true, false, time.Date(2026, 7, 14, 16, 0, 0, 0, paris)},
		{"unreadable_reset", chatScreen("❯ fix it", "  ⎿  You've hit your session limit · resets soon"), true, false, time.Time{}},
		{"epoch_form_shown_as_it_is", chatScreen("❯ fix it", "  ⎿  Claude AI usage limit reached|1784041200"), true, false, time.Unix(1784041200, 0)},
		{"menu_cursor_on_wait", menuScreen(1), true, true, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"menu_cursor_elsewhere", menuScreen(3), true, true, time.Date(2026, 7, 14, 17, 10, 0, 0, paris)},
		{"banner_in_history_only", chatScreen("❯ fix it", "  ⎿  You've hit your session limit · resets 5:10pm (Europe/Paris)", "", "❯ the limit has reset", "  ⎿  Done."), false, false, time.Time{}},
		{"approaching_is_a_warning", chatScreen("❯ fix it", "  ⎿  Done.", "Approaching usage limit · resets at 5pm"), false, false, time.Time{}},
		{"usage_dashboard_is_not_a_limit", chatScreen("❯ /usage", "   Current session", "   Resets 1:30am (Europe/Vienna)"), false, false, time.Time{}},
		{"ready", chatScreen("❯ fix it", "  ⎿  Done."), false, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, ok := c.Limit(tc.screen, now)
			require.Equal(t, tc.found, ok, "%+v", l)
			if !ok {
				return
			}
			assert.Equal(t, LimitUsage, l.Kind)
			assert.Equal(t, tc.menu, l.Menu)
			assert.True(t, tc.reset.Equal(l.Reset), "want %v, got %v", tc.reset, l.Reset)
			assert.NotEmpty(t, l.Text)
		})
	}
}

// TestClaudeLimitMenuKeys checks that the keys sent to the usage-limit
// menu choose "Stop and wait" wherever the cursor is, and never a choice
// that spends money.
func TestClaudeLimitMenuKeys(t *testing.T) {
	c := claudeWithEnv(t, nil)
	assert.Equal(t, []string{"Enter"}, c.LimitMenuKeys(menuScreen(1)))
	assert.Equal(t, []string{"1"}, c.LimitMenuKeys(menuScreen(2)))
	assert.Equal(t, []string{"1"}, c.LimitMenuKeys(menuScreen(3)))
	// A menu that lists the paying choices first still gets the wait one.
	reordered := strings.Join([]string{" What do you want to do?", " ❯ 1. Switch to extra usage", "   2. Upgrade your plan",
		"   3. Stop and wait for limit to reset", " Enter to confirm · Esc to cancel"}, "\n")
	assert.Equal(t, []string{"3"}, c.LimitMenuKeys(reordered))
	// No wait choice: nothing is pressed.
	noWait := strings.Join([]string{" What do you want to do?", " ❯ 1. Switch to extra usage", "   2. Upgrade your plan"}, "\n")
	assert.Nil(t, c.LimitMenuKeys(noWait))
	assert.Nil(t, c.LimitMenuKeys(chatScreen("❯ hi")))
	s, why := c.Screen(menuScreen(2))
	assert.Equal(t, ScreenBlocked, s)
	assert.Equal(t, BlockUsageLimitMenu, why)
}

func TestClaudeBlocked(t *testing.T) {
	c := claudeWithEnv(t, nil)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "claude-2.1.197", name))
		require.NoError(t, err)
		return string(b)
	}
	for _, tc := range []struct {
		name   string
		screen string
		want   Block
	}{
		{"logged_out_footer_before_any_prompt", read("ready-empty.txt"), BlockLoginRequired},
		{"logged_out_reply", read("ready-after-turn.txt"), BlockLoginRequired},
		{"trust_dialog", read("blocked-trust.txt"), BlockWorkspaceTrust},
		{"api_key_dialog", read("blocked-apikey.txt"), BlockAPIKey},
		{"picker", read("blocked-picker.txt"), BlockResumePicker},
		{"bypass_consent", read("blocked-bypass.txt"), BlockBypassConsent},
		{"limit_menu_loopd_answers", menuScreen(1), ""},
		{"limit_menu_without_cursor", strings.ReplaceAll(menuScreen(1), "❯ 1.", "  1."), BlockUsageLimitMenu},
		{"permission_prompt", strings.Join([]string{strings.Repeat("─", 40), " Bash command", "   rm -rf build", "",
			" Do you want to proceed?", " ❯ 1. Yes", "   2. Yes, and don't ask again for rm commands", "   3. No, and tell Claude what to do differently (esc)"}, "\n"), BlockPermission},
		{"edit_permission", strings.Join([]string{" Edit file", " Do you want to make this edit to main.go?", " ❯ 1. Yes", "   2. No"}, "\n"), BlockPermission},
		{"login_screen", " Select login method:\n ❯ 1. Claude account with subscription\n   2. Anthropic Console account", BlockLoginRequired},
		{"onboarding_theme", " Let's get started.\n Choose the text style that looks best with your terminal\n ❯ 1. Dark mode", BlockOnboarding},
		{"connectivity", "Unable to connect to Anthropic services\nFailed to connect to api.anthropic.com: ENOTFOUND", BlockConnectivity},
		{"logged_in_reply", chatScreen("❯ fix it", "  ⎿  Done."), ""},
		{"login_reply_in_history_only", chatScreen("❯ fix it", "  ⎿  Invalid API key · Please run /login", "", "❯ again", "  ⎿  Done."), ""},
		{"agent_prints_the_words", chatScreen("❯ what does the permission dialog say?", "  ⎿  It says: Do you want to proceed? 1. Yes"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, c.Blocked(tc.screen))
		})
	}
}

func TestClaudeTranscriptLimit(t *testing.T) {
	c := claudeWithEnv(t, nil)
	dir := t.TempDir()
	user := `{"type":"user","message":{"role":"user","content":"fix it"},"timestamp":"2026-07-14T13:00:00.000Z"}`
	apiErr := func(text string) string {
		return `{"type":"assistant","isApiErrorMessage":true,"message":{"role":"assistant","model":"<synthetic>","content":[{"type":"text","text":` +
			strings.ReplaceAll(`"`+text+`"`, "\n", `\n`) + `}]},"timestamp":"2026-07-14T13:00:05.000Z"}`
	}
	at := time.Date(2026, 7, 14, 13, 0, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		lines []string
		found bool
		kind  LimitKind
		reset time.Time
	}{
		{"session_limit", []string{user, apiErr("You've hit your session limit · resets 5:10pm (Europe/Paris)")}, true, LimitUsage, time.Date(2026, 7, 14, 15, 10, 0, 0, time.UTC)},
		{"epoch_form", []string{user, apiErr("Claude AI usage limit reached|1784041200")}, true, LimitUsage, time.Unix(1784041200, 0)},
		{"rate_limit_429", []string{user, apiErr(`API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}`)}, true, LimitRate, time.Time{}},
		{"overloaded_529", []string{user, apiErr(`API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}`)}, true, LimitOverload, time.Time{}},
		{"unreadable_reset", []string{user, apiErr("You've hit your session limit")}, true, LimitUsage, time.Time{}},
		{"a_later_prompt_ends_it", []string{user, apiErr("You've hit your session limit · resets 5:10pm (Europe/Paris)"), user}, false, "", time.Time{}},
		{"an_ordinary_answer_quoting_it", []string{user, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"You've hit your session limit · resets 5pm"}]},"timestamp":"2026-07-14T13:00:05.000Z"}`}, false, "", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".jsonl")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(tc.lines, "\n")+"\n"), 0o600))
			l, ok, err := c.TranscriptLimit(Transcript{Known: true, Exists: true, Path: path})
			require.NoError(t, err)
			require.Equal(t, tc.found, ok, "%+v", l)
			if !ok {
				return
			}
			assert.Equal(t, tc.kind, l.Kind)
			assert.True(t, at.Equal(l.At))
			assert.True(t, tc.reset.Equal(l.Reset), "want %v, got %v", tc.reset, l.Reset)
		})
	}
}

func TestClaudeAccount(t *testing.T) {
	assert.Equal(t, "claude-code:/srv/claude-a", claudeWithEnv(t, map[string]string{"CLAUDE_CONFIG_DIR": "/srv/claude-a/"}).Account())
	assert.Equal(t, "claude-code:/home/bot/.claude", claudeWithEnv(t, map[string]string{"HOME": "/home/bot"}).Account())
	assert.NotEqual(t, claudeWithEnv(t, map[string]string{"CLAUDE_CONFIG_DIR": "/a"}).Account(), claudeWithEnv(t, map[string]string{"CLAUDE_CONFIG_DIR": "/b"}).Account())
}
