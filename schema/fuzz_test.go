package schema_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
)

// minimalConfig is the smallest useful config: one harness, one route.
const minimalConfig = `
harnesses:
  claude-code:
    command: claude
webhooks:
  ghWebhook:
    routing:
      repos:
        "*":
          harness: claude-code
          workdir: /srv/{{.Owner}}/{{.Repo}}/{{.Number}}
`

// FuzzParse feeds the config loader any YAML, seeded with the example
// config and the smallest useful one. It never panics; a config it
// refuses gives ErrInvalid with at least one problem. One it accepts, and
// whose harnesses harness.New makes (as loopd config validate and serve
// do; a refusal there is ErrBadConfig), validates: the same bytes give the
// same config, each route names a harness and renders an absolute workdir,
// the listen address is host:port and the backoff starts below its cap.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "loopd.example.yaml"))
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte(minimalConfig))
	f.Add([]byte(minimalConfig + "      tmux: {restartPolicy: Always, backoffInitialSeconds: 9, backoffMaxSeconds: 3}\n"))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte{})

	path := filepath.Join(f.TempDir(), "loopd.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := schema.Parse(data, path)
		if err != nil {
			var verr *schema.ValidationError
			require.ErrorIs(t, err, schema.ErrInvalid)
			require.True(t, errors.As(err, &verr))
			require.NotEmpty(t, verr.Problems)
			return
		}
		again, err := schema.Parse(data, path)
		require.NoError(t, err)
		require.Equal(t, cfg, again, "the same bytes parse alike")
		_, _, err = net.SplitHostPort(cfg.Webhooks.GHWebhook.Listen)
		require.NoError(t, err)
		p := cfg.Webhooks.GHWebhook.Routing.Tmux
		require.LessOrEqual(t, p.BackoffInitial(), p.BackoffMax())
		for name, h := range cfg.Harnesses {
			// The harness's own rules (its process name, extraArgs) are
			// checked where it is made, as loopd config validate does.
			if _, err := harness.New(name, h); err != nil {
				require.ErrorIs(t, err, harness.ErrBadConfig, "harness %s", name)
				return
			}
		}
		for key, route := range cfg.Webhooks.GHWebhook.Routing.Repos {
			require.Contains(t, cfg.Harnesses, route.Harness, "route %s", key)
			dir, err := route.RenderWorkdir("octo-org", "api", 42, "issue")
			require.NoError(t, err, "route %s", key)
			require.True(t, filepath.IsAbs(dir), "route %s renders %q", key, dir)
		}
	})
}
