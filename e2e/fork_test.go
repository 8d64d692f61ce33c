package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
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
