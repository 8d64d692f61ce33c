package ghapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
)

// The minter asks for a token of one repository with the agents'
// permissions, keeps it per repository (names in any case) while it
// lasts, and needs an App.
func TestMinterScopesEachTokenToOneRepository(t *testing.T) {
	_, err := ghapi.NewMinter("", ghapi.Credentials{Token: "ghp_x"}, nil, time.Second)
	require.ErrorIs(t, err, ghapi.ErrNoCredentials)

	srv := ghapitest.New(t)
	m, err := ghapi.NewMinter(srv.APIURL(), ghapi.Credentials{AppID: 12, InstallationID: 34, PrivateKey: ghapitest.AppKey(t)}, nil, 5*time.Second)
	require.NoError(t, err)
	ctx := context.Background()
	tok, expires, err := m.Token(ctx, 0, "octo-org", "api")
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), expires, time.Minute)
	again, _, err := m.Token(ctx, 0, "Octo-Org", "API")
	require.NoError(t, err)
	assert.Equal(t, tok, again, "one token per repository, whatever the case")
	other, _, err := m.Token(ctx, 0, "octo-org", "web")
	require.NoError(t, err)
	assert.NotEqual(t, tok, other)

	minted := srv.Tokens()
	require.Len(t, minted, 2)
	assert.Equal(t, []string{"api"}, minted[0].Repositories)
	assert.Equal(t, []string{"web"}, minted[1].Repositories)
	for _, mt := range minted {
		assert.Equal(t, map[string]string{"contents": "write", "pull_requests": "write", "issues": "write"}, mt.Permissions)
	}
	for _, r := range srv.Requests() {
		assert.Equal(t, "/app/installations/34/access_tokens", r.Path)
		assert.Contains(t, r.Auth, "Bearer ", "as the App (a JWT), never with a token")
	}
}
