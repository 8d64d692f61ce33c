package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/webhook"
)

// fixturesDir holds the GitHub webhook example payloads
// (testdata/github-webhooks/README.md says where they come from).
var fixturesDir = filepath.Join("..", "testdata", "github-webhooks")

// commentFixture is a comment on issue 1.
const commentFixture = "issue_comment.created.1.json"

// githubTimeout is how long GitHub waits for the answer to a delivery
// before it gives up on it (GitHub docs, "Best practices for using
// webhooks": respond within 10 seconds).
const githubTimeout = 10 * time.Second

// webhookURL is where the daemon listens for deliveries.
func (e *env) webhookURL() string { return "http://" + e.listen + "/webhook" }

// payload reads the fixture (e.g. "issue_comment.created.1.json"), applies
// mutate to its parsed JSON (numbers kept exact) and returns the new body.
func (e *env) payload(t testing.TB, fixture string, mutate func(map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixturesDir, fixture))
	require.NoError(t, err)
	if mutate == nil {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	mutate(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// eventOf is the X-GitHub-Event of a fixture: its name up to the first dot.
func eventOf(fixture string) string {
	event, _, _ := strings.Cut(fixture, ".")
	return event
}

// replay delivers the fixture, edited by mutate (may be nil), signed with
// the env's secret, as delivery deliveryID ("" for a new GUID), and returns
// the HTTP status.
func (e *env) replay(t testing.TB, fixture, deliveryID string, mutate func(map[string]any)) int {
	t.Helper()
	body := e.payload(t, fixture, mutate)
	return e.post(t, eventOf(fixture), deliveryID, body, webhook.Sign([]byte(e.secret), body))
}

// post delivers body as event with the given signature header ("" for
// none), as GitHub does, and returns the HTTP status. It fails the test
// when no answer comes within githubTimeout.
func (e *env) post(t testing.TB, event, deliveryID string, body []byte, signature string) int {
	t.Helper()
	if deliveryID == "" {
		deliveryID = uuid.NewString()
	}
	req, err := http.NewRequest(http.MethodPost, e.webhookURL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", deliveryID)
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := (&http.Client{Timeout: githubTimeout}).Do(req)
	require.NoError(t, err, "no answer within GitHub's %s", githubTimeout)
	resp.Body.Close()
	return resp.StatusCode
}

// deliver replays the fixture as a new delivery, requires it accepted and
// returns its delivery id.
func (e *env) deliver(t testing.TB, fixture string, mutate func(map[string]any)) string {
	t.Helper()
	id := uuid.NewString()
	require.Equal(t, http.StatusAccepted, e.replay(t, fixture, id, mutate), "delivery %s of %s", id, fixture)
	return id
}

// sendComment sends a comment with body on keyIssue, as a new delivery, and
// returns the delivery id.
func sendComment(t *testing.T, e *env, body string) string {
	t.Helper()
	return e.deliver(t, commentFixture, withComment(body))
}

// comment delivers a new comment on issue 1 whose body holds a unique
// marker, and returns the marker and the delivery id.
func (e *env) comment(t *testing.T) (marker, deliveryID string) {
	t.Helper()
	marker = "marker-" + uuid.NewString()
	return marker, sendComment(t, e, "please look again "+marker)
}

// withComment sets the payload's comment body, and makes the comment's
// updated_at its own: the same fixture sent again with another body is
// another comment (an edit's time), not a replay of the first (an event's
// identity is its comment's id, action and updated_at).
func withComment(body string) func(map[string]any) {
	return func(m map[string]any) {
		c := m["comment"].(map[string]any)
		c["body"], c["updated_at"] = body, time.Now().UTC().Format(time.RFC3339Nano)
	}
}

// withNumber sets the issue or pull request number of the payload.
func withNumber(n int) func(map[string]any) {
	return func(m map[string]any) {
		for _, k := range []string{"issue", "pull_request"} {
			if o, ok := m[k].(map[string]any); ok {
				o["number"] = n
			}
		}
		if _, ok := m["number"]; ok {
			m["number"] = n
		}
	}
}

// all applies every mutation in order.
func all(muts ...func(map[string]any)) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range muts {
			f(m)
		}
	}
}
