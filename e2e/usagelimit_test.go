package e2e

import (
	"os"
	"path/filepath"
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

// keyIssue2 is a second issue of the same repository, on the same harness.
var keyIssue2 = desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 7}

// commentOn sends a comment with body on issue n and returns the delivery
// id.
func commentOn(t *testing.T, e *env, n int, body string) string {
	t.Helper()
	return e.deliver(t, commentFixture, all(withNumber(n), withComment(body)))
}

// TestUsageLimitHoldsTheAccountAndEachItemResumesItsConversation: one agent
// hits a usage limit that resets a few seconds later. It goes RateLimited
// with no failure counted; the other item on the same harness (the same
// config dir) is held from its spawn, and an event for the first is held
// from delivery, each keeping its place. After the reset and the margin
// the first resumes its own conversation with the limit nudge and then
// gets its event, and the second spawns with its own. A daemon killed and
// restarted during the hold keeps it.
func TestUsageLimitHoldsTheAccountAndEachItemResumesItsConversation(t *testing.T) {
	t.Parallel()
	reset := time.Now().Add(10 * time.Second).Truncate(time.Second)
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_LIMIT_UNTIL": strconv.FormatInt(reset.Unix(), 10)},
		Policy:     map[string]any{"usageLimitMarginSeconds": 1},
	})
	e.start(t)
	first := "first " + uuid.NewString()
	commentOn(t, e, keyIssue.Number, first)
	r1 := e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
	id1 := r1.Status.HarnessSessionID
	require.True(t, reset.Equal(r1.Status.LimitReset), "reset %v, recorded %v", reset, r1.Status.LimitReset)
	ev := e.waitEvent(t, journal.SessionRateLimited, keyIssue, 1, waitShort)[0]
	assert.Equal(t, reset.UTC().Format(time.RFC3339), ev.Attrs["reset"], "%v", ev.Attrs)
	assert.Equal(t, "false", ev.Attrs["default_reset"])
	assert.Equal(t, float64(reset.Unix()), e.metric(t, `loopd_usage_limit_reset_timestamp_seconds{harness="claude-code"}`))

	// Held: the other item does not spawn, and the next event of the first
	// is not pasted.
	second := "second " + uuid.NewString()
	d2 := commentOn(t, e, keyIssue2.Number, second)
	later := "later " + uuid.NewString()
	d3 := commentOn(t, e, keyIssue.Number, later)
	// The hold is in the store: a daemon restarted during it keeps it.
	e.kill9(t)
	e.start(t)
	out := e.mustRun(t, "get")
	assert.Regexp(t, `(?m)^`+strings.ReplaceAll(keyIssue.String(), "#", `#`)+`\s.*RateLimited.*rate_limited reset=`, out)
	assert.Regexp(t, `(?m)^`+keyIssue2.String()+`\s.*rate_limited reset=`, out, "the other item shows the hold too")
	dry := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Regexp(t, `(?m)^wait work_item=`+keyIssue2.String()+` until=\S+ reason=rate_limited$`, dry)
	e.settle(t)
	require.True(t, time.Now().Before(reset), "the test ran past the reset before checking the hold; make the reset later")
	assert.Len(t, e.starts(t), 1, "nothing else spawned during the hold")
	assert.False(t, e.hasSession(t, keyIssue2))
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, d3), "nothing pasted during the hold")

	// After the reset: each resumes or starts its own conversation.
	waitDelivered(t, e, d3, waitLong)
	assert.Equal(t, d2, e.waitEvent(t, journal.DispatchDelivered, keyIssue2, 1, waitShort)[0].Attrs["delivery"])
	r1 = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id1, r1.Status.HarnessSessionID, "the same conversation")
	turns := e.userTurns(t, keyIssue, id1)
	require.GreaterOrEqual(t, len(turns), 3, "%q", turns)
	assert.Contains(t, turns[0], first)
	assert.Contains(t, turns[1], "usage limit reset", "the resume nudge says the limit has reset")
	assert.Contains(t, turns[2], later)
	var resumed bool
	for _, s := range e.starts(t) {
		if flag, id := s.mode(); flag == "--resume" && id == id1 {
			resumed = true
		}
	}
	assert.True(t, resumed, "the first item was resumed with --resume %s", id1)
	assert.Zero(t, e.metric(t, `loopd_usage_limit_reset_timestamp_seconds{harness="claude-code"}`), "no limit holds the harness any more")
	r2 := e.waitPhase(t, keyIssue2, desired.PhaseRunning, waitShort)
	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue2, r2.Status.HarnessSessionID), second))
	for _, k := range []desired.Key{keyIssue, keyIssue2} {
		noCrash(t, e, k)
	}
}

// limitedAtMenu starts an item whose first prompt meets the usage-limit
// menu of a limit 3 hours long, with the fake's knobs in knobs, and returns
// it once RateLimited, with the file the fake logs the menu's choices to.
func limitedAtMenu(t *testing.T, knobs map[string]string) (*env, desired.Record, string) {
	t.Helper()
	menuDir := t.TempDir() // the sandbox shows it (Binds)
	menuLog := filepath.Join(menuDir, "menu.log")
	env := map[string]string{
		"FAKECLAUDE_LIMIT_UNTIL": strconv.FormatInt(time.Now().Add(3*time.Hour).Unix(), 10),
		"FAKECLAUDE_LIMIT_FORM":  "menu",
		"FAKECLAUDE_MENU_LOG":    menuLog,
	}
	for k, v := range knobs {
		env[k] = v
	}
	e := newEnv(t, envOpts{HarnessEnv: env, Binds: []string{menuDir}})
	e.start(t)
	commentOn(t, e, keyIssue.Number, "fix it "+uuid.NewString())
	return e, e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort), menuLog
}

// TestUsageLimitMenuIsAnsweredWait: the menu starts with its cursor on
// "Upgrade your plan"; loopd moves it to "Stop and wait for limit to
// reset" and chooses that, and nothing else is ever chosen.
func TestUsageLimitMenuIsAnsweredWait(t *testing.T) {
	t.Parallel()
	e, r, menuLog := limitedAtMenu(t, map[string]string{"FAKECLAUDE_LIMIT_MENU_CURSOR": "3"})
	assert.True(t, r.Status.LimitReset.After(time.Now().Add(2*time.Hour)), "the banner's reset: %v", r.Status.LimitReset)
	var choices []map[string]string
	e.waitFor(t, func() bool {
		choices = readJSONLines[map[string]string](t, menuLog)
		return len(choices) > 0
	}, waitShort, "the menu was never answered")
	e.settle(t)
	choices = readJSONLines[map[string]string](t, menuLog)
	require.Equal(t, []map[string]string{{"choice": "Stop and wait for limit to reset"}}, choices, "exactly the wait choice, once")
	answered := e.eventsNamed(t, journal.SessionLimitMenuAnswered, keyIssue)
	require.GreaterOrEqual(t, len(answered), 1)
	for _, a := range answered {
		assert.Contains(t, []string{"1", "Enter"}, a.Attrs["keys"], "only the wait choice's number and Enter: %v", a.Attrs)
	}
	assert.Equal(t, desired.PhaseRateLimited, e.mustRecord(t, keyIssue).Status.Phase)
	assert.Zero(t, e.mustRecord(t, keyIssue).Status.Failures)
}

// TestLoginRequiredIsShownAsBlockedAtOnce: a logged-out harness answers
// every prompt "Not logged in"; the item is blocked (login_required) in
// the journal and loopd get at once, not failed: its event counts as
// delivered, and nothing is counted.
func TestLoginRequiredIsShownAsBlockedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_NOT_LOGGED_IN": "1"}})
	e.start(t)
	d := commentOn(t, e, keyIssue.Number, "fix it "+uuid.NewString())
	ev := e.waitEvent(t, journal.SessionBlocked, keyIssue, 1, waitShort)[0]
	assert.Equal(t, "login_required", ev.Attrs["reason"])
	waitDelivered(t, e, d, waitShort)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, "login_required", r.Status.Blocked)
	assert.Equal(t, "blocked: login_required", r.Status.NeedsHuman())
	assert.Zero(t, r.Status.Failures)
	assert.Regexp(t, `(?m)^`+keyIssue.String()+`\s.*Running.*blocked reason=login_required`, e.mustRun(t, "get"))
}

// TestPermissionPromptIsShownAsBlockedAndNeverAnswered: a tool's
// permission dialog is named at once, and loopd sends it no key.
func TestPermissionPromptIsShownAsBlockedAndNeverAnswered(t *testing.T) {
	t.Parallel()
	menuDir := t.TempDir() // the sandbox shows it (Binds)
	menuLog := filepath.Join(menuDir, "menu.log")
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_PERMISSION_PROMPT": "1", "FAKECLAUDE_MENU_LOG": menuLog}, Binds: []string{menuDir}})
	e.start(t)
	commentOn(t, e, keyIssue.Number, "run the tests "+uuid.NewString())
	ev := e.waitEvent(t, journal.SessionBlocked, keyIssue, 1, waitShort)[0]
	assert.Equal(t, "permission_prompt", ev.Attrs["reason"])
	// A second event waits behind the dialog, unsent.
	d := commentOn(t, e, keyIssue.Number, "and then "+uuid.NewString())
	e.settle(t)
	assert.Empty(t, readJSONLines[map[string]string](t, menuLog), "loopd never answers a permission prompt")
	assert.Empty(t, deliveriesOf(t, e, journal.DispatchSent, d))
	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, "permission_prompt", r.Status.Blocked)
	assert.Zero(t, r.Status.Failures)
}

// TestTrustDialogIsNamedAtOnce: the trust dialog is journaled as soon as it
// shows, long before the confirm timeout.
func TestTrustDialogIsNamedAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{"FAKECLAUDE_TRUST_PROMPT": "1"},
		Policy:     map[string]any{"confirmTimeoutSeconds": 300},
	})
	e.start(t)
	commentOn(t, e, keyIssue.Number, "hello "+uuid.NewString())
	ev := e.waitEvent(t, journal.SessionBlocked, keyIssue, 1, waitShort)[0]
	assert.Equal(t, "workspace_trust", ev.Attrs["reason"])
	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseSpawning, r.Status.Phase, "still within the confirm timeout")
	assert.Regexp(t, `blocked reason=workspace_trust`, e.mustRun(t, "get"))
	// The spawn is waited for: probed first, then awaiting its
	// confirmation; which one depends on how loaded the machine is.
	out := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Regexp(t, `(?m)^wait .*reason=(probing|awaiting_confirmation)$`, out)
	assert.NotContains(t, out, "_spawn", "not started again")
}

// deliveredTo waits for dispatch.delivered of delivery id on item k.
func deliveredTo(t *testing.T, e *env, k desired.Key, id string, timeout time.Duration) {
	t.Helper()
	e.waitFor(t, func() bool {
		for _, ev := range e.eventsNamed(t, journal.DispatchDelivered, k) {
			if ev.Attrs["delivery"] == id {
				return true
			}
		}
		return false
	}, timeout, "delivery %s to %s was never confirmed", id, k)
}

// TestQuotedLimitBannerHoldsNothing: an agent asked about an error quotes
// a usage-limit banner in its answer. Only the CLI's own reply is a limit:
// the item keeps running, the comment is delivered, and the other item's
// event goes through.
func TestQuotedLimitBannerHoldsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_ECHO": "1"}})
	e.start(t)
	banner := "You've hit your session limit · resets " + strings.ToLower(time.Now().Add(3*time.Hour).UTC().Format("3:04PM")) + " (UTC)"
	d1 := commentOn(t, e, keyIssue.Number, "Please explain this error from our CI bot:\nECHO: "+banner)
	waitDelivered(t, e, d1, waitShort)
	d2 := commentOn(t, e, keyIssue2.Number, "second "+uuid.NewString())
	deliveredTo(t, e, keyIssue2, d2, waitShort)
	again := commentOn(t, e, keyIssue.Number, "And this one?\nECHO: "+banner)
	waitDelivered(t, e, again, waitShort)
	e.settle(t)
	assert.Empty(t, e.eventsNamed(t, journal.SessionRateLimited, desired.Key{}), "a quoted banner is no limit")
	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
	assert.Zero(t, r.Status.Failures)
	assert.NotRegexp(t, `rate_limited`, e.mustRun(t, "get"))
}

// TestReleaseEndsALimitForGood: the CLI prints a usage-limit banner whose
// reset is hours away, and the account is held. The limit ends early (more
// usage bought): loopd release of the item ends the hold at once although
// the banner is still on its screen and in its transcript, the other
// item's event goes through, and the banner is not taken again when the
// item's next comment is pasted.
func TestReleaseEndsALimitForGood(t *testing.T) {
	t.Parallel()
	limitDir := t.TempDir() // the sandbox shows it (Binds)
	limited := filepath.Join(limitDir, "limited")
	require.NoError(t, os.WriteFile(limited, nil, 0o644))
	reset := time.Now().Add(3 * time.Hour)
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{
			"FAKECLAUDE_LIMIT_UNTIL": strconv.FormatInt(reset.Unix(), 10),
			"FAKECLAUDE_LIMIT_FORM":  "banner",
			"FAKECLAUDE_LIMIT_WHILE": limited,
		},
		Binds: []string{limitDir},
	})
	e.start(t)
	commentOn(t, e, keyIssue.Number, "first "+uuid.NewString())
	e.waitPhase(t, keyIssue, desired.PhaseRateLimited, waitShort)
	d2 := commentOn(t, e, keyIssue2.Number, "second "+uuid.NewString())
	e.settle(t)
	require.False(t, e.hasSession(t, keyIssue2), "the account is held")

	require.NoError(t, os.Remove(limited))
	e.mustRun(t, "release", keyIssue.String())
	e.waitEvent(t, journal.ItemReleased, keyIssue, 1, waitShort)
	deliveredTo(t, e, keyIssue2, d2, waitShort)
	again := commentOn(t, e, keyIssue.Number, "again "+uuid.NewString())
	waitDelivered(t, e, again, waitShort)
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.SessionRateLimited, keyIssue), 1, "the released banner, still on screen, is not taken again")
	r := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseRunning, r.Status.Phase)
	assert.True(t, r.Status.LimitSeen.Released)
	assert.NotRegexp(t, `rate_limited`, e.mustRun(t, "get"))
}

// TestUsageLimitMenuOfAPassedResetIsALimit: the banner rounds the reset
// down to the minute, so the limit lasts past the reset it names plus the
// margin. A menu on screen is a limit in force all the same: it is
// answered "wait" and the account held a margin from now, again each time
// the resumed agent hits it, until the limit really ends; then each item
// runs, and no menu is left unanswered.
func TestUsageLimitMenuOfAPassedResetIsALimit(t *testing.T) {
	t.Parallel()
	if now := time.Now(); now.Second() >= 48 {
		// The limit must end in the minute it starts in, so that the
		// reset its banner names has passed from the first hit on.
		time.Sleep(now.Truncate(time.Minute).Add(61 * time.Second).Sub(now))
	}
	until := time.Now().Add(7 * time.Second)
	menuDir := t.TempDir() // the sandbox shows it (Binds)
	menuLog := filepath.Join(menuDir, "menu.log")
	e := newEnv(t, envOpts{
		HarnessEnv: map[string]string{
			"FAKECLAUDE_LIMIT_UNTIL": strconv.FormatInt(until.Unix(), 10),
			"FAKECLAUDE_LIMIT_FORM":  "menu",
			"FAKECLAUDE_MENU_LOG":    menuLog,
		},
		Policy: map[string]any{"usageLimitMarginSeconds": 1},
		Binds:  []string{menuDir},
	})
	e.start(t)
	d1 := commentOn(t, e, keyIssue.Number, "first "+uuid.NewString())
	ev := e.waitEvent(t, journal.SessionRateLimited, keyIssue, 1, waitShort)[0]
	assert.Contains(t, ev.Attrs["text"], "resets "+strings.ToLower(until.UTC().Format("3:04PM")), "the banner names the minute, already passed")
	e.waitEvent(t, journal.SessionLimitMenuAnswered, keyIssue, 1, waitShort)
	commentOn(t, e, keyIssue2.Number, "second "+uuid.NewString())

	for _, k := range []desired.Key{keyIssue, keyIssue2} {
		r := e.waitRecord(t, k, func(r desired.Record) bool {
			return r.Status.Phase == desired.PhaseRunning && r.Status.Blocked == "" && len(r.Pending) == 0
		}, waitLong, "never ran unblocked after the limit")
		assert.Zero(t, r.Status.Failures, "%s", k)
	}
	assert.False(t, time.Now().Before(until), "the items ran again only once the limit ended")
	assert.GreaterOrEqual(t, len(e.eventsNamed(t, journal.SessionRateLimited, keyIssue)), 2, "the limit hit again after the first hold was taken again")
	for _, ev := range deliveriesOf(t, e, journal.DispatchDelivered, d1) {
		assert.NotEqual(t, "boot_prompt", ev.Attrs["via"], "a boot prompt answered by the limit is not taken as started: %v", ev.Attrs)
	}
	assert.Empty(t, e.eventsNamed(t, journal.SessionBlocked, desired.Key{}), "the menu never sat unanswered")
	choices := readJSONLines[map[string]string](t, menuLog)
	require.NotEmpty(t, choices)
	for _, c := range choices {
		assert.Equal(t, "Stop and wait for limit to reset", c["choice"])
	}
}
