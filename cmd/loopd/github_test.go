package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
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
	_, err = gitHubClient(cfg)
	require.Error(t, err, "a key ghinstallation cannot parse stops serve at start")
	assert.NotContains(t, err.Error(), "not a key")
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
