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

// TestPlanWorkspace covers the workspace rows of the planner: what comes
// before a first spawn, conflicts, failures and their backoff and budget,
// the pinned workdir, and the close.
func TestPlanWorkspace(t *testing.T) {
	const (
		url      = "https://x-access-token:SECRET@git.example/octo-org/api.git"
		current  = "/srv/new/octo-org/api/42" // what the route renders today
		physical = "/real/octo-org/api/42"
	)
	routed := func(f func(*schema.Checkout)) Policy {
		p := testPolicy()
		c := &schema.Checkout{URL: "https://x-access-token:SECRET@git.example/{{.Owner}}/{{.Repo}}.git"}
		if f != nil {
			f(c)
		}
		p.Routing = schema.Routing{Repos: map[string]schema.Route{"octo-org/*": {Harness: "claude-code", Workdir: "/srv/new/{{.Owner}}/{{.Repo}}/{{.Number}}", Checkout: c}}}
		return p
	}
	plain := func() Policy {
		p := testPolicy()
		p.Routing = schema.Routing{Repos: map[string]schema.Route{"*": {Harness: "claude-code", Workdir: "/srv/new/{{.Owner}}/{{.Repo}}/{{.Number}}"}}}
		return p
	}
	issue := &actions.Checkout{URL: url, Mode: actions.CheckoutIssue, Branch: "loopd/issue-42"}
	idle := desired.Status{Phase: desired.PhaseIdle}
	workdir := func(w observed.Workdir) observed.Observation {
		o := obs(gone())
		o.Workdirs = map[desired.Key]observed.Workdir{key: w}
		if !w.Exists {
			o.MissingWorkdirs[key] = true
		}
		return o
	}
	first := func(dir string) actions.FreshSpawn {
		s := spawnOf(ev1, actions.ReasonNewEvent)
		s.Respawn, s.Cwd = false, dir
		return actions.FreshSpawn{Spawn: s}
	}
	// retry < 0: the budget is spent, a transient failure gives up.
	prep := func(c *actions.Checkout, reason actions.Reason, failures int, retry time.Duration) actions.PrepareWorkspace {
		return actions.PrepareWorkspace{Key: key, Session: sess, Dir: current, Checkout: c, Reason: reason, Failures: failures, Retry: retry >= 0, RetryAfter: max(retry, 0)}
	}
	pr := func(head string) desired.Record {
		r := rec(idle, ev1)
		r.Spec.Kind, r.Spec.HeadRef = desired.KindPullRequest, head
		return r
	}
	fork := func(canModify bool) desired.Record {
		r := pr("feature/login")
		r.Spec.HeadRepo, r.Spec.MaintainerCanModify = "someone/api-fork", canModify
		return r
	}
	failedBefore := func(failures int, next time.Time) desired.Status {
		return desired.Status{Phase: desired.PhaseBackingOff, RestartHistory: desired.RestartHistory{Failures: failures, NextAttempt: next, LastExitReason: string(actions.ReasonWorkspaceFailed)}}
	}
	pinned := func(f func(*desired.Status)) desired.Status {
		st := running()
		st.Phase, st.Workdir, st.WorkdirRendered = desired.PhaseExited, physical, cwd
		if f != nil {
			f(&st)
		}
		return st
	}
	// settled is pinned with the route's rendering recorded (no report).
	settled := func(f func(*desired.Status)) desired.Status {
		return pinned(func(s *desired.Status) {
			s.WorkdirRendered = current
			if f != nil {
				f(s)
			}
		})
	}
	// crashed is an agent that died and is due to restart now.
	crashed := func(s *desired.Status) {
		s.Phase, s.NextAttempt, s.LastExitReason = desired.PhaseBackingOff, t0, string(actions.ReasonCrash)
	}
	again := func(reason actions.Reason, resume bool) actions.PrepareWorkspace {
		return actions.PrepareWorkspace{Key: key, Session: sess, Dir: physical, Checkout: issue, Reason: reason, Failures: 1, Retry: true, Resume: resume}
	}
	resumed := func(d desired.Delivery, reason actions.Reason) actions.ResumeSpawn {
		r := resume(d, reason)
		r.Cwd = physical
		return r
	}
	released := func(r desired.Record) desired.Record {
		r.Spec.Generation++
		r.Spec.ReleaseGeneration = r.Spec.Generation
		return r
	}
	closed := func(st desired.Status) desired.Record {
		r := rec(st)
		r.Spec.Closed = true
		return r
	}
	tests := []struct {
		name string
		rec  desired.Record
		obs  observed.Observation
		p    Policy
		want []actions.Action
	}{
		// Before the first spawn, the workdir comes from the current config.
		{"plain_missing_workdir_is_made_from_the_current_route", rec(idle, ev1), workdir(observed.Workdir{}), plain(),
			[]actions.Action{prep(nil, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		{"plain_existing_workdir_spawns_at_once", rec(idle, ev1), workdir(observed.Workdir{Exists: true, Physical: current}), plain(),
			[]actions.Action{first(current)}},
		{"no_route_keeps_the_ingested_workdir", rec(idle, ev1), workdir(observed.Workdir{Exists: true}), testPolicy(),
			[]actions.Action{first(cwd)}},
		{"issue_gets_a_worktree_on_its_branch", rec(idle, ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		{"issue_branch_and_base_from_the_route", rec(idle, ev1), workdir(observed.Workdir{}),
			routed(func(c *schema.Checkout) { c.IssueBranch, c.Base = "agent/{{.Repo}}-{{.Number}}", "develop" }),
			[]actions.Action{prep(&actions.Checkout{URL: url, Mode: actions.CheckoutIssue, Branch: "agent/api-42", Base: "develop"}, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		{"empty_directory_takes_the_worktree", rec(idle, ev1), workdir(observed.Workdir{Exists: true, Empty: true}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		{"pull_request_in_the_same_repository_checks_out_its_head", pr("feature/login"), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(&actions.Checkout{URL: url, Mode: actions.CheckoutPullRequest, Branch: "feature/login", PR: 42}, actions.ReasonFirstSpawn, 1, 0),
				func() actions.FreshSpawn { f := first(current); return f }()}},
		{"pull_request_from_a_fork_fetches_its_pull_ref", pr(""), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(&actions.Checkout{URL: url, Mode: actions.CheckoutFork, Branch: "loopd/pr-42", PR: 42}, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		// A fork's head branch of the same name as a branch of the base:
		// the pull ref all the same, and a push goes to the fork's branch
		// only when the fork lets maintainers push.
		{"fork_that_takes_no_pushes_has_no_push_target", fork(false), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(&actions.Checkout{URL: url, Mode: actions.CheckoutFork, Branch: "loopd/pr-42", PR: 42}, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		{"fork_that_takes_pushes_pushes_to_its_head_branch", fork(true), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(&actions.Checkout{URL: url, Mode: actions.CheckoutFork, Branch: "loopd/pr-42", PR: 42,
				PushURL: "https://x-access-token:SECRET@git.example/someone/api-fork.git", PushBranch: "feature/login"}, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		// A worktree is made outside the pass: while its mirror's lock is
		// held the item waits for its worker; a Preparing item whose
		// preparation left no outcome (the daemon stopped or was killed)
		// is prepared again, a half-made worktree finished.
		{"preparing_waits_while_its_mirror_is_busy", rec(desired.Status{Phase: desired.PhasePreparing}, ev1), workdir(observed.Workdir{Busy: true}), routed(nil),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonWorkspacePreparing}}},
		{"preparing_with_no_worker_is_prepared_again", rec(desired.Status{Phase: desired.PhasePreparing}, ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonWorkspaceInterrupted, 1, 0), first(current)}},
		{"preparing_half_made_is_finished", rec(desired.Status{Phase: desired.PhasePreparing}, ev1), workdir(observed.Workdir{Exists: true, Worktree: true, Partial: true}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonWorkspacePartial, 1, 0), first(current)}},
		{"preparing_done_by_another_process_spawns", rec(desired.Status{Phase: desired.PhasePreparing}, ev1), workdir(observed.Workdir{Exists: true, Clone: true, Physical: current}), routed(nil),
			[]actions.Action{first(current)}},
		{"idle_item_prepares_while_another_holds_the_mirror", rec(idle, ev1), workdir(observed.Workdir{Busy: true}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonFirstSpawn, 1, 0), first(current)}},
		// Never clobber.
		{"existing_clone_is_used_as_it_is", rec(idle, ev1), workdir(observed.Workdir{Exists: true, Clone: true, Physical: current}), routed(nil),
			[]actions.Action{first(current)}},
		{"worktree_of_an_older_loopd_is_migrated_before_the_first_spawn", rec(idle, ev1), workdir(observed.Workdir{Exists: true, Worktree: true}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonWorkspaceLegacy, 1, 0), first(current)}},
		{"half_made_worktree_is_finished", rec(idle, ev1), workdir(observed.Workdir{Exists: true, Worktree: true, Partial: true}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonWorkspacePartial, 1, 0), first(current)}},
		{"conflicting_directory_needs_attention_untouched", rec(idle, ev1), workdir(observed.Workdir{Exists: true}), routed(nil),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonWorkspaceConflict, Path: current,
				Detail: current + " exists and is not a clone of " + url}}},
		// Failures are states: backoff and the restart budget.
		{"failed_workspace_waits_its_backoff", rec(failedBefore(2, t0.Add(time.Second)), ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{actions.Wait{Key: key, Until: t0.Add(time.Second), Reason: actions.ReasonBackoff}}},
		{"failed_workspace_retried_after_its_backoff_with_the_next_delay", rec(failedBefore(2, t0), ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonFirstSpawn, 3, 4*time.Second), first(current)}},
		{"failed_workspace_past_the_budget_gives_up_on_the_next_transient_failure", rec(failedBefore(10, t0), ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{prep(issue, actions.ReasonFirstSpawn, 11, -1), first(current)}},
		{"needs_attention_waits_for_a_new_event", rec(desired.Status{Phase: desired.PhaseNeedsAttention, AttentionState: desired.AttentionState{AttentionGeneration: 3}}, ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{actions.Wait{Key: key, Reason: actions.ReasonNeedsAttention}}},
		{"route_that_does_not_render_needs_attention", rec(idle, ev1), workdir(observed.Workdir{}),
			routed(func(c *schema.Checkout) { c.URL = "{{.Nope}}" }),
			[]actions.Action{actions.GiveUp{Key: key, Session: sess, Reason: actions.ReasonWorkspaceFailed, Path: current,
				Detail: `render checkout url: template: url:1:2: executing "url" at <.Nope>: can't evaluate field Nope in type schema.checkoutData`}}},
		// Once spawned, the workdir is pinned.
		{"pinned_workdir_resumes_there_and_reports_a_changed_route", rec(pinned(nil), ev1), workdir(observed.Workdir{Exists: true, Clone: true, Physical: physical}), routed(nil),
			[]actions.Action{actions.ReportWorkdir{Key: key, Pinned: physical, Rendered: current},
				func() actions.ResumeSpawn {
					r := resume(ev1, actions.ReasonNewEvent)
					r.Cwd = physical
					return r
				}()}},
		{"changed_route_reported_once", rec(pinned(func(s *desired.Status) { s.WorkdirReported = current }), ev1), workdir(observed.Workdir{Exists: true, Clone: true}), routed(nil),
			[]actions.Action{func() actions.ResumeSpawn {
				r := resume(ev1, actions.ReasonNewEvent)
				r.Cwd = physical
				return r
			}()}},
		// Repair at any time: before every spawn of a pinned clone, what
		// a crash or an older loopd left is dealt with, at the same path.
		{"pinned_clone_gone_is_made_again_at_its_path_and_resumes", rec(settled(nil), ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspaceMissing, false), resumed(ev1, actions.ReasonNewEvent)}},
		{"crashed_agent_whose_clone_vanished_resumes_once_it_is_made_again", rec(settled(crashed)), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspaceMissing, true), resumed(desired.Delivery{}, actions.ReasonPaneDead)}},
		{"pinned_empty_directory_is_made_again", rec(settled(nil), ev1), workdir(observed.Workdir{Exists: true, Empty: true}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspaceMissing, false), resumed(ev1, actions.ReasonNewEvent)}},
		{"stale_lock_in_the_clone_is_removed_before_the_resume", rec(settled(crashed)), workdir(observed.Workdir{Exists: true, Clone: true, Leftover: true}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspaceLeftover, true), resumed(desired.Delivery{}, actions.ReasonPaneDead)}},
		{"pinned_worktree_of_an_older_loopd_is_migrated_before_the_resume", rec(settled(nil), ev1), workdir(observed.Workdir{Exists: true, Worktree: true}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspaceLegacy, false), resumed(ev1, actions.ReasonNewEvent)}},
		{"pinned_half_made_worktree_is_finished", rec(settled(nil), ev1), workdir(observed.Workdir{Exists: true, Worktree: true, Partial: true}), routed(nil),
			[]actions.Action{again(actions.ReasonWorkspacePartial, false), resumed(ev1, actions.ReasonNewEvent)}},
		{"pinned_directory_that_is_not_a_clone_is_used_as_it_is", rec(settled(nil), ev1), workdir(observed.Workdir{Exists: true}), routed(nil),
			[]actions.Action{resumed(ev1, actions.ReasonNewEvent)}},
		{"pinned_workdir_not_observed_is_spawned_there", rec(settled(nil), ev1), obs(gone()), routed(nil),
			[]actions.Action{resumed(ev1, actions.ReasonNewEvent)}},
		{"pinned_plain_workdir_gone_blocks_never_remade", rec(settled(nil), ev1), workdir(observed.Workdir{}), plain(),
			[]actions.Action{actions.Block{Key: key, Reason: actions.ReasonWorkspaceMissing, Detail: physical}}},
		{"a_rebuild_that_keeps_failing_gives_up_past_the_budget", rec(settled(func(s *desired.Status) {
			crashed(s)
			s.Failures, s.LastExitReason = 10, string(actions.ReasonWorkspaceFailed)
		})), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{func() actions.PrepareWorkspace {
				a := again(actions.ReasonWorkspaceMissing, true)
				a.Failures, a.Retry = 11, false
				return a
			}(), resumed(desired.Delivery{}, actions.ReasonNewEvent)}},
		{"release_retries_a_rebuild_that_needs_attention", released(rec(settled(func(s *desired.Status) {
			s.Phase, s.Reason, s.WorkspaceError, s.AttentionGeneration = desired.PhaseNeedsAttention, string(actions.ReasonWorkspaceFailed), "clone: git fetch: exit 128", 3
		}))), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{actions.Release{Key: key, Session: sess, Generation: 4, Phase: desired.PhaseBackingOff},
				again(actions.ReasonWorkspaceMissing, true), resumed(desired.Delivery{}, actions.ReasonReleased)}},
		{"item_spawned_before_pinning_keeps_its_ingested_workdir", rec(with(running(), func(s *desired.Status) { s.Phase = desired.PhaseExited }), ev1),
			workdir(observed.Workdir{Exists: true}), plain(),
			[]actions.Action{actions.ReportWorkdir{Key: key, Pinned: cwd, Rendered: current},
				resume(ev1, actions.ReasonNewEvent)}},
		// Closing.
		{"close_removes_the_worktree_when_asked", closed(pinned(func(s *desired.Status) { s.Phase = desired.PhaseStopped })), obs(gone()),
			routed(func(c *schema.Checkout) { c.RemoveOnClose = true }),
			[]actions.Action{actions.RemoveWorkspace{Key: key, Dir: physical, URL: url}}},
		{"close_keeps_the_worktree_by_default", closed(pinned(func(s *desired.Status) { s.Phase, s.WorkdirRendered = desired.PhaseStopped, current })), obs(gone()),
			routed(nil), nil},
		{"close_deals_with_the_worktree_once", closed(pinned(func(s *desired.Status) {
			s.Phase, s.WorkdirRendered, s.Workspace = desired.PhaseStopped, current, desired.WorkspaceKept
		})), obs(gone()), routed(func(c *schema.Checkout) { c.RemoveOnClose = true }), nil},
		{"reopened_item_remakes_its_removed_worktree_and_resumes", rec(pinned(func(s *desired.Status) {
			s.Phase, s.WorkdirRendered, s.Workspace = desired.PhaseStopped, current, desired.WorkspaceRemoved
		}), ev1), workdir(observed.Workdir{}), routed(nil),
			[]actions.Action{actions.PrepareWorkspace{Key: key, Session: sess, Dir: physical, Checkout: issue, Reason: actions.ReasonWorkspaceRemoved, Failures: 1, Retry: true},
				func() actions.ResumeSpawn {
					r := resume(ev1, actions.ReasonNewEvent)
					r.Cwd = physical
					return r
				}()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Plan([]desired.Record{tt.rec}, tt.obs, tt.p, t0))
		})
	}
}

func TestWorkdirMoved(t *testing.T) {
	p := testPolicy()
	p.Routing = schema.Routing{Repos: map[string]schema.Route{"*": {Harness: "claude-code", Workdir: "/new/{{.Number}}"}}}
	r := rec(running())
	got, moved := WorkdirMoved(r, p)
	require.Equal(t, "/new/42", got)
	require.True(t, moved, "pinned to %s", cwd)
	r.Status.Workdir, r.Status.WorkdirRendered = "/real/42", "/new/42"
	_, moved = WorkdirMoved(r, p)
	require.False(t, moved, "the same rendering, pinned at its physical path")
	_, moved = WorkdirMoved(rec(desired.Status{}), p)
	require.False(t, moved, "nothing is pinned before the first spawn")
}

func with(st desired.Status, f func(*desired.Status)) desired.Status { f(&st); return st }

func TestDecideRetry(t *testing.T) {
	p := testPolicy()
	for _, tc := range []struct {
		before int
		want   Decision
	}{
		{0, Decision{Outcome: OutcomeRestart, Failures: 1, Reason: actions.ReasonWorkspaceFailed}},
		{1, Decision{Outcome: OutcomeRestart, Failures: 2, Delay: 2 * time.Second, Reason: actions.ReasonWorkspaceFailed}},
		{9, Decision{Outcome: OutcomeRestart, Failures: 10, Delay: 5 * time.Minute, Reason: actions.ReasonWorkspaceFailed}},
		{10, Decision{Outcome: OutcomeGiveUp, Failures: 11, Reason: actions.ReasonBudgetExhausted}},
	} {
		require.Equal(t, tc.want, decideRetry(tc.before, p), "after %d failures", tc.before)
	}
}
