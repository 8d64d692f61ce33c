package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
)

// announcementsOf returns the comments on issue k that carry its announce
// marker.
func announcementsOf(srv *ghapitest.Server, k desired.Key) []ghapitest.Comment {
	var out []ghapitest.Comment
	for _, c := range srv.Comments(k.Owner, k.Repo, k.Number) {
		if strings.Contains(c.Body, "<!-- loopd:announce "+k.String()+" -->") {
			out = append(out, c)
		}
	}
	return out
}

// TestSecondaryLimitPausesEveryWrite: three issues open while GitHub
// answers every content write 429 with retry-after: 8. The first write
// pauses the installation's writes (github.paused), which loopd get, the
// status page and /metrics show while it holds; nothing else is sent into
// the limit but one probe per pause. Once GitHub takes writes again, the
// writes drain a second apart or more, and every issue has exactly one
// announcement and its reaction.
func TestSecondaryLimitPausesEveryWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv, _ := e.withGitHub(t)
	srv.LimitWrites(ghapitest.SecondaryLimit{Until: time.Now().Add(time.Hour), Status: http.StatusTooManyRequests, RetryAfter: 8 * time.Second})
	e.start(t)
	keys := []desired.Key{keyIssue, {Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 3}, {Owner: keyIssue.Owner, Repo: keyIssue.Repo, Number: 4}}
	for _, k := range keys {
		e.deliver(t, "issues.opened.1.json", withNumber(k.Number))
	}
	for _, k := range keys {
		e.waitPhase(t, k, desired.PhaseRunning, waitLong)
	}
	paused := e.waitEvent(t, journal.GitHubPaused, desired.Key{}, 1, waitLong)
	assert.Equal(t, "secondary", paused[0].Attrs["limit"])
	assert.Equal(t, "token", paused[0].Attrs["installation"])
	assert.Equal(t, "8s", paused[0].Attrs["pause"])

	got := e.mustRun(t, "get")
	assert.Contains(t, got, "GITHUB CALLS PAUSED")
	assert.Contains(t, got, "token         secondary")
	assert.Contains(t, got, "429")
	assert.Greater(t, e.metric(t, `loopd_github_paused_seconds{installation="token",limit="secondary"}`), 0.0)
	resp, err := (&http.Client{Timeout: waitShort}).Get("http://" + e.listen + "/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(page), "GitHub calls paused")

	srv.LimitWrites(ghapitest.SecondaryLimit{})
	e.waitFor(t, func() bool {
		for _, k := range keys {
			if len(announcementsOf(srv, k)) == 0 {
				return false
			}
		}
		return len(srv.Reactions()) == len(keys)
	}, waitLong, "not every issue was announced and acknowledged")
	e.settle(t)

	limited, landed := srv.Writes()
	pauses := e.eventsNamed(t, journal.GitHubPaused, desired.Key{})
	assert.Equal(t, len(pauses), limited, "one write into the limit per pause: the first, then one probe each")
	require.Len(t, landed, 2*len(keys), "an announcement and a reaction each")
	for i := 1; i < len(landed); i++ {
		assert.GreaterOrEqual(t, landed[i].Sub(landed[i-1]), time.Second, "write %d", i)
	}
	for _, k := range keys {
		assert.Len(t, announcementsOf(srv, k), 1, "%s announced once", k)
	}
	assert.NotContains(t, e.mustRun(t, "get"), "GITHUB CALLS PAUSED", "a write went through: the pause is over")
}
