package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// TestPlanLoopBack is the table of the planner's part of "never talk to
// itself": the agent's own push is dropped, and the loop breaker.
func TestPlanLoopBack(t *testing.T) {
	push := desired.Delivery{ID: "d-push", Event: "pull_request", Action: "synchronize", Sender: "octocat", Prompt: "[loopd] pull_request.synchronize\npush", Commit: "abc1234"}.Compact()
	held := func(o observed.Observation, commit string, yes bool) observed.Observation {
		o.Holds = map[desired.Key]map[string]bool{key: {commit: yes}}
		return o
	}
	// times returns n delivery times, one a minute, the last a minute
	// before t0.
	times := func(n int) []time.Time {
		var out []time.Time
		for i := n; i > 0; i-- {
			out = append(out, t0.Add(-time.Duration(i)*time.Minute))
		}
		return out
	}
	with := func(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }
	storm := func(n int) func(*desired.Status) { return func(s *desired.Status) { s.DeliveredAt = times(n) } }
	limit := func(n int) Policy {
		p := testPolicy()
		p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/api": {Harness: "claude-code", Workdir: cwd, MaxDeliveriesPerHour: n}}}
		return p
	}
	giveUp := actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonDeliveryStorm}
	paste := func(d desired.Delivery) actions.Action {
		return actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: d.ID}
	}
	// cloned is a pull request whose route has a checkout: a push that is
	// not the agent's is fetched into its mirror before it is pasted.
	cloned := func(r desired.Record) desired.Record {
		r.Spec.Kind = desired.KindPullRequest
		return r
	}
	checkout := testPolicy()
	checkout.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/api": {Harness: "claude-code", Workdir: cwd,
		Checkout: &schema.Checkout{URL: "https://git.example/{{.Owner}}/{{.Repo}}.git"}}}}
	fetch := actions.FetchHead{Key: key, DeliveryID: "d-push", URL: "https://git.example/octo-org/api.git", PR: key.Number, Commit: "abc1234"}
	// fetching is a fetch of the push's head handed to the worker, with
	// its outcome ("" while it runs).
	fetching := func(outcome string) func(*desired.Status) {
		return func(s *desired.Status) {
			s.HeadFetch = desired.HeadFetch{Commit: "abc1234", Started: t0.Add(-time.Second), Outcome: outcome}
		}
	}
	// busy is o with the item's mirror locked by a worker.
	busy := func(o observed.Observation) observed.Observation {
		o.Workdirs = map[desired.Key]observed.Workdir{key: {Busy: true}}
		return o
	}
	drop := actions.DropDelivery{Key: key, DeliveryID: "d-push", Commit: "abc1234", Reason: actions.ReasonOwnPush}

	for _, tc := range []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		{"own_push_is_dropped_not_pasted", rec(running(), push, ev1), held(obs(alive()), "abc1234", true), testPolicy(),
			[]actions.Action{drop, paste(ev1)}},
		{"own_push_alone_is_dropped_and_nothing_starts", rec(desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: oldID}}, push), held(obs(gone()), "abc1234", true), testPolicy(),
			[]actions.Action{drop}},
		{"anothers_push_is_pasted", rec(running(), push), held(obs(alive()), "abc1234", false), testPolicy(),
			[]actions.Action{paste(push)}},
		{"push_not_read_is_pasted", rec(running(), push), obs(alive()), testPolicy(),
			[]actions.Action{paste(push)}},
		{"anothers_push_is_fetched_into_the_clone_first", cloned(rec(running(), push)), held(obs(alive()), "abc1234", false), checkout,
			[]actions.Action{fetch}},
		{"the_push_waits_while_its_fetch_runs", cloned(rec(with(running(), fetching("")), push)), busy(held(obs(alive()), "abc1234", false)), checkout,
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonHeadFetching}}},
		{"the_push_is_pasted_once_fetched", cloned(rec(with(running(), fetching(desired.HeadFetched)), push)), busy(held(obs(alive()), "abc1234", false)), checkout,
			[]actions.Action{paste(push)}},
		{"the_push_is_pasted_after_a_failed_fetch", cloned(rec(with(running(), fetching(desired.HeadFetchFailed)), push)), held(obs(alive()), "abc1234", false), checkout,
			[]actions.Action{paste(push)}},
		{"a_fetch_that_lost_its_worker_is_made_again", cloned(rec(with(running(), fetching("")), push)), held(obs(alive()), "abc1234", false), checkout,
			[]actions.Action{fetch}},
		{"a_fetch_of_an_older_head_does_not_stand_for_the_new_one", cloned(rec(with(running(), func(s *desired.Status) {
			s.HeadFetch = desired.HeadFetch{Commit: "0ld0ld0", Started: t0.Add(-time.Hour), Outcome: desired.HeadFetched}
		}), push)), held(obs(alive()), "abc1234", false), checkout,
			[]actions.Action{fetch}},
		{"a_comment_fetches_nothing", cloned(rec(running(), ev1)), obs(alive()), checkout,
			[]actions.Action{paste(ev1)}},
		{"push_in_flight_is_left_to_land", rec(with(running(), func(s *desired.Status) {
			s.SendingDeliveryID, s.SentAt, s.SendAttempts = "d-push", t0.Add(-500*time.Millisecond), 1
		}), push),
			held(obs(alive(), transcript), "abc1234", true), testPolicy(),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(500 * time.Millisecond), Reason: actions.ReasonAwaitingDelivery}}},
		{"a_ci_failure_on_the_agents_own_commit_is_pasted", rec(running(), desired.Delivery{ID: "d-ci", Event: "check_run", Action: "completed", Prompt: "ci", Commit: "abc1234"}.Compact()),
			held(obs(alive()), "abc1234", true), testPolicy(),
			[]actions.Action{actions.DeliverPrompt{Key: key, Session: sess, PaneID: "%1", DeliveryID: "d-ci"}}},

		{"under_the_limit_pastes", rec(with(running(), storm(2)), ev1), obs(alive()), limit(3),
			[]actions.Action{paste(ev1)}},
		{"one_more_than_the_limit_needs_attention", rec(with(running(), storm(3)), ev1), obs(alive()), limit(3),
			[]actions.Action{giveUp}},
		{"default_limit_is_30", rec(with(running(), storm(30)), ev1), obs(alive()), testPolicy(),
			[]actions.Action{giveUp}},
		{"default_limit_not_reached", rec(with(running(), storm(29)), ev1), obs(alive()), testPolicy(),
			[]actions.Action{paste(ev1)}},
		{"deliveries_older_than_an_hour_do_not_count", rec(with(running(), func(s *desired.Status) {
			s.DeliveredAt = append([]time.Time{t0.Add(-time.Hour), t0.Add(-2 * time.Hour)}, times(2)...)
		}), ev1), obs(alive()), limit(3),
			[]actions.Action{paste(ev1)}},
		{"storm_stops_a_new_spawn_too", rec(with(desired.Status{Phase: desired.PhaseExited, SessionState: desired.SessionState{HarnessSessionID: oldID}}, storm(3)), ev1), obs(gone()), limit(3),
			[]actions.Action{giveUp}},
		{"storm_with_nothing_pending_is_quiet", rec(with(running(), storm(3))), obs(alive()), limit(3), nil},
		{"storm_waits_for_a_release_even_with_a_new_event", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) {
				s.Phase, s.Reason, s.AttentionGeneration, s.DeliveredAt = desired.PhaseNeedsAttention, string(actions.ReasonDeliveryStorm), 2, times(3)
			}), ev1)
			r.Spec.Generation = 3
			return r
		}(), obs(alive()), limit(3),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
		{"release_ends_the_storm", func() desired.Record {
			r := rec(with(running(), func(s *desired.Status) {
				s.Phase, s.Reason, s.AttentionGeneration, s.DeliveredAt = desired.PhaseNeedsAttention, string(actions.ReasonDeliveryStorm), 2, times(3)
			}), ev1)
			r.Spec.Generation, r.Spec.ReleaseGeneration = 3, 3
			return r
		}(), obs(alive()), limit(3),
			[]actions.Action{actions.Release{Key: key, Session: sess, Generation: 3, Phase: desired.PhaseRunning}, paste(ev1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Plan([]desired.Record{tc.rec}, tc.obs, tc.p, t0))
		})
	}
}

// TestPushCommits: observation looks for the commits of pending pushes
// only, never one in flight nor a CI failure's.
func TestPushCommits(t *testing.T) {
	r := rec(desired.Status{DeliveryState: desired.DeliveryState{SendingDeliveryID: "d-2"}},
		desired.Delivery{ID: "d-1", Event: "pull_request", Action: "synchronize", Commit: "aaa1111"},
		desired.Delivery{ID: "d-2", Event: "pull_request", Action: "synchronize", Commit: "bbb2222"},
		desired.Delivery{ID: "d-3", Event: "check_run", Action: "completed", Commit: "ccc3333"},
		ev1)
	require.Equal(t, []string{"aaa1111"}, pushCommits(r))
}
