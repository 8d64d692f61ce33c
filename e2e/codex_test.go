package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
)

// codexProvider is the credential-free local model provider of the
// reference (harness-cli-facts.md, section 2): no key, no login screen,
// and every request fails offline.
var codexProvider = []string{"-c", "model_provider=loc", "-c", `model_providers.loc={name="loc",base_url="http://127.0.0.1:9/v1",wire_api="responses"}`}

// newCodexEnv is newEnv with every route on a codex harness running
// command in its own CODEX_HOME; loggedOut leaves the provider out, so
// that the TUI stops at its login screen.
func newCodexEnv(t *testing.T, command string, loggedOut bool, policy map[string]any) (*env, harness.Adapter) {
	t.Helper()
	e := newEnv(t, envOpts{Policy: policy})
	home := filepath.Join(e.dir, "codex")
	require.NoError(t, os.MkdirAll(home, 0o700))
	h := map[string]any{"adapter": "codex", "command": command, "env": map[string]string{"CODEX_HOME": home}}
	if !loggedOut {
		h["extraArgs"] = codexProvider
	}
	e.config["harnesses"].(map[string]any)["codex"] = h
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["harness"] = "codex"
	e.writeConfig(t)
	ad, err := harness.New("codex", schema.Harness{Adapter: harness.AdapterCodex, Command: command, Env: map[string]string{"CODEX_HOME": home}})
	require.NoError(t, err)
	return e, ad
}

// codexMessages returns the user messages of conversation id of k, as
// the codex adapter reads its rollout.
func codexMessages(t *testing.T, e *env, ad harness.Adapter, k desired.Key, id string) []string {
	t.Helper()
	tr, err := ad.Transcript(e.mustRecord(t, k).Workdir(), id)
	require.NoError(t, err)
	if !tr.Exists {
		return nil
	}
	data, err := os.ReadFile(tr.Path)
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"UserMessage"`) {
			out = append(out, line)
		}
	}
	return out
}

// waitLearned waits until k runs in a conversation whose id loopd learned,
// and returns the record.
func waitLearned(t *testing.T, e *env, k desired.Key, not string) desired.Record {
	t.Helper()
	return e.waitRecord(t, k, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning && !r.Status.IDUnconfirmed && r.Status.HarnessSessionID != "" && r.Status.HarnessSessionID != not
	}, waitLong, "the conversation id was never learned")
}

// killAgentGroup is kill -9 of the agent: its whole process group, as
// Codex's Node launcher and its native child share one.
func (e *env) killAgentGroup(t *testing.T, k desired.Key) {
	t.Helper()
	pid := e.panePID(t, k)
	require.NotZero(t, pid, "no live pane for %s", k)
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
}

// codexLearnDeliverKillResume is the Codex round trip: a fresh spawn whose
// id loopd learns from the rollout, a pasted comment verified there, kill
// -9 of the agent, and a resume of the same id in the same workdir that
// delivers the next comment.
func codexLearnDeliverKillResume(t *testing.T, e *env, ad harness.Adapter) {
	e.start(t)
	first := "first comment " + uuid.NewString()
	sendComment(t, e, first)
	r := waitLearned(t, e, keyIssue, "")
	id := r.Status.HarnessSessionID
	assert.True(t, ad.ValidSessionID(id), id)
	assert.NotContains(t, e.paneStartCommand(t, keyIssue), "resume", "a fresh spawn cannot name an id")
	assert.Contains(t, e.paneStartCommand(t, keyIssue), "--no-daemon")
	followed := e.waitEvent(t, journal.SessionFollowed, keyIssue, 1, waitLong)
	assert.Equal(t, "rollout", followed[0].Attrs["source"])
	assert.Equal(t, id, followed[0].Attrs["harness_session_id"])
	e.waitFor(t, func() bool { return countContaining(codexMessages(t, e, ad, keyIssue, id), first) == 1 }, waitLong,
		"the boot prompt never reached the rollout")

	second := "second comment " + uuid.NewString() + "\nwith a second line"
	delivery := sendComment(t, e, second)
	assert.Equal(t, "true", waitDelivered(t, e, delivery, waitLong).Attrs["verified"], "the pasted comment is verified in the rollout")

	e.killAgentGroup(t, keyIssue)
	e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong)

	third := "after the kill " + uuid.NewString()
	delivery = sendComment(t, e, third)
	rr, ev := waitRespawn(t, e, keyIssue, 1)
	assert.Equal(t, "true", ev.Attrs["resumed"], "%v", ev.Attrs)
	assert.Equal(t, id, rr.Status.HarnessSessionID)
	assert.Contains(t, e.paneStartCommand(t, keyIssue), "resume --no-daemon")
	assert.Contains(t, e.paneStartCommand(t, keyIssue), id)
	e.waitFor(t, func() bool { return countContaining(codexMessages(t, e, ad, keyIssue, id), third) == 1 }, waitLong,
		"the comment after the kill never reached the same rollout")
	assert.Equal(t, "boot_prompt", waitDelivered(t, e, delivery, waitLong).Attrs["via"], "the resume carried it")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}

func TestCodexLearnsTheIDDeliversAndResumesAfterKill(t *testing.T) {
	t.Parallel()
	e, ad := newCodexEnv(t, fakeCodexBin, false, map[string]any{"restartPolicy": "Never"})
	codexLearnDeliverKillResume(t, e, ad)
}

func TestRealCodexLearnsTheIDDeliversAndResumesAfterKill(t *testing.T) {
	t.Parallel()
	path := os.Getenv("LOOPD_REAL_CODEX")
	if path == "" {
		t.Skip("LOOPD_REAL_CODEX is not set")
	}
	e, ad := newCodexEnv(t, path, false, map[string]any{"restartPolicy": "Never", "resumeProbeSeconds": 2})
	codexLearnDeliverKillResume(t, e, ad)
}

// TestCodexMissingRolloutStartsFresh: the rollout of a learned id is gone
// when the next comment comes: a fresh spawn carries it, with the event
// journaled, and the new id is learned.
func TestCodexMissingRolloutStartsFresh(t *testing.T) {
	t.Parallel()
	e, ad := newCodexEnv(t, fakeCodexBin, false, map[string]any{"restartPolicy": "Never"})
	e.start(t)
	sendComment(t, e, "first "+uuid.NewString())
	old := waitLearned(t, e, keyIssue, "").Status.HarnessSessionID
	tr, err := ad.Transcript(e.mustRecord(t, keyIssue).Workdir(), old)
	require.NoError(t, err)
	e.killAgentGroup(t, keyIssue)
	e.waitPhase(t, keyIssue, desired.PhaseExited, waitLong)
	require.NoError(t, os.Remove(tr.Path))
	e.dropStoredTranscript(t, keyIssue, old) // else it is restored from there

	body := "after the rollout was lost " + uuid.NewString()
	sendComment(t, e, body)
	failed := e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitLong)
	assert.Equal(t, "transcript_missing", failed[0].Attrs["reason"], "%v", failed[0].Attrs)
	assert.Equal(t, old, failed[0].Attrs["attempted_session_id"])
	r := waitLearned(t, e, keyIssue, old)
	e.waitFor(t, func() bool {
		return countContaining(codexMessages(t, e, ad, keyIssue, r.Status.HarnessSessionID), body) == 1
	}, waitLong,
		"the fresh conversation does not carry the comment")
}

// TestCodexUnconfirmedIDIsShownAndADeathGoesFresh: at the login screen no
// rollout is ever written, so the id stays unconfirmed: loopd get and the
// dry run say so, and a death before it is learned is a fresh spawn with
// reason id_unknown (under the default restart policy: under Never a
// spawn that dies on its event needs attention instead).
func TestCodexUnconfirmedIDIsShownAndADeathGoesFresh(t *testing.T) {
	t.Parallel()
	e, _ := newCodexEnv(t, fakeCodexBin, true, nil)
	e.start(t)
	sendComment(t, e, "first "+uuid.NewString())
	e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseSpawning && r.Status.IDUnconfirmed && r.Status.Blocked == harness.BlockLoginRequired
	}, waitLong, "the spawn never reached the login screen")
	e.waitFor(t, func() bool {
		out, _, _ := e.run(t, "get")
		return strings.Contains(out, "unconfirmed")
	}, waitShort, "loopd get does not show the id unconfirmed")
	e.stop(t)
	// Within the spawn's probe window the dry run says probing; past it,
	// what it waits for.
	e.waitFor(t, func() bool {
		return strings.Contains(e.mustRun(t, "reconcile", "--once", "--dry-run"), "reason=awaiting_session_id")
	}, waitLong, "the dry run does not say it awaits the session id")

	e.start(t)
	e.killAgentGroup(t, keyIssue)
	failed := e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitLong)
	assert.Equal(t, "id_unknown", failed[0].Attrs["reason"], "%v", failed[0].Attrs)
	assert.NotContains(t, e.paneStartCommand(t, keyIssue), "resume")
}

// TestCodexTwoItemsInOneWorkdirNeverShareARollout: two items whose route
// shares one workdir spawn at once; each learns the conversation its own
// boot prompt started.
func TestCodexTwoItemsInOneWorkdirNeverShareARollout(t *testing.T) {
	t.Parallel()
	e, ad := newCodexEnv(t, fakeCodexBin, false, nil)
	e.ghWebhook()["routing"].(map[string]any)["repos"].(map[string]any)["*"].(map[string]any)["workdir"] = filepath.Join(e.workRoot, "{{.Owner}}", "{{.Repo}}")
	e.writeConfig(t)
	e.start(t)
	other := desired.Key{Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}
	one, three := "for one "+uuid.NewString(), "for three "+uuid.NewString()
	e.deliver(t, commentFixture, withComment(one))
	e.deliver(t, commentFixture, func(m map[string]any) { withComment(three)(m); withNumber(3)(m) })
	a := waitLearned(t, e, keyIssue, "")
	b := waitLearned(t, e, other, "")
	require.NotEqual(t, a.Status.HarnessSessionID, b.Status.HarnessSessionID)
	assert.Equal(t, a.Workdir(), b.Workdir())
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, keyIssue, a.Status.HarnessSessionID), one))
	assert.Zero(t, countContaining(codexMessages(t, e, ad, keyIssue, a.Status.HarnessSessionID), three))
	assert.Equal(t, 1, countContaining(codexMessages(t, e, ad, other, b.Status.HarnessSessionID), three))
}

// TestCodexTwoRolloutsThatFitAreNotGuessed (issue 21, case 6): two
// rollouts that both fit a spawn whose id is still to be learned (each
// opens with its boot line and the agent's brief) are not settled by a
// guess: session.id_ambiguous names both, once, and the item goes on with
// its id unknown. A rollout that holds another spawn's boot line fits
// none. Once only one fits, its id is learned.
func TestCodexTwoRolloutsThatFitAreNotGuessed(t *testing.T) {
	t.Parallel()
	// Logged out: the CLI stops at its login screen and writes no rollout
	// of its own.
	e, _ := newCodexEnv(t, fakeCodexBin, true, nil)
	e.start(t)
	sendComment(t, e, "first "+uuid.NewString())
	r := e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseSpawning && r.Status.IDUnconfirmed && r.Status.BootID != ""
	}, waitLong, "the spawn never started")
	brief := "\n\n" + desired.AgentBrief(keyIssue)
	line := desired.BootLine(r.Status.BootID)
	// The item's own Codex home, under the shared one: the one it reads.
	homes, err := filepath.Glob(filepath.Join(e.dir, "codex", "loopd-items", "*"))
	require.NoError(t, err)
	require.Len(t, homes, 1, "one item, one home")
	ids, paths := plantRollouts(t, homes[0], r.Workdir(), line+brief, line+brief, desired.BootLine(uuid.NewString())+brief)
	a, b := ids[0], ids[1]

	amb := e.waitEvent(t, journal.SessionIDAmbiguous, keyIssue, 1, waitLong)
	assert.ElementsMatch(t, []string{a, b}, strings.Split(amb[0].Attrs["candidates"], ","))
	e.settle(t)
	assert.Len(t, e.eventsNamed(t, journal.SessionIDAmbiguous, keyIssue), 1, "the same ambiguity is journaled once")
	st := e.mustRecord(t, keyIssue).Status
	assert.True(t, st.IDUnconfirmed, "no id taken")
	assert.Empty(t, st.HarnessSessionID)
	assert.Empty(t, e.eventsNamed(t, journal.SessionFollowed, keyIssue))

	require.NoError(t, os.Remove(paths[1]))
	e.waitRecord(t, keyIssue, func(r desired.Record) bool {
		return !r.Status.IDUnconfirmed && r.Status.HarnessSessionID == a
	}, waitLong, "the one rollout left that fits was never learned")
	followed := e.waitEvent(t, journal.SessionFollowed, keyIssue, 1, waitShort)
	assert.Equal(t, a, followed[0].Attrs["harness_session_id"])
	assert.Equal(t, "rollout", followed[0].Attrs["source"])
}

// plantRollouts writes rollouts of Codex 0.171.0's shape under home
// (CODEX_HOME), one per first user message in firsts, each for a
// conversation started now in workdir, and returns their paths (ids[i]'s
// at paths[i]). They appear at once, by the rename of the year directory
// that holds them, so that no pass sees some of them without the others;
// home must hold no rollout of this year yet.
func plantRollouts(t *testing.T, home, workdir string, firsts ...string) (ids, paths []string) {
	t.Helper()
	cwd, err := filepath.EvalSymlinks(workdir)
	require.NoError(t, err)
	now := time.Now().UTC()
	stamp := now.Format("2006-01-02T15:04:05.000Z")
	staging := filepath.Join(home, "planting")
	day := now.Format("2006/01/02")
	require.NoError(t, os.MkdirAll(filepath.Join(staging, day), 0o700))
	for _, first := range firsts {
		id := uuid.Must(uuid.NewV7()).String()
		var data []byte
		for _, l := range []map[string]any{
			{"timestamp": stamp, "type": "session_meta", "payload": map[string]any{"id": id, "timestamp": stamp, "cwd": cwd, "originator": "codex-tui"}},
			{"timestamp": stamp, "type": "event_msg", "payload": map[string]any{"type": "user_message", "message": first}},
		} {
			b, err := json.Marshal(l)
			require.NoError(t, err)
			data = append(append(data, b...), '\n')
		}
		name := filepath.Join(day, "rollout-"+now.Format("2006-01-02T15-04-05")+"-"+id+".jsonl")
		require.NoError(t, os.WriteFile(filepath.Join(staging, name), data, 0o600))
		ids, paths = append(ids, id), append(paths, filepath.Join(home, "sessions", name))
	}
	year := now.Format("2006")
	require.NoError(t, os.MkdirAll(filepath.Join(home, "sessions"), 0o700))
	require.NoDirExists(t, filepath.Join(home, "sessions", year))
	require.NoError(t, os.Rename(filepath.Join(staging, year), filepath.Join(home, "sessions", year)))
	return ids, paths
}
