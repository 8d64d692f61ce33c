package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatusPageKey(t *testing.T) {
	withKey := func(v string) string {
		return strings.Replace(minimal, "  ghWebhook:\n", "  ghWebhook:\n    statusPage: "+v+"\n", 1)
	}
	tests := []struct {
		name string
		src  string
		want bool
	}{
		{name: "on_by_default", src: minimal, want: true},
		{name: "on", src: withKey("true"), want: true},
		{name: "off", src: withKey("false"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.src), "loopd.yaml")
			require.NoError(t, err)
			assert.Equal(t, tt.want, cfg.Webhooks.GHWebhook.StatusPageOn())
		})
	}
	_, err := Parse([]byte(withKey(`"no"`)), "loopd.yaml")
	assert.ErrorContains(t, err, "statusPage")
}
