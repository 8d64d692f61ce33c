package paneenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// daemonEnv is a daemon environment with the variables issue 6 found in
// panes: the webhook secret, another token, and GitHub credentials.
var daemonEnv = []string{
	"PATH=/usr/bin:/bin",
	"HOME=/home/loopd",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"TERM=xterm-256color",
	"TMUX_TMPDIR=/run/loopd",
	"LOOPD_WEBHOOK_SECRET=s3cr3t",
	"OTHER_TOKEN=x",
	"GITHUB_TOKEN=ghp_x",
	"GH_TOKEN=gho_x",
	"LOOPD_GITHUB_TOKEN=ghs_x",
	"HOMEBREW_GITHUB_API_TOKEN=y",
	"ANTHROPIC_API_KEY=sk-ant",
	"CLAUDECODE=1",
	"TMUX=/tmp/tmux-0/default,1,0",
	"TMUX_PANE=%1",
	"SSH_AUTH_SOCK=/tmp/ssh/agent",
	"LC_SECRET=z",
	"no_equals_sign",
}

func TestServer(t *testing.T) {
	assert.Equal(t, []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/loopd",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TERM=xterm-256color",
		"TMUX_TMPDIR=/run/loopd",
	}, Server(daemonEnv))
	assert.Empty(t, Server(nil))
}

func TestPass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  map[string]string
	}{
		{name: "none", names: nil, want: map[string]string{}},
		{name: "named_and_present", names: []string{"ANTHROPIC_API_KEY", "OTHER_TOKEN"},
			want: map[string]string{"ANTHROPIC_API_KEY": "sk-ant", "OTHER_TOKEN": "x"}},
		{name: "absent_is_left_out", names: []string{"CLAUDE_CONFIG_DIR"}, want: map[string]string{}},
		{name: "denied_even_when_named", names: []string{"LOOPD_WEBHOOK_SECRET", "GITHUB_TOKEN", "GH_TOKEN", "LOOPD_GITHUB_TOKEN", "HOMEBREW_GITHUB_API_TOKEN"},
			want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Pass(daemonEnv, tc.names))
		})
	}
}

func TestDenied(t *testing.T) {
	for name, want := range map[string]bool{
		"LOOPD_WEBHOOK_SECRET":      true,
		"LOOPD_WORK_ITEM":           true,
		"loopd_x":                   true,
		"GITHUB_TOKEN":              true,
		"GITHUB_ENTERPRISE_TOKEN":   true,
		"GH_TOKEN":                  true,
		"GH_ENTERPRISE_TOKEN":       true,
		"HOMEBREW_GITHUB_API_TOKEN": true,
		"github_pat":                true,
		"PGPASSWORD":                true,
		"PGPASSFILE":                true,
		"PGHOST":                    false,
		"PATH":                      false,
		"ANTHROPIC_API_KEY":         false,
		"GHOST":                     false,
	} {
		assert.Equal(t, want, Denied(name), name)
	}
}

func TestAllowed(t *testing.T) {
	assert.True(t, Allowed("PATH", nil))
	assert.True(t, Allowed("CLAUDE_CONFIG_DIR", []string{"CLAUDE_CONFIG_DIR"}))
	assert.False(t, Allowed("CLAUDE_CONFIG_DIR", nil))
	assert.False(t, Allowed("OTHER_TOKEN", nil))
	assert.False(t, Allowed("GITHUB_TOKEN", []string{"GITHUB_TOKEN"}))
	assert.False(t, Allowed("LOOPD_WEBHOOK_SECRET", []string{"LOOPD_WEBHOOK_SECRET"}))
}
