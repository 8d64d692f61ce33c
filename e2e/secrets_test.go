package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

// apiKey is a harness env value, where API keys go: it must reach the
// agent and appear on no command line.
const apiKey = "sk-test-SECRET-123"

// tmuxShim puts a tmux first on a PATH that logs each invocation's argv
// (one word a line, then a line "--end--") and execs the real tmux; it
// returns the PATH and the log's path.
func tmuxShim(t *testing.T, dir string) (path, log string) {
	t.Helper()
	real, err := exec.LookPath("tmux")
	require.NoError(t, err)
	bin := filepath.Join(dir, "shim")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	log = filepath.Join(dir, "tmux-argv.log")
	script := fmt.Sprintf("#!/bin/sh\nfor a in \"$@\"; do printf '%%s\\n' \"$a\"; done >> %q\necho --end-- >> %q\nexec %q \"$@\"\n", log, log, real)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "tmux"), []byte(script), 0o755))
	return bin + string(os.PathListSeparator) + os.Getenv("PATH"), log
}

// procFile returns /proc/<pid>/<name> with a newline before each entry
// (its NULs made newlines), so that "\nNAME=" finds any entry.
func procFile(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	require.NoError(t, err)
	return "\n" + string(bytes.ReplaceAll(b, []byte{0}, []byte{'\n'}))
}

// Issue 6, items 1 and 2: loopd serve runs with the webhook secret, another
// token and a GitHub token in its environment, and its harness has an API
// key in its env. After one issue opens, the agent's environment holds the
// API key and none of the daemon's secrets, neither does the tmux server's
// global or session environment, no tmux command line ever held a value,
// and a delivery signed with a guessed secret is refused and stores
// nothing.
func TestNoDaemonSecretReachesAnAgent(t *testing.T) {
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"ANTHROPIC_API_KEY": apiKey}})
	e.secret = "s3cr3t"
	e.ghWebhook()["secretEnv"] = "LOOPD_WEBHOOK_SECRET"
	e.writeConfig(t)
	path, argvLog := tmuxShim(t, e.dir)
	e.daemonEnv = []string{"LOOPD_WEBHOOK_SECRET=s3cr3t", "OTHER_TOKEN=x", "GITHUB_TOKEN=ghp_daemon", "PATH=" + path}
	secrets := []string{"s3cr3t", "OTHER_TOKEN", "ghp_daemon"}
	e.start(t)

	require.Equal(t, http.StatusAccepted, e.replay(t, "issues.opened.1.json", "", nil))
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	session := desired.SessionName(keyIssue)
	pid := e.panePID(t, keyIssue)
	require.NotZero(t, pid)

	environ := procFile(t, pid, "environ")
	for _, s := range secrets {
		assert.NotContains(t, environ, s, "the agent's environment")
	}
	assert.Contains(t, environ, "\nANTHROPIC_API_KEY="+apiKey+"\n", "the harness env reaches the agent")
	assert.Contains(t, environ, "\nLOOPD_WORK_ITEM="+keyIssue.String()+"\n")
	assert.Contains(t, environ, "\nPATH="+path+"\n")
	assert.NotContains(t, environ, "\nTMUX=", "the agent is not handed loopd's tmux server")
	assert.NotContains(t, environ, "\nTMUX_PANE=")
	assert.NotContains(t, procFile(t, pid, "cmdline"), apiKey, "the harness's own argv")
	assert.Equal(t, filepath.Base(fakeClaudeBin), e.paneCommand(t, keyIssue), "the launcher became the harness")

	for _, args := range [][]string{{"show-environment", "-g"}, {"show-environment", "-t", "=" + session}} {
		out, err := e.tmux(t, args...)
		require.NoError(t, err)
		for _, s := range append(secrets, apiKey) {
			assert.NotContains(t, out, s, "tmux %s", strings.Join(args, " "))
		}
	}

	b, err := os.ReadFile(argvLog)
	require.NoError(t, err)
	assert.Contains(t, string(b), "\nnew-session\n", "the shim saw the spawn")
	for _, s := range append(secrets, apiKey) {
		assert.NotContains(t, string(b), s, "a tmux command line")
	}
	files, err := filepath.Glob(filepath.Join(e.stateDir, "launch", "*"))
	require.NoError(t, err)
	assert.Empty(t, files, "the launcher removed its env file")

	// What an agent that had read the secret would do; a guess fails.
	body := e.payload(t, "issues.opened.1.json", withNumber(99))
	assert.Equal(t, http.StatusUnauthorized, e.post(t, "issues", "", body, webhook.Sign([]byte("guessed-secret"), body)))
	_, stored := e.record(t, desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 99})
	assert.False(t, stored, "a forged delivery stores nothing")
	assert.Len(t, e.eventsNamed(t, journal.DeliveryAccepted, desired.Key{}), 1, "only the signed delivery was accepted")
}

// webhooks.ghWebhook.secretFile: the secret comes from a file (one trailing
// newline ignored), deliveries signed with it are accepted, and an empty
// file stops loopd at start with a message naming the file.
func TestSecretFile(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.secret = "from-a-file"
	secretPath := filepath.Join(e.dir, "secrets", "webhook-secret")
	require.NoError(t, os.MkdirAll(filepath.Dir(secretPath), 0o700))
	require.NoError(t, os.WriteFile(secretPath, []byte("from-a-file\n"), 0o600))
	gh := e.ghWebhook()
	delete(gh, "secretEnv")
	gh["secretFile"] = "${SECRETS_DIR}/webhook-secret"
	e.writeConfig(t)
	e.daemonEnv = []string{"SECRETS_DIR=" + filepath.Dir(secretPath)}
	e.start(t)
	require.Equal(t, http.StatusAccepted, e.replay(t, "issues.opened.1.json", "", nil))
	body := e.payload(t, "issues.opened.1.json", withNumber(98))
	assert.Equal(t, http.StatusUnauthorized, e.post(t, "issues", "", body, webhook.Sign([]byte("from-a-file\n"), body)),
		"the newline is not part of the secret")
	e.stop(t)

	require.NoError(t, os.WriteFile(secretPath, []byte("\n"), 0o600))
	out, errOut, code := e.runEnv(t, e.daemonEnv, "serve")
	require.NotZero(t, code)
	assert.Contains(t, out+errOut, "secretFile "+secretPath+" is empty")
}

// TestDaemonEnvironHoldsNoSecret: unsetting a variable leaves it in the
// block the kernel shows in /proc/<pid>/environ, which root reads (and an
// agent running as root with it). loopd serve, started with the webhook
// secret, a GitHub token and a harness's API key in its environment, under
// configured names, re-executes itself without them: its environ holds
// none, and it still verifies deliveries with the secret, calls GitHub
// with the token, and hands the key to its harness. Its pid does not
// change.
func TestDaemonEnvironHoldsNoSecret(t *testing.T) {
	t.Parallel()
	// The secret's variable is secretEnv's (LOOPD_E2E_SECRET), the
	// token's tokenEnv's: configured names, not the defaults.
	e := newEnv(t, envOpts{})
	e.harness()["passEnv"] = []string{"E2E_HARNESS_KEY"}
	e.writeConfig(t)
	srv, token := e.withGitHub(t)
	const harnessKey = "sk-e2e-harness-key"
	e.daemonEnv = append(e.daemonEnv, "E2E_HARNESS_KEY="+harnessKey)
	e.start(t)
	pid := e.daemon.Process.Pid

	require.Equal(t, http.StatusAccepted, e.replay(t, "issues.opened.1.json", "", nil), "the secret verifies deliveries")
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	e.waitPosted(t, 1)
	assert.Contains(t, srv.Requests()[0].Auth, token, "the token reaches GitHub")

	environ := procFile(t, pid, "environ")
	for _, s := range []string{e.secret, token, harnessKey} {
		assert.NotContains(t, environ, s, "loopd's /proc/%d/environ", pid)
	}
	for _, name := range []string{secretEnv + "=", gitHubTokenEnv + "=", "E2E_HARNESS_KEY="} {
		assert.NotContains(t, environ, "\n"+name, "not even the name")
	}
	assert.Contains(t, environ, "\nPATH=", "the rest of the environment is kept")
	assert.NotContains(t, procFile(t, pid, "cmdline"), e.secret)
	agent := procFile(t, e.panePID(t, keyIssue), "environ")
	assert.Contains(t, agent, "\nE2E_HARNESS_KEY="+harnessKey+"\n", "passEnv still reaches the harness")
	assert.NotContains(t, agent, e.secret)
	assert.NotContains(t, agent, token)
}
