package ghapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/schema"
)

// reactOnAPI is react on keyAPI.
func reactOnAPI() desired.Call {
	c := react
	c.Key = keyAPI
	return c
}

// TestInstallationTokenRefreshedBeforeItExpires: with GitHub's clock two
// minutes ahead of loopd's, two behind, or the same, the App's first call
// gets a token (the JWT's times follow GitHub's Date), a call while the
// token has more than schema.GitHubTokenRefreshMargin left by GitHub's clock uses it,
// and one with less mints a new one first: no call is refused.
func TestInstallationTokenRefreshedBeforeItExpires(t *testing.T) {
	for _, skew := range []time.Duration{-2 * time.Minute, 0, 2 * time.Minute} {
		t.Run(skew.String(), func(t *testing.T) {
			local := &clock{t: time.Now().Truncate(time.Second)}
			srv := ghapitest.New(t)
			srv.SetNow(func() time.Time { return local.Now().Add(skew) })
			c, err := ghapi.NewAt(srv.APIURL(), ghapi.Credentials{AppID: 12, InstallationID: 34, PrivateKey: pemKey}, nil, 5*time.Second, local.Now)
			require.NoError(t, err)
			ctx := context.Background()

			_, err = c.Send(ctx, reactOnAPI())
			require.NoError(t, err)
			require.Equal(t, 1, srv.OwnTokens())

			local.set(local.Now().Add(srv.TokenTTL - schema.GitHubTokenRefreshMargin - 10*time.Second))
			_, err = c.Send(ctx, reactOnAPI())
			require.NoError(t, err)
			assert.Equal(t, 1, srv.OwnTokens(), "more than the margin left: the same token")

			local.set(local.Now().Add(20 * time.Second))
			_, err = c.Send(ctx, reactOnAPI())
			require.NoError(t, err)
			assert.Equal(t, 2, srv.OwnTokens(), "less than the margin left: a new token")
			reqs := srv.Requests()
			assert.Equal(t, "token ghs_installation_2", reqs[len(reqs)-1].Auth)
			assert.Equal(t, 3, srv.Count("POST", reactPath), "no call was refused and sent again")
		})
	}
}

// TestUnauthorizedCallMintsATokenAndRetriesOnce: a token GitHub revoked
// is answered 401; the call mints another token and is sent once more,
// its body whole. A call refused again is not sent a third time: its 401
// is the error, not retried by the outbox.
func TestUnauthorizedCallMintsATokenAndRetriesOnce(t *testing.T) {
	srv := ghapitest.New(t)
	c := appClient(t, srv, 34)
	ctx := context.Background()
	_, err := c.Send(ctx, reactOnAPI())
	require.NoError(t, err)

	srv.RevokeTokens()
	notice := desired.Call{Key: keyAPI, Kind: desired.CallNotify, Body: "after a revoke"}
	_, err = c.Send(ctx, notice)
	require.NoError(t, err)
	assert.Equal(t, 2, srv.OwnTokens())
	comments := srv.Comments("acme", "api", 42)
	require.Len(t, comments, 1)
	assert.Equal(t, "after a revoke", comments[0].Body)
	assert.Equal(t, "loopd-app[bot]", comments[0].Author)

	before := srv.Count("POST", postPath)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: postPath, Status: http.StatusUnauthorized, Body: `{"message":"Bad credentials"}`, Times: 3})
	_, err = c.Send(ctx, notice)
	require.Error(t, err)
	assert.Equal(t, ghapi.Verdict{HTTPStatus: 401, Message: "Bad credentials"}, ghapi.Classify(err, time.Now()))
	assert.Equal(t, before+2, srv.Count("POST", postPath), "sent once more, not again")
	assert.Equal(t, 3, srv.OwnTokens())
}

// TestMinterMintsAgainBeforeExpiry: an agent's token is minted anew, as
// loopd's own is, schema.GitHubTokenRefreshMargin before it expires by GitHub's clock,
// which runs two minutes ahead of loopd's here; before that, the same
// token is handed out with its expiry.
func TestMinterMintsAgainBeforeExpiry(t *testing.T) {
	local := &clock{t: time.Now().Truncate(time.Second)}
	srv := ghapitest.New(t)
	srv.SetNow(func() time.Time { return local.Now().Add(2 * time.Minute) })
	m, err := ghapi.NewMinterAt(srv.APIURL(), ghapi.Credentials{AppID: 12, InstallationID: 34, PrivateKey: pemKey}, nil, 5*time.Second, local.Now)
	require.NoError(t, err)
	ctx := context.Background()
	tok, expires, err := m.Token(ctx, 0, "acme", "api")
	require.NoError(t, err)
	assert.WithinDuration(t, srv.Now().Add(srv.TokenTTL), expires, time.Second, "GitHub's expires_at")

	local.set(local.Now().Add(srv.TokenTTL - schema.GitHubTokenRefreshMargin - 10*time.Second))
	again, _, err := m.Token(ctx, 0, "acme", "api")
	require.NoError(t, err)
	assert.Equal(t, tok, again)
	local.set(local.Now().Add(20 * time.Second))
	next, _, err := m.Token(ctx, 0, "acme", "api")
	require.NoError(t, err)
	assert.NotEqual(t, tok, next)
	assert.Len(t, srv.Tokens(), 2)
}
