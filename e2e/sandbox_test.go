package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
	"github.com/loopd/loopd/testdata/fakecli"
)

// The tests from inside a sandbox: the fake CLI runs what a comment asks
// (FAKECLAUDE_PROBE=1: each "PROBE: <command>" line runs with sh -c in the
// workdir, as an agent runs what a comment talks it into) and writes what
// became of it to probes.jsonl in the workdir, which the test reads. Each
// probe is something the agent could do as loopd's user before the
// sandbox; the same probes with sandbox.mode none show it still can.
//
// Other suites use the knob the same way (env.probe): moving another
// item's branch (the per-item clone), forging a report for another item
// and running loopd release from inside (the item's channel).

// probeEnv is an env whose fake CLI runs probes.
func probeEnv(t *testing.T, opts envOpts) *env {
	t.Helper()
	if opts.HarnessEnv == nil {
		opts.HarnessEnv = map[string]string{}
	}
	opts.HarnessEnv["FAKECLAUDE_PROBE"] = "1"
	return newEnv(t, opts)
}

// probe sends a comment to k's running agent that runs each of cmds, one
// probe line each, waits until all have run and returns what each got,
// in order.
func (e *env) probe(t *testing.T, k desired.Key, cmds ...string) []fakecli.Probe {
	t.Helper()
	log := filepath.Join(e.workdir(k), fakecli.ProbeLog)
	before := len(readJSONLines[fakecli.Probe](t, log))
	var body strings.Builder
	body.WriteString("Please run these.\n")
	for _, c := range cmds {
		body.WriteString(fakecli.ProbePrefix + c + "\n")
	}
	e.deliver(t, commentFixture, func(m map[string]any) {
		withNumber(k.Number)(m)
		withComment(body.String())(m)
	})
	var got []fakecli.Probe
	e.waitFor(t, func() bool {
		got = readJSONLines[fakecli.Probe](t, log)
		return len(got) >= before+len(cmds)
	}, waitLong, "the probes never ran")
	return got[before : before+len(cmds)]
}

// insideProbes are what an agent tries against loopd and the other items,
// each named, with what the sandbox must make of it.
type insideProbe struct {
	name string
	cmd  string
	// refused is true when the probe must fail (a status not 0) and must
	// not show what it was after (absent).
	refused bool
	absent  string
}

// TestAgentInsideItsSandbox: from inside a sandboxed agent, loopd's
// process and its environment, the other processes of the host, the tmux
// socket, the store, another item's workdir and transcript, the config,
// the secretFile and the operator's home are out of reach; its own
// workdir and transcript are not, and no verb of loopd's works from
// inside. The same probes with sandbox.mode none reach them all
// (TestAgentWithoutASandbox).
func TestAgentInsideItsSandbox(t *testing.T) {
	t.Parallel()
	e, probes := insideEnv(t, "bubblewrap")
	for i, p := range e.probe(t, keyIssue, probeCmds(probes)...) {
		t.Run(probes[i].name, func(t *testing.T) {
			if probes[i].refused {
				assert.NotZero(t, p.Status, "%s: %s", p.Cmd, p.Output)
			} else {
				assert.Zero(t, p.Status, "%s: %s", p.Cmd, p.Output)
			}
			if probes[i].absent != "" {
				assert.NotContains(t, p.Output, probes[i].absent, p.Cmd)
			}
		})
	}
	assertSandboxShown(t, e, sandbox.ModeBubblewrap)
}

// assertSandboxShown checks that loopd get (its table and -o json),
// describe, the status page and /metrics say how issue 1's agent runs:
// sandbox none on every view, bubblewrap quietly.
func assertSandboxShown(t *testing.T, e *env, mode string) {
	t.Helper()
	none := mode == sandbox.ModeNone
	get := e.mustRun(t, "get")
	assert.Equal(t, none, strings.Contains(get, "sandbox=none"), get)
	var list struct {
		Items []struct {
			Key    string `json:"key"`
			Status struct {
				Sandbox string `json:"sandbox"`
			} `json:"status"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.mustRun(t, "get", "-o", "json")), &list))
	require.NotEmpty(t, list.Items)
	for _, it := range list.Items {
		assert.Equal(t, mode, it.Status.Sandbox, it.Key)
	}
	assert.Regexp(t, `(?m)^Sandbox:\s+`+mode+`$`, e.mustRun(t, "describe", keyIssue.String()))
	resp, err := http.Get("http://" + e.listen + "/items/Codertocat/Hello-World/1")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, none, strings.Contains(string(page), "no sandbox"), "the status page's tag")
	want := 0.0
	if none {
		want = 2 // issues 1 and 2, Running
	}
	assert.Equal(t, want, e.metric(t, `loopd_unsandboxed_work_items{phase="Running"}`))
}

// TestAgentWithoutASandbox: sandbox.mode none is what it says: the agent
// reaches what TestAgentInsideItsSandbox shows it cannot, and every view
// of the item says so.
func TestAgentWithoutASandbox(t *testing.T) {
	t.Parallel()
	e, probes := insideEnv(t, "none")
	for i, p := range e.probe(t, keyIssue, probeCmds(probes)...) {
		if probes[i].refused {
			assert.Zero(t, p.Status, "%s reaches it without a sandbox: %s", p.Cmd, p.Output)
		}
	}
	assertSandboxShown(t, e, sandbox.ModeNone)
}

func probeCmds(probes []insideProbe) []string {
	out := make([]string, len(probes))
	for i, p := range probes {
		out[i] = p.cmd
	}
	return out
}

// insideEnv boots issues 1 and 2, each with an agent that
// runs probes, under sandbox mode, with a secretFile and a home of the
// operator's that holds a key, and returns the env and the probes to run
// from issue 1's agent.
func insideEnv(t *testing.T, mode string) (*env, []insideProbe) {
	e := probeEnv(t, envOpts{})
	e.config["sandbox"].(map[string]any)["mode"] = mode
	secret := filepath.Join(e.dir, "secrets", "webhook-secret")
	require.NoError(t, os.MkdirAll(filepath.Dir(secret), 0o700))
	require.NoError(t, os.WriteFile(secret, []byte(e.secret+"\n"), 0o600))
	gh := e.ghWebhook()
	delete(gh, "secretEnv")
	gh["secretFile"] = secret
	home := filepath.Join(e.dir, "home")
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("PRIVATE KEY\n"), 0o600))
	e.daemonEnv = append(e.daemonEnv, "HOME="+home)
	e.writeConfig(t)
	id := e.bootRunning(t)
	two := issueKey(2)
	e.deliver(t, "issues.opened.1.json", withNumber(2))
	other := e.waitPhase(t, two, desired.PhaseRunning, waitLong)
	e.waitFor(t, func() bool { return len(e.userTurns(t, two, other.Status.HarnessSessionID)) > 0 }, waitLong,
		"the other item's agent never got its prompt")
	require.NoError(t, os.WriteFile(filepath.Join(e.workdir(two), "notes.txt"), []byte("the other item's work\n"), 0o644))
	socket, err := tmux.SocketPath(e.socket)
	require.NoError(t, err)
	daemon := strconv.Itoa(e.daemon.Process.Pid)
	return e, []insideProbe{
		{name: "own_workdir", cmd: "pwd && echo mine > mine.txt && cat mine.txt"},
		{name: "own_transcript", cmd: "wc -l " + e.transcriptPath(t, keyIssue, id)},
		{name: "loopd_environ", cmd: "cat /proc/" + daemon + "/environ", refused: true, absent: e.secret},
		{name: "loopd_process", cmd: "test -e /proc/" + daemon, refused: true},
		{name: "host_processes", cmd: "test $(ls /proc | grep -c '^[0-9]') -gt 10", refused: true},
		{name: "tmux_socket", cmd: "tmux -S " + socket + " list-sessions", refused: true, absent: "loop-"},
		{name: "tmux_socket_dir", cmd: "ls " + filepath.Dir(socket), refused: true, absent: e.socket},
		{name: "store", cmd: "cat " + filepath.Join(e.stateDir, "loopd.db"), refused: true, absent: "SQLite"},
		// Only the mount points of what the sandbox shows in it: the
		// item's own channel dir.
		{name: "state_dir", cmd: "ls -A " + e.stateDir + " && test ! -e " + filepath.Join(e.stateDir, "launch"), absent: "loopd.db"},
		{name: "other_workdir", cmd: "cat " + filepath.Join(e.workdir(two), "notes.txt"), refused: true, absent: "the other item's work"},
		{name: "other_transcript", cmd: "cat " + e.transcriptPath(t, two, other.Status.HarnessSessionID), refused: true, absent: "user"},
		{name: "config", cmd: "cat " + e.configPath, refused: true, absent: "authorizedUsers"},
		{name: "secret_file", cmd: "cat " + secret, refused: true, absent: e.secret},
		{name: "home", cmd: "cat " + filepath.Join(home, ".ssh", "id_ed25519"), refused: true, absent: "PRIVATE KEY"},
		{name: "capabilities", cmd: "grep -q '^CapEff:.*[1-9a-f]' /proc/self/status", refused: true},
		// loopd's executable is there (its hook runs it), its config and
		// store are not: no verb of loopd's works from inside.
		{name: "loopd_verbs", cmd: loopdBin + " get --config " + e.configPath, refused: true, absent: keyIssue.String()},
	}
}

// TestAgentGitInItsSandboxedClone: in its sandbox, git works in the
// agent's clone whole (the history it borrows from the mirror reads; it
// commits and branches), while the mirror's objects it borrows are
// read-only, and the mirror's refs and config and the other item's clone
// are not there at all.
func TestAgentGitInItsSandboxedClone(t *testing.T) {
	t.Parallel()
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	e := probeEnv(t, envOpts{})
	e.withCheckout(t, r.URL, nil)
	e.bootRunning(t)
	two := issueKey(2)
	e.deliver(t, "issues.opened.1.json", withNumber(2))
	e.waitPhase(t, two, desired.PhaseRunning, waitLong)
	require.Len(t, e.mirrors(t), 1)
	mirror := e.mirrors(t)[0]
	objects := filepath.Join(mirror, "objects")
	const commit = "git -c user.name=agent -c user.email=agent@example.com commit --quiet -m agent-work"
	got := e.probe(t, keyIssue,
		"git log --format=%H -1 "+r.DefaultHead,
		"echo work > work.txt && git add work.txt && "+commit+" && git log --format=%s -1",
		"git branch agent-topic && git branch --list agent-topic",
		"touch "+filepath.Join(objects, "agent-was-here"),
		"ls "+filepath.Join(mirror, "refs"),
		"cat "+filepath.Join(mirror, "config"),
		"ls -A "+e.workdir(two),
	)
	for i, want := range []struct {
		name, output string
		refused      bool
	}{
		{"reads_borrowed_history", r.DefaultHead, false},
		{"commits", "agent-work", false},
		{"branches", "agent-topic", false},
		{"mirror_objects_read_only", "", true},
		{"mirror_refs", "", true},
		{"mirror_config", "", true},
		{"other_clone", "", true},
	} {
		t.Run(want.name, func(t *testing.T) {
			p := got[i]
			if want.refused {
				assert.NotZero(t, p.Status, "%s: %s", p.Cmd, p.Output)
			} else {
				assert.Zero(t, p.Status, "%s: %s", p.Cmd, p.Output)
				assert.Contains(t, p.Output, want.output, p.Cmd)
			}
		})
	}
	dir := e.workdir(keyIssue)
	assert.Equal(t, "agent-work", gitIn(t, dir, "log", "--format=%s", "-1"), "the commit is the clone's")
	assert.NoFileExists(t, filepath.Join(objects, "agent-was-here"))
	assert.Empty(t, gitIn(t, mirror, "for-each-ref", "refs/heads"), "no branch reached the mirror")
}
