package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplayRefusesAFileWhoseEventItCannotTell: replay takes the event from
// the file's name; a name that is no GitHub event (payload.json) is refused
// before anything is sent, with a near miss suggested, and --event names it
// instead.
func TestReplayRefusesAFileWhoseEventItCannotTell(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", "issue_comment.created.1.json"))
	require.NoError(t, err)
	named := filepath.Join(dir, "issue_comment.created.1.json")
	unnamed := filepath.Join(dir, "payload.json")
	typo := filepath.Join(dir, "isue_comment.created.1.json")
	for _, f := range []string{named, unnamed, typo} {
		require.NoError(t, os.WriteFile(f, body, 0o600))
	}
	var mu sync.Mutex
	var events []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		events = append(events, r.Header.Get("X-GitHub-Event"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	replay := func(args ...string) error {
		t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cret") // loopd takes it out of its environment once read
		_, err := run(t, "", append([]string{"--config", config, "replay", "--url", srv.URL}, args...)...)
		return err
	}
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), events...)
	}

	err = replay(named, unnamed)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `cannot tell its event: "payload" is no GitHub event; name the file <event>.<action>.<n>.json or give --event`)
	assert.Empty(t, sent(), "nothing sent: the bad name is found first")

	assert.ErrorContains(t, replay(typo), `"isue_comment" is no GitHub event; did you mean issue_comment?`)

	err = replay(named, filepath.Join(dir, "issue_comment.created.9.json"))
	assert.ErrorIs(t, err, os.ErrNotExist, "a file that is not there is named so")
	assert.Equal(t, []string{}, append([]string{}, sent()...), "and nothing is sent")
	require.NoError(t, replay(named))
	require.NoError(t, replay("--event", "issue_comment", unnamed))
	assert.Equal(t, []string{"issue_comment", "issue_comment"}, sent())
}

// TestReplayWithNoServeSaysSo: a replay to a listener nobody runs asks
// whether serve runs there, not only "connection refused".
func TestReplayWithNoServeSaysSo(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	file := filepath.Join(dir, "issue_comment.created.1.json")
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", "issue_comment.created.1.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, body, 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/webhook"
	require.NoError(t, ln.Close()) // a port no one listens on
	t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cret")
	_, err = run(t, "", "--config", config, "replay", "--url", url, file)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is loopd serve running, listening at "+url+"?")
}

// TestReplayRefusesJunk: a file that is not JSON, or JSON that is not a
// payload of the event --event names, is refused with the reason and a
// non-zero exit, before anything is sent; every sample payload passes.
func TestReplayRefusesJunk(t *testing.T) {
	dir := t.TempDir()
	config := writeConfig(t, dir)
	var mu sync.Mutex
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent++
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	replay := func(args ...string) error {
		t.Setenv("LOOPD_WEBHOOK_SECRET", "s3cret")
		_, err := run(t, "", append([]string{"--config", config, "replay", "--url", srv.URL}, args...)...)
		return err
	}
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte(body), 0o600))
		return f
	}
	assert.ErrorContains(t, replay("--event", "issues", write("junk", "this is no json\n")), "junk: not a JSON object")
	assert.ErrorContains(t, replay("--event", "issues", write("null.json", "null")), "not a JSON object")
	assert.ErrorContains(t, replay("--event", "issues", write("empty.json", "{}")), `not a payload of its event: issues payload has no "action"`)
	check, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", "check_run.completed.1.json"))
	require.NoError(t, err)
	assert.ErrorContains(t, replay("--event", "issues", write("other.json", string(check))), `issues payload has no "issue"`)
	issue, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", "issues.opened.1.json"))
	require.NoError(t, err)
	assert.ErrorContains(t, replay("--event", "isues", write("payload.json", string(issue))), `--event: "isues" is no GitHub event; did you mean issues?`)
	mu.Lock()
	assert.Zero(t, sent, "nothing sent")
	mu.Unlock()

	samples, err := filepath.Glob(filepath.Join("..", "..", "testdata", "github-webhooks", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, samples)
	for _, f := range samples {
		assert.NoError(t, replay(f), "sample %s", filepath.Base(f))
	}
}
