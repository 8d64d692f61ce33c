package desired

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// TestStatusGroupsAreFlat: the groups embedded in Status have no name of
// their own in JSON (the text the store keeps) nor in YAML (the plan
// cases): a status is one flat object, so a status stored before its
// fields were grouped reads the same, and one written now is the same
// text.
func TestStatusGroupsAreFlat(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	want := Status{Phase: PhaseRunning, Reason: "delivered",
		SessionState:   SessionState{HarnessSessionID: "a", PaneID: "%1"},
		DeliveryState:  DeliveryState{SendingDeliveryID: "d-1", SentAt: at},
		RestartHistory: RestartHistory{Failures: 2},
		LeaseState:     LeaseState{Host: "h"},
		LimitState:     LimitState{LimitUntil: at},
		WorkspaceState: WorkspaceState{Workdir: "/w"},
		AttentionState: AttentionState{Episodes: 1},
	}
	// As the store wrote it when Status was flat.
	stored := `{"Phase":"Running","Reason":"delivered","HarnessSessionID":"a","PaneID":"%1",` +
		`"SendingDeliveryID":"d-1","SentAt":"2026-01-01T12:00:00Z","Failures":2,"Host":"h",` +
		`"LimitUntil":"2026-01-01T12:00:00Z","Workdir":"/w","Episodes":1}`
	var got Status
	require.NoError(t, json.Unmarshal([]byte(stored), &got))
	assert.Equal(t, want, got)

	text, err := json.Marshal(want)
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(text, &keys))
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Status]()) {
		if f.Anonymous {
			assert.NotContains(t, keys, f.Name, "a group is no key of its own")
		}
	}
	for _, k := range []string{"Phase", "PaneID", "SentAt", "Failures", "Host", "LimitUntil", "Workdir", "Episodes"} {
		assert.Contains(t, keys, k)
	}

	var fromYAML Status
	require.NoError(t, yaml.Unmarshal([]byte(`{phase: Running, reason: delivered, harnesssessionid: a, paneid: "%1",
		sendingdeliveryid: d-1, sentat: 2026-01-01T12:00:00Z, failures: 2, host: h, limituntil: 2026-01-01T12:00:00Z,
		workdir: /w, episodes: 1}`), &fromYAML))
	assert.Equal(t, want, fromYAML)
}
