package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
)

// withInstallation sets the payload's installation.id, as an App's
// webhook delivery carries it; 0 removes it (a repository webhook's, a
// replayed file's).
func withInstallation(id int64) func(map[string]any) {
	return func(m map[string]any) {
		if id == 0 {
			delete(m, "installation")
			return
		}
		m["installation"] = map[string]any{"id": id}
	}
}

// withRepository moves the payload to owner/repo.
func withRepository(owner, repo string) func(map[string]any) {
	return func(m map[string]any) {
		r := m["repository"].(map[string]any)
		r["name"], r["full_name"] = repo, owner+"/"+repo
		r["html_url"] = "https://github.com/" + owner + "/" + repo
		r["owner"].(map[string]any)["login"] = owner
	}
}

// TestEveryInstallation: an App installed on two organizations, with no
// installation id in the config, announces each organization's item with
// a token of the installation its delivery came through (the stand-in
// refuses another installation's token there, as GitHub does); an item
// whose delivery names no installation is announced through the one
// GitHub's per-repository lookup names, asked once; the item keeps its
// installation (loopd describe shows it).
func TestEveryInstallation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	srv := ghapitest.New(t)
	srv.Install("Codertocat", 11)
	srv.Install("octo-org", 22)
	keyFile := filepath.Join(e.dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, ghapitest.AppKey(t), 0o600))
	e.config["github"] = map[string]any{"apiURL": srv.APIURL(), "app": map[string]any{"appID": 12, "privateKeyFile": keyFile}}
	e.writeConfig(t)
	e.start(t)

	other := desired.Key{Owner: "octo-org", Repo: "api", Number: 2}
	replayed := desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 3}
	e.deliver(t, "issues.opened.1.json", withInstallation(11))
	e.deliver(t, "issues.opened.1.json", all(withRepository("octo-org", "api"), withNumber(2), withInstallation(22)))
	e.deliver(t, "issues.opened.1.json", all(withNumber(3), withInstallation(0)))

	want := map[desired.Key]int64{keyIssue: 11, other: 22, replayed: 11}
	for k, id := range want {
		e.waitFor(t, func() bool { return len(announcementsOf(srv, k)) == 1 }, waitLong, "%s never announced", k)
		a := announcementsOf(srv, k)[0]
		assert.Equal(t, id, a.Installation, "%s announced with installation %d's token", k, id)
		assert.Equal(t, "loopd-app[bot]", a.Author)
	}
	assert.Equal(t, 1, srv.Count(http.MethodGet, regexp.MustCompile(`/installation$`)), "one lookup: the item no delivery named one for")
	assert.Equal(t, 1, srv.Count(http.MethodGet, regexp.MustCompile(`^/repos/Codertocat/Hello-World/installation$`)))
	assert.Equal(t, 2, srv.OwnTokens(), "one token per installation")
	for _, ev := range e.eventsNamed(t, journal.GitHubFailed, desired.Key{}) {
		t.Errorf("github.failed: %v", ev.Attrs)
	}

	r, ok := e.record(t, other)
	require.True(t, ok)
	assert.Equal(t, int64(22), r.Spec.Installation)
	assert.Regexp(t, `(?m)^  Installation:\s+22$`, e.mustRun(t, "describe", other.String()))
	r, ok = e.record(t, replayed)
	require.True(t, ok)
	assert.Zero(t, r.Spec.Installation, "no delivery named one: the lookup is the call's")
}
