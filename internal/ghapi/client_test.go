package ghapi_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
)

var keyAPI = desired.Key{Owner: "acme", Repo: "api", Number: 42}

func tokenClient(t *testing.T, srv *ghapitest.Server) *ghapi.Client {
	t.Helper()
	c, err := ghapi.New(srv.APIURL(), ghapi.Credentials{Token: "tok-123"}, nil, 5*time.Second)
	require.NoError(t, err)
	return c
}

// TestSendMakesTheExactRequests: an announcement asks the bot login once
// (GET /user), lists the item's comments and posts one; each reaction goes to its own endpoint with "eyes"; every
// request carries the token as a bearer, under the GHES /api/v3 path.
func TestSendMakesTheExactRequests(t *testing.T) {
	srv := ghapitest.New(t)
	c := tokenClient(t, srv)
	ctx := context.Background()

	sent, err := c.Send(ctx, desired.Call{Key: keyAPI, Kind: desired.CallAnnounce, Body: "hi\n\n<!-- m -->", Marker: "<!-- m -->"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, sent.HTTPStatus)
	assert.False(t, sent.Found)
	assert.Regexp(t, `^https://github.example/acme/api/42#issuecomment-\d+$`, sent.URL)
	for _, target := range []desired.Source{
		{Kind: desired.SourceIssueComment, ID: 7}, {Kind: desired.SourceReviewComment, ID: 8}, {Kind: desired.SourceItem},
	} {
		sent, err := c.Send(ctx, desired.Call{Key: keyAPI, Kind: desired.CallReact, Target: target})
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, sent.HTTPStatus)
	}

	got := srv.Requests()
	require.Len(t, got, 6)
	for i := range got {
		got[i].At = time.Time{} // the server's clock
	}
	want := []ghapitest.Request{
		{Method: "GET", Path: "/user"},
		{Method: "GET", Path: "/repos/acme/api/issues/42/comments", Query: "per_page=100"},
		{Method: "POST", Path: "/repos/acme/api/issues/42/comments", Body: `{"body":"hi\n\n<!-- m -->"}` + "\n"},
		{Method: "POST", Path: "/repos/acme/api/issues/comments/7/reactions", Body: `{"content":"eyes"}` + "\n"},
		{Method: "POST", Path: "/repos/acme/api/pulls/comments/8/reactions", Body: `{"content":"eyes"}` + "\n"},
		{Method: "POST", Path: "/repos/acme/api/issues/42/reactions", Body: `{"content":"eyes"}` + "\n"},
	}
	for i := range want {
		want[i].Auth = "Bearer tok-123"
	}
	assert.Equal(t, want, got)
	assert.Equal(t, []ghapitest.Comment{{ID: srv.Comments("acme", "api", 42)[0].ID, Body: "hi\n\n<!-- m -->", URL: sent.URL, Author: "loopd-bot"}},
		srv.Comments("acme", "api", 42))
}

// TestSendFindsTheMarkerOnAnyPage: a comment that already carries the
// call's marker, even on a later page of the listing, is not posted again.
func TestSendFindsTheMarkerOnAnyPage(t *testing.T) {
	srv := ghapitest.New(t)
	srv.SetPageSize(2)
	srv.AddComment("acme", "api", 42, "octocat", "first")
	srv.AddComment("acme", "api", 42, "octocat", "second")
	srv.AddComment("acme", "api", 42, "loopd-bot", "hello\n\n<!-- loopd:announce acme/api#42 -->")
	c := tokenClient(t, srv)

	sent, err := c.Send(context.Background(), desired.Call{Key: keyAPI, Kind: desired.CallAnnounce, Body: "hello again",
		Marker: "<!-- loopd:announce acme/api#42 -->"})
	require.NoError(t, err)
	assert.True(t, sent.Found)
	assert.Len(t, srv.Comments("acme", "api", 42), 3)
	assert.Equal(t, 2, srv.Count("GET", regexp.MustCompile(`/issues/42/comments$`)), "two pages read")
	assert.Zero(t, srv.Count("POST", regexp.MustCompile(`/comments$`)))
}

// TestLogin: the bot login is the token's user, or the App's slug with
// [bot] asked as the App (a JWT); the App's installation calls carry the
// installation token ghinstallation fetched.
func TestLogin(t *testing.T) {
	srv := ghapitest.New(t)
	ctx := context.Background()
	tc := tokenClient(t, srv)
	login, err := tc.BotLogin(ctx)
	require.NoError(t, err)
	assert.Equal(t, "loopd-bot", login)
	_, err = tc.BotLogin(ctx)
	require.NoError(t, err, "asked once, then remembered")
	configured, err := ghapi.New(srv.APIURL(), ghapi.Credentials{Token: "tok-123", BotLogin: "configured[bot]"}, nil, 5*time.Second)
	require.NoError(t, err)
	login, err = configured.BotLogin(ctx)
	require.NoError(t, err)
	assert.Equal(t, "configured[bot]", login)

	app := appClient(t, srv, 34)
	login, err = app.Login(ctx)
	require.NoError(t, err)
	assert.Equal(t, "loopd-app[bot]", login)
	_, err = app.Send(ctx, desired.Call{Key: keyAPI, Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceItem}})
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Len(t, reqs, 4, "a configured login asks nothing")
	assert.Equal(t, "/user", reqs[0].Path)
	assert.Equal(t, "/app", reqs[1].Path)
	assert.Regexp(t, `^Bearer ey`, reqs[1].Auth, "GET /app as the App: a JWT")
	assert.Equal(t, "/app/installations/34/access_tokens", reqs[2].Path)
	assert.Equal(t, "/repos/acme/api/issues/42/reactions", reqs[3].Path)
	assert.Equal(t, "token ghs_installation", reqs[3].Auth)

	_, err = ghapi.New(srv.APIURL(), ghapi.Credentials{}, nil, time.Second)
	assert.ErrorIs(t, err, ghapi.ErrNoCredentials)
	_, err = ghapi.New(srv.APIURL(), ghapi.Credentials{AppID: 1, InstallationID: 2, PrivateKey: []byte("not a key")}, nil, time.Second)
	assert.Error(t, err)
}

var pemKey = func() []byte {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}()

func appClient(t *testing.T, srv *ghapitest.Server, installation int64) *ghapi.Client {
	t.Helper()
	c, err := ghapi.New(srv.APIURL(), ghapi.Credentials{AppID: 12, InstallationID: installation, PrivateKey: pemKey}, nil, 5*time.Second)
	require.NoError(t, err)
	return c
}

// TestSendCountsOnlyTheBotsMarker: a marker in anyone else's comment (the
// markers are predictable) does not stop the call, and the call is posted;
// the bot's own comment with it, whatever the login's case, does.
func TestSendCountsOnlyTheBotsMarker(t *testing.T) {
	srv := ghapitest.New(t)
	const marker = "<!-- loopd:announce acme/api#42 -->"
	srv.AddComment("acme", "api", 42, "mallory", "Nice idea! "+marker)
	c := tokenClient(t, srv)
	call := desired.Call{Key: keyAPI, Kind: desired.CallAnnounce, Body: "hello\n\n" + marker, Marker: marker}
	sent, err := c.Send(context.Background(), call)
	require.NoError(t, err)
	assert.False(t, sent.Found)
	assert.Equal(t, http.StatusCreated, sent.HTTPStatus)
	require.Len(t, srv.Comments("acme", "api", 42), 2)

	srv2 := ghapitest.New(t)
	srv2.AddComment("acme", "api", 42, "LOOPD-Bot", "hello\n\n"+marker)
	sent, err = tokenClient(t, srv2).Send(context.Background(), call)
	require.NoError(t, err)
	assert.True(t, sent.Found)
	assert.Len(t, srv2.Comments("acme", "api", 42), 1)

	// An App's comments are its slug's [bot] login's.
	app := appClient(t, srv2, 34)
	notice := desired.Call{Key: keyAPI, Kind: desired.CallNotify, Body: "n <!-- n1 -->", Marker: "<!-- n1 -->"}
	sent, err = app.Send(context.Background(), notice)
	require.NoError(t, err)
	assert.False(t, sent.Found)
	sent, err = app.Send(context.Background(), notice)
	require.NoError(t, err)
	assert.True(t, sent.Found, "the App's own comment")
}

// TestCheck: the start check of an App gets an installation token, so a
// wrong installation id is GitHub's 404, which is not retried; a token
// GitHub could not hand out for a 5xx is retried. A token client checks
// its login.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	srv := ghapitest.New(t)
	login, err := appClient(t, srv, 34).Check(ctx)
	require.NoError(t, err)
	assert.Equal(t, "loopd-app[bot]", login)
	assert.Equal(t, 1, srv.Count("POST", regexp.MustCompile(`^/app/installations/34/access_tokens$`)))

	tokens := regexp.MustCompile(`/access_tokens$`)
	srv.Fail(ghapitest.Failure{Method: "POST", Path: tokens, Status: http.StatusNotFound, Body: `{"message":"Not Found"}`, Times: 2})
	_, err = appClient(t, srv, 999).Check(ctx)
	require.Error(t, err)
	assert.Equal(t, ghapi.Verdict{HTTPStatus: 404, Message: "installation 999 token: Not Found"}, ghapi.Classify(err, time.Now()))
	_, err = appClient(t, srv, 999).Send(ctx, desired.Call{Key: keyAPI, Kind: desired.CallReact, Target: desired.Source{Kind: desired.SourceItem}})
	require.Error(t, err)
	assert.False(t, ghapi.Classify(err, time.Now()).Retry, "a call through the installation transport: the same 404")

	srv.Fail(ghapitest.Failure{Method: "POST", Path: tokens, Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`, Times: 1})
	_, err = appClient(t, srv, 34).Check(ctx)
	require.Error(t, err)
	assert.Equal(t, ghapi.Verdict{Retry: true, HTTPStatus: 502, Message: "installation 34 token: Bad Gateway"}, ghapi.Classify(err, time.Now()))

	login, err = tokenClient(t, srv).Check(ctx)
	require.NoError(t, err)
	assert.Equal(t, "loopd-bot", login)
}

// TestCheckComparesTheConfiguredLogin: a configured bot login must be the
// one the credentials post as (case aside), or serve would miss its own
// comments; GitHub not answering leaves the configured one.
func TestCheckComparesTheConfiguredLogin(t *testing.T) {
	ctx := context.Background()
	srv := ghapitest.New(t)
	configured := func(login string) *ghapi.Client {
		c, err := ghapi.New(srv.APIURL(), ghapi.Credentials{Token: "tok-123", BotLogin: login}, nil, 5*time.Second)
		require.NoError(t, err)
		return c
	}
	_, err := configured("loopd-app").Check(ctx)
	require.ErrorIs(t, err, ghapi.ErrLoginMismatch)
	assert.ErrorContains(t, err, `github.botLogin is "loopd-app", the credentials post as "loopd-bot"`)

	c := configured("LOOPD-BOT")
	assert.Empty(t, c.Known(), "nothing learned before a call")
	login, err := c.Check(ctx)
	require.NoError(t, err)
	assert.Equal(t, "LOOPD-BOT", login)
	assert.Equal(t, "LOOPD-BOT", c.Known())

	srv.Fail(ghapitest.Failure{Method: "GET", Path: regexp.MustCompile(`^/user$`), Status: http.StatusBadGateway, Body: `{"message":"Bad Gateway"}`, Times: 1})
	login, err = configured("loopd-app").Check(ctx)
	require.NoError(t, err, "GitHub out of reach: the configured login stands")
	assert.Equal(t, "loopd-app", login)
}

// TestKnownIsWhatACallLearned: the login a call learned (to look for its
// marker) is known at once to whoever asks without waiting for GitHub.
func TestKnownIsWhatACallLearned(t *testing.T) {
	srv := ghapitest.New(t)
	c := tokenClient(t, srv)
	assert.Empty(t, c.Known())
	_, err := c.Send(context.Background(), desired.Call{Key: keyAPI, Kind: desired.CallAnnounce, Marker: "<!-- m -->", Body: "hi <!-- m -->"})
	require.NoError(t, err)
	assert.Equal(t, "loopd-bot", c.Known())
}

// TestClassify: what each failure of GitHub means for the outbox.
func TestClassify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := func(code int, h ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}, Request: &http.Request{Method: "POST"}}
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	after := 30 * time.Second
	tests := []struct {
		name string
		err  error
		want ghapi.Verdict
	}{
		{"bad_gateway", &github.ErrorResponse{Response: resp(502), Message: "Bad Gateway"}, ghapi.Verdict{Retry: true, HTTPStatus: 502, Message: "Bad Gateway"}},
		{"forbidden_with_retry_after", &github.ErrorResponse{Response: resp(403, "Retry-After", "60"), Message: "slow down"},
			ghapi.Verdict{Retry: true, After: time.Minute, HTTPStatus: 403, Message: "slow down", Limit: desired.PauseSecondary}},
		{"too_many_requests", &github.ErrorResponse{Response: resp(429)},
			ghapi.Verdict{Retry: true, HTTPStatus: 429, Message: "Too Many Requests", Limit: desired.PauseSecondary}},
		{"too_many_requests_with_retry_after", &github.ErrorResponse{Response: resp(429, "retry-after", "30")},
			ghapi.Verdict{Retry: true, After: after, HTTPStatus: 429, Message: "Too Many Requests", Limit: desired.PauseSecondary}},
		{"secondary_message_without_retry_after", &github.ErrorResponse{Response: resp(403),
			Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."},
			ghapi.Verdict{Retry: true, HTTPStatus: 403, Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
				Limit: desired.PauseSecondary}},
		{"unavailable_with_retry_after", &github.ErrorResponse{Response: resp(503, "Retry-After", "30"), Message: "busy"},
			ghapi.Verdict{Retry: true, After: after, HTTPStatus: 503, Message: "busy", Limit: desired.PauseSecondary}},
		{"primary_rate_limit", &github.RateLimitError{Response: resp(403), Message: "API rate limit exceeded",
			Rate: github.Rate{Reset: github.Timestamp{Time: now.Add(90 * time.Second)}}},
			ghapi.Verdict{Retry: true, After: 90 * time.Second, HTTPStatus: 403, Message: "API rate limit exceeded", Limit: desired.PausePrimary}},
		{"secondary_rate_limit", &github.AbuseRateLimitError{Response: resp(403), Message: "secondary", RetryAfter: &after},
			ghapi.Verdict{Retry: true, After: after, HTTPStatus: 403, Message: "secondary", Limit: desired.PauseSecondary}},
		{"forbidden_for_good", &github.ErrorResponse{Response: resp(403), Message: "Resource not accessible by integration"},
			ghapi.Verdict{HTTPStatus: 403, Message: "Resource not accessible by integration"}},
		{"unauthorized", &github.ErrorResponse{Response: resp(401), Message: "Bad credentials"}, ghapi.Verdict{HTTPStatus: 401, Message: "Bad credentials"}},
		{"not_found", &github.ErrorResponse{Response: resp(404), Message: "Not Found"}, ghapi.Verdict{HTTPStatus: 404, Message: "Not Found"}},
		{"no_answer", errors.New("dial tcp: connection refused"), ghapi.Verdict{Retry: true, Message: "dial tcp: connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ghapi.Classify(tt.err, now))
		})
	}
}
