package e2e

import (
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/webhook"
)

func TestFirstCommentSpawnsFreshSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	body := "please look at the failing build " + uuid.NewString()
	r := startWithComment(t, e, body)

	id := r.Status.HarnessSessionID
	assert.Regexp(t, uuidPattern, id)
	assert.Equal(t, desired.SpawnFresh, r.Status.SpawnMode)
	assert.Equal(t, e.workdir(keyIssue), r.Spec.Cwd)
	assert.DirExists(t, e.workdir(keyIssue), "the rendered workdir is created")
	assert.Empty(t, r.Pending, "the boot prompt was the delivery")

	log := e.argvLog(t)
	require.Len(t, log, 1, "one process start")
	got, ok := flagValue(log[0], "--session-id")
	assert.True(t, ok, "fresh spawn uses --session-id: %q", log[0])
	assert.Equal(t, id, got)
	assert.NotContains(t, log[0], "--resume")
	assert.Contains(t, log[0][len(log[0])-1], body, "the prompt is the last argument")

	out := e.mustRun(t, "get")
	var line string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, keyIssue.String()+" ") {
			line = l
		}
	}
	require.NotEmpty(t, line, "loopd get lists %s:\n%s", keyIssue, out)
	assert.Contains(t, strings.Fields(line), string(desired.PhaseRunning))
	assert.Contains(t, strings.Fields(line), id)
	assert.Contains(t, strings.Fields(line), desired.SessionName(keyIssue))

	for _, name := range []journal.Name{journal.DeliveryAccepted, journal.SessionSpawned, journal.DispatchDelivered} {
		assert.Len(t, e.eventsNamed(t, name, keyIssue), 1, "journal %s", name)
	}
	assert.True(t, e.hasSession(t, keyIssue))
}

func TestSecondCommentIsPastedIntoLiveSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID
	pid := e.panePID(t, keyIssue)
	require.NotZero(t, pid)

	body := "line one " + uuid.NewString() + "\nline two\n\nline four"
	sendComment(t, e, body)
	e.waitTurn(t, keyIssue, id, body, waitShort, "the second comment never reached the transcript with its newlines")
	e.waitEvent(t, journal.DispatchDelivered, keyIssue, 2, waitShort)
	e.settle(t)

	turns := e.userTurns(t, keyIssue, id)
	assert.Len(t, turns, 2, "exactly one more user turn: %q", turns)
	assert.Equal(t, 1, countContaining(turns, body))
	assert.Len(t, e.argvLog(t), 1, "no new process start")
	assert.Equal(t, pid, e.panePID(t, keyIssue), "the same process")
	after := e.mustRecord(t, keyIssue)
	assert.Equal(t, id, after.Status.HarnessSessionID)
	assert.Empty(t, after.Pending)
}

func TestRedeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID

	body := "a comment GitHub redelivers " + uuid.NewString()
	delivery := sendComment(t, e, body)
	e.waitTurn(t, keyIssue, id, body, waitShort, "the comment never reached the transcript")
	e.waitEvent(t, journal.DispatchDelivered, keyIssue, 2, waitShort)

	status := e.replay(t, commentFixture, delivery, withComment(body))
	assert.GreaterOrEqual(t, status, 200)
	assert.Less(t, status, 300)
	e.waitEvent(t, journal.DeliveryDuplicate, keyIssue, 1, waitShort)
	e.settle(t)

	assert.Equal(t, 1, countContaining(e.userTurns(t, keyIssue, id), body), "no second user turn")
	assert.Len(t, e.userTurns(t, keyIssue, id), 2)
	after := e.mustRecord(t, keyIssue)
	assert.Empty(t, after.Pending, "no new pending delivery")
	assert.Len(t, e.eventsNamed(t, journal.DeliveryAccepted, keyIssue), 2)
	assert.Len(t, e.eventsNamed(t, journal.DispatchDelivered, keyIssue), 2)
	assert.Len(t, e.argvLog(t), 1)
}

func TestKilledAgentResumesOnNextComment(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{Policy: map[string]any{"restartPolicy": "Never"}})
	r := startWithComment(t, e, "first comment "+uuid.NewString())
	id := r.Status.HarnessSessionID
	path := e.transcriptPath(t, keyIssue, id)

	e.killPane(t, keyIssue)
	exited := e.waitEvent(t, journal.SessionExited, keyIssue, 1, waitShort)
	assert.Equal(t, "false", exited[0].Attrs["clean"], "a kill -9 is not a clean exit: %v", exited[0].Attrs)
	e.settle(t)
	require.Len(t, e.argvLog(t), 1, "restartPolicy Never: no self-heal")
	down := e.mustRecord(t, keyIssue)
	assert.Equal(t, desired.PhaseExited, down.Status.Phase)

	body := "after the crash " + uuid.NewString()
	sendComment(t, e, body)
	e.waitTurn(t, keyIssue, id, body, waitShort, "the comment never reached the same transcript")
	after := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)

	log := e.argvLog(t)
	require.Len(t, log, 2)
	got, ok := flagValue(log[1], "--resume")
	assert.True(t, ok, "the respawn resumes: %q", log[1])
	assert.Equal(t, id, got)
	assert.NotContains(t, log[1], "--session-id")
	assert.Equal(t, id, after.Status.HarnessSessionID)
	assert.Equal(t, desired.SpawnResume, after.Status.SpawnMode)
	assert.Equal(t, path, e.transcriptPath(t, keyIssue, after.Status.HarnessSessionID), "the same transcript file")
	assert.Empty(t, e.eventsNamed(t, journal.SessionResumeFailed, keyIssue))
}

// longBody returns n characters of text in short lines: a unique first
// line with some non-ASCII UTF-8, then ASCII lines with a tab.
func longBody(n int) string {
	var b strings.Builder
	b.WriteString("long é ünïcode " + uuid.NewString() + "\n")
	runes := utf8.RuneCountInString(b.String())
	for i := 0; runes < n; i++ {
		line := strings.Repeat(string(rune('a'+i%26)), 60) + "\ttabbed line\n"
		b.WriteString(line)
		runes += len(line)
	}
	r := []rune(b.String())
	return string(r[:n-1]) + "."
}

func TestLongCommentArrivesWhole(t *testing.T) {
	t.Parallel()
	body := longBody(65536)
	require.Equal(t, 65536, utf8.RuneCountInString(body))
	// Claude Code stores a pasted tab as four spaces (docs/design.md,
	// "Delivery is verified"), and so does the fake.
	pasted := strings.ReplaceAll(body, "\t", "    ")

	t.Run("live_session", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		r := startWithComment(t, e, "first comment "+uuid.NewString())
		delivery := sendComment(t, e, body)
		e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, pasted, waitLong, "the long comment never arrived whole")
		assert.Equal(t, "true", waitDelivered(t, e, delivery, waitShort).Attrs["verified"])
		assert.Len(t, e.argvLog(t), 1)
	})
	t.Run("first_event_of_new_item", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOpts{})
		e.start(t)
		require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", withComment(body)))
		r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
		e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, pasted, waitLong, "the long comment never arrived whole")
		log := e.argvLog(t)
		require.Len(t, log, 1)
		_, fresh := flagValue(log[0], "--session-id")
		assert.True(t, fresh)
		assert.NotContains(t, log[0][len(log[0])-1], body, "the boot prompt in argv is the header only")
		assert.Less(t, len(log[0][len(log[0])-1]), 8192)
		turns := e.userTurns(t, keyIssue, r.Status.HarnessSessionID)
		assert.Equal(t, 1, countContaining(turns, pasted))
	})
}

func TestClosedPullRequestStopsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	require.Equal(t, http.StatusAccepted, e.replay(t, "pull_request.opened.1.json", "", nil))
	e.waitPhase(t, keyPR, desired.PhaseRunning, waitShort)
	require.True(t, e.hasSession(t, keyPR))
	starts := len(e.argvLog(t))

	require.Equal(t, http.StatusAccepted, e.replay(t, "pull_request.closed.1.json", "", nil))
	r := e.waitPhase(t, keyPR, desired.PhaseStopped, waitShort)
	assert.True(t, r.Spec.Closed)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyPR) }, waitShort, "the session was not killed")
	e.waitEvent(t, journal.SessionStopped, keyPR, 1, waitShort)

	body := "a comment on a closed pull request " + uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", all(withNumber(keyPR.Number), withComment(body))))
	e.waitEvent(t, journal.DeliveryAccepted, keyPR, 2, waitShort)
	e.settle(t)

	assert.False(t, e.hasSession(t, keyPR), "no respawn")
	assert.Len(t, e.argvLog(t), starts, "no process start")
	after := e.mustRecord(t, keyPR)
	assert.Equal(t, desired.PhaseStopped, after.Status.Phase)
	assert.Equal(t, r.Status.HarnessSessionID, after.Status.HarnessSessionID)
}

func TestBadSignatureStoresNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	body := e.payload(t, commentFixture, nil)
	for name, sig := range map[string]string{
		"wrong_secret": webhook.Sign([]byte("not-the-secret"), body),
		"missing":      "",
		"sha1":         "sha1=0123456789abcdef0123456789abcdef01234567",
	} {
		assert.Equal(t, http.StatusUnauthorized, e.post(t, "issue_comment", "", body, sig), name)
	}
	e.settle(t)
	assert.Empty(t, e.records(t))
	// Each is journaled as rejected (its reason and error tell the three
	// apart), and nothing else is.
	evs := e.waitEvent(t, journal.DeliveryRejected, desired.Key{}, 3, waitShort)
	reasons := map[string]int{}
	for _, ev := range evs {
		assert.Empty(t, ev.WorkItem)
		reasons[ev.Attrs["reason"]]++
	}
	assert.Equal(t, map[string]int{"bad_signature": 2, "missing_signature": 1}, reasons)
	assert.Len(t, e.events(t), 3)
	assert.Empty(t, e.sessions(t))
	assert.Empty(t, e.starts(t), "no agent started")
}
