package desired_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
)

// TestTalkRule: which status change queues which GitHub call, and the
// flags that keep each to once.
func TestTalkRule(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	all := desired.Talk{Announce: true, Acknowledge: true, Notify: true, Host: "build-1", Socket: "loopd"}
	comment := desired.Delivery{ID: "d1", Source: desired.Source{Kind: desired.SourceIssueComment, ID: 99}}
	review := desired.Delivery{ID: "d2"} // a review body: no source, no reaction
	exit := 1
	replaced := desired.Replacement{From: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", Why: "not_resumable", Replayed: 2, Left: 1}
	tests := []struct {
		name      string
		prev      desired.Status
		next      desired.Status
		delivered []desired.Delivery
		talk      desired.Talk
		wantKinds []desired.CallKind
		announced bool
		episodes  int
	}{
		{name: "first_spawn_confirmed_announces", prev: desired.Status{Phase: desired.PhaseSpawning},
			next: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{ConfirmedSessionID: "c"}}, talk: all, wantKinds: []desired.CallKind{desired.CallAnnounce}, announced: true},
		{name: "first_spawn_after_a_failed_one_announces", prev: desired.Status{Phase: desired.PhaseSpawning, SessionState: desired.SessionState{Respawn: true}, RestartHistory: desired.RestartHistory{Failures: 1}},
			next: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Respawn: true, ConfirmedSessionID: "c"}}, talk: all, wantKinds: []desired.CallKind{desired.CallAnnounce}, announced: true},
		{name: "unconfirmed_adoption_waits_for_a_confirmed_spawn", prev: desired.Status{Phase: desired.PhaseBackingOff},
			next: desired.Status{Phase: desired.PhaseRunning}, talk: all},
		{name: "respawn_never_announces", prev: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Announced: true}, SessionState: desired.SessionState{Respawn: true}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}, SessionState: desired.SessionState{Respawn: true}}, talk: all, announced: true},
		{name: "release_to_running_never_announces", prev: desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{Announced: true, Episodes: 1}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true, Episodes: 1}}, talk: all, announced: true, episodes: 1},
		{name: "announce_off_still_marks_the_first_spawn", prev: desired.Status{Phase: desired.PhaseSpawning},
			next: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{ConfirmedSessionID: "c"}}, talk: desired.Talk{Notify: true}, announced: true},
		{name: "staying_running_announces_nothing", prev: desired.Status{Phase: desired.PhaseRunning},
			next: desired.Status{Phase: desired.PhaseRunning}, talk: all},
		{name: "delivered_comment_is_acknowledged", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}}, delivered: []desired.Delivery{comment, review}, talk: all,
			wantKinds: []desired.CallKind{desired.CallReact}, announced: true},
		{name: "acknowledge_off", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}}, delivered: []desired.Delivery{comment},
			talk: desired.Talk{Announce: true, Notify: true}, announced: true},
		{name: "boot_prompt_announced_and_acknowledged", prev: desired.Status{Phase: desired.PhaseSpawning},
			next: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{ConfirmedSessionID: "c"}}, delivered: []desired.Delivery{comment}, talk: all,
			wantKinds: []desired.CallKind{desired.CallAnnounce, desired.CallReact}, announced: true},
		{name: "entering_needs_attention_notifies", prev: desired.Status{Phase: desired.PhaseExited, AttentionState: desired.AttentionState{Announced: true, Episodes: 2}},
			next: desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{Announced: true, Episodes: 2}, Reason: "restart_budget_exhausted", RestartHistory: desired.RestartHistory{Failures: 10, LastExitStatus: &exit, LastExitReason: "crash"}},
			talk: all, wantKinds: []desired.CallKind{desired.CallNotify}, announced: true, episodes: 3},
		{name: "staying_in_needs_attention_is_the_same_episode", prev: desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{Episodes: 1}, Reason: "a"},
			next: desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{Episodes: 1}, Reason: "delivery_storm"}, talk: all, episodes: 1},
		{name: "a_reason_added_later_is_notified", prev: desired.Status{Phase: desired.PhaseRunning},
			next: desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "delivery_storm"}, talk: all,
			wantKinds: []desired.CallKind{desired.CallNotify}, episodes: 1},
		{name: "without_github_an_episode_is_still_counted", prev: desired.Status{Phase: desired.PhaseSpawning},
			next: desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "spawn_unconfirmed"}, episodes: 1},
		{name: "a_blocked_screen_notifies", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true, Blocked: "login_required"}}, talk: all,
			wantKinds: []desired.CallKind{desired.CallNotify}, announced: true, episodes: 1},
		{name: "a_blocked_screen_that_comes_back_is_the_same_episode", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true, Episodes: 1, NoticedBlock: "login_required"}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true, Episodes: 1, Blocked: "login_required", NoticedBlock: "login_required"}}, talk: all,
			announced: true, episodes: 1},
		{name: "another_blocked_reason_notifies", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Episodes: 1, NoticedBlock: "login_required"}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Episodes: 1, Blocked: "permission_prompt", NoticedBlock: "login_required"}}, talk: all,
			wantKinds: []desired.CallKind{desired.CallNotify}, episodes: 2},
		{name: "staying_blocked_is_the_same_episode", prev: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Episodes: 1, Blocked: "login_required", NoticedBlock: "login_required"}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Episodes: 1, Blocked: "workspace_trust", NoticedBlock: "login_required"}}, talk: all, episodes: 1},
		{name: "needs_attention_while_blocked_notifies", prev: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Episodes: 1, Blocked: "workspace_trust", NoticedBlock: "workspace_trust"}},
			next: desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{Episodes: 1, Blocked: "workspace_trust", NoticedBlock: "workspace_trust"}, Reason: "spawn_unconfirmed"}, talk: all,
			wantKinds: []desired.CallKind{desired.CallNotify}, episodes: 2},
		// Issue 21, case 10: one notice when a conversation is replaced.
		{name: "a_replaced_conversation_notifies", prev: desired.Status{Phase: desired.PhaseExited, AttentionState: desired.AttentionState{Announced: true, Episodes: 1}},
			next: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Announced: true, Episodes: 1}, SessionState: desired.SessionState{Replaced: &replaced}}, talk: all,
			wantKinds: []desired.CallKind{desired.CallNotify}, announced: true, episodes: 2},
		{name: "another_replacement_is_news", prev: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Episodes: 2}, SessionState: desired.SessionState{Replaced: &replaced}},
			next: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Episodes: 2}, SessionState: desired.SessionState{Replaced: &desired.Replacement{From: replaced.From, Why: replaced.Why, Event: "d1"}}},
			talk: all, wantKinds: []desired.CallKind{desired.CallNotify}, episodes: 3},
		{name: "a_replacement_kept_is_no_news", prev: desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Episodes: 2}, SessionState: desired.SessionState{Replaced: &replaced}},
			next: desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Episodes: 2}, SessionState: desired.SessionState{Replaced: &replaced}}, talk: all, episodes: 2},
		{name: "a_replacement_without_github_is_counted", prev: desired.Status{Phase: desired.PhaseExited},
			next: desired.Status{Phase: desired.PhaseSpawning, SessionState: desired.SessionState{Replaced: &replaced}}, episodes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := desired.Record{Key: key, Spec: desired.Spec{Kind: desired.KindIssue}, Status: tt.prev}
			next, calls := desired.TalkRule(r, tt.next, tt.delivered, tt.talk)
			var kinds []desired.CallKind
			for _, c := range calls {
				kinds = append(kinds, c.Kind)
				assert.Equal(t, key, c.Key)
			}
			assert.Equal(t, tt.wantKinds, kinds)
			assert.Equal(t, tt.announced, next.Announced, "announced")
			assert.Equal(t, tt.episodes, next.Episodes, "episodes")
			for _, c := range calls {
				switch c.Kind {
				case desired.CallReact:
					assert.Equal(t, comment.Source, c.Target)
				case desired.CallAnnounce:
					assert.Equal(t, "<!-- loopd:announce acme/api#42 -->", c.Marker)
				case desired.CallNotify:
					assert.Contains(t, c.Marker, "<!-- loopd:notice acme/api#42 episode=")
				}
			}
		})
	}
}

// TestComments: the announcement names the session and host and says
// replies reach the agent; the notice names the reason, what loopd tried
// and the release command; each ends with its marker, and text from
// loopd's state cannot break out into markup.
func TestComments(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	talk := desired.Talk{Announce: true, Acknowledge: true, Notify: true, Host: "build-1", Socket: "loopd"}
	r := desired.Record{Key: key, Spec: desired.Spec{Kind: desired.KindPullRequest}, Status: desired.Status{Phase: desired.PhaseSpawning},
		Pending: []desired.Delivery{{ID: "p1"}}}
	_, calls := desired.TalkRule(r, desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Session: "loop-acme-api-42", ConfirmedSessionID: "c"}}, nil, talk)
	require.Len(t, calls, 1)
	body := calls[0].Body
	assert.Contains(t, body, "this pull request")
	assert.Contains(t, body, "`loop-acme-api-42` on host `build-1`")
	assert.Contains(t, body, "Replies here reach the agent")
	assert.Contains(t, body, "`tmux -L loopd attach -t =loop-acme-api-42`")
	assert.Regexp(t, `\n\n<!-- loopd:announce acme/api#42 -->$`, body)

	// An agent of the process runner has no tmux session to attach to:
	// its announcement says how to follow its runs.
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Session: "loop-acme-api-42", RunID: "r1", ConfirmedSessionID: "c"}}, nil, talk)
	require.Len(t, calls, 1)
	body = calls[0].Body
	assert.Contains(t, body, "as a process, one headless run per event, on host `build-1`")
	assert.Contains(t, body, "To follow it on build-1: `loopd logs acme/api#42`")
	assert.NotContains(t, body, "tmux")
	assert.Regexp(t, `\n\n<!-- loopd:announce acme/api#42 -->$`, body)

	r.Status = desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Announced: true}}
	next := desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "spawn_unconfirmed", AttentionState: desired.AttentionState{Screen: "trust `dialog`\nshown"},
		WorkspaceState: desired.WorkspaceState{WorkspaceError: "git fetch: exit 128\n@someone fatal: repository not found"}}
	_, calls = desired.TalkRule(r, next, nil, talk)
	require.Len(t, calls, 1)
	body = calls[0].Body
	assert.Contains(t, body, "needs attention: `spawn_unconfirmed`")
	assert.Contains(t, body, "The agent's screen shows: trust 'dialog' shown.")
	assert.Contains(t, body, "1 event(s) wait for the agent")
	assert.Contains(t, body, "\n    git fetch: exit 128\n    @someone fatal", "a failure's text is a code block: no markup, no mention")
	assert.Contains(t, body, "\n    loopd release acme/api#42\n")
	assert.Regexp(t, `\n\n<!-- loopd:notice acme/api#42 episode=1 -->$`, body)

	// A paste that never landed: the status before the give-up says what was tried.
	r.Status = desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}, DeliveryState: desired.DeliveryState{SendingDeliveryID: "abc", SendAttempts: 3}}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "delivery_unconfirmed"}, nil, talk)
	require.Len(t, calls, 1)
	assert.Contains(t, calls[0].Body, "It sent event abc 3 times; it never showed in the agent's conversation.")

	// A workspace that could not be made: the agent never ran, and the
	// notice says what failed instead.
	r.Status = desired.Status{Phase: desired.PhasePreparing, AttentionState: desired.AttentionState{Announced: true}}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "workspace_failed", RestartHistory: desired.RestartHistory{Failures: 1},
		WorkspaceState: desired.WorkspaceState{WorkspaceError: "git fetch: exit 128"}}, nil, talk)
	require.Len(t, calls, 1)
	body = calls[0].Body
	assert.NotContains(t, body, "ran the agent")
	assert.Contains(t, body, "It tried to start the agent 1 time in a row; the last try failed making its workspace, so the agent did not start (below).")
	assert.Contains(t, body, "\n    git fetch: exit 128\n")

	// A crash loop says how many runs failed.
	r.Status = desired.Status{Phase: desired.PhaseBackingOff, AttentionState: desired.AttentionState{Announced: true}}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "budget_exhausted", RestartHistory: desired.RestartHistory{Failures: 3}}, nil, talk)
	require.Len(t, calls, 1)
	assert.Contains(t, calls[0].Body, "It ran the agent 3 times in a row without a healthy run.")

	// The loop breaker names its rule: the events within the hour and the
	// route's maxDeliveriesPerHour.
	storm := talk
	storm.MaxDeliveries = 2
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r.Status = desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: desired.ReasonDeliveryStorm, AttentionState: desired.AttentionState{Screen: "ready"},
		DeliveryState: desired.DeliveryState{DeliveredAt: []time.Time{at, at.Add(time.Minute)}}}, nil, storm)
	require.Len(t, calls, 1)
	assert.Contains(t, calls[0].Body, "The loop breaker stopped sending events to the agent: 2 reached it within an hour, "+
		"and one more would be more than the route's maxDeliveriesPerHour (2).")

	// A conversation replaced: why, and what the new one was given.
	r.Status = desired.Status{Phase: desired.PhaseExited, AttentionState: desired.AttentionState{Announced: true}}
	x := desired.Replacement{From: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", Why: "not_resumable", Event: "d-9", Replayed: 3, Left: 1}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Announced: true}, SessionState: desired.SessionState{Replaced: &x}}, nil, talk)
	require.Len(t, calls, 1)
	body = calls[0].Body
	assert.Contains(t, body, "is in a new conversation: the harness said it cannot resume the last one (`not_resumable`, conversation `7f3c2a9e-1b4d-4c8e-9f00-0123456789ab`).")
	assert.Contains(t, body, "The new conversation was given event d-9, and 3 of the item's earlier events again (1 left out for length).")
	assert.Regexp(t, `\n\n<!-- loopd:notice acme/api#42 episode=1 -->$`, body)
	x = desired.Replacement{From: "7f3c2a9e-1b4d-4c8e-9f00-0123456789ab", Why: "released"}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseSpawning, AttentionState: desired.AttentionState{Announced: true}, SessionState: desired.SessionState{Replaced: &x}}, nil, talk)
	require.Len(t, calls, 1)
	assert.Contains(t, calls[0].Body, "an operator asked for it (loopd release --fresh)")
	assert.Contains(t, calls[0].Body, "was given loopd's prompt that says why it is new.")

	// A blocked agent: what clears it is acting on its screen, not a release.
	r.Status = desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true}, SessionState: desired.SessionState{Session: "loop-acme-api-42"}}
	_, calls = desired.TalkRule(r, desired.Status{Phase: desired.PhaseRunning, AttentionState: desired.AttentionState{Announced: true, Blocked: "login_required"}, SessionState: desired.SessionState{Session: "loop-acme-api-42"}}, nil, talk)
	require.Len(t, calls, 1)
	body = calls[0].Body
	assert.Contains(t, body, "needs attention: `blocked: login_required`")
	assert.Contains(t, body, "\n    tmux -L loopd attach -t =loop-acme-api-42\n")
	assert.NotContains(t, body, "loopd release")
}

// TestTalkRuleTellsAForkItCannotBePushedTo: the first confirmed run of a
// fork's pull request whose owner does not let maintainers push
// (Spec.MaintainerCanModify false) queues one notice beside the
// announcement, naming the fork and saying the changes cannot be pushed;
// a respawn queues none again, and neither does a fork that lets
// maintainers push, a pull request of the repository itself, or an item
// loopd may not post on.
func TestTalkRuleTellsAForkItCannotBePushedTo(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	talk := desired.Talk{Announce: true, Notify: true, Host: "build-1", Socket: "loopd"}
	fork := desired.Spec{Kind: desired.KindPullRequest, HeadRepo: "Bob/api"}
	running := desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{Session: "loop-acme-api-42", ConfirmedSessionID: "c"}}
	spawning := desired.Record{Key: key, Spec: fork, Status: desired.Status{Phase: desired.PhaseSpawning}}

	next, calls := desired.TalkRule(spawning, running, nil, talk)
	require.Len(t, calls, 2)
	assert.Equal(t, desired.CallAnnounce, calls[0].Kind)
	notice := calls[1]
	assert.Equal(t, desired.CallNotify, notice.Kind)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 fork -->", notice.Marker)
	assert.True(t, desired.IsOwnMarker(notice.Marker))
	assert.Contains(t, notice.Body, "the fork `Bob/api`")
	assert.Contains(t, notice.Body, "cannot be pushed to this pull request")
	assert.Contains(t, notice.Body, "in a review or a comment")
	assert.Regexp(t, `\n\n<!-- loopd:notice acme/api#42 fork -->$`, notice.Body)

	respawned := spawning
	respawned.Status = next
	respawned.Status.Phase = desired.PhaseSpawning
	_, calls = desired.TalkRule(respawned, running, nil, talk)
	assert.Empty(t, calls, "once per item")

	for name, r := range map[string]desired.Record{
		"maintainers may push": {Key: key, Spec: desired.Spec{Kind: desired.KindPullRequest, HeadRepo: "bob/api", MaintainerCanModify: true}},
		"the repository's own": {Key: key, Spec: desired.Spec{Kind: desired.KindPullRequest, HeadRepo: "ACME/api"}},
		"head unknown":         {Key: key, Spec: desired.Spec{Kind: desired.KindPullRequest}},
	} {
		_, calls = desired.TalkRule(r, running, nil, talk)
		require.Len(t, calls, 1, name)
		assert.Equal(t, desired.CallAnnounce, calls[0].Kind, name)
	}
	_, calls = desired.TalkRule(spawning, running, nil, desired.Talk{Announce: true})
	require.Len(t, calls, 1, "no notices without a GitHub client")
}

// TestIsOwnMarker: the markers loopd ends its announcements and notices
// with are its own, in any case and spacing; an agent's marker, other
// hidden text and a marker not in a comment are not.
func TestIsOwnMarker(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	talk := desired.Talk{Announce: true, Notify: true}
	_, calls := desired.TalkRule(desired.Record{Key: key}, desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{ConfirmedSessionID: "c"}}, nil, talk)
	require.Len(t, calls, 1)
	_, notices := desired.TalkRule(desired.Record{Key: key}, desired.Status{Phase: desired.PhaseNeedsAttention, Reason: "crash"}, nil, talk)
	require.Len(t, notices, 1)
	for _, m := range []string{calls[0].Marker, notices[0].Marker, "<!--LOOPD : Announce o/r#1-->", "<!-- loopd:notice o/r#1 episode = 7 --!>"} {
		assert.True(t, desired.IsOwnMarker(m), m)
	}
	for _, m := range []string{desired.AgentMarker(key), "<!-- loopd:announce -->", "<!-- loopd:notice o/r#1 episode=x -->",
		"loopd:announce o/r#1", "<!-- loopd:announcement o/r#1 -->", "<!-- loopd:notice o/r#1 -->x"} {
		assert.False(t, desired.IsOwnMarker(m), m)
	}
}

// TestTalkRuleTellsEachUsageLimitEpisodeOnce: a usage-limit episode posts
// one notice with its window, reset and the end of the wait, under a
// marker of its own; the wait written again posts nothing, and the next
// episode posts its own. An item limited at its first prompt is announced
// once it runs after the reset.
func TestTalkRuleTellsEachUsageLimitEpisodeOnce(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	talk := desired.Talk{Announce: true, Notify: true, Host: "build-1", Socket: "loopd"}
	reset := time.Date(2026, 7, 15, 0, 0, 0, 0, time.UTC)
	limited := desired.Status{Phase: desired.PhaseRateLimited, LimitState: desired.LimitState{LimitReset: reset,
		LimitUntil: reset.Add(time.Minute), LimitWindow: "per_minute", LimitEpisodes: 1}}
	spawning := desired.Record{Key: key, Status: desired.Status{Phase: desired.PhaseSpawning}}

	next, calls := desired.TalkRule(spawning, limited, nil, talk)
	require.Len(t, calls, 1, "no announcement: the agent never ran")
	assert.False(t, next.Announced)
	notice := calls[0]
	assert.Equal(t, desired.CallNotify, notice.Kind)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 limit=1 -->", notice.Marker)
	assert.True(t, desired.IsOwnMarker(notice.Marker))
	assert.Contains(t, notice.Body, "hit its usage limit (per minute) on host `build-1`: it resets at 2026-07-15 00:00 UTC.")
	assert.Contains(t, notice.Body, "loopd waits until 2026-07-15 00:01 UTC, then resumes the same conversation.")
	assert.Contains(t, notice.Body, "loopd release acme/api#42")

	waiting := desired.Record{Key: key, Status: next}
	_, calls = desired.TalkRule(waiting, next, nil, talk)
	assert.Empty(t, calls, "the wait written again is no new episode")

	running := next
	running.Phase, running.ConfirmedSessionID = desired.PhaseRunning, "c"
	running, calls = desired.TalkRule(desired.Record{Key: key, Status: next}, running, nil, talk)
	require.Len(t, calls, 1)
	assert.Equal(t, desired.CallAnnounce, calls[0].Kind, "announced once it runs")

	again := running
	again.Phase, again.LimitEpisodes, again.LimitDefault, again.LimitWindow = desired.PhaseRateLimited, 2, true, ""
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: running}, again, nil, talk)
	require.Len(t, calls, 1)
	assert.Equal(t, "<!-- loopd:notice acme/api#42 limit=2 -->", calls[0].Marker)
	assert.Contains(t, calls[0].Body, "hit its usage limit on host `build-1`: the harness named no reset loopd could read")
	_, calls = desired.TalkRule(desired.Record{Key: key, Status: running}, again, nil, desired.Talk{Announce: true})
	assert.Empty(t, calls, "no notice without a GitHub client")
}
