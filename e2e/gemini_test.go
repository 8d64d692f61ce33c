package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/schema"
)

// geminiEnv is an env whose harness is the fake Gemini CLI (the gemini
// adapter), "authenticated", with its config dir in the test's dir and a
// file of the pids of every process it starts.
type geminiEnv struct {
	*env
	home string // GEMINI_CLI_HOME
	pids string // FAKEGEMINI_PID_FILE
}

func newGeminiEnv(t *testing.T, extra map[string]string) geminiEnv {
	t.Helper()
	e := newEnv(t, envOpts{})
	g := geminiEnv{env: e, home: filepath.Join(e.dir, "gemini-home"), pids: e.fakeFile("gemini.pids")}
	env := map[string]string{"GEMINI_CLI_HOME": g.home, "FAKEGEMINI_AUTH": "1", "FAKEGEMINI_PID_FILE": g.pids,
		"FAKEGEMINI_RESUME_FAIL_DELAY": "100ms"}
	for k, v := range extra {
		env[k] = v
	}
	h := e.harness()
	h["adapter"], h["command"], h["env"] = harness.AdapterGemini, fakeGeminiBin, env
	e.writeConfig(t)
	// The fake outlives kill-server, as Gemini does: before the env's own
	// cleanup kills the server, the daemon is stopped (so that it starts
	// no more) and every process the fake started is ended.
	t.Cleanup(func() {
		e.signalDaemon(t, syscall.SIGTERM)
		g.endAll(t)
	})
	return g
}

// endAll kills every process of the fake still running, by the pids it
// logged, each checked to be the fake's: in its sandbox the fake ends with
// its pane, and the pids it logs are the sandbox's, which killFake finds
// to name none of its processes on the host.
func (g geminiEnv) endAll(t *testing.T) {
	b, err := os.ReadFile(g.pids)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		killFake(pid, fakeGeminiBin)
	}
}

// chatLines returns the lines of the chat file of conversation id of k,
// as the gemini adapter finds it.
func (g geminiEnv) chatLines(t *testing.T, k desired.Key, id string) [][]byte {
	t.Helper()
	r, ok := g.record(t, k)
	if !ok {
		return nil
	}
	a, err := harness.New("gemini", schema.Harness{Command: "gemini", Env: map[string]string{"GEMINI_CLI_HOME": g.home}})
	require.NoError(t, err)
	tr, err := a.Transcript(r.Workdir(), id)
	if err != nil || !tr.Exists {
		return nil
	}
	f, err := os.Open(tr.Path)
	require.NoError(t, err)
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	return out
}

// turns returns the user messages of conversation id of k, from its chat
// file (chatLines).
func (g geminiEnv) turns(t *testing.T, k desired.Key, id string) []string {
	t.Helper()
	var out []string
	for _, l := range g.chatLines(t, k, id) {
		var m struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(l, &m) == nil && m.Type == "user" && len(m.Content) > 0 {
			out = append(out, m.Content[0].Text)
		}
	}
	return out
}

// chatUsage sums the tokens of the gemini messages of conversation id of
// k as its chat file records them, each message once by its id however
// many times it is written: what loopd must have counted, no more. Input
// is input less cached plus tool, output is output plus thoughts.
func (g geminiEnv) chatUsage(t *testing.T, k desired.Key, id string) (desired.Tokens, int) {
	t.Helper()
	byID := map[string]desired.Tokens{}
	for _, l := range g.chatLines(t, k, id) {
		var m struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			Tokens *struct {
				Input, Output, Cached, Thoughts, Tool int64
			} `json:"tokens"`
		}
		if json.Unmarshal(l, &m) != nil || m.Type != "gemini" || m.Tokens == nil {
			continue
		}
		u := m.Tokens
		byID[m.ID] = desired.Tokens{Input: u.Input - u.Cached + u.Tool, Output: u.Output + u.Thoughts, CacheRead: u.Cached}
	}
	return sumUsage(byID)
}

// started returns the processes the fake started for k's pane, by the
// host's pid (hostPID: the fake logs its sandbox's) and start time.
func (g geminiEnv) started(t *testing.T, k desired.Key) []proc.Process {
	t.Helper()
	b, err := os.ReadFile(g.pids)
	require.NoError(t, err)
	pane := g.panePID(t, k)
	var ps []proc.Process
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pid = hostPID(t, pane, pid)
		p, err := proc.Lookup(pid)
		if err != nil {
			p = proc.Process{PID: pid} // gone already
		}
		ps = append(ps, p)
	}
	return ps
}

// stillRunning returns those of ps that still run.
func stillRunning(ps []proc.Process) []int {
	var pids []int
	for _, p := range ps {
		if p.Start != 0 && p.Running() {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// bootGemini boots issue 1 and returns its conversation id once its chat
// file holds the opening prompt.
func (g geminiEnv) bootGemini(t *testing.T) string {
	t.Helper()
	g.start(t)
	g.deliver(t, "issues.opened.1.json", nil)
	r := g.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	id := r.Status.HarnessSessionID
	require.Regexp(t, uuidPattern, id)
	g.waitFor(t, func() bool { return len(g.turns(t, keyIssue, id)) == 1 }, waitLong, "the opening prompt never reached the chat file")
	return id
}

// TestGeminiResumesAfterKill: a Gemini agent is spawned, a comment is
// pasted and verified in its chat file, its pane's process is killed with
// SIGKILL, and loopd resumes the same conversation with the next comment;
// nothing of the killed agent runs on (its child, which outlives its
// launcher, is ended with the pane's process group).
func TestGeminiResumesAfterKill(t *testing.T) {
	t.Parallel()
	g := newGeminiEnv(t, nil)
	// restartPolicy Never: the death waits for the next comment, which the
	// resume then carries.
	g.policy()["restartPolicy"] = "Never"
	g.writeConfig(t)
	id := g.bootGemini(t)
	marker, delivery := g.comment(t)
	g.waitFor(t, func() bool { return countContaining(g.turns(t, keyIssue, id), marker) == 1 }, waitShort, "the comment never reached the chat file")
	g.waitFor(t, func() bool { return len(deliveriesOf(t, g.env, journal.DispatchDelivered, delivery)) == 1 }, waitShort, "not verified")
	first := g.started(t, keyIssue)
	require.Len(t, first, 2, "a launcher and its child")

	g.killPane(t, keyIssue)
	g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)
	second, _ := g.comment(t)
	r := g.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.SpawnMode == desired.SpawnResume
	}, waitShort, "no resume")
	assert.Equal(t, id, r.Status.HarnessSessionID)
	assert.Contains(t, g.paneStartCommand(t, keyIssue), "--resume "+id)
	g.waitFor(t, func() bool { return countContaining(g.turns(t, keyIssue, id), second) == 1 }, waitShort, "the resume never got the comment")
	assert.Empty(t, stillRunning(first), "the killed agent's processes are gone")
	g.settle(t)
	assert.Equal(t, 1, countContaining(g.turns(t, keyIssue, id), marker), "the first comment once")
}

// TestGeminiMissingSessionFallsBack: a resume that Gemini refuses (exit 42,
// "Error resuming session") falls back to a fresh conversation carrying
// the same event, and the journal says why.
func TestGeminiMissingSessionFallsBack(t *testing.T) {
	t.Parallel()
	g := newGeminiEnv(t, map[string]string{"FAKEGEMINI_RESUME_FAIL": "1"})
	g.policy()["restartPolicy"] = "Never"
	g.writeConfig(t)
	old := g.bootGemini(t)
	g.killPane(t, keyIssue)
	g.waitPhase(t, keyIssue, desired.PhaseExited, waitShort)

	marker, delivery := g.comment(t)
	r := g.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && r.Status.HarnessSessionID != old
	}, waitShort, "no fresh conversation after the refused resume")
	assert.Equal(t, desired.SpawnFresh, r.Status.SpawnMode)
	g.waitFor(t, func() bool { return countContaining(g.turns(t, keyIssue, r.Status.HarnessSessionID), marker) == 1 }, waitShort,
		"the fallback never got the comment")
	failed := g.eventsNamed(t, journal.SessionResumeFailed, keyIssue)
	if assert.Len(t, failed, 1) {
		assert.Equal(t, "not_resumable", failed[0].Attrs["reason"])
		assert.Equal(t, harness.CauseSessionError, failed[0].Attrs["exit_cause"])
		assert.Equal(t, old, failed[0].Attrs["attempted_session_id"])
	}
	exited := g.eventsNamed(t, journal.SessionExited, keyIssue)
	require.NotEmpty(t, exited)
	assert.Equal(t, harness.CauseSessionError, exited[len(exited)-1].Attrs["exit_cause"])
	assert.Empty(t, g.eventsNamed(t, journal.SessionCrashLoop, keyIssue), "a refused resume is not a crash")
	assert.Len(t, waitDeliveries(t, g.env, journal.DispatchDelivered, delivery, 1), 1)
}

// TestGeminiStopLeavesNoProcess: closing the issue stops its Gemini agent,
// which ignores tmux kill-session; loopd ends the pane's process group,
// and neither of its processes runs on.
func TestGeminiStopLeavesNoProcess(t *testing.T) {
	t.Parallel()
	g := newGeminiEnv(t, nil)
	g.bootGemini(t)
	ps := g.started(t, keyIssue)
	require.Len(t, ps, 2, "a launcher and its child")
	require.Len(t, stillRunning(ps), 2)
	closeIssue(t, g.env, "2030-01-01T00:00:00Z")
	g.waitPhase(t, keyIssue, desired.PhaseStopped, waitShort)
	assert.Empty(t, stillRunning(ps), "no process of the stopped agent is left")
	assert.False(t, g.hasSession(t, keyIssue))
	settings, err := os.ReadFile(filepath.Join(g.home, ".gemini", "settings.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"general":{"sessionRetention":{"enabled":false}}}`, string(settings), "retention provisioned before the spawn")
}
