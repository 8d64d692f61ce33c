package schema

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRouteTriggerReactionsAndBreaker: a route's trigger, reactions and
// loop breaker parse, default (ciFailure on, 30 deliveries an hour) and
// are bounded; github.botLogin is read through Config.BotLogin.
func TestRouteTriggerReactionsAndBreaker(t *testing.T) {
	cfg, err := Parse([]byte(minimal), filepath.Join("conf", "loopd.yaml"))
	require.NoError(t, err)
	r := cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Nil(t, r.Trigger)
	assert.True(t, r.Reactions.CIFailureOn())
	assert.Equal(t, DefaultMaxDeliveriesPerHour, r.MaxDeliveriesPerHour)
	assert.Equal(t, 30, r.MaxDeliveries())
	assert.Empty(t, cfg.BotLogin())

	cfg, err = Parse([]byte(minimal+`          trigger: {mention: "@loopd", labels: [agent]}
          reactions: {ciFailure: false}
          maxDeliveriesPerHour: 5
github:
  botLogin: loopd-app[bot]
`), filepath.Join("conf", "loopd.yaml"))
	require.NoError(t, err)
	r = cfg.Webhooks.GHWebhook.Routing.Repos["*"]
	assert.Equal(t, &Trigger{Mention: "@loopd", Labels: []string{"agent"}}, r.Trigger)
	assert.False(t, r.Reactions.CIFailureOn())
	assert.Equal(t, 5, r.MaxDeliveries())
	assert.Equal(t, "loopd-app[bot]", cfg.BotLogin())

	for _, bad := range []string{
		"          maxDeliveriesPerHour: 0\n",
		"          maxDeliveriesPerHour: 1001\n",
		"          trigger: {mention: \"@loop d\"}\n",
		"          trigger: {labels: [\"\"]}\n",
		"          reactions: {ciFailure: maybe}\n",
		"github:\n  botLogin: \"-bad\"\n",
	} {
		_, err := Parse([]byte(minimal+bad), filepath.Join("conf", "loopd.yaml"))
		assert.Error(t, err, bad)
	}
}
