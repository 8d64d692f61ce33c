package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

func TestProjectSettingsOf(t *testing.T) {
	key := desired.Key{Owner: "acme", Repo: "api", Number: 7}
	routes := func(settings string) schema.Routing {
		return schema.Routing{Repos: map[string]schema.Route{"acme/*": {Harness: "claude-code", ProjectSettings: settings}}}
	}
	pr := desired.Spec{Kind: desired.KindPullRequest, HeadRef: "feature/x", HeadRepo: "ACME/Api", HeadSHA: "aaa", Author: "alice", HeadPusher: "Bob"}
	for _, tc := range []struct {
		name    string
		spec    func(*desired.Spec)
		routing schema.Routing
		want    ProjectSettings
	}{
		{"same_repository_head_of_authorized_logins", nil, routes("trusted"), ProjectSettings{true, ProjectSettingsHead}},
		{"default_route_never", nil, routes(""), ProjectSettings{false, ProjectSettingsUntrustedRoute}},
		{"untrusted_route_never", nil, routes("untrusted"), ProjectSettings{false, ProjectSettingsUntrustedRoute}},
		{"no_route", nil, schema.Routing{}, ProjectSettings{false, ProjectSettingsNoRoute}},
		{"issue_under_a_trusted_route", func(s *desired.Spec) { *s = desired.Spec{Kind: desired.KindIssue, Author: "mallory"} },
			routes("trusted"), ProjectSettings{true, ProjectSettingsIssue}},
		{"issue_under_the_default_route", func(s *desired.Spec) { *s = desired.Spec{Kind: desired.KindIssue} },
			routes(""), ProjectSettings{false, ProjectSettingsUntrustedRoute}},
		{"fork_head", func(s *desired.Spec) { s.HeadRepo, s.HeadRef = "mallory/api", "" }, routes("trusted"), ProjectSettings{false, ProjectSettingsFork}},
		{"fork_head_named_like_a_branch", func(s *desired.Spec) { s.HeadRepo = "mallory/api" }, routes("trusted"), ProjectSettings{false, ProjectSettingsFork}},
		{"same_repository_without_a_head_branch", func(s *desired.Spec) { s.HeadRef = "" }, routes("trusted"), ProjectSettings{false, ProjectSettingsFork}},
		{"head_never_named", func(s *desired.Spec) { s.HeadRepo = "" }, routes("trusted"), ProjectSettings{false, ProjectSettingsHeadUnknown}},
		{"opened_by_a_stranger", func(s *desired.Spec) { s.Author = "mallory" }, routes("trusted"), ProjectSettings{false, ProjectSettingsAuthor}},
		{"opener_unknown", func(s *desired.Spec) { s.Author = "" }, routes("trusted"), ProjectSettings{false, ProjectSettingsAuthor}},
		{"pushed_by_a_stranger", func(s *desired.Spec) { s.HeadPusher = "mallory" }, routes("trusted"), ProjectSettings{false, ProjectSettingsPusher}},
		{"pushed_by_loopd_itself", func(s *desired.Spec) { s.HeadPusher = "loopd-bot" }, routes("trusted"), ProjectSettings{false, ProjectSettingsPusher}},
		{"pusher_unknown", func(s *desired.Spec) { s.HeadPusher = "" }, routes("trusted"), ProjectSettings{false, ProjectSettingsPusherUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := pr
			if tc.spec != nil {
				tc.spec(&spec)
			}
			p := Policy{Routing: tc.routing, AuthorizedUsers: schema.Logins{"alice", "bob", "loopd-bot"}, BotLogin: "Loopd-Bot"}
			assert.Equal(t, tc.want, ProjectSettingsOf(desired.Record{Key: key, Spec: spec}, p))
		})
	}
}

// TestPlanSpawnCarriesProjectSettings: a spawn is planned with the
// workdir's project settings only for an item ProjectSettingsOf trusts,
// and a change of the route's projectSettings or of authorizedUsers
// applies to the next spawn.
func TestPlanSpawnCarriesProjectSettings(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	key := desired.Key{Owner: "acme", Repo: "api", Number: 7}
	rec := desired.Record{
		Key: key,
		Spec: desired.Spec{Kind: desired.KindPullRequest, Harness: "claude-code", Cwd: "/w/7", HeadRef: "feature/x",
			HeadRepo: "acme/api", HeadSHA: "aaa", Author: "alice", HeadPusher: "alice", Generation: 1},
		Status:  desired.Status{Phase: desired.PhaseIdle},
		Pending: []desired.Delivery{{ID: "d1", Event: "issue_comment", Prompt: "review this", ReceivedAt: now}},
	}
	policy := func(settings string, authorized ...string) Policy {
		p := testPolicy()
		p.Routing = schema.Routing{Repos: map[string]schema.Route{"acme/api": {Harness: "claude-code", Workdir: "/w/{{.Number}}", ProjectSettings: settings}}}
		p.AuthorizedUsers = authorized
		return p
	}
	spawnOf := func(p Policy, r desired.Record) actions.Spawn {
		t.Helper()
		for _, a := range Plan([]desired.Record{r}, observed.Observation{Snapshot: observed.Snapshot{}}, p, now) {
			if f, ok := a.(actions.FreshSpawn); ok {
				return f.Spawn
			}
		}
		require.Fail(t, "no fresh spawn planned")
		return actions.Spawn{}
	}
	s := spawnOf(policy("trusted", "alice"), rec)
	assert.True(t, s.ProjectSettings)
	assert.Contains(t, actions.FreshSpawn{Spawn: s}.String(), "project_settings=trusted")
	assert.False(t, spawnOf(policy("untrusted", "alice"), rec).ProjectSettings, "the route turned it off")
	assert.False(t, spawnOf(policy("trusted", "bob"), rec).ProjectSettings, "alice is no longer authorized")
	assert.NotContains(t, actions.FreshSpawn{Spawn: spawnOf(policy("", "alice"), rec)}.String(), "project_settings")

	fork := rec
	fork.Spec.HeadRepo, fork.Spec.HeadRef = "alice/api", ""
	assert.False(t, spawnOf(policy("trusted", "alice"), fork).ProjectSettings, "a fork's head, whoever pushed it")
}
