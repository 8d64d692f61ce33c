package schema

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// routeWith is minimal with lines added to its one route.
func routeWith(lines ...string) string {
	return minimal + "          " + strings.Join(lines, "\n          ") + "\n"
}

func TestInstructions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	write("ok.md", "Open a pull request.\n\tThen reply on the issue.\n")
	write("big.md", strings.Repeat("x", MaxInstructions+1))
	write("esc.md", "fine\x1b[201~ then not")
	write("latin1.md", "caf\xe9")
	tests := []struct {
		name    string
		src     string
		want    string // the route's Instructions after Load
		problem string // "" when valid
	}{
		{name: "none", src: minimal},
		{name: "inline", src: routeWith("instructions: Work on the issue."), want: "Work on the issue."},
		{name: "file_relative_to_config", src: routeWith("instructionsFile: ok.md"), want: "Open a pull request.\n\tThen reply on the issue.\n"},
		{name: "file_missing", src: routeWith("instructionsFile: nope.md"), problem: `c.yaml:12:29: webhooks.ghWebhook.routing.repos["*"].instructionsFile: open ` + filepath.Join(dir, "nope.md") + ": no such file or directory"},
		{name: "file_too_big", src: routeWith("instructionsFile: big.md"), problem: `big.md: 4097 bytes, more than the 4096 that fit in a boot prompt`},
		{name: "file_control", src: routeWith("instructionsFile: esc.md"), problem: "esc.md: holds the control character U+001B"},
		{name: "file_not_utf8", src: routeWith("instructionsFile: latin1.md"), problem: "latin1.md: not UTF-8 text"},
		{name: "inline_control", src: routeWith(`instructions: "a\u0007b"`), problem: `instructions: holds the control character U+0007`},
		{name: "both", src: routeWith("instructions: x", "instructionsFile: ok.md"), problem: "instructionsFile: set instructions or instructionsFile, not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.src), filepath.Join(dir, "c.yaml"))
			if tt.problem != "" {
				require.ErrorIs(t, err, ErrInvalid)
				assert.Contains(t, strings.ReplaceAll(err.Error(), dir+"/c.yaml", "c.yaml"), tt.problem)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Webhooks.GHWebhook.Routing.Repos["*"].Instructions)
		})
	}
}

// TestPlaceholderLoginIsAProblem: the authorizedUsers placeholder of
// `loopd config init` must be replaced; config validate says so.
func TestPlaceholderLoginIsAProblem(t *testing.T) {
	src := minimal + "    authorizedUsers: [octocat, " + PlaceholderLogin + "]\n"
	_, err := Parse([]byte(src), "c.yaml")
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "webhooks.ghWebhook.authorizedUsers[1]: replace the placeholder "+PlaceholderLogin+" with the GitHub logins")
}
