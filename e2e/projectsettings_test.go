package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/harness/harnesstest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// plantedRemote is a bare remote whose same-repository pull request branch
// and fork pull request head (refs/pull/<ForkPR>/head) each hold every
// setting of a hostile workdir (harnesstest.Plant): a project SessionStart
// hook, a local one and an approved .mcp.json server for Claude Code, and
// Codex's and Gemini's, each writing a marker into the directory of its
// pull request (same, fork).
type plantedRemote struct {
	*workspacetest.Remote
	same, fork string
}

func newPlantedRemote(t *testing.T) plantedRemote {
	t.Helper()
	p := plantedRemote{Remote: workspacetest.NewRemote(t, workspacetest.Options{}), same: t.TempDir(), fork: t.TempDir()}
	work := t.TempDir()
	workspacetest.Git(t, work, "clone", "--quiet", p.Dir, ".")
	plant := func(markers string) string {
		harnesstest.Plant(t, work, markers)
		// Forced: the user's global excludes may name settings.local.json
		// (the real CLI adds it there).
		workspacetest.Git(t, work, "add", "--force", "-A")
		workspacetest.Git(t, work, "commit", "--quiet", "-m", "settings of our own")
		return workspacetest.Git(t, work, "rev-parse", "HEAD")
	}
	workspacetest.Git(t, work, "checkout", "--quiet", p.PRBranch)
	p.PRHead = plant(p.same)
	workspacetest.Git(t, work, "push", "--quiet", "origin", p.PRBranch)
	ref := "refs/pull/" + strconv.Itoa(p.ForkPR) + "/head"
	workspacetest.Git(t, work, "fetch", "--quiet", "origin", ref)
	workspacetest.Git(t, work, "checkout", "--quiet", "--detach", "FETCH_HEAD")
	p.ForkHead = plant(p.fork)
	workspacetest.Git(t, work, "push", "--quiet", "origin", "HEAD:"+ref)
	return p
}

// projectSettingsEnv routes Codertocat's repositories to worktrees of p
// with projectSettings: trusted, under runner ("" for tmux), and starts
// the daemon. The same-repository pull request is #5, opened by an
// authorized login; the fork's is p.ForkPR, opened by a stranger, whose
// agent an authorized comment starts.
func projectSettingsEnv(t *testing.T, e *env, p plantedRemote, runner string) (same, fork desired.Key) {
	t.Helper()
	e.withCheckout(t, p.URL, func(_, route map[string]any) {
		route["projectSettings"] = "trusted"
		if runner != "" {
			route["runner"], route["dispatchTimeoutSeconds"] = runner, 600
		}
	})
	if runner != "" {
		t.Cleanup(func() { e.endRunGroups(t) })
	}
	e.start(t)
	same = desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 5}
	fork = desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: p.ForkPR}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, k := range []desired.Key{same, fork} {
			screen, _ := e.tmux(t, "capture-pane", "-p", "-S", "-", "-t", paneTarget(k))
			t.Logf("%s's pane:\n%s", k, screen)
		}
		t.Logf("markers written: same %v, fork %v", harnesstest.Written(p.same, harnesstest.Claude...), harnesstest.Written(p.fork, harnesstest.Claude...))
	})
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(5), func(m map[string]any) {
		head := m["pull_request"].(map[string]any)["head"].(map[string]any)
		head["ref"], head["sha"] = p.PRBranch, p.PRHead
	}))
	// A stranger's fork: its opening reaches no agent, and records nothing.
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(p.ForkPR), withSender("someone"), func(m map[string]any) {
		pr := m["pull_request"].(map[string]any)
		pr["user"].(map[string]any)["login"] = "someone"
		head := pr["head"].(map[string]any)
		head["ref"], head["sha"] = "master", p.ForkHead
		head["repo"].(map[string]any)["full_name"] = "someone/Hello-World"
		head["repo"].(map[string]any)["owner"].(map[string]any)["login"] = "someone"
	}))
	e.deliver(t, commentFixture, all(withNumber(p.ForkPR), withComment("Can you review this? "+uuid.NewString()), func(m map[string]any) {
		m["issue"].(map[string]any)["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/" + strconv.Itoa(p.ForkPR)}
	}))
	return same, fork
}

// forkRunsNoneOfItsSettings checks the tmux runner's end state: the fork's
// agent runs in the fork's head, started with the workdir's settings off,
// its conversation confirmed by loopd's own SessionStart report; the
// same-repository pull request's agent, trusted, ran its settings (so the
// files do run, and had run by then); the fork's ran none.
func forkRunsNoneOfItsSettings(t *testing.T, e *env, p plantedRemote, same, fork desired.Key) {
	t.Helper()
	// Where the workdir is a git worktree, the real CLI asks whether to
	// use the project's MCP server before it runs any of the settings
	// (workspace_trust), as it asks every user: the operator answers it
	// once. In a clone it does not ask.
	answered := false
	e.waitFor(t, func() bool {
		if r, ok := e.record(t, same); ok && r.Status.Blocked == harness.BlockWorkspaceTrust && !answered {
			e.sendKeys(t, same, "Enter")
			answered = true
		}
		return len(harnesstest.Written(p.same, harnesstest.Claude...)) == len(harnesstest.Claude)
	}, waitLong, "the trusted same-repository pull request never ran its settings")
	r := e.waitPhase(t, fork, desired.PhaseRunning, waitLong)
	id := r.Status.HarnessSessionID
	e.waitFor(t, func() bool {
		return slices.ContainsFunc(e.eventsNamed(t, journal.SessionReported, fork), func(ev journal.Event) bool {
			return ev.Attrs["harness_session_id"] == id && ev.Attrs["source"] == "startup"
		})
	}, waitLong, "loopd's own SessionStart hook never reported the fork's spawn")
	e.waitFor(t, func() bool { return len(e.userTurns(t, fork, id)) > 0 }, waitLong, "the comment never reached the fork's agent")
	assert.Equal(t, p.ForkHead, gitIn(t, r.Workdir(), "rev-parse", "HEAD"), "the fork's agent works in the fork's head")
	assert.Empty(t, harnesstest.Written(p.fork, harnesstest.Claude...), "the fork's settings ran")
	assert.Contains(t, e.paneStartCommand(t, fork), "--setting-sources user --strict-mcp-config")
	assert.NotContains(t, e.paneStartCommand(t, same), "--setting-sources")

	out := e.mustRun(t, "describe", fork.String())
	assert.Regexp(t, `Project settings:\s+off \(head_unknown\)`, out)
	out = e.mustRun(t, "describe", same.String())
	assert.Regexp(t, `Project settings:\s+trusted \(same_repository_head\)`, out)
	assert.Regexp(t, `Head:\s+`+p.PRHead+` pushed by Codertocat`, out)
}

// forkRunNoneOfItsSettings checks the process runner's end state: each
// pull request's event was one headless run; the trusted same-repository
// one ran its settings, the fork's ran none and its event reached the
// conversation.
func forkRunNoneOfItsSettings(t *testing.T, e *env, p plantedRemote, same, fork desired.Key) {
	t.Helper()
	e.waitFor(t, func() bool { return len(harnesstest.Written(p.same, harnesstest.Claude...)) == len(harnesstest.Claude) }, waitLong,
		"the trusted same-repository pull request's run never ran its settings")
	e.waitFor(t, func() bool {
		r, ok := e.record(t, fork)
		return ok && r.Status.HarnessSessionID != "" && len(e.userTurns(t, fork, r.Status.HarnessSessionID)) > 0 &&
			len(e.eventsNamed(t, journal.DispatchDelivered, fork)) > 0
	}, waitLong, "the fork's event never reached its conversation")
	assert.Empty(t, harnesstest.Written(p.fork, harnesstest.Claude...), "the fork's run ran its settings")
	starting := e.daemonLines(t, journal.SessionStarting)
	logged := func(k desired.Key) []string {
		var out []string
		for _, l := range starting {
			if strings.Contains(l, "work_item="+k.String()+" ") {
				out = append(out, logField(l, "project_settings"))
			}
		}
		return out
	}
	forkProject, sameProject := logged(fork), logged(same)
	require.NotEmpty(t, forkProject)
	assert.NotContains(t, forkProject, "true")
	assert.Contains(t, forkProject, "false")
	assert.Contains(t, sameProject, "true", "the trusted pull request's run had its settings")
}

// TestForkPullRequestRunsNoneOfItsSettings: the issue's attack. A
// stranger's fork pull request holds a project hook, a local hook and an
// MCP server; an authorized comment starts its agent under a route that
// trusts project settings; none runs, and loopd's own hook still confirms
// the spawn, while a same-repository pull request of an authorized login
// does run its own. In tmux and as runs of the process runner, with the
// fake CLI and with the real one (LOOPD_REAL_CLAUDE, offline).
func TestForkPullRequestRunsNoneOfItsSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		runner string
		real   bool
		check  func(t *testing.T, e *env, p plantedRemote, same, fork desired.Key)
	}{
		{"tmux", "", false, forkRunsNoneOfItsSettings},
		{"process", "process", false, forkRunNoneOfItsSettings},
		{"real_tmux", "", true, forkRunsNoneOfItsSettings},
		{"real_process", "process", true, forkRunNoneOfItsSettings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts envOpts
			if tc.real {
				// A HOME of its own: the real CLI adds a settings.local.json
				// it reads to the user's global git excludes.
				opts = envOpts{Harness: realClaude(t), Policy: map[string]any{"resumeProbeSeconds": 2},
					HarnessEnv: map[string]string{"HOME": t.TempDir()}}
			}
			p := newPlantedRemote(t)
			// The settings run inside the agents' sandbox: it shows them
			// where their markers go.
			opts.Binds = []string{p.same, p.fork}
			e := newEnv(t, opts)
			same, fork := projectSettingsEnv(t, e, p, tc.runner)
			tc.check(t, e, p, same, fork)
		})
	}
}
