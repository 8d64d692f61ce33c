package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
)

// gitHubTokenEnv is the variable the test configs name for the GitHub
// token (github.tokenEnv).
const gitHubTokenEnv = "LOOPD_E2E_GITHUB_TOKEN"

// withGitHub points e's config at a stand-in of GitHub's REST API and gives
// the daemon a token for it. It returns the server and the token.
func (e *env) withGitHub(t *testing.T) (*ghapitest.Server, string) {
	t.Helper()
	srv := ghapitest.New(t)
	token := "ghp_e2e" + strings.ReplaceAll(uuid.NewString(), "-", "")
	e.config["github"] = map[string]any{"apiURL": srv.APIURL(), "tokenEnv": gitHubTokenEnv}
	e.writeConfig(t)
	e.daemonEnv = append(e.daemonEnv, gitHubTokenEnv+"="+token)
	return srv, token
}

var (
	issueComments = regexp.MustCompile(`^/repos/Codertocat/Hello-World/issues/1/comments$`)
	anyReaction   = regexp.MustCompile(`/reactions$`)
)

// announcements returns the comments on issue 1 that carry its announce
// marker.
func announcements(srv *ghapitest.Server) []ghapitest.Comment {
	return commentsWith(srv, "<!-- loopd:announce Codertocat/Hello-World#1 -->")
}

// notices returns the comments on issue 1 that carry one of its notice
// markers.
func notices(srv *ghapitest.Server) []ghapitest.Comment {
	return commentsWith(srv, "<!-- loopd:notice Codertocat/Hello-World#1 episode=")
}

// commentsWith returns the comments on issue 1 whose body holds marker.
func commentsWith(srv *ghapitest.Server, marker string) []ghapitest.Comment {
	var out []ghapitest.Comment
	for _, c := range srv.Comments("Codertocat", "Hello-World", 1) {
		if strings.Contains(c.Body, marker) {
			out = append(out, c)
		}
	}
	return out
}

// waitPosted waits until the journal holds n github.posted rows of issue 1.
func (e *env) waitPosted(t *testing.T, n int) []journal.Event {
	t.Helper()
	return e.waitEvent(t, journal.GitHubPosted, keyIssue, n, waitLong)
}

// TestAnnounceOnceAndAcknowledge: the first spawn of an item is announced
// once, with its session and host, through the configured API URL and the
// token as a bearer; the opened event and a later comment get an eyes
// reaction once they reached the agent; a crash with a resume fallback
// posts one notice of the conversation replaced, and it, a release and a
// daemon restart announce nothing more; the token reaches no pane.
func TestAnnounceOnceAndAcknowledge(t *testing.T) {
	t.Parallel()
	// Every resume fails: a crash is followed by a fresh fallback.
	e := newEnv(t, envOpts{HarnessEnv: map[string]string{"FAKECLAUDE_RESUME_FAIL": "1"}})
	srv, token := e.withGitHub(t)
	r := e.boot(t, "issues.opened.1.json", nil)

	posted := e.waitPosted(t, 2)
	require.Len(t, announcements(srv), 1)
	body := announcements(srv)[0].Body
	assert.Contains(t, body, "`"+desired.SessionName(keyIssue)+"` on host `")
	assert.Contains(t, body, "Replies here reach the agent")
	assert.Contains(t, body, "tmux -L "+e.socket+" attach -t ="+desired.SessionName(keyIssue))
	assert.Equal(t, []ghapitest.Reaction{{On: "/repos/Codertocat/Hello-World/issues/1/reactions", Content: "eyes"}}, srv.Reactions(),
		"the opened event is acknowledged on the issue itself")
	calls := map[string]bool{}
	for _, ev := range posted {
		calls[ev.Attrs["call"]] = true
	}
	assert.Equal(t, map[string]bool{"announce": true, "react": true}, calls)
	for _, req := range srv.Requests() {
		assert.Equal(t, "Bearer "+token, req.Auth, "%s %s", req.Method, req.Path)
	}
	connected := e.eventsNamed(t, journal.GitHubConnected, desired.Key{})
	require.Len(t, connected, 1)
	assert.Equal(t, "loopd-bot", connected[0].Attrs["login"])

	// A comment that reached the agent gets eyes on the comment.
	marker, delivery := e.comment(t)
	waitDelivered(t, e, delivery, waitLong)
	e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, marker, waitShort, "the comment never reached the transcript")
	e.waitPosted(t, 3)
	assert.Contains(t, srv.Reactions(), ghapitest.Reaction{On: "/repos/Codertocat/Hello-World/issues/comments/492700400/reactions", Content: "eyes"})

	// A crash: the resume fails and a fresh conversation replaces it.
	e.killPane(t, keyIssue)
	e.waitEvent(t, journal.SessionResumeFailed, keyIssue, 1, waitLong)
	e.waitRecord(t, keyIssue, func(n desired.Record) bool {
		return n.Status.Phase == desired.PhaseRunning && n.Status.HarnessSessionID != r.Status.HarnessSessionID
	}, waitLong, "the fresh fallback never ran")

	// A release, then a restart.
	e.mustRun(t, "release", keyIssue.String())
	e.waitEvent(t, journal.ItemReleased, keyIssue, 1, waitShort)
	e.stop(t)
	e.start(t)
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	e.settle(t)

	assert.Len(t, announcements(srv), 1, "announced once")
	assert.Equal(t, 2, srv.Count("POST", issueComments), "the announcement and the notice of the conversation replaced, in all")
	queued := e.eventsNamed(t, journal.GitHubQueued, keyIssue)
	var kinds []string
	for _, ev := range queued {
		kinds = append(kinds, ev.Attrs["call"])
	}
	assert.Equal(t, []string{"announce", "react", "react", "notify"}, kinds, "announce, two reactions and one notice, nothing more")

	// The token is the daemon's: no pane's environment holds it.
	pid := e.panePID(t, keyIssue)
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	assert.NotContains(t, string(environ), token)
	assert.NotContains(t, string(environ), gitHubTokenEnv)
	out, err := e.tmux(t, "show-environment", "-g")
	require.NoError(t, err)
	assert.NotContains(t, out, token)
}

// TestGitHubOutboxSurvivesKill9: a daemon killed with SIGKILL while GitHub
// held its announcement (taken, not yet answered) finds the marker after
// the restart and posts nothing more, and sends the reaction queued behind
// it; a reaction that kept failing with a 502 when the daemon was killed
// is shown by the dry run, which sends nothing, and sent by a cron
// reconcile --once once due.
func TestGitHubOutboxSurvivesKill9(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv, token := e.withGitHub(t)
	held := srv.HoldPosts()
	r := e.boot(t, "issues.opened.1.json", nil)
	<-held
	e.kill9(t)
	srv.Release()
	require.Len(t, announcements(srv), 1, "GitHub took the announcement")

	e.start(t)
	posted := e.waitPosted(t, 2)
	found := map[string]string{}
	for _, ev := range posted {
		found[ev.Attrs["call"]] = ev.Attrs["found"]
	}
	assert.Equal(t, map[string]string{"announce": "true", "react": "false"}, found)
	assert.Len(t, announcements(srv), 1, "exactly one announcement")
	assert.Equal(t, 1, srv.Count("POST", issueComments))

	// A comment's reaction fails with 502 until the daemon is killed.
	srv.Fail(ghapitest.Failure{Method: "POST", Path: anyReaction, Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`, Times: 1000})
	marker, _ := e.comment(t)
	e.waitTurn(t, keyIssue, r.Status.HarnessSessionID, marker, waitLong, "the comment never reached the transcript")
	retry := e.waitEvent(t, journal.GitHubRetry, keyIssue, 1, waitLong)
	assert.Equal(t, "502", retry[0].Attrs["http_status"])
	e.kill9(t)
	srv.ClearFailures()

	// The dry run shows the queued call and sends nothing; a cron pass
	// sends it once it is due.
	before := len(srv.Requests())
	dry := e.mustRun(t, "reconcile", "--once", "--dry-run")
	assert.Contains(t, dry, "github_call work_item=Codertocat/Hello-World#1 call=react call_id=3 attempts=1 next_attempt=")
	assert.Contains(t, dry, "http_status=502 err=\"Bad Gateway\"", "the dry run shows why the call waits")
	assert.Len(t, srv.Requests(), before, "the dry run sends nothing")
	e.waitFor(t, func() bool {
		_, stderr, code := e.runEnv(t, []string{gitHubTokenEnv + "=" + token}, "reconcile", "--once")
		require.Zero(t, code, stderr)
		return len(srv.Reactions()) == 2
	}, waitShort, "reconcile --once never sent the reaction")
	e.start(t)
	e.settle(t)
	assert.Equal(t, []ghapitest.Reaction{
		{On: "/repos/Codertocat/Hello-World/issues/1/reactions", Content: "eyes"},
		{On: "/repos/Codertocat/Hello-World/issues/comments/492700400/reactions", Content: "eyes"},
	}, srv.Reactions(), "sent once")
}

// TestNeedsAttentionNotice: an item that enters NeedsAttention gets one
// notice per episode, naming the reason, the dialog its agent shows, and
// the release command; an agent blocked on a dialog gets one at once,
// naming the attach command; staying there posts nothing more; leaving
// and entering again is a new episode and a new notice. A reaction
// GitHub answers with 404 is not retried and shows in loopd get.
func TestNeedsAttentionNotice(t *testing.T) {
	t.Parallel()
	e := trustPromptEnv(t)
	srv, _ := e.withGitHub(t)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: anyReaction, Status: http.StatusNotFound, Body: `{"message":"Not Found"}`, Times: 1})
	stuckAtTrustDialog(t, e, "please look "+uuid.NewString())
	e.waitPosted(t, 2)
	notices := func() []ghapitest.Comment { return notices(srv) }
	require.Len(t, notices(), 2)
	// The dialog is noticed at once, with what clears it: acting on the
	// screen.
	body := notices()[0].Body
	assert.Contains(t, body, "needs attention: `blocked: workspace_trust`")
	assert.Contains(t, body, "\n    tmux -L "+e.socket+" attach -t =")
	assert.Contains(t, body, "episode=1 -->")
	// Then loopd gives up on the spawn: a new episode, cleared by a release.
	body = notices()[1].Body
	assert.Contains(t, body, "needs attention: `spawn_unconfirmed`")
	assert.Contains(t, body, "The agent's screen shows: workspace_trust.")
	assert.Contains(t, body, "1 event(s) wait for the agent")
	assert.Contains(t, body, "\n    loopd release Codertocat/Hello-World#1\n")
	assert.Contains(t, body, "episode=2 -->")
	assert.Empty(t, announcements(srv), "never confirmed running: nothing announced")
	e.settle(t)
	assert.Len(t, notices(), 2, "staying in NeedsAttention, and staying blocked, is the same episode")

	// The operator answers the dialog and releases: the event is found
	// in the conversation, and its reaction is refused with 404, given up
	// at once.
	pressEnter(t, e)
	e.mustRun(t, "release", keyIssue.String())
	failed := e.waitEvent(t, journal.GitHubFailed, keyIssue, 1, waitLong)
	assert.Equal(t, "404", failed[0].Attrs["http_status"])
	assert.Equal(t, "not_retried", failed[0].Attrs["reason"])
	assert.Equal(t, 1, srv.Count("POST", anyReaction), "a 404 is not retried")
	out := e.mustRun(t, "get")
	assert.Regexp(t, `GITHUB CALLS GIVEN UP\n.*\n`+regexp.QuoteMeta(keyIssue.String())+`\s+react\s+1\s+404\s+"?Not Found`, out)

	// A crash: the resume stops at the dialog again, a second episode.
	e.waitPhase(t, keyIssue, desired.PhaseRunning, waitShort)
	e.killPane(t, keyIssue)
	e.waitEvent(t, journal.SessionNeedsAttention, keyIssue, 2, waitLong)
	// Posted one a second (the write gap), after the announcement of the
	// run the release confirmed.
	e.waitFor(t, func() bool { return len(notices()) >= 4 }, waitLong, "the crash's notices were never posted")
	require.Len(t, notices(), 4)
	assert.Contains(t, notices()[2].Body, "needs attention: `blocked: workspace_trust`", "the release cleared the blocked notice")
	assert.Contains(t, notices()[3].Body, "needs attention: `resume_unconfirmed`")
	assert.Contains(t, notices()[3].Body, "episode=4 -->")
}

// TestBotLoginResolvedOnceGitHubAnswers: GitHub out of reach when serve
// starts is journaled and serve runs on, asking again in the background
// until it knows its login; meanwhile and after, a comment that carries
// loopd's own announcement marker is loopd's and never delivered, whoever
// sent it; once the login is known, a comment by it is not delivered even
// though the login is authorized (agents post as the operator).
func TestBotLoginResolvedOnceGitHubAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ghWebhook()["authorizedUsers"] = []string{"Codertocat", "loopd-bot"}
	srv, _ := e.withGitHub(t)
	srv.Fail(ghapitest.Failure{Method: "GET", Path: regexp.MustCompile(`^/user$`), Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`, Times: 1})
	e.start(t)
	failed := e.waitEvent(t, journal.GitHubFailed, desired.Key{}, 1, waitShort)
	assert.Equal(t, "login_unknown", failed[0].Attrs["reason"])
	assert.Equal(t, "502", failed[0].Attrs["http_status"])

	announce := "An agent is working on this issue.\n\n<!-- loopd:announce Codertocat/Hello-World#1 -->"
	e.deliver(t, commentFixture, withComment(announce))
	connected := e.waitEvent(t, journal.GitHubConnected, desired.Key{}, 1, waitLong)
	assert.Equal(t, "loopd-bot", connected[0].Attrs["login"])
	e.deliver(t, commentFixture, all(withComment("Done."), func(m map[string]any) {
		m["sender"].(map[string]any)["login"] = "loopd-bot"
	}))
	e.waitFor(t, func() bool { return len(e.ignoredReasons(t)) == 2 }, waitShort, "both comments are journaled as ignored")
	reasons := e.ignoredReasons(t)
	assert.Equal(t, 1, count(reasons, "own_marker"), "%v", reasons)
	assert.Equal(t, 1, count(reasons, "own_login"), "%v", reasons)
	_, ok := e.record(t, keyIssue)
	assert.False(t, ok, "neither created the item")
}

// TestWrongAppInstallationStopsServe: an App whose installation id GitHub
// does not know (404 on its installation token) stops serve at start with
// GitHub's answer, rather than passing the check on GET /app and retrying
// every call.
func TestWrongAppInstallationStopsServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv := ghapitest.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(e.dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	e.config["github"] = map[string]any{"apiURL": srv.APIURL(), "app": map[string]any{"appID": 12, "installationID": 999, "privateKeyFile": keyFile}}
	e.writeConfig(t)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: regexp.MustCompile(`^/app/installations/999/access_tokens$`), Status: http.StatusNotFound,
		Body: `{"message":"Not Found"}`, Times: 1})
	_, stderr, code := e.run(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "the credentials were refused")
	assert.Contains(t, stderr, "installation 999")
	assert.Equal(t, 1, srv.Count("POST", regexp.MustCompile(`/access_tokens$`)), "asked once, not retried")
}
