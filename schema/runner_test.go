package schema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRouteRunner: a route runs in tmux by default, each run of the
// process runner is bounded by 1800 s by default, and the schema takes
// only the two runners and a positive timeout.
func TestRouteRunner(t *testing.T) {
	cfg, err := Parse([]byte(minimal), "loopd.yaml")
	require.NoError(t, err)
	r := cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Equal(t, RunnerTmux, r.Runner)
	assert.Equal(t, 1800, r.DispatchTimeoutSeconds)
	assert.Equal(t, 30*time.Minute, r.DispatchTimeout())
	assert.Equal(t, 30*time.Minute, Route{}.DispatchTimeout(), "a route not defaulted (gone since) takes the default")

	cfg, err = Parse([]byte(minimal+"          runner: process\n          dispatchTimeoutSeconds: 90\n"), "loopd.yaml")
	require.NoError(t, err)
	r = cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Equal(t, RunnerProcess, r.Runner)
	assert.Equal(t, 90*time.Second, r.DispatchTimeout())

	for _, bad := range []string{"          runner: docker\n", "          dispatchTimeoutSeconds: 0\n"} {
		_, err := Parse([]byte(minimal+bad), "loopd.yaml")
		assert.ErrorIs(t, err, ErrInvalid, bad)
	}
}
