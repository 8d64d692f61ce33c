package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
)

// TestGitHubCredentials: the token is read from tokenEnv and then removed
// from the process's environment, so nothing loopd starts inherits it; an
// empty variable, or an App key file that is missing or empty, is an error
// that names the variable or the path and never the secret.
func TestGitHubCredentials(t *testing.T) {
	const name = "LOOPD_TEST_GITHUB_TOKEN"
	cfg := &schema.Config{GitHub: &schema.GitHub{APIURL: schema.DefaultGitHubAPIURL, TokenEnv: name}}
	t.Setenv(name, "ghp_secret")
	cred, err := gitHubCredentials(cfg)
	require.NoError(t, err)
	assert.Equal(t, "ghp_secret", cred.Token)
	_, set := os.LookupEnv(name)
	assert.False(t, set, "the token's variable is unset once read")

	_, err = gitHubCredentials(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), name+" is empty")

	dir := t.TempDir()
	key := filepath.Join(dir, "app.pem")
	cfg.GitHub = &schema.GitHub{APIURL: schema.DefaultGitHubAPIURL, App: &schema.GitHubApp{AppID: 1, InstallationID: 2, PrivateKeyFile: key}}
	_, err = gitHubCredentials(cfg)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(key, nil, 0o600))
	_, err = gitHubCredentials(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), key+" is empty")
	require.NoError(t, os.WriteFile(key, []byte("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n"), 0o600))
	cred, err = gitHubCredentials(cfg)
	require.NoError(t, err)
	assert.Equal(t, int64(1), cred.AppID)
	_, _, err = gitHubClient(cfg)
	require.Error(t, err, "a key ghinstallation cannot parse stops serve at start")
	assert.NotContains(t, err.Error(), "not a key")
}

// The token from github.tokenFile, a systemd credential: ${NAME} expanded,
// one trailing newline dropped; an empty file names the path.
func TestGitHubTokenFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CREDENTIALS_DIRECTORY", dir)
	path := filepath.Join(dir, "github-token")
	require.NoError(t, os.WriteFile(path, []byte("ghp_from_a_file\n"), 0o600))
	cfg := &schema.Config{GitHub: &schema.GitHub{APIURL: schema.DefaultGitHubAPIURL, TokenFile: "${CREDENTIALS_DIRECTORY}/github-token"}}
	cred, err := gitHubCredentials(cfg)
	require.NoError(t, err)
	assert.Equal(t, "ghp_from_a_file", cred.Token)
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err = gitHubCredentials(cfg)
	require.ErrorContains(t, err, "github: tokenFile "+path+" is empty")
	t.Setenv("CREDENTIALS_DIRECTORY", "")
	_, err = gitHubCredentials(cfg)
	require.ErrorContains(t, err, "environment variable CREDENTIALS_DIRECTORY is not set")
}

// TestPrintCalls: loopd get lists the calls given up, with GitHub's status
// and message; nothing when there are none.
func TestPrintCalls(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printCalls(&out, nil))
	assert.Empty(t, out.String())
	k := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	require.NoError(t, printCalls(&out, []desired.Call{{Key: k, Kind: desired.CallReact, Attempts: 1, HTTPStatus: 404, Error: "Not Found"}}))
	assert.Equal(t, "\nGITHUB CALLS GIVEN UP\nWORK ITEM    CALL   TRIES  HTTP STATUS  MESSAGE\nacme/api#42  react  1      404          \"Not Found\"\n", out.String())
}

// TestPrintPauses: loopd get lists the pauses of GitHub calls that still
// hold, with how many calls wait; nothing when none holds.
func TestPrintPauses(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	over := desired.Pause{Installation: "installation 9", Kind: desired.PausePrimary, Until: now.Add(-time.Second), Streak: 1}
	require.NoError(t, printPauses(&out, []desired.Pause{over}, 3, now))
	assert.Empty(t, out.String())
	held := desired.Pause{Installation: "token", Kind: desired.PauseSecondary, Until: now.Add(41 * time.Second), Streak: 2,
		HTTPStatus: 403, Message: "You have exceeded a secondary rate limit"}
	require.NoError(t, printPauses(&out, []desired.Pause{over, held}, 3, now))
	assert.Equal(t, "\nGITHUB CALLS PAUSED (3 waiting)\n"+
		"INSTALLATION  LIMIT      UNTIL                 LEFT  STREAK  HTTP STATUS  MESSAGE\n"+
		"token         secondary  2026-05-01T12:00:41Z  41s   2       403          \"You have exceeded a secondary rate limit\"\n", out.String())
}

// TestPrintPlanCall: the dry run's github_call line shows a call tried
// before with its last answer (http_status, err), so an operator sees why
// it waits; a call never tried shows none.
func TestPrintPlanCall(t *testing.T) {
	k := desired.Key{Owner: "acme", Repo: "api", Number: 42}
	next := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	require.NoError(t, printPlan(&out, "text", reconciler.PassResult{}, []desired.Call{
		{ID: 3, Key: k, Kind: desired.CallReact, Attempts: 2, NextAttempt: next, HTTPStatus: 502, Error: "Bad Gateway"},
		{ID: 4, Key: k, Kind: desired.CallAnnounce},
	}))
	assert.Equal(t, "github_call work_item=acme/api#42 call=react call_id=3 attempts=2 next_attempt=2026-05-01T12:00:00Z http_status=502 err=\"Bad Gateway\"\n"+
		"github_call work_item=acme/api#42 call=announce call_id=4 attempts=0\n", out.String())
}
