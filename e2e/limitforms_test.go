package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// setHarnessEnv adds env to the environment of harness name in e's
// config, written out.
func (e *env) setHarnessEnv(t *testing.T, name string, env map[string]string) {
	t.Helper()
	h := e.config["harnesses"].(map[string]any)[name].(map[string]any)
	merged := map[string]string{}
	if old, ok := h["env"].(map[string]string); ok {
		for k, v := range old {
			merged[k] = v
		}
	}
	for k, v := range env {
		merged[k] = v
	}
	h["env"] = merged
	e.writeConfig(t)
}

// noCrash checks that k's wait on a usage limit counted no failure and no
// death of its agent.
func noCrash(t *testing.T, e *env, k desired.Key) {
	t.Helper()
	r := e.mustRecord(t, k)
	assert.Zero(t, r.Status.Failures, "%s: a usage limit is not a failure", k)
	assert.Empty(t, e.eventsNamed(t, journal.SessionExited, k), "%s: no crash", k)
	assert.Empty(t, e.eventsNamed(t, journal.SessionCrashLoop, k), "%s", k)
}

// TestCodexUsageLimitFormsWaitAndTheConversationContinues: Codex's limit
// as the backend's 429 body, with resets_in_seconds or resets_at, holds
// the item RateLimited until that reset (taken as given) with no failure
// counted, and after it the same rollout goes on with the limit nudge and
// the comment that came meanwhile. The form without the contraction
// ("You have hit your usage limit … try again at <date>") is taken with
// the date it names.
func TestCodexUsageLimitFormsWaitAndTheConversationContinues(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"resets_in", "resets_at"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			reset := time.Now().Add(8 * time.Second).Truncate(time.Second)
			e, ad := newCodexEnv(t, fakeCodexBin, false, map[string]any{"usageLimitMarginSeconds": 1})
			e.setHarnessEnv(t, "codex", map[string]string{"FAKECODEX_LIMIT_UNTIL": strconv.FormatInt(reset.Unix(), 10), "FAKECODEX_LIMIT_FORM": form})
			e.start(t)
			first := "first " + uuid.NewString()
			sendComment(t, e, first)
			r := e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
			if form == "resets_at" {
				assert.True(t, reset.Equal(r.Status.LimitReset), "resets_at taken as given: %v", r.Status.LimitReset)
			} else {
				assert.WithinDuration(t, reset, r.Status.LimitReset, 3*time.Second, "resets_in_seconds counted from its report")
			}
			ev := e.waitEvent(t, journal.SessionRateLimited, keyIssue, 1, waitShort)[0]
			assert.Equal(t, "false", ev.Attrs["default_reset"], "%v", ev.Attrs)
			later := "later " + uuid.NewString()
			d := sendComment(t, e, later)
			require.True(t, time.Now().Before(reset), "the test ran past the reset; make it later")
			assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, d), "nothing pasted during the hold")

			waitDelivered(t, e, d, waitLong)
			r = waitLearned(t, e, keyIssue, "")
			id := r.Status.HarnessSessionID
			msgs := codexMessages(t, e, ad, keyIssue, id)
			assert.Equal(t, 1, countContaining(msgs, first), "the same rollout: %q", msgs)
			assert.Equal(t, 1, countContaining(msgs, "usage limit reset"), "the resume nudge: %q", msgs)
			assert.Equal(t, 1, countContaining(msgs, later), "%q", msgs)
			assert.Contains(t, e.paneStartCommand(t, keyIssue), "resume")
			assert.Equal(t, 1, e.mustRecord(t, keyIssue).Status.LimitEpisodes)
			noCrash(t, e, keyIssue)
		})
	}
	t.Run("no_contraction", func(t *testing.T) {
		t.Parallel()
		until := time.Now().Add(3 * time.Hour)
		e, _ := newCodexEnv(t, fakeCodexBin, false, nil)
		e.setHarnessEnv(t, "codex", map[string]string{"FAKECODEX_LIMIT_UNTIL": strconv.FormatInt(until.Unix(), 10), "TZ": "Asia/Kolkata"})
		e.start(t)
		sendComment(t, e, "fix it "+uuid.NewString())
		r := e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
		assert.True(t, until.Truncate(time.Minute).Equal(r.Status.LimitReset), "the date it names, to the minute: %v, want %v", r.Status.LimitReset, until)
		assert.False(t, r.Status.LimitDefault)
		noCrash(t, e, keyIssue)
	})
}

// TestGeminiQuotaFormsWaitAndTheConversationContinues: a per-minute
// RESOURCE_EXHAUSTED error holds the item until its retry delay, and the
// same chat goes on after it; "Usage limit reached … Access resets at
// 5:10 PM UTC." is read in UTC, not in the pane's zone, and shown as a
// daily limit in loopd get.
func TestGeminiQuotaFormsWaitAndTheConversationContinues(t *testing.T) {
	t.Parallel()
	t.Run("per_minute", func(t *testing.T) {
		t.Parallel()
		reset := time.Now().Add(8 * time.Second)
		g := newGeminiEnv(t, map[string]string{"FAKEGEMINI_LIMIT_UNTIL": strconv.FormatInt(reset.Unix(), 10)})
		g.policy()["usageLimitMarginSeconds"] = 1
		g.writeConfig(t)
		g.start(t)
		g.deliver(t, "issues.opened.1.json", nil)
		r := g.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
		assert.Equal(t, "per_minute", r.Status.LimitWindow)
		assert.WithinDuration(t, reset, r.Status.LimitReset, 4*time.Second, "its retry delay")
		id := r.Status.HarnessSessionID
		marker, d := g.comment(t)
		waitDelivered(t, g.env, d, waitLong)
		r = g.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
		assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
		turns := g.turns(t, keyIssue, id)
		assert.Equal(t, 1, countContaining(turns, "usage limit reset"), "%q", turns)
		assert.Equal(t, 1, countContaining(turns, marker), "%q", turns)
		assert.Equal(t, float64(1), g.metric(t, `loopd_usage_limit_episodes_total{harness="claude-code",window="per_minute"}`))
		noCrash(t, g.env, keyIssue)
	})
	t.Run("access_resets_utc", func(t *testing.T) {
		t.Parallel()
		until := time.Now().Add(3 * time.Hour)
		g := newGeminiEnv(t, map[string]string{"FAKEGEMINI_LIMIT_UNTIL": strconv.FormatInt(until.Unix(), 10), "FAKEGEMINI_LIMIT_FORM": "access",
			"TZ": "Pacific/Kiritimati"})
		g.start(t)
		g.deliver(t, "issues.opened.1.json", nil)
		r := g.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
		assert.True(t, until.Truncate(time.Minute).Equal(r.Status.LimitReset), "read in UTC: %v, want %v", r.Status.LimitReset, until)
		assert.Equal(t, "daily", r.Status.LimitWindow)
		assert.Regexp(t, `(?m)^`+keyIssue.String()+`\s.*RateLimited.*rate_limited reset=\S+ until=\S+ window=daily`, g.mustRun(t, "get"))
		described := g.mustRun(t, "describe", keyIssue.String())
		assert.Regexp(t, `(?m)^\s+Usage limit:?\s+held until \S+ window daily$`, described)
		assert.Regexp(t, `(?m)^\s+Limit episodes:?\s+1$`, described)
		noCrash(t, g.env, keyIssue)
	})
}

// TestUsageLimitThatComesBackAfterTheResetIsANewEpisode: an item limited
// at its first prompt waits, is resumed once at the reset, meets the limit
// again (a new episode, counted in its status, the journal and /metrics),
// is resumed once more at the second reset, and then works in the same
// conversation. GitHub gets one notice per episode with its reset, and the
// one announcement once the agent runs.
func TestUsageLimitThatComesBackAfterTheResetIsANewEpisode(t *testing.T) {
	t.Parallel()
	first := time.Now().Add(8 * time.Second).Truncate(time.Second)
	second := first.Add(6 * time.Second)
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_LIMIT_UNTIL": strconv.FormatInt(first.Unix(), 10) + "," + strconv.FormatInt(second.Unix(), 10)},
		Policy:     map[string]any{"usageLimitMarginSeconds": 1},
	})
	srv, _ := e.withGitHub(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	r := e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
	id := r.Status.HarnessSessionID
	require.True(t, first.Equal(r.Status.LimitReset), "%v", r.Status.LimitReset)

	r = e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Phase == desired.PhaseRunning }, waitLong, "never ran")
	assert.Equal(t, id, r.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, 2, r.Status.LimitEpisodes, "the limit came back after the first reset")
	limited := e.eventsNamed(t, journal.SessionRateLimited, keyIssue)
	require.Len(t, limited, 2, "one rate_limited per episode")
	assert.Equal(t, "1", limited[0].Attrs["episode"])
	assert.Equal(t, "2", limited[1].Attrs["episode"])
	assert.Equal(t, second.UTC().Format(time.RFC3339), limited[1].Attrs["reset"])
	resumes := 0
	for _, s := range e.starts(t) {
		if flag, sid := s.mode(); flag == "--resume" && sid == id {
			resumes++
		}
	}
	assert.Equal(t, 2, resumes, "one resume per episode")
	assert.Equal(t, float64(2), e.metric(t, `loopd_usage_limit_episodes_total{harness="claude-code",window="unknown"}`))
	noCrash(t, e, keyIssue)

	notices := func() (announce int, limits []string) {
		for _, c := range srv.Comments(keyIssue.Owner, keyIssue.Repo, keyIssue.Number) {
			switch {
			case strings.Contains(c.Body, "<!-- loopd:announce "+keyIssue.String()+" -->"):
				announce++
			case strings.Contains(c.Body, "<!-- loopd:notice "+keyIssue.String()+" limit="):
				limits = append(limits, c.Body)
			}
		}
		return announce, limits
	}
	e.waitFor(t, func() bool { a, l := notices(); return a == 1 && len(l) == 2 }, waitLong, "no announcement and two limit notices")
	e.settle(t)
	announce, limits := notices()
	assert.Equal(t, 1, announce, "announced once, when it ran")
	require.Len(t, limits, 2, "one notice per episode")
	assert.Contains(t, limits[0], "it resets at "+first.UTC().Format("2006-01-02 15:04 UTC"))
	assert.Contains(t, limits[1], "it resets at "+second.UTC().Format("2006-01-02 15:04 UTC"))
	assert.Contains(t, limits[1], "limit=2 -->")
}

// TestUsageLimitMenuWithoutACursorGetsNoKey: a usage-limit menu drawn
// without its cursor is never answered (no key reaches it, on any pass),
// and the item is shown blocked on it while it waits on the limit.
func TestUsageLimitMenuWithoutACursorGetsNoKey(t *testing.T) {
	t.Parallel()
	e, _, menuLog := limitedAtMenu(t, map[string]string{"FAKECLAUDE_LIMIT_MENU_CURSOR": "2", "FAKECLAUDE_LIMIT_MENU_NO_CURSOR": "1"})
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool { return r.Status.Blocked != "" }, waitShort, "never shown blocked")
	assert.Equal(t, "usage_limit_menu", r.Status.Blocked)
	e.settle(t)
	assert.Empty(t, readJSONLines[map[string]string](t, menuLog), "no key was sent to the menu")
	assert.Empty(t, e.eventsNamed(t, journal.SessionLimitMenuAnswered, keyIssue))
	assert.Regexp(t, `(?m)^`+keyIssue.String()+`\s.*blocked reason=usage_limit_menu`, e.mustRun(t, "get"))
	noCrash(t, e, keyIssue)
}
