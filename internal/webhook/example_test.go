package webhook

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/schema"
)

// TestExampleConfigAcceptsTheFixtures: the README's first run copies
// loopd.example.yaml and replays the fixtures under
// testdata/github-webhooks; their sender is authorized and their
// repository routed, so each opening event is accepted, not ignored.
func TestExampleConfigAcceptsTheFixtures(t *testing.T) {
	cfg, err := schema.Load("../../loopd.example.yaml")
	require.NoError(t, err)
	e := newEnv(t)
	e.cfg.Store(&cfg.Webhooks.GHWebhook)
	for _, f := range []struct{ event, file string }{
		{"issues", "issues.opened.1.json"},
		{"issue_comment", "issue_comment.created.1.json"},
		{"pull_request", "pull_request.opened.1.json"},
	} {
		code, text := e.replay(t, f.event, "d-"+f.file, fixture(t, f.file))
		assert.Equal(t, http.StatusAccepted, code, "%s: %s", f.file, text)
		assert.NotContains(t, text, "ignored", f.file)
	}
}
