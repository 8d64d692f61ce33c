package reconciler

import (
	"strings"

	"github.com/loopd/loopd/desired"
)

// ProjectSettings is whether a spawn of an item lets its harness read the
// settings the workdir holds itself (Claude Code's .claude/settings.json,
// .claude/settings.local.json and .mcp.json, Codex's .codex/config.toml,
// Gemini's .gemini/), which can run code as loopd's user the moment the
// CLI starts (hooks, MCP servers, tool discovery): Trusted, and why
// (docs/design.md, "Repository content never configures the harness").
type ProjectSettings struct {
	Trusted bool
	Reason  ProjectSettingsReason
}

// ProjectSettingsReason says why an item gets its project settings or not.
type ProjectSettingsReason string

// The reasons of ProjectSettingsOf, in the order it checks them.
const (
	// ProjectSettingsNoRoute: the item's repository has no route any more.
	ProjectSettingsNoRoute ProjectSettingsReason = "no_route"
	// ProjectSettingsUntrustedRoute: the route keeps the default,
	// projectSettings: untrusted.
	ProjectSettingsUntrustedRoute ProjectSettingsReason = "route_untrusted"
	// ProjectSettingsIssue: an issue's workdir holds the repository's own
	// branch (its base, or the issue's branch on it), under a route that
	// trusts project settings.
	ProjectSettingsIssue ProjectSettingsReason = "issue"
	// ProjectSettingsHeadUnknown: no pull request payload named the
	// head's repository yet (an item made by a comment).
	ProjectSettingsHeadUnknown ProjectSettingsReason = "head_unknown"
	// ProjectSettingsFork: the head is in another repository, a fork.
	ProjectSettingsFork ProjectSettingsReason = "fork_head"
	// ProjectSettingsAuthor: the pull request was opened by a login that
	// is not in authorizedUsers (or by none loopd knows).
	ProjectSettingsAuthor ProjectSettingsReason = "author_unauthorized"
	// ProjectSettingsPusherUnknown: no opened or synchronize payload named
	// who pushed the recorded head (it moved with a payload of another
	// action, or that delivery was lost).
	ProjectSettingsPusherUnknown ProjectSettingsReason = "head_pusher_unknown"
	// ProjectSettingsPusher: the head was pushed by a login that is not in
	// authorizedUsers, or by loopd's own login (an agent's push).
	ProjectSettingsPusher ProjectSettingsReason = "pusher_unauthorized"
	// ProjectSettingsHead: a same-repository head, opened and pushed by
	// authorized logins, under a route that trusts project settings.
	ProjectSettingsHead ProjectSettingsReason = "same_repository_head"
)

// ProjectSettingsOf decides whether r's next spawn gets its workdir's
// project settings under p (its route's projectSettings, the
// authorizedUsers, loopd's own login), from what the record holds of the
// item: an issue gets them when its route trusts them; a pull request only
// when, besides, its head is a branch of the item's own repository
// (Spec.HeadRepo, and a head branch recorded, Spec.HeadRef), it was opened
// by an authorized login (Spec.Author), and the recorded head commit was
// pushed by one (Spec.HeadPusher), never loopd's own. A fork's head, or a
// pull request opened or pushed by anyone else, never gets them, whatever
// the route says. It is the one home of this rule: the planner puts it in
// every spawn (actions.Spawn.ProjectSettings) and loopd describe shows it.
func ProjectSettingsOf(r desired.Record, p Policy) ProjectSettings {
	route, ok := p.route(r.Key)
	no := func(why ProjectSettingsReason) ProjectSettings { return ProjectSettings{Reason: why} }
	switch {
	case !ok:
		return no(ProjectSettingsNoRoute)
	case !route.TrustsProjectSettings():
		return no(ProjectSettingsUntrustedRoute)
	case r.Spec.Kind != desired.KindPullRequest:
		return ProjectSettings{Trusted: true, Reason: ProjectSettingsIssue}
	case r.Spec.HeadRepo == "":
		return no(ProjectSettingsHeadUnknown)
	case r.Spec.Fork(r.Key) || r.Spec.HeadRef == "":
		return no(ProjectSettingsFork)
	case !p.authorized(r.Spec.Author):
		return no(ProjectSettingsAuthor)
	case r.Spec.HeadPusher == "":
		return no(ProjectSettingsPusherUnknown)
	case !p.authorized(r.Spec.HeadPusher):
		return no(ProjectSettingsPusher)
	}
	return ProjectSettings{Trusted: true, Reason: ProjectSettingsHead}
}

// authorized reports whether login is one of p's AuthorizedUsers and not
// loopd's own login (BotLogin).
func (p Policy) authorized(login string) bool {
	return p.AuthorizedUsers.Has(login) && (p.BotLogin == "" || !strings.EqualFold(login, p.BotLogin))
}
