package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// agentEnviron returns the environment of k's live agent, as any process
// it starts inherits it (/proc/<pid>/environ).
func (e *env) agentEnviron(t *testing.T, k desired.Key) []string {
	t.Helper()
	pid := e.panePID(t, k)
	require.NotZero(t, pid, "no live agent for %s", k)
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	require.NoError(t, err)
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// setEnv returns environ with name set to value.
func setEnv(environ []string, name, value string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}

// getEnv returns the value of name in environ, "" when absent.
func getEnv(environ []string, name string) string {
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// runIn runs argv in dir with environ and stdin, as the agent would, and
// returns its combined output and exit status.
func runIn(t *testing.T, dir string, environ []string, stdin string, argv ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, environ, strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

// sandboxed runs loopd with args in a bubblewrap sandbox that shows it
// what a sandboxed agent sees of loopd: the system read-only, loopd's
// executable at its path, and binds (read-write) at theirs; its own /proc,
// /tmp and pid namespace, no capabilities. No state dir, no config, no
// store. Its environment goes through execve (environ), never an argv.
// The test is skipped without bwrap, and fails under CI=true, where .ci/run
// installs it.
func sandboxed(t *testing.T, environ []string, binds []string, stdin string, args ...string) (string, int) {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap not found on PATH; .ci/run installs it (apt-get install bubblewrap)")
		}
		t.Skip("bwrap not found on PATH: apt-get install bubblewrap to run the sandboxed channel test")
	}
	argv := []string{bwrap, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-pid", "--die-with-parent",
		"--cap-drop", "ALL", "--ro-bind", loopdBin, loopdBin}
	for _, b := range binds {
		argv = append(argv, "--bind", b, b)
	}
	return runIn(t, "/", environ, stdin, append(append(argv, "--", loopdBin), args...)...)
}

// withGitHubApp points e's config at a stand-in of GitHub's REST API as a
// GitHub App installation (its key in a file), and routes Codertocat's
// repositories to worktrees of a git server behind the tokens the
// stand-in mints, with the route's keys edited by edit. It returns the
// server and the git server, which serves Hello-World and Other.
func (e *env) withGitHubApp(t *testing.T, edit func(route map[string]any)) (*ghapitest.Server, *ghapitest.GitServer) {
	t.Helper()
	srv := ghapitest.New(t)
	git := ghapitest.NewGitServer(t, srv)
	for _, repo := range []string{"Hello-World", "Other"} {
		git.Add(t, "Codertocat", repo, workspacetest.NewRemote(t, workspacetest.Options{}).Dir)
	}
	keyFile := filepath.Join(e.dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, ghapitest.AppKey(t), 0o600))
	e.config["github"] = map[string]any{"apiURL": srv.APIURL(), "app": map[string]any{"appID": 12, "installationID": 34, "privateKeyFile": keyFile}}
	e.withCheckout(t, git.URL+"/{{.Owner}}/{{.Repo}}.git", func(_, route map[string]any) {
		if edit != nil {
			edit(route)
		}
	})
	return srv, git
}

// TestAgentPushesWithItsScopedToken: with a GitHub App, an item's agent
// pushes its branch with an installation token scoped to its repository,
// which git's credential helper asks loopd serve for over the item's
// channel at the moment of use; the token endpoint was asked for that
// repository and the agent's permissions alone. loopd hands out nothing
// for another repository, and the token the agent holds is refused there.
// The helper and the hook work in a sandbox that shows them only the
// channel and loopd's executable; there loopd's verbs that change the spec
// find no config and no store. The agent's environment holds no token and
// no key. Without serve, no credential is handed out.
func TestAgentPushesWithItsScopedToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv, git := e.withGitHubApp(t, nil)
	r := e.boot(t, "issues.opened.1.json", nil)
	environ := e.agentEnviron(t, keyIssue)
	dir := getEnv(environ, channel.EnvDir)
	require.Equal(t, e.channelDir(keyIssue), dir)
	for _, kv := range environ {
		assert.NotContains(t, kv, "ghs_", "no token in the agent's environment")
		assert.NotContains(t, kv, "PRIVATE KEY")
	}
	out, _, code := e.run(t, "describe", keyIssue.String())
	require.Zero(t, code)
	assert.Regexp(t, `Credentials: +app \(an installation token of this repository alone\)`, out)

	// In the sandbox: the credential helper gets the token, the hook
	// reports, and release has no config to run with.
	host := strings.TrimPrefix(git.URL, "http://")
	request := "protocol=http\nhost=" + host + "\npath=Codertocat/Hello-World.git\n\n"
	answer, code := sandboxed(t, environ, []string{dir}, request, "credential", "get")
	require.Zero(t, code, answer)
	password := ""
	for _, l := range strings.Split(answer, "\n") {
		if v, ok := strings.CutPrefix(l, "password="); ok {
			password = v
		}
	}
	require.True(t, strings.HasPrefix(password, "ghs_scoped_"), answer)
	minted := srv.Tokens()
	require.Len(t, minted, 1)
	assert.Equal(t, []string{"Hello-World"}, minted[0].Repositories)
	assert.Equal(t, map[string]string{"contents": "write", "pull_requests": "write", "issues": "write"}, minted[0].Permissions)

	reported := len(e.eventsNamed(t, journal.SessionReported, keyIssue))
	input := `{"session_id":"` + r.Status.HarnessSessionID + `","hook_event_name":"SessionStart","source":"resume"}`
	out, code = sandboxed(t, environ, []string{dir}, input, "hook", "session-start")
	require.Zero(t, code, out)
	e.waitEvent(t, journal.SessionReported, keyIssue, reported+1, waitShort)
	out, code = sandboxed(t, environ, []string{dir}, "", "release", keyIssue.String(), "--config", e.configPath)
	assert.NotZero(t, code, "release from inside the sandbox: %s", out)
	assert.Contains(t, out, "no such file or directory")
	out, code = sandboxed(t, environ, []string{dir}, "", "get", "--config", e.configPath)
	assert.NotZero(t, code, "the store is not there either: %s", out)

	// The agent commits and pushes its branch (git finds the helper in its
	// environment), to its repository; another repository gets nothing.
	work := r.Workdir()
	gitEnv := append(environ, "GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com")
	out, code = runIn(t, work, gitEnv, "", "git", "commit", "--allow-empty", "-m", "the agent's work")
	require.Zero(t, code, out)
	head := strings.TrimSpace(gitIn(t, work, "rev-parse", "HEAD"))
	out, code = runIn(t, work, gitEnv, "", "git", "push", "origin", "HEAD:refs/heads/loopd/issue-1")
	require.Zero(t, code, "push to its own repository: %s", out)
	remote, code := runIn(t, work, gitEnv, "", "git", "ls-remote", git.RepoURL("Codertocat", "Hello-World"), "refs/heads/loopd/issue-1")
	require.Zero(t, code, remote)
	assert.Contains(t, remote, head)

	out, code = runIn(t, work, gitEnv, "", "git", "push", git.RepoURL("Codertocat", "Other"), "HEAD:refs/heads/stolen")
	assert.NotZero(t, code, "push to another repository: %s", out)
	assert.Contains(t, out, "other_repository")
	refused := e.eventsNamed(t, journal.CredentialRefused, keyIssue)
	require.NotEmpty(t, refused)
	assert.Equal(t, "other_repository", refused[0].Attrs["reason"])
	out, code = runIn(t, work, gitEnv, "", "git", "-c", "credential.helper=", "-c",
		"credential.helper=!f() { echo username=x-access-token; echo password="+password+"; }; f",
		"push", git.RepoURL("Codertocat", "Other"), "HEAD:refs/heads/stolen")
	assert.NotZero(t, code, "the scoped token itself at another repository: %s", out)
	assert.Contains(t, git.Refused(), ghapitest.Refusal{Repo: "Codertocat/Other", Reason: "token not scoped to Codertocat/Other"})
	assert.Len(t, srv.Tokens(), 1, "nothing minted for another repository")
	issued := e.eventsNamed(t, journal.CredentialIssued, keyIssue)
	require.NotEmpty(t, issued)
	for _, ev := range issued {
		assert.Equal(t, "Codertocat/Hello-World", ev.Attrs["repository"])
		for _, v := range ev.Attrs {
			assert.NotContains(t, v, "ghs_", "no token in the journal")
		}
	}

	// A cron pass hands out nothing: without serve nothing answers.
	e.stop(t)
	answer, code = sandboxed(t, environ, []string{dir}, request, "credential", "get")
	require.Zero(t, code, answer)
	assert.Contains(t, answer, "quit=1")
	assert.Contains(t, answer, "loopd serve only")
	assert.NotContains(t, answer, "password=")
}

// TestForgedReportsChangeNothing: the attacks the issue tried from inside
// an agent, with the agent's own environment. Its hook told another work
// item (LOOPD_WORK_ITEM), a report in another item's channel with its own
// token, a flood of them, and the token of an earlier spawn of that item,
// all naming a conversation planted in the other item's project directory:
// each is refused, journaled once (the limiter folds the flood), removed,
// and the other item keeps its conversation.
func TestForgedReportsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	keyB := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}
	e.deliver(t, "issues.opened.1.json", nil)
	e.deliver(t, "issues.opened.1.json", withNumber(3))
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	b := e.waitPhase(t, keyB, desired.PhaseRunning, waitLong)
	envA, envB := e.agentEnviron(t, keyIssue), e.agentEnviron(t, keyB)
	dirA, dirB := getEnv(envA, channel.EnvDir), getEnv(envB, channel.EnvDir)
	require.NotEqual(t, dirA, dirB)

	// The conversation the attacker wants B in, planted where B's harness
	// keeps its transcripts.
	planted := uuid.NewString()
	path := e.transcriptPath(t, keyB, planted)
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"user","message":{"role":"user","content":"planted"},"uuid":"`+uuid.NewString()+`"}`+"\n"), 0o600))
	clear := `{"session_id":"` + planted + `","hook_event_name":"SessionStart","source":"clear"}`
	hook := func(environ []string) {
		t.Helper()
		out, code := runIn(t, "/", environ, clear, loopdBin, "hook", "session-start")
		require.Zero(t, code, out)
	}
	// 1. The issue's attack: A's hook told it works on B.
	hook(setEnv(envA, channel.EnvWorkItem, keyB.String()))
	e.waitEvent(t, journal.SessionReportRejected, keyIssue, 1, waitShort)
	// 2. A report in B's channel, with A's token, and a flood of them.
	forged := setEnv(setEnv(envA, channel.EnvWorkItem, keyB.String()), channel.EnvDir, dirB)
	for range 20 {
		hook(forged)
	}
	e.waitFor(t, func() bool { return len(e.channelReports(t, keyB)) == 0 }, waitShort, "the forged reports were not removed")

	// 3. B's next spawn; a report with the token of the one before.
	e.killPane(t, keyB)
	e.waitFor(t, func() bool {
		r, _ := e.record(t, keyB)
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnedAt.After(b.Status.SpawnedAt)
	}, waitLong, "B did not come back")
	nextB := e.agentEnviron(t, keyB)
	require.NotEqual(t, getEnv(envB, channel.EnvToken), getEnv(nextB, channel.EnvToken), "each spawn its own token")
	hook(envB)
	e.waitFor(t, func() bool { return len(e.channelReports(t, keyB)) == 0 }, waitShort, "the stale report was not removed")
	e.settle(t)

	rejectedA := e.eventsNamed(t, journal.SessionReportRejected, keyIssue)
	require.Len(t, rejectedA, 1)
	assert.Equal(t, "wrong_work_item", rejectedA[0].Attrs["reason"])
	rejectedB := e.eventsNamed(t, journal.SessionReportRejected, keyB)
	require.Len(t, rejectedB, 1, "21 refusals of B's channel, journaled once: %v", rejectedB)
	assert.Equal(t, "not_this_spawn", rejectedB[0].Attrs["reason"])
	assert.Equal(t, planted, rejectedB[0].Attrs["attempted_session_id"])

	after := e.mustRecord(t, keyB)
	assert.Equal(t, b.Status.HarnessSessionID, after.Status.HarnessSessionID, "B keeps its conversation")
	assert.NotEqual(t, planted, after.Status.HarnessSessionID)
	if after.Report != nil {
		assert.NotEqual(t, planted, after.Report.SessionID)
	}
	assert.Empty(t, e.eventsNamed(t, journal.SessionFollowed, keyB))
	assert.Empty(t, e.eventsNamed(t, journal.SessionFollowed, keyIssue))
	for _, s := range e.starts(t) {
		assert.NotContains(t, strings.Join(s.Argv, " "), planted, "the planted conversation never reaches an argv")
	}
}

// TestCronPassTakesReportsAndRefusesForgedOnes: without a daemon, a cron
// pass reads the item's channel too: the agent's own report is taken, and
// a flood of reports with another token is refused and removed, one
// journal row and one with the count of the rest.
func TestCronPassTakesReportsAndRefusesForgedOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := e.boot(t, "issues.opened.1.json", nil)
	environ := e.agentEnviron(t, keyIssue)
	e.stop(t)
	reported := len(e.eventsNamed(t, journal.SessionReported, keyIssue))
	input := `{"session_id":"` + r.Status.HarnessSessionID + `","hook_event_name":"SessionStart","source":"resume"}`
	out, code := runIn(t, "/", environ, input, loopdBin, "hook", "session-start")
	require.Zero(t, code, out)
	forged := setEnv(environ, channel.EnvToken, strings.Repeat("0", 64))
	for range 5 {
		out, code := runIn(t, "/", forged, input, loopdBin, "hook", "session-start")
		require.Zero(t, code, out)
	}
	require.Len(t, e.channelReports(t, keyIssue), 6)

	e.mustRun(t, "reconcile", "--once")
	assert.Empty(t, e.channelReports(t, keyIssue), "every report taken or refused, and removed")
	assert.Len(t, e.eventsNamed(t, journal.SessionReported, keyIssue), reported+1)
	rejected := e.eventsNamed(t, journal.SessionReportRejected, keyIssue)
	require.Len(t, rejected, 2, "%v", rejected)
	assert.Equal(t, "not_this_spawn", rejected[0].Attrs["reason"])
	assert.Equal(t, "4", rejected[1].Attrs["repeated"])
}
