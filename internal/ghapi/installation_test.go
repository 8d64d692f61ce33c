package ghapi_test

import (
	"context"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
)

// TestEachInstallationItsOwnToken: an App installed on two organizations
// and configured with no installation id sends each call with a token of
// the installation its item names, and counts it against that
// installation's limits; a call whose item names none goes through the
// installation GitHub's lookup names for its repository, asked once per
// repository; a repository the App is not installed on is GitHub's 404,
// not retried.
func TestEachInstallationItsOwnToken(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Install("acme", 11)
	srv.Install("globex", 22)
	c := appClient(t, srv, 0)
	ctx := context.Background()

	acme := react
	acme.Key, acme.Installation = keyAPI, 11
	globex := react
	globex.Key, globex.Installation = desired.Key{Owner: "globex", Repo: "web", Number: 7}, 22
	for _, call := range []desired.Call{acme, globex, acme} {
		_, err := c.Send(ctx, call)
		require.NoError(t, err)
	}
	inst, err := c.Installation(ctx, globex)
	require.NoError(t, err)
	assert.Equal(t, "installation 22", inst)
	assert.Equal(t, 2, srv.OwnTokens(), "one token per installation, kept")
	byRepo := map[string]int64{}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && anyReactions.MatchString(r.Path) {
			byRepo[r.Path] = srv.TokenInstallation(r.Auth[len("token "):])
		}
	}
	assert.Equal(t, map[string]int64{"/repos/acme/api/issues/comments/7/reactions": 11, "/repos/globex/web/issues/comments/7/reactions": 22}, byRepo)

	unknown := globex
	unknown.Installation = 0
	for range 2 {
		inst, err = c.Installation(ctx, unknown)
		require.NoError(t, err)
		assert.Equal(t, "installation 22", inst, "the lookup's")
		_, err = c.Send(ctx, unknown)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, srv.Count(http.MethodGet, regexp.MustCompile(`^/repos/globex/web/installation$`)), "asked once")
	assert.Equal(t, 2, srv.OwnTokens())

	elsewhere := react
	elsewhere.Key = desired.Key{Owner: "initech", Repo: "tps", Number: 1}
	_, err = c.Send(ctx, elsewhere)
	require.Error(t, err)
	v := ghapi.Classify(err, srv.Now())
	assert.Equal(t, http.StatusNotFound, v.HTTPStatus)
	assert.False(t, v.Retry)
}

var anyReactions = regexp.MustCompile(`/reactions$`)
