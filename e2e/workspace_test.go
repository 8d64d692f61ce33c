package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// withCheckout routes every repository of Codertocat (an owner wildcard)
// to the harness with workdirs that are worktrees of url, the route's
// checkout edited by edit, and writes the config.
func (e *env) withCheckout(t *testing.T, url string, edit func(checkout, route map[string]any)) {
	t.Helper()
	checkout := map[string]any{"url": url}
	route := map[string]any{
		"harness":  "claude-code",
		"workdir":  filepath.Join(e.workRoot, "{{.Owner}}", "{{.Repo}}", "{{.Number}}"),
		"checkout": checkout,
	}
	if edit != nil {
		edit(checkout, route)
	}
	e.ghWebhook()["routing"].(map[string]any)["repos"] = map[string]any{"Codertocat/*": route}
	e.writeConfig(t)
}

// gitIn runs git in dir and returns its trimmed output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return workspacetest.Git(t, dir, args...)
}

// mirrors lists the bare mirrors in the state dir.
func (e *env) mirrors(t *testing.T) []string {
	t.Helper()
	out, err := filepath.Glob(filepath.Join(e.stateDir, "mirrors", "*.git"))
	require.NoError(t, err)
	return out
}

// TestWorkspaceIssueGetsAClone: an issue's agent starts in a clone of the
// routed repository on loopd/issue-<n> at the base's head, that borrows
// the objects of the repository's mirror, in the physical path when the
// workdir template goes through a symlink; a second issue of the
// repository shares the mirror and gets a clone of its own; an agent
// killed with SIGKILL resumes in the same clone, and the file it left
// there is still there.
func TestWorkspaceIssueGetsAClone(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	link := filepath.Join(e.dir, "link")
	require.NoError(t, os.Symlink(e.workRoot, link))
	e.withCheckout(t, r.URL, func(_, route map[string]any) {
		route["workdir"] = filepath.Join(link, "{{.Owner}}", "{{.Repo}}", "{{.Number}}")
	})

	rec := e.boot(t, "issues.opened.1.json", nil)
	dir := e.workdir(keyIssue)
	assert.Equal(t, dir, rec.Status.Workdir, "the physical path is pinned, not the symlink")
	assert.Equal(t, dir, e.paneField(t, keyIssue, "#{pane_current_path}"))
	assert.Equal(t, "loopd/issue-1", gitIn(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, r.DefaultHead, gitIn(t, dir, "rev-parse", "HEAD"))
	prepared := e.waitEvent(t, journal.WorkspacePrepared, keyIssue, 1, waitShort)
	assert.Equal(t, "loopd/issue-1", prepared[0].Attrs["branch"])

	second := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}
	e.deliver(t, "issues.opened.1.json", withNumber(3))
	e.waitPhase(t, second, desired.PhaseRunning, waitLong)
	assert.Equal(t, "loopd/issue-3", gitIn(t, e.workdir(second), "rev-parse", "--abbrev-ref", "HEAD"))
	require.Len(t, e.mirrors(t), 1, "two items of one repository share one mirror")
	mirror := e.mirrors(t)[0]
	for _, d := range []string{dir, e.workdir(second)} {
		assert.DirExists(t, filepath.Join(d, ".git"), "a clone of its own")
		assert.Equal(t, filepath.Join(mirror, "objects")+"\n", readFile(t, filepath.Join(d, ".git", "objects", "info", "alternates")))
		assert.Equal(t, r.URL, gitIn(t, d, "remote", "get-url", "origin"))
	}
	assert.NotContains(t, gitIn(t, mirror, "worktree", "list", "--porcelain"), e.workRoot, "no worktree of the mirror")
	assert.Empty(t, gitIn(t, mirror, "for-each-ref", "refs/heads"), "the items' branches are their clones'")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent-notes.txt"), []byte("work in progress\n"), 0o644))
	e.killPane(t, keyIssue)
	e.waitFor(t, func() bool { return len(e.starts(t)) >= 3 }, waitLong, "the killed agent was not respawned")
	back := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnMode == desired.SpawnResume
	}, waitLong, "the agent did not resume")
	assert.Equal(t, rec.Status.HarnessSessionID, back.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, dir, e.paneField(t, keyIssue, "#{pane_current_path}"), "resumed in the same clone")
	b, err := os.ReadFile(filepath.Join(dir, "agent-notes.txt"))
	require.NoError(t, err)
	assert.Equal(t, "work in progress\n", string(b))
	assert.Equal(t, "?? agent-notes.txt", gitIn(t, dir, "status", "--porcelain"))
}

// TestWorkspacePullRequestChecksOutItsHead: a pull request from the same
// repository gets its head branch, tracking the remote one; a fork's gets
// refs/pull/<n>/head as loopd/pr-<n>.
func TestWorkspacePullRequestChecksOutItsHead(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	e.start(t)

	same := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 5}
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(5), func(m map[string]any) {
		m["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = r.PRBranch
	}))
	fork := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: r.ForkPR}
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(r.ForkPR), func(m map[string]any) {
		head := m["pull_request"].(map[string]any)["head"].(map[string]any)
		head["ref"] = "master"
		head["repo"].(map[string]any)["full_name"] = "someone/Hello-World"
	}))
	e.waitPhase(t, same, desired.PhaseRunning, waitLong)
	e.waitPhase(t, fork, desired.PhaseRunning, waitLong)

	assert.Equal(t, r.PRBranch, gitIn(t, e.workdir(same), "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, r.PRHead, gitIn(t, e.workdir(same), "rev-parse", "HEAD"))
	assert.Equal(t, "origin/"+r.PRBranch, gitIn(t, e.workdir(same), "rev-parse", "--abbrev-ref", "@{upstream}"))
	assert.Equal(t, "loopd/pr-2", gitIn(t, e.workdir(fork), "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, r.ForkHead, gitIn(t, e.workdir(fork), "rev-parse", "HEAD"))
}

// TestWorkspacePullRequestFromTheIssueBranch is the agent's own pull
// request: the issue's agent pushed loopd/issue-1 and opened a pull
// request from it. The pull request's agent starts in a clone of its own
// at the pushed head, on that branch, whose plain `git push` updates it;
// the issue's clone stays where it is.
func TestWorkspacePullRequestFromTheIssueBranch(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	e.boot(t, "issues.opened.1.json", nil)
	issueDir := e.workdir(keyIssue)
	require.NoError(t, os.WriteFile(filepath.Join(issueDir, "fix.txt"), []byte("fix\n"), 0o644))
	gitIn(t, issueDir, "add", "fix.txt")
	gitIn(t, issueDir, "commit", "--quiet", "-m", "fix")
	gitIn(t, issueDir, "push", "--quiet", "origin", "loopd/issue-1")
	head := gitIn(t, issueDir, "rev-parse", "HEAD")

	pr := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 5}
	e.deliver(t, "pull_request.opened.1.json", all(withNumber(5), func(m map[string]any) {
		m["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = "loopd/issue-1"
	}))
	e.waitPhase(t, pr, desired.PhaseRunning, waitLong)
	prDir := e.workdir(pr)
	assert.Equal(t, "loopd/issue-1", gitIn(t, prDir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, head, gitIn(t, prDir, "rev-parse", "HEAD"))
	assert.Equal(t, "origin/loopd/issue-1", gitIn(t, prDir, "rev-parse", "--abbrev-ref", "@{upstream}"))
	assert.Equal(t, "loopd/issue-1", gitIn(t, issueDir, "rev-parse", "--abbrev-ref", "HEAD"), "the issue's clone is not moved")
	assert.Empty(t, e.eventsNamed(t, journal.WorkspaceFailed, pr))

	gitIn(t, prDir, "commit", "--quiet", "--allow-empty", "-m", "review fix")
	gitIn(t, prDir, "push", "--quiet")
	assert.Equal(t, gitIn(t, prDir, "rev-parse", "HEAD"), gitIn(t, r.Dir, "rev-parse", "refs/heads/loopd/issue-1"),
		"a plain git push from the pull request's clone updates its head branch")
}

// TestWorkspaceStalledRemoteHoldsNoOtherItem: an issue's remote stalls
// (its ssh never answers). Its worktree is made outside the pass: the item
// is Preparing in loopd get and the dry run waits on it, while another
// item is spawned and gets its next event delivered. SIGTERM stops the
// daemon at once, killing the stalled git: the preparation is recorded as
// interrupted, no failure counted, and the next start prepares it again
// at once, with the route corrected.
func TestWorkspaceStalledRemoteHoldsNoOtherItem(t *testing.T) {
	t.Parallel()
	good := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	plain := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"]
	e.withCheckout(t, "ssh://git@stalled.example/{{.Owner}}/{{.Repo}}.git", nil)
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"] = plain
	e.writeConfig(t)
	pidFile, ssh := filepath.Join(e.dir, "ssh.pid"), filepath.Join(e.dir, "ssh")
	require.NoError(t, os.WriteFile(ssh, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 600\n"), 0o755))
	e.daemonEnv = []string{"GIT_SSH_COMMAND=" + ssh}
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)
	pid := e.waitPIDFile(t, pidFile, "git never reached the remote")
	e.waitPhase(t, keyIssue, desired.PhasePreparing, waitShort)
	assert.Regexp(t, `Codertocat/Hello-World#1 .* Preparing .* first_spawn preparing_since=`, e.mustRun(t, "get"))
	assert.Contains(t, e.mustRun(t, "reconcile", "--once", "--dry-run"), "wait work_item=Codertocat/Hello-World#1 reason=workspace_preparing")

	other := desired.Key{Owner: "octo-org", Repo: "plain", Number: 9}
	e.ingestComment(t, other, "start")
	e.waitPhase(t, other, desired.PhaseRunning, waitLong)
	next := e.ingestComment(t, other, "and then this")
	e.waitFor(t, func() bool {
		for _, ev := range e.eventsNamed(t, journal.DispatchDelivered, other) {
			if ev.Attrs["delivery"] == next {
				return true
			}
		}
		return false
	}, waitLong, "the other item's next event was not delivered")
	assert.True(t, proc.Alive(pid), "the stalled git still runs")
	assert.Equal(t, desired.PhasePreparing, e.mustRecord(t, keyIssue).Status.Phase, "the other item went first")

	e.stop(t)
	e.waitFor(t, func() bool { return !proc.Alive(pid) }, waitShort, "the stalled git outlived the daemon")
	rec := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseIdle, rec.Status.Phase)
	assert.Equal(t, "workspace_interrupted", rec.Status.Reason)
	assert.Zero(t, rec.Status.Failures, "a stop is no failure of the workspace")
	assert.Len(t, e.eventsNamed(t, journal.WorkspaceInterrupted, keyIssue), 1)
	assert.Empty(t, e.eventsNamed(t, journal.WorkspaceFailed, keyIssue))

	e.withCheckout(t, good.URL, nil)
	e.daemonEnv = nil
	e.start(t)
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	assert.Equal(t, "loopd/issue-1", gitIn(t, e.workdir(keyIssue), "rev-parse", "--abbrev-ref", "HEAD"))
}

// TestWorkspaceReconcileOnceFinishesItsPreparation: a cron run's worktree
// is made outside its pass too, and the run waits for it: the dry run
// plans it and makes nothing; one `reconcile --once` makes the worktree
// and starts the agent in it.
func TestWorkspaceReconcileOnceFinishesItsPreparation(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	e.ingestComment(t, keyIssue, "start")
	assert.Contains(t, e.mustRun(t, "reconcile", "--once", "--dry-run"), "prepare_workspace work_item=Codertocat/Hello-World#1")
	assert.NoDirExists(t, e.workdir(keyIssue), "the dry run makes nothing")

	e.mustRun(t, "reconcile", "--once")
	rec := e.mustRecord(t, keyIssue)
	assert.Contains(t, []desired.Phase{desired.PhaseSpawning, desired.PhaseRunning}, rec.Status.Phase)
	assert.Equal(t, "loopd/issue-1", gitIn(t, e.workdir(keyIssue), "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Len(t, e.eventsNamed(t, journal.WorkspacePrepared, keyIssue), 1)
	e.waitFor(t, func() bool { return len(e.starts(t)) == 1 }, waitShort, "the agent was not started")
}

// TestWorkspaceMissingRepositoryNeedsAttention: git cannot find the
// repository, a permanent failure: the webhook still got its 2xx, the item
// records workspace.failed with git's command, exit status and stderr, and
// goes to NeedsAttention with the reason in loopd get; its event stays
// pending and no agent starts.
func TestWorkspaceMissingRepositoryNeedsAttention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.withCheckout(t, "file://"+filepath.Join(e.dir, "no-such-repo.git"), nil)
	e.start(t)
	delivery := uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, "issues.opened.1.json", delivery, nil))

	rec := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "workspace_failed", rec.Status.Reason)
	require.Len(t, rec.Pending, 1)
	assert.Equal(t, delivery, rec.Pending[0].ID, "the event stays pending")
	failed := e.waitEvent(t, journal.WorkspaceFailed, keyIssue, 1, waitShort)
	a := failed[0].Attrs
	assert.Equal(t, "permanent", a["class"])
	assert.Equal(t, "git fetch --quiet --prune origin", a["command"])
	assert.Equal(t, "128", a["exit_status"])
	assert.Contains(t, a["stderr"], "does not appear to be a git repository")
	get := e.mustRun(t, "get")
	assert.Contains(t, get, "NeedsAttention")
	assert.Contains(t, get, "workspace_failed workspace_error=")
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.WorkspaceFailed, keyIssue), 1, "journaled once, not every pass")
	assert.Empty(t, e.starts(t), "no agent started")
}

// TestWorkspaceConflictIsLeftUntouched: a workdir that exists with files
// and is not a worktree of the repository is never touched: the item needs
// attention (workspace_conflict), the journal names the path, and the
// event stays pending.
func TestWorkspaceConflictIsLeftUntouched(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	dir := e.workdir(keyIssue)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("mine\n"), 0o600))
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	rec := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "workspace_conflict", rec.Status.Reason)
	assert.Len(t, rec.Pending, 1, "the event stays pending")
	ev := e.waitEvent(t, journal.SessionNeedsAttention, keyIssue, 1, waitShort)
	assert.Equal(t, dir, ev[0].Attrs["cwd"])
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing added to the directory")
	b, _ := os.ReadFile(filepath.Join(dir, "precious.txt"))
	assert.Equal(t, "mine\n", string(b))
	assert.Empty(t, e.starts(t))
}

// TestWorkspaceDaemonKilledDuringCloneIsRepaired kills the daemon, and the
// git it ran, while the clone's files are checked out (a smudge filter
// that waits, as a large checkout would): nothing is at the workdir's
// path, the half-made clone is beside it. The next daemon removes that,
// makes the clone and starts the agent there.
func TestWorkspaceDaemonKilledDuringCloneIsRepaired(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{Filter: "slow"})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	pidFile := filepath.Join(e.dir, "filter.pid")
	gitConfig := filepath.Join(e.dir, "gitconfig")
	require.NoError(t, os.WriteFile(gitConfig, []byte("[filter \"slow\"]\n\tsmudge = \"echo $$ > "+pidFile+"; sleep 60; cat\"\n"), 0o600))
	e.daemonEnv = []string{"GIT_CONFIG_GLOBAL=" + gitConfig}
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	pid := e.waitPIDFile(t, pidFile, "the checkout never started")
	pgid, err := syscall.Getpgid(pid)
	require.NoError(t, err)
	e.kill9(t)
	// The machine goes down with it: git and its filter die too.
	require.NoError(t, syscall.Kill(-pgid, syscall.SIGKILL))
	e.waitFor(t, func() bool { return !proc.Alive(pid) }, waitShort, "the filter did not die")

	dir := e.workdir(keyIssue)
	assert.NoDirExists(t, dir, "half a clone at the workdir's path")
	left, err := filepath.Glob(filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".loopd-new-*"))
	require.NoError(t, err)
	require.Len(t, left, 1, "the half-made clone beside the workdir")

	e.daemonEnv = nil // no filter now: a checkout goes through
	e.start(t)
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	prepared := e.waitEvent(t, journal.WorkspacePrepared, keyIssue, 1, waitShort)
	assert.Equal(t, "true", prepared[0].Attrs["repaired"])
	b, err := os.ReadFile(filepath.Join(dir, "README"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(b))
	assert.Equal(t, "loopd/issue-1", gitIn(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.NoDirExists(t, left[0])
}

// TestWorkspaceVanishedCloneIsMadeAgainAndResumed: the clone of an item
// whose agent ran is deleted, and the agent dies. loopd makes the clone
// again at the same path, on the same branch (prepare_workspace
// reason=workspace_missing), and resumes the same conversation there; a
// comment sent meanwhile reaches it. Before, the item stayed BackingOff
// workspace_missing for good, the comment pending.
func TestWorkspaceVanishedCloneIsMadeAgainAndResumed(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	id := e.bootRunning(t)
	dir := e.workdir(keyIssue)
	require.NoError(t, os.RemoveAll(dir))
	e.killPane(t, keyIssue)
	marker, _ := e.comment(t)

	e.waitTurn(t, keyIssue, id, marker, waitLong, "the comment never reached the resumed conversation")
	back := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	assert.Equal(t, id, back.Status.HarnessSessionID, "the same conversation")
	assert.Equal(t, desired.SpawnResume, back.Status.SpawnMode)
	assert.Equal(t, dir, back.Status.Workdir)
	assert.Equal(t, dir, e.paneField(t, keyIssue, "#{pane_current_path}"), "resumed at the same path")
	assert.Equal(t, "loopd/issue-1", gitIn(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	prepared := e.eventsNamed(t, journal.WorkspacePrepared, keyIssue)
	require.Len(t, prepared, 2, "made, then made again")
	assert.Equal(t, "workspace_missing", prepared[1].Attrs["reason"])
	assert.Len(t, e.starts(t), 2, "one spawn, one resume")
}

// TestWorkspaceRemoveOnClose: with removeOnClose a closed item's clean
// worktree is removed, and a dirty one is kept with the reason journaled
// (workspace.kept); reopened, the kept one is used again, the removed one
// is made again on its branch.
func TestWorkspaceRemoveOnClose(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := newEnv(t, envOpts{})
	e.withCheckout(t, r.URL, func(c, _ map[string]any) { c["removeOnClose"] = true })
	e.start(t)
	clean, dirty := keyIssue, desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 4}
	e.deliver(t, "issues.opened.1.json", nil)
	e.deliver(t, "issues.opened.1.json", withNumber(4))
	e.waitPhase(t, clean, desired.PhaseRunning, waitLong)
	e.waitPhase(t, dirty, desired.PhaseRunning, waitLong)
	require.NoError(t, os.WriteFile(filepath.Join(e.workdir(dirty), "draft.txt"), []byte("unfinished\n"), 0o644))

	closed := func(n int) func(map[string]any) {
		return all(withNumber(n), func(m map[string]any) { m["action"] = "closed" }, withIssueState("closed", "2030-01-01T00:00:00Z"))
	}
	e.deliver(t, "issues.opened.1.json", closed(1))
	e.deliver(t, "issues.opened.1.json", closed(4))
	e.waitEvent(t, journal.WorkspaceRemoved, clean, 1, waitLong)
	kept := e.waitEvent(t, journal.WorkspaceKept, dirty, 1, waitLong)
	assert.Equal(t, "untracked_files", kept[0].Attrs["reason"])
	assert.NoDirExists(t, e.workdir(clean))
	assert.FileExists(t, filepath.Join(e.workdir(dirty), "draft.txt"))
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.WorkspaceKept, dirty), 1, "kept once")

	reopened := func(n int) func(map[string]any) {
		return all(withNumber(n), func(m map[string]any) { m["action"] = "reopened" }, withIssueState("open", "2030-01-02T00:00:00Z"))
	}
	e.deliver(t, "issues.opened.1.json", reopened(4))
	e.deliver(t, "issues.opened.1.json", reopened(1))
	e.waitRecord(t, dirty, func(r desired.Record) bool { return r.Status.Phase == desired.PhaseRunning && !r.Spec.Closed }, waitLong, "not reopened")
	e.waitRecord(t, clean, func(r desired.Record) bool { return r.Status.Phase == desired.PhaseRunning && !r.Spec.Closed }, waitLong, "not reopened")
	assert.FileExists(t, filepath.Join(e.workdir(dirty), "draft.txt"), "the kept worktree is used again")
	assert.Equal(t, "loopd/issue-1", gitIn(t, e.workdir(clean), "rev-parse", "--abbrev-ref", "HEAD"), "the removed worktree is made again")
}

// TestWorkspaceURLCredentialsNeverShown: a checkout URL with a token in it
// fails (nothing listens), transiently, with backoff, until the budget is
// spent; the token is in no journal row, log line, `loopd get` or dry run,
// nor in the mirror's config.
func TestWorkspaceURLCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const token = "ghs_e2eS3cretT0ken"
	e := newEnv(t, envOpts{Policy: map[string]any{"restartBudget": 2}})
	e.withCheckout(t, "https://x-access-token:"+token+"@"+freeAddr(t)+"/{{.Owner}}/{{.Repo}}.git", nil)
	delivery := e.ingestComment(t, keyIssue, "start")
	dry := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, dry, "url=https://***@")
	e.start(t)
	rec := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, delivery, rec.Pending[0].ID)
	assert.Equal(t, 3, rec.Status.Failures, "the first try and two retries within the budget")
	assert.Equal(t, "workspace_failed", rec.Status.Reason)
	// Identical failures within a minute are folded into one row
	// (journal.Limiter): the first is written at once.
	failed := e.eventsNamed(t, journal.WorkspaceFailed, keyIssue)
	require.NotEmpty(t, failed)
	assert.Equal(t, "transient", failed[0].Attrs["class"])
	assert.NotEmpty(t, failed[0].Attrs["next_attempt"])

	for what, text := range map[string]string{
		"events": e.mustRun(t, "events"), "get": e.mustRun(t, "get"), "dry run": dry,
		"status": rec.Status.WorkspaceError, "log": readFile(t, e.daemonLog),
	} {
		assert.NotContains(t, text, token, "%s shows the token", what)
	}
	for _, m := range e.mirrors(t) {
		assert.NotContains(t, readFile(t, filepath.Join(m, "config")), token, "the mirror stores the token")
	}
}

// TestPlainWorkdirThatCannotBeMadeNeedsAttention: a plain workdir under a
// directory loopd may not write is a permanent failure, journaled once
// with its reason and shown by loopd get, not a dispatch.failed every
// second; correcting the route and releasing the item starts it in the
// corrected workdir, since none was pinned yet.
func TestPlainWorkdirThatCannotBeMadeNeedsAttention(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root may create any directory")
	}
	e := newEnv(t, envOpts{})
	locked := filepath.Join(e.dir, "srv")
	require.NoError(t, os.MkdirAll(locked, 0o555))
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	repos := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)
	repos["*"].(map[string]any)["workdir"] = filepath.Join(locked, "agents", "{{.Owner}}", "{{.Repo}}", "{{.Number}}")
	e.writeConfig(t)
	e.start(t)
	e.deliver(t, "issues.opened.1.json", nil)

	rec := e.waitPhase(t, keyIssue, desired.PhaseNeedsAttention, waitLong)
	assert.Equal(t, "workspace_failed", rec.Status.Reason)
	assert.Contains(t, rec.Status.WorkspaceError, "permission denied")
	e.settle(t)
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.WorkspaceFailed, keyIssue), 1, "journaled once")
	assert.Empty(t, e.eventsNamed(t, journal.DispatchFailed, keyIssue))
	assert.Contains(t, e.mustRun(t, "get"), "workspace_failed")

	repos["*"].(map[string]any)["workdir"] = filepath.Join(e.workRoot, "{{.Owner}}", "{{.Repo}}", "{{.Number}}")
	e.writeConfig(t)
	e.reload(t)
	e.mustRun(t, "release", keyIssue.String())
	rec = e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	assert.Equal(t, e.workdir(keyIssue), rec.Status.Workdir, "the corrected route applies")
	assert.Equal(t, e.workdir(keyIssue), e.paneField(t, keyIssue, "#{pane_current_path}"))
}

// TestWorkdirPinnedAfterFirstSpawn: once the agent ran in a workdir, a
// route that renders another one is shown by loopd get, journaled once at
// the next spawn (workspace.pinned), and not applied: the restart resumes
// in the pinned one.
func TestWorkdirPinnedAfterFirstSpawn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	rec := e.boot(t, "issues.opened.1.json", nil)
	repos := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)
	moved := filepath.Join(e.dir, "moved", "{{.Number}}")
	repos["*"].(map[string]any)["workdir"] = moved
	e.writeConfig(t)
	e.reload(t)
	// describe gives the reason whole (get's list cuts a long one).
	assert.Contains(t, e.mustRun(t, "describe", keyIssue.String()), "workdir_pinned="+e.workdir(keyIssue)+" config_workdir="+filepath.Join(e.dir, "moved", "1"))

	e.killPane(t, keyIssue)
	ev := e.waitEvent(t, journal.WorkspacePinned, keyIssue, 1, waitLong)
	assert.Equal(t, e.workdir(keyIssue), ev[0].Attrs["cwd"])
	assert.Equal(t, filepath.Join(e.dir, "moved", "1"), ev[0].Attrs["config_cwd"])
	back := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnMode == desired.SpawnResume
	}, waitLong, "the agent did not resume")
	assert.Equal(t, rec.Status.HarnessSessionID, back.Status.HarnessSessionID)
	assert.Equal(t, e.workdir(keyIssue), e.paneField(t, keyIssue, "#{pane_current_path}"))
	assert.NoDirExists(t, filepath.Join(e.dir, "moved"))
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.WorkspacePinned, keyIssue), 1, "reported once")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// waitPIDFile waits for a process to write its pid into file, and returns
// it; msg says what did not happen.
func (e *env) waitPIDFile(t *testing.T, file, msg string) int {
	t.Helper()
	var pid int
	e.waitFor(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, waitLong, msg)
	return pid
}
