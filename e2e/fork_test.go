package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// withForkHead makes the payload's pull request #number a fork's: its head
// is branch ref of someone/Hello-World at sha, which lets maintainers push
// (maintainer_can_modify: canModify).
func withForkHead(number int, ref, sha string, canModify bool) func(map[string]any) {
	return all(withNumber(number), func(m map[string]any) {
		pr := m["pull_request"].(map[string]any)
		pr["maintainer_can_modify"] = canModify
		head := pr["head"].(map[string]any)
		head["ref"], head["sha"] = ref, sha
		head["repo"].(map[string]any)["full_name"] = "someone/Hello-World"
		if _, ok := m["after"]; ok {
			m["after"] = sha
		}
	})
}

// TestForkPullRequestPushesToItsHead: a fork's pull request that lets
// maintainers push, whose head branch has the name of a branch of the
// base. Its agent's plain `git push` updates the fork's head branch and
// nothing of the base's (a push to origin is refused). The fork then
// force-pushes a new head, and its synchronize is pasted only once the
// agent's clone can read the new head commit (git cat-file -e); the
// agent's own commit, not pushed, is still its branch's head.
func TestForkPullRequestPushesToItsHead(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	// The base and the fork, as GitHub keeps them: the base's
	// refs/pull/<n>/head follows the fork's head branch.
	repos := t.TempDir()
	base := filepath.Join(repos, "Codertocat", "Hello-World.git")
	fork := filepath.Join(repos, "someone", "Hello-World.git")
	for _, dir := range []string{base, fork} {
		gitIn(t, repos, "clone", "--quiet", "--mirror", r.Dir, dir)
	}
	gitIn(t, fork, "update-ref", "refs/heads/"+r.PRBranch, r.ForkHead)
	e := newEnv(t, envOpts{})
	e.withCheckout(t, "file://"+repos+"/{{.Owner}}/{{.Repo}}.git", nil)
	e.start(t)

	k := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: r.ForkPR}
	e.deliver(t, "pull_request.opened.1.json", withForkHead(r.ForkPR, r.PRBranch, r.ForkHead, true))
	e.waitPhase(t, k, desired.PhaseRunning, waitLong)
	dir := e.workdir(k)
	assert.Equal(t, "loopd/pr-2", gitIn(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	assert.Equal(t, "head/"+r.PRBranch, gitIn(t, dir, "rev-parse", "--abbrev-ref", "@{upstream}"))

	baseRefs := gitIn(t, base, "for-each-ref")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fix.txt"), []byte("fix\n"), 0o644))
	gitIn(t, dir, "add", "fix.txt")
	gitIn(t, dir, "commit", "--quiet", "-m", "fix")
	gitIn(t, dir, "push", "--quiet")
	assert.Equal(t, gitIn(t, dir, "rev-parse", "HEAD"), gitIn(t, fork, "rev-parse", "refs/heads/"+r.PRBranch),
		"a plain git push updates the fork's head branch")
	push := exec.Command("git", "push", "origin")
	push.Dir = dir
	out, err := push.CombinedOutput()
	assert.Error(t, err, "a push to the base is refused: %s", out)
	assert.Equal(t, baseRefs, gitIn(t, base, "for-each-ref"), "nothing of the base's moved")

	// The agent's next commit, not pushed; then the fork's force-push.
	gitIn(t, dir, "commit", "--quiet", "--allow-empty", "-m", "work in progress")
	mine := gitIn(t, dir, "rev-parse", "HEAD")
	other := t.TempDir()
	gitIn(t, other, "clone", "--quiet", fork, ".")
	gitIn(t, other, "checkout", "--quiet", "--detach", r.DefaultHead)
	gitIn(t, other, "commit", "--quiet", "--allow-empty", "-m", "rewritten")
	head := gitIn(t, other, "rev-parse", "HEAD")
	gitIn(t, other, "push", "--quiet", "--force", fork, "HEAD:refs/heads/"+r.PRBranch)
	gitIn(t, other, "push", "--quiet", "--force", base, "HEAD:refs/pull/2/head")
	_, err = exec.Command("git", "-C", dir, "cat-file", "-e", head+"^{commit}").CombinedOutput()
	require.Error(t, err, "the clone cannot read the new head before the synchronize")

	id := e.deliver(t, "pull_request.synchronize.1.json", withForkHead(r.ForkPR, r.PRBranch, head, true))
	waitDelivered(t, e, id, waitLong)
	gitIn(t, dir, "cat-file", "-e", head+"^{commit}")
	assert.Equal(t, mine, gitIn(t, dir, "rev-parse", "HEAD"), "the agent's own commit is kept")
	fetched := e.eventsNamed(t, journal.WorkspacePrepared, k)
	require.NotEmpty(t, fetched)
	assert.Equal(t, "head_fetched", fetched[len(fetched)-1].Attrs["reason"])
	assert.Empty(t, e.eventsNamed(t, journal.WorkspaceFailed, k))
}

// TestForkHeadFetchStalledHoldsNoOtherItem: the fetch of a synchronize's
// new head runs in its item's workspace worker, outside the pass. While
// the remote stalls it, the event waits (head_fetching) and another
// item's event is delivered; once the fetch fails, the synchronize is
// delivered all the same, and the failure is journaled.
func TestForkHeadFetchStalledHoldsNoOtherItem(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	repos := t.TempDir()
	base := filepath.Join(repos, "Codertocat", "Hello-World.git")
	gitIn(t, repos, "clone", "--quiet", "--mirror", r.Dir, base)
	e := newEnv(t, envOpts{})
	plain := e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"]
	e.withCheckout(t, "file://"+repos+"/{{.Owner}}/{{.Repo}}.git", nil)
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"] = plain
	e.writeConfig(t)
	// The remote side of every fetch, which stalls once the stall file
	// exists (git-config(1), remote.<name>.uploadpack).
	stall, pidFile, pack := filepath.Join(e.dir, "stall"), filepath.Join(e.dir, "pack.pid"), filepath.Join(e.dir, "upload-pack")
	require.NoError(t, os.WriteFile(pack, []byte("#!/bin/sh\nif [ -e "+stall+" ]; then echo $$ > "+pidFile+"; exec sleep 600; fi\nexec git upload-pack \"$@\"\n"), 0o755))
	e.daemonEnv = []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.uploadpack", "GIT_CONFIG_VALUE_0=" + pack}
	e.start(t)

	k := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: r.ForkPR}
	e.deliver(t, "pull_request.opened.1.json", withForkHead(r.ForkPR, r.PRBranch, r.ForkHead, false))
	e.waitPhase(t, k, desired.PhaseRunning, waitLong)
	other := desired.Key{Owner: "octo-org", Repo: "plain", Number: 9}
	e.ingestComment(t, other, "start")
	e.waitPhase(t, other, desired.PhaseRunning, waitLong)

	// A new head, which the item's mirror does not hold.
	work := t.TempDir()
	gitIn(t, work, "clone", "--quiet", base, ".")
	gitIn(t, work, "commit", "--quiet", "--allow-empty", "-m", "rewritten")
	head := gitIn(t, work, "rev-parse", "HEAD")
	gitIn(t, work, "push", "--quiet", "--force", base, "HEAD:refs/pull/"+strconv.Itoa(r.ForkPR)+"/head")
	require.NoError(t, os.WriteFile(stall, nil, 0o644))
	id := e.deliver(t, "pull_request.synchronize.1.json", withForkHead(r.ForkPR, r.PRBranch, head, false))
	pid := e.waitPIDFile(t, pidFile, "the head fetch never reached the remote")
	assert.Contains(t, e.mustRun(t, "reconcile", "--once", "--dry-run"), "wait work_item="+k.String()+" reason=head_fetching")
	assert.Regexp(t, k.String()+` .* head_fetching=`+head+` since=`, e.mustRun(t, "get"))

	next := e.ingestComment(t, other, "and then this")
	waitDelivered(t, e, next, waitLong)
	assert.True(t, proc.Alive(pid), "the stalled fetch still runs")
	for _, ev := range e.eventsNamed(t, journal.DispatchDelivered, k) {
		assert.NotEqual(t, id, ev.Attrs["delivery"], "the synchronize was pasted while its head was fetched")
	}

	require.NoError(t, os.Remove(stall))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	waitDelivered(t, e, id, waitLong)
	failed := e.eventsNamed(t, journal.WorkspaceFailed, k)
	require.Len(t, failed, 1)
	assert.Equal(t, "head_fetch_failed", failed[0].Attrs["reason"])
	assert.Equal(t, desired.HeadFetchFailed, e.mustRecord(t, k).Status.HeadFetch.Outcome)
}
