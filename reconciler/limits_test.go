package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// limitPolicy is testPolicy with a 10 s usage-limit margin, both test
// harnesses on accounts of their own, and the defaults of schema.
func limitPolicy() Policy {
	p := testPolicy()
	p.LimitMargin, p.LimitDefault, p.OverloadWait, p.LimitMaxHold = 10*time.Second, 5*time.Hour, 5*time.Minute, 7*24*time.Hour
	caps := map[string]Capabilities{}
	for name, c := range p.Harnesses {
		c.Account = "account-of-" + name
		caps[name] = c
	}
	caps["claude-other"] = Capabilities{SupportsResume: true, ValidSessionID: isUUID, ProcessNames: []string{"claude"}, Account: "account-of-claude-code"}
	p.Harnesses = caps
	return p
}

var key2 = desired.Key{Owner: "octo-org", Repo: "api", Number: 43}

// rec2 is a second item, on harness h.
func rec2(h string, st desired.Status, pending ...desired.Delivery) desired.Record {
	st.Session = desired.SessionName(key2)
	return desired.Record{Key: key2, Spec: desired.Spec{Kind: desired.KindIssue, Harness: h, Cwd: cwd + "-2", Generation: 3}, Status: st, Pending: pending}
}

// alive2 adds the second item's live pane to s.
func alive2(s observed.Snapshot) observed.Snapshot {
	panes := map[string]tmux.Pane{}
	for k, v := range s.Panes {
		panes[k] = v
	}
	n := desired.SessionName(key2)
	panes[n] = tmux.Pane{Session: n, PaneID: "%2", PID: 11, StatusKnown: true, CurrentCommand: "claude", Owner: testOwner}
	return observed.Snapshot{Panes: panes}
}

// screen adds what the first item's screen shows to o.
func screen(o observed.Observation, sc observed.Screen) observed.Observation {
	o.Screens = map[desired.Key]observed.Screen{key: sc}
	return o
}

func limitAt(reset time.Time) *harness.Limit {
	return &harness.Limit{Kind: harness.LimitUsage, Reset: reset, Text: "You've hit your session limit · resets 12:00pm"}
}

// otherLimitAt is a limit of another banner than limitAt's.
func otherLimitAt(reset time.Time) *harness.Limit {
	l := limitAt(reset)
	l.Text = "You've hit your session limit · resets 1:00pm"
	return l
}

// menuAt is the usage-limit menu of a limit that resets at reset.
func menuAt(reset time.Time) *harness.Limit {
	l := limitAt(reset)
	l.Menu = true
	return l
}

// limitedBy is st after it took limit l (Status.LimitSeen).
func limitedBy(st desired.Status, l harness.Limit) desired.Status {
	st.LimitSeen = seenOf(l, "%1")
	return st
}

// released is st after a release ended limit l.
func released(st desired.Status, l harness.Limit) desired.Status {
	st = limitedBy(st, l)
	st.LimitSeen.Released = true
	return st
}

// limited is the first item rate-limited until t0+until.
func limited(until time.Duration) desired.Status {
	st := running()
	st.Phase, st.Reason = desired.PhaseRateLimited, "rate_limited"
	st.LimitReset, st.LimitUntil, st.NextAttempt = t0.Add(until-10*time.Second), t0.Add(until), t0.Add(until)
	return st
}

func TestPlanUsageLimits(t *testing.T) {
	reset := t0.Add(20 * time.Second)
	rateLimit := func(f func(*actions.RateLimit)) actions.RateLimit {
		a := actions.RateLimit{Key: key, Session: sess, Harness: "claude-code", Account: "account-of-claude-code", Kind: string(harness.LimitUsage),
			Reset: reset, Until: reset.Add(10 * time.Second), Text: "You've hit your session limit · resets 12:00pm"}
		if f != nil {
			f(&a)
		}
		if a.Seen == (desired.SeenLimit{}) {
			a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: a.Reset, Pane: "%1"}
		}
		return a
	}
	menu := actions.AnswerLimitMenu{Key: key, Session: sess, PaneID: "%1"}
	limitNudge := func() actions.ResumeSpawn {
		r := resume(desired.Delivery{}, actions.ReasonLimitReset)
		r.Prompt = desired.LimitResetPrompt(key)
		return r
	}
	heldUntil := func(k desired.Key, d time.Duration) actions.Wait {
		return actions.Wait{Key: k, Until: t0.Add(d), Reason: actions.ReasonRateLimited}
	}
	tests := []struct {
		name  string
		items []desired.Record
		obs   observed.Observation
		want  []actions.Action
	}{
		// Seeing a limit.
		{"banner_on_screen_rate_limits_without_a_failure_or_nudge", []desired.Record{rec(running())},
			screen(obs(alive()), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{rateLimit(nil)}},
		{"menu_is_answered_wait", []desired.Record{rec(running())},
			screen(obs(alive()), observed.Screen{
				Limit: &harness.Limit{Kind: harness.LimitUsage, Reset: reset, Menu: true, Text: "You've hit your session limit · resets 12:00pm"}}),
			[]actions.Action{rateLimit(nil), menu}},
		{"unreadable_reset_waits_the_bounded_default", []desired.Record{rec(running())},
			screen(obs(alive()), observed.Screen{Limit: limitAt(time.Time{})}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until, a.Default = t0.Add(5*time.Hour), t0.Add(5*time.Hour+10*time.Second), true
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Pane: "%1"}
			})}},
		{"overload_in_the_transcript_counts_from_its_line", []desired.Record{rec(running())},
			screen(obs(alive()), observed.Screen{Limit: &harness.Limit{Kind: harness.LimitOverload, At: t0.Add(-time.Minute), Text: "API Error: 529"}}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Kind, a.Text, a.Reset, a.Until, a.Default = string(harness.LimitOverload), "API Error: 529", t0.Add(4*time.Minute), t0.Add(4*time.Minute+10*time.Second), true
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, At: t0.Add(-time.Minute)}
			})}},
		{"a_transcript_limit_that_has_reset_is_ignored", []desired.Record{rec(running(), ev1)},
			screen(obs(alive()), observed.Screen{Limit: &harness.Limit{Kind: harness.LimitUsage, Reset: t0.Add(-time.Hour), At: t0.Add(-2 * time.Hour),
				Text: "You've hit your session limit · resets 12:00pm"}}),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_screen_banner_whose_reset_just_passed_holds_a_margin_from_now", []desired.Record{rec(running(), ev1)},
			screen(obs(alive()), observed.Screen{Limit: limitAt(t0.Add(-5 * time.Minute))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until = t0, t0.Add(10*time.Second)
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: t0.Add(-5 * time.Minute), Pane: "%1"}
			})}},
		{"boot_prompt_that_landed_before_the_limit_is_delivered", []desired.Record{rec(spawning(desired.SpawnFresh), ev1)},
			screen(landed(obs(alive(), grown)), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) { a.Delivered = "d-1" })}},
		{"limit_while_spawning_before_the_prompt_keeps_it_pending", []desired.Record{rec(spawning(desired.SpawnResume), ev1)},
			screen(obs(alive(), transcript), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{rateLimit(nil)}},

		// Waiting it out.
		{"rate_limited_waits_until_reset_and_margin", []desired.Record{rec(limited(30*time.Second), ev1)}, obs(alive()),
			[]actions.Action{heldUntil(key, 30*time.Second)}},
		{"rate_limited_menu_still_shown_is_answered_again", []desired.Record{rec(limited(30 * time.Second))},
			screen(obs(alive()), observed.Screen{Limit: &harness.Limit{Kind: harness.LimitUsage, Reset: reset, Menu: true}}),
			[]actions.Action{menu, heldUntil(key, 30*time.Second)}},
		{"rate_limited_pane_that_dies_is_no_crash", []desired.Record{rec(limited(30 * time.Second))}, obs(dead(1)),
			[]actions.Action{heldUntil(key, 30*time.Second)}},
		{"rate_limited_session_gone_is_no_crash", []desired.Record{rec(limited(30 * time.Second))}, obs(gone()),
			[]actions.Action{heldUntil(key, 30*time.Second)}},
		{"after_the_reset_it_resumes_its_conversation_with_the_limit_nudge", []desired.Record{rec(limited(-time.Second), ev1)}, obs(alive(), transcript),
			[]actions.Action{limitNudge()}},
		{"after_the_reset_a_dead_pane_resumes_too", []desired.Record{rec(limited(-time.Second))}, obs(dead(143), transcript),
			[]actions.Action{limitNudge()}},
		{"a_later_reset_on_the_account_holds_it_longer", []desired.Record{rec(limited(-time.Second)),
			rec2("claude-other", func() desired.Status { st := limited(time.Minute); st.Session = desired.SessionName(key2); return st }())},
			obs(alive2(alive()), transcript),
			[]actions.Action{heldUntil(key, time.Minute), heldUntil(key2, time.Minute)}},
		{"release_ends_the_limit_it_reported", func() []desired.Record {
			r := rec(limited(30*time.Second), ev1)
			r.Spec.ReleaseGeneration = 1
			return []desired.Record{r, rec2("claude-code", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)}
		}(), obs(alive2(alive()), transcript),
			[]actions.Action{actions.Release{Key: key, Session: sess, Generation: 1, Phase: desired.PhaseRunning},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"},
				actions.DeliverPrompt{Key: key2, Session: desired.SessionName(key2), PaneID: "%2", DeliveryID: "d-2"}}},
		{"release_with_the_banner_still_on_screen_ends_the_hold_at_once", func() []desired.Record {
			r := rec(limitedBy(limited(30*time.Second), *limitAt(reset)), ev1)
			r.Spec.ReleaseGeneration = 1
			return []desired.Record{r, rec2("claude-code", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)}
		}(), screen(obs(alive2(alive()), transcript), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{actions.Release{Key: key, Session: sess, Generation: 1, Phase: desired.PhaseRunning, Shown: seenOf(*limitAt(reset), "%1")},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"},
				actions.DeliverPrompt{Key: key2, Session: desired.SessionName(key2), PaneID: "%2", DeliveryID: "d-2"}}},
		{"release_ends_a_later_banner_shown_while_rate_limited_too", func() []desired.Record {
			r := rec(limitedBy(limited(30*time.Second), *limitAt(reset)), ev1)
			r.Spec.ReleaseGeneration = 1
			return []desired.Record{r}
		}(), screen(obs(alive(), transcript), observed.Screen{Limit: limitAt(reset.Add(time.Hour))}),
			[]actions.Action{actions.Release{Key: key, Session: sess, Generation: 1, Phase: desired.PhaseRunning, Shown: seenOf(*limitAt(reset.Add(time.Hour)), "%1")},
				actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_released_banner_quoted_again_stays_ended", []desired.Record{rec(released(running(), *limitAt(reset)), ev1),
			rec2("claude-code", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)},
			screen(obs(alive2(alive()), transcript), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"},
				actions.DeliverPrompt{Key: key2, Session: desired.SessionName(key2), PaneID: "%2", DeliveryID: "d-2"}}},
		// A limit released earlier stays ended after another limit was taken
		// and released in turn: the agent quoting the first again holds
		// nothing (a fresh release's replay makes an agent do just that).
		{"an_earlier_released_banner_quoted_after_another_stays_ended", []desired.Record{rec(func() desired.Status {
			st := limitedBy(running(), *limitAt(reset)).Released(1, desired.PhaseRunning, false, "")
			st = limitedBy(st, *limitAt(reset.Add(-2 * time.Minute))).Released(2, desired.PhaseRunning, true, "")
			st.FreshRequested = false
			return st
		}(), ev1)},
			screen(obs(alive(), transcript), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_new_limit_after_a_release_is_taken", []desired.Record{rec(released(running(), *limitAt(reset)))},
			screen(obs(alive()), observed.Screen{Limit: otherLimitAt(reset.Add(time.Hour))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until, a.Text = reset.Add(time.Hour), reset.Add(time.Hour+10*time.Second), otherLimitAt(reset).Text
			})}},
		{"a_new_transcript_line_after_a_release_is_taken", []desired.Record{rec(released(running(), harness.Limit{Kind: harness.LimitOverload, At: t0.Add(-time.Hour), Text: "API Error: 529"}))},
			screen(obs(alive()), observed.Screen{Limit: &harness.Limit{Kind: harness.LimitOverload, At: t0.Add(-time.Minute), Text: "API Error: 529"}}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Kind, a.Text, a.Reset, a.Until, a.Default = string(harness.LimitOverload), "API Error: 529", t0.Add(4*time.Minute), t0.Add(4*time.Minute+10*time.Second), true
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, At: t0.Add(-time.Minute)}
			})}},
		{"a_released_menu_is_answered_and_holds_nothing", []desired.Record{rec(released(running(), *limitAt(reset)), ev1)},
			screen(obs(alive()), observed.Screen{Limit: menuAt(reset)}),
			[]actions.Action{menu}},
		{"a_banner_already_taken_does_not_move_the_hold", []desired.Record{rec(limitedBy(limited(30*time.Second), *limitAt(time.Time{})))},
			screen(obs(alive()), observed.Screen{Limit: limitAt(time.Time{})}),
			[]actions.Action{heldUntil(key, 30*time.Second)}},
		{"a_forged_far_reset_holds_at_most_the_longest_window", []desired.Record{rec(running())},
			screen(obs(alive()), observed.Screen{Limit: limitAt(t0.Add(200 * 24 * time.Hour))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until, a.Capped = t0.Add(7*24*time.Hour), t0.Add(7*24*time.Hour+10*time.Second), true
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: t0.Add(200 * 24 * time.Hour), Pane: "%1"}
			})}},

		// A menu on screen is always a limit in force.
		{"a_menu_whose_rounded_reset_has_passed_holds_a_margin_from_now", []desired.Record{rec(running(), ev1),
			rec2("claude-code", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)},
			screen(obs(alive2(alive())), observed.Screen{Limit: menuAt(t0.Add(-30 * time.Second))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until = t0, t0.Add(10*time.Second)
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: t0.Add(-30 * time.Second), Pane: "%1"}
			}), menu, heldUntil(key2, 10*time.Second)}},
		{"the_menu_of_the_limit_taken_before_is_a_limit_again", []desired.Record{rec(limitedBy(running(), *menuAt(t0.Add(-30 * time.Second))), ev1)},
			screen(obs(alive()), observed.Screen{Limit: menuAt(t0.Add(-30 * time.Second))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until = t0, t0.Add(10*time.Second)
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: t0.Add(-30 * time.Second), Pane: "%1"}
			}), menu}},
		{"a_boot_prompt_answered_by_the_menu_is_not_marked_running", []desired.Record{rec(spawning(desired.SpawnFresh), ev1)},
			screen(landed(obs(alive(), grown)), observed.Screen{Limit: menuAt(t0.Add(-30 * time.Second))}),
			[]actions.Action{rateLimit(func(a *actions.RateLimit) {
				a.Reset, a.Until, a.Delivered = t0, t0.Add(10*time.Second), "d-1"
				a.Seen = desired.SeenLimit{Kind: a.Kind, Text: a.Text, Reset: t0.Add(-30 * time.Second), Pane: "%1"}
			}), menu}},
		{"closed_while_rate_limited_stops", func() []desired.Record {
			r := rec(limited(30 * time.Second))
			r.Spec.Closed = true
			return []desired.Record{r}
		}(),
			obs(alive()), []actions.Action{actions.StopSession{Key: key, Session: sess, Reason: actions.ReasonClosed}}},

		// Every item on the account is held, each keeping its place.
		{"recorded_limit_holds_a_delivery_on_the_same_account", []desired.Record{rec(limited(30 * time.Second)),
			rec2("claude-other", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)},
			obs(alive2(alive())),
			[]actions.Action{heldUntil(key, 30*time.Second), heldUntil(key2, 30*time.Second)}},
		{"recorded_limit_holds_a_spawn_on_the_same_account", []desired.Record{rec(limited(30 * time.Second)),
			rec2("claude-code", desired.Status{Phase: desired.PhaseIdle}, ev2)},
			obs(alive()),
			[]actions.Action{heldUntil(key, 30*time.Second), heldUntil(key2, 30*time.Second)}},
		{"recorded_limit_holds_a_self_heal", []desired.Record{rec(limited(30 * time.Second)),
			rec2("claude-code", func() desired.Status {
				st := running()
				st.Phase, st.NextAttempt, st.LastExitReason = desired.PhaseBackingOff, t0.Add(-time.Second), string(actions.ReasonCrash)
				return st
			}())},
			obs(alive()),
			[]actions.Action{heldUntil(key, 30*time.Second), heldUntil(key2, 30*time.Second)}},
		{"a_limit_seen_this_pass_holds_the_others_in_the_same_pass", []desired.Record{rec(running()),
			rec2("claude-code", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)},
			screen(obs(alive2(alive())), observed.Screen{Limit: limitAt(reset)}),
			[]actions.Action{rateLimit(nil), heldUntil(key2, 30*time.Second)}},
		{"another_account_is_not_held", []desired.Record{rec(limited(30 * time.Second)),
			rec2("cursor", func() desired.Status { st := running(); st.PaneID = "%2"; return st }(), ev2)},
			func() observed.Observation {
				o := obs(alive2(alive()))
				p := o.Snapshot.Panes[desired.SessionName(key2)]
				p.CurrentCommand = "cursor-agent"
				o.Snapshot.Panes[desired.SessionName(key2)] = p
				return o
			}(),
			[]actions.Action{heldUntil(key, 30*time.Second),
				actions.DeliverPrompt{Key: key2, Session: desired.SessionName(key2), PaneID: "%2", DeliveryID: "d-2"}}},
		{"an_expired_limit_holds_nothing", []desired.Record{rec2("claude-code", func() desired.Status {
			st := running()
			st.PaneID, st.LimitReset, st.LimitUntil = "%2", t0.Add(-time.Minute), t0.Add(-50*time.Second)
			return st
		}(), ev2)}, obs(alive2(gone())),
			[]actions.Action{actions.DeliverPrompt{Key: key2, Session: desired.SessionName(key2), PaneID: "%2", DeliveryID: "d-2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan(tt.items, tt.obs, limitPolicy(), t0))
		})
	}
}

func TestPlanBlockedScreens(t *testing.T) {
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	blocked := func(b string) actions.MarkBlocked { return actions.MarkBlocked{Key: key, Session: sess, Block: b} }
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		want []actions.Action
	}{
		{"login_required_is_named_at_once_and_events_still_go", rec(running(), ev1),
			screen(obs(alive()), observed.Screen{Blocked: harness.BlockLoginRequired}),
			[]actions.Action{blocked(harness.BlockLoginRequired), actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"login_required_already_recorded_is_not_repeated", rec(with(running(), func(s *desired.Status) { s.Blocked = harness.BlockLoginRequired })),
			screen(obs(alive()), observed.Screen{Blocked: harness.BlockLoginRequired}), nil},
		{"trust_dialog_while_spawning_is_named_at_once_not_after_the_timeout", rec(spawning(desired.SpawnFresh), ev1),
			screen(obs(alive(), noScript), observed.Screen{Blocked: harness.BlockWorkspaceTrust}),
			[]actions.Action{blocked(harness.BlockWorkspaceTrust), actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonAwaitingConfirm}}},
		{"permission_prompt_is_named_and_never_answered", rec(running(), ev1),
			screen(obs(alive()), observed.Screen{Blocked: harness.BlockPermission}),
			[]actions.Action{blocked(harness.BlockPermission), actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-1"}}},
		{"a_screen_that_clears_unblocks", rec(with(running(), func(s *desired.Status) { s.Blocked = harness.BlockPermission })),
			screen(obs(alive()), observed.Screen{}), []actions.Action{blocked("")}},
		{"an_unread_screen_changes_nothing", rec(with(running(), func(s *desired.Status) { s.Blocked = harness.BlockPermission })), obs(alive()), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, limitPolicy(), t0))
		})
	}
}

func TestNeedsScreen(t *testing.T) {
	p := limitPolicy()
	for _, tc := range []struct {
		name string
		rec  desired.Record
		snap observed.Snapshot
		want bool
	}{
		{"running_live_agent", rec(running()), alive(), true},
		{"spawning_live_agent", rec(spawning(desired.SpawnFresh)), alive(), true},
		{"rate_limited_live_agent", rec(limited(time.Minute)), alive(), true},
		{"dead_pane_keeps_its_last_frame", rec(running()), dead(1), false},
		{"a_shell_left_behind", rec(running()), stray("bash"), false},
		{"foreign_session", rec(running()), foreign("someone-else"), false},
		{"idle_item", rec(desired.Status{Phase: desired.PhaseIdle}), alive(), false},
		{"closed_item", func() desired.Record { r := rec(running()); r.Spec.Closed = true; return r }(), alive(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, needsScreen(tc.rec, tc.snap, p))
			n := needs(p, t0)(tc.rec, tc.snap)
			require.Equal(t, tc.want, n.Screen)
		})
	}
}

// TestPlanLimitEpisodes: a banner read off a screen is one episode on the
// pane that showed it, whatever reset it reads now (a clock time names the
// next day's once it has passed); on the pane of the resume after the
// reset it is the old turn of the resumed history until the resume's boot
// prompt reached the conversation, and a new episode after that.
func TestPlanLimitEpisodes(t *testing.T) {
	reset := t0.Add(20 * time.Second)
	tomorrow := limitAt(reset.Add(24 * time.Hour)) // the same banner, read after its reset
	took := func(st desired.Status, pane string) desired.Status {
		st = limitedBy(st, *limitAt(reset))
		st.LimitSeen.Pane = pane
		return st
	}
	resumed := spawning(desired.SpawnResume)
	for _, tc := range []struct {
		name  string
		st    desired.Status
		obs   observed.Observation
		isNew bool
	}{
		{"same_pane_another_reading_is_no_news", took(running(), "%1"), obs(alive()), false},
		{"resumed_history_before_the_prompt_landed_is_no_news", took(resumed, "%0"), obs(alive(), grown), false},
		{"after_the_resume_prompt_landed_it_is_a_new_episode", took(resumed, "%0"), landed(obs(alive(), grown)), true},
		{"another_banner_is_a_new_episode_on_any_pane", took(running(), "%1"), obs(alive()), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shown := tomorrow
			if strings.HasPrefix(tc.name, "another_banner") {
				shown = otherLimitAt(reset.Add(time.Hour))
			}
			got := Plan([]desired.Record{rec(tc.st, ev1)}, screen(tc.obs, observed.Screen{Limit: shown}), limitPolicy(), t0)
			without := Plan([]desired.Record{rec(tc.st, ev1)}, tc.obs, limitPolicy(), t0)
			if !tc.isNew {
				require.Equal(t, without, got, "the banner changes nothing")
				return
			}
			require.NotEmpty(t, got)
			a, ok := got[0].(actions.RateLimit)
			require.True(t, ok, "%v", got)
			assert.Equal(t, "%1", a.Seen.Pane)
			assert.True(t, shown.Reset.Equal(a.Reset), "%v", a.Reset)
		})
	}
}

// TestNeedsScreenOnlyForNews: the screen of a running agent with nothing
// in flight is read for its news only (Need.ScreenIfChanged); a decision
// needs it whole while a start, an event or a block is in flight.
func TestNeedsScreenOnlyForNews(t *testing.T) {
	p := limitPolicy()
	blocked := running()
	blocked.Blocked = harness.BlockPermission
	sending := running()
	sending.SendingDeliveryID = ev1.ID
	for _, tc := range []struct {
		name string
		rec  desired.Record
		news bool
	}{
		{"running_with_nothing_to_do", rec(running()), true},
		{"an_event_to_paste", rec(running(), ev1), false},
		{"a_paste_in_flight", rec(sending), false},
		{"a_blocked_screen", rec(blocked), false},
		{"spawning", rec(spawning(desired.SpawnFresh)), false},
		{"rate_limited", rec(limited(time.Minute)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := needs(p, t0)(tc.rec, alive())
			require.True(t, n.Screen)
			require.Equal(t, tc.news, n.ScreenIfChanged)
		})
	}
}
