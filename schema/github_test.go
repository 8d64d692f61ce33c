package schema

import (
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
