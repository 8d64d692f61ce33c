package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestRealClaudeStartsInAConfigDirLoopdProvisioned: the real Claude Code
// CLI, in a config dir that nobody prepared (no .claude.json), starts at
// its input box: loopd marked onboarding done and trusted the workdir
// before the spawn, so neither the onboarding screens nor the trust dialog
// shows, and the first comment reaches the transcript. The user's own keys
// in the files are kept.
func TestRealClaudeStartsInAConfigDirLoopdProvisioned(t *testing.T) {
	t.Parallel()
	e := newRealEnv(t, "Never")
	global := filepath.Join(e.claudeDir, ".claude.json")
	require.NoFileExists(t, global)
	require.NoError(t, os.WriteFile(filepath.Join(e.claudeDir, "settings.json"), []byte(`{"theme":"light-ansi"}`), 0o600))

	r := startReal(t, e)
	// Offline the CLI is not logged in (login_required): that is expected,
	// the first-run screens are not.
	for _, ev := range e.eventsNamed(t, journal.SessionBlocked, keyIssue) {
		assert.NotContains(t, []string{"workspace_trust", "onboarding", "connectivity"}, ev.Attrs["reason"], "%v", ev.Attrs)
	}

	var cfg struct {
		Onboarded bool `json:"hasCompletedOnboarding"`
		Projects  map[string]struct {
			Trusted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	b, err := os.ReadFile(global)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &cfg))
	assert.True(t, cfg.Onboarded)
	assert.True(t, cfg.Projects[r.Status.Workdir].Trusted, "the workdir is trusted: %s", b)
	settings, err := os.ReadFile(filepath.Join(e.claudeDir, "settings.json"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"theme":"light-ansi","env":{"DISABLE_AUTOUPDATER":"1"}}`, string(settings))
}

// TestProvisionRefusesAMalformedClaudeConfig: a .claude.json loopd cannot
// parse is never overwritten; the spawn is refused with a journaled
// dispatch.failed reason=provision_failed naming the file, and the event
// stays pending until the file is fixed, when the next pass spawns.
func TestProvisionRefusesAMalformedClaudeConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	global := filepath.Join(e.claudeDir, ".claude.json")
	broken := `{"hasCompletedOnboarding": true, "projects": {` // cut short by a full disk
	require.NoError(t, os.WriteFile(global, []byte(broken), 0o600))
	e.start(t)
	delivery := sendComment(t, e, "while the config is broken "+uuid.NewString())

	failed := e.waitEvent(t, journal.DispatchFailed, keyIssue, 1, waitLong)
	assert.Equal(t, "provision_failed", failed[0].Attrs["reason"], "%v", failed[0].Attrs)
	assert.Contains(t, failed[0].Attrs["err"], global, "the error names the file")
	assert.Contains(t, failed[0].Attrs["err"], "not a plain JSON object")
	b, err := os.ReadFile(global)
	require.NoError(t, err)
	assert.Equal(t, broken, string(b), "never overwritten")
	assert.Len(t, e.mustRecord(t, keyIssue).Pending, 1, "the event waits")
	assert.Empty(t, e.starts(t), "no harness started")

	require.NoError(t, os.WriteFile(global, []byte(`{"numStartups": 3}`), 0o600))
	waitDelivered(t, e, delivery, waitLong)
	r := e.waitPhase(t, keyIssue, desired.PhaseRunning, waitLong)
	b, err = os.ReadFile(global)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"numStartups": 3`)
	assert.Contains(t, string(b), r.Status.Workdir)
}
