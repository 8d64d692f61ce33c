package schema

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitHubConfig: without a github block loopd posts nothing; with one,
// announce and acknowledge default to true per route, a token comes from
// LOOPD_GITHUB_TOKEN unless an App is named, and an App's key file is
// resolved against the config's directory.
func TestGitHubConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Parse([]byte(minimal), filepath.Join(dir, "c.yaml"))
	require.NoError(t, err)
	assert.Nil(t, cfg.GitHub)
	announce, ack := cfg.Webhooks.GHWebhook.Routing.Repos["*"].Talk(cfg.GitHub != nil)
	assert.False(t, announce)
	assert.False(t, ack)

	cfg, err = Parse([]byte(minimal+"          acknowledge: false\ngithub: {}\n"), filepath.Join(dir, "c.yaml"))
	require.NoError(t, err)
	require.NotNil(t, cfg.GitHub)
	assert.Equal(t, GitHub{APIURL: "https://api.github.com", TokenEnv: "LOOPD_GITHUB_TOKEN"}, *cfg.GitHub)
	announce, ack = cfg.Webhooks.GHWebhook.Routing.Repos["*"].Talk(cfg.GitHub != nil)
	assert.True(t, announce)
	assert.False(t, ack)

	src := minimal + "github:\n  apiURL: https://ghe.example/api/v3\n  app:\n    appID: 12\n    installationID: 34\n    privateKeyFile: keys/app.pem\n  botLogin: loopd-bot\n"
	cfg, err = Parse([]byte(src), filepath.Join(dir, "c.yaml"))
	require.NoError(t, err)
	assert.Equal(t, GitHub{APIURL: "https://ghe.example/api/v3", BotLogin: "loopd-bot",
		App: &GitHubApp{AppID: 12, InstallationID: 34, PrivateKeyFile: filepath.Join(dir, "keys/app.pem")}}, *cfg.GitHub)
}

func TestGitHubConfigInvalid(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"token_and_app", "github:\n  tokenEnv: LOOPD_GITHUB_TOKEN\n  app:\n    appID: 1\n    installationID: 2\n    privateKeyFile: /k.pem\n", "github.app: set app or tokenEnv, not both"},
		{"app_without_key", "github:\n  app:\n    appID: 1\n    installationID: 2\n", "privateKeyFile"},
		{"token_env_reaches_panes", "github:\n  tokenEnv: MY_TOKEN\n", "github.tokenEnv: MY_TOKEN could reach a pane"},
		{"token_env_is_the_secret", "github:\n  tokenEnv: LOOPD_WEBHOOK_SECRET\n", "is the webhook secret's variable"},
		{"api_url_not_a_url", "github:\n  apiURL: \"https://\"\n", "github.apiURL: \"https://\" is not an http(s) URL"},
		{"token_file_and_env", "github:\n  tokenEnv: LOOPD_GITHUB_TOKEN\n  tokenFile: /run/t\n", "github.tokenFile: set one of app, tokenEnv and tokenFile"},
		{"token_file_and_app", "github:\n  tokenFile: /run/t\n  app:\n    appID: 1\n    installationID: 2\n    privateKeyFile: /k.pem\n", "github.tokenFile: set one of app, tokenEnv and tokenFile"},
		{"bad_route_key", strings.Replace(minimal, "workdir:", "announce: yes\n          workdir:", 1), "announce"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			if !strings.HasPrefix(src, "\nharnesses") {
				src = minimal + src
			}
			_, err := Parse([]byte(src), "c.yaml")
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestAgentCredentials: what a route's agents get by default (an App's
// scoped token; with a plain token, nothing), what a route may choose, and
// what it may not: the App's token without an App, loopd's own token with
// an App (use its scoped token) or without one, a credential with no
// repository to push to, gh with no credential.
func TestAgentCredentials(t *testing.T) {
	route := "        \"octo-org/*\": {harness: claude-code, workdir: \"/w/{{.Repo}}/{{.Number}}\", checkout: {url: \"https://github.com/{{.Owner}}/{{.Repo}}.git\"}%s}\n"
	app := "github:\n  app:\n    appID: 1\n    installationID: 2\n    privateKeyFile: /k.pem\n"
	token := "github: {}\n"
	parse := func(t *testing.T, keys, gh string) (*Config, error) {
		return Parse([]byte(minimal+fmt.Sprintf(route, keys)+gh), "c.yaml")
	}
	for _, tt := range []struct {
		name, keys, github, want string
	}{
		{"app_by_default", "", app, AgentCredentialsApp},
		{"none_by_default_with_a_token", "", token, AgentCredentialsNone},
		{"none_without_github", "", "", AgentCredentialsNone},
		{"token_when_the_route_says_so", ", agentCredentials: token", token, AgentCredentialsToken},
		{"none_when_the_route_says_so", ", agentCredentials: none", app, AgentCredentialsNone},
		{"gh_too", ", agentGH: true", app, AgentCredentialsApp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(t, tt.keys, tt.github)
			require.NoError(t, err)
			r, ok := cfg.Webhooks.GHWebhook.Routing.Route("octo-org", "api")
			require.True(t, ok)
			assert.Equal(t, tt.want, r.Credentials(cfg.GitHub))
		})
	}
	cfg, err := Parse([]byte(minimal+app), "c.yaml")
	require.NoError(t, err)
	r, _ := cfg.Webhooks.GHWebhook.Routing.Route("acme", "x")
	assert.Equal(t, AgentCredentialsNone, r.Credentials(cfg.GitHub), "no checkout: nothing to push to")

	for _, tt := range []struct {
		name, keys, github, want string
	}{
		{"app_without_an_app", ", agentCredentials: app", token, "agentCredentials: app needs github.app"},
		{"token_with_an_app", ", agentCredentials: token", app, "agentCredentials: token hands out loopd's own token"},
		{"token_without_github", ", agentCredentials: token", "", "agentCredentials: token hands out loopd's own token"},
		{"gh_without_a_credential", ", agentGH: true", token, "agentGH: gh gets the agent's credential: the route gives none"},
		{"not_a_mode", ", agentCredentials: ssh", app, "agentCredentials: value must be one of 'app', 'token', 'none'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.keys, tt.github)
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = Parse([]byte(minimal+"        octo-org/web: {harness: claude-code, workdir: /w, agentCredentials: app}\n"+app), "c.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "agentCredentials: needs checkout")
}

// TestGitHubNeedsRestart: a reload keeps the running github block (the
// client and its credentials are made at start) and says so; the routes'
// announce and acknowledge apply at once.
func TestGitHubNeedsRestart(t *testing.T) {
	old, err := Parse([]byte(minimal+"github: {}\n"), "c.yaml")
	require.NoError(t, err)
	next, err := Parse([]byte(strings.Replace(minimal, "workdir:", "announce: false\n          workdir:", 1)), "c.yaml")
	require.NoError(t, err)
	assert.Equal(t, []string{"github"}, keepRestartOnly(old, next))
	require.NotNil(t, next.GitHub)
	announce, _ := next.Webhooks.GHWebhook.Routing.Repos["*"].Talk(next.GitHub != nil)
	assert.False(t, announce)
}
