package schema

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapacityDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal), filepath.Join(t.TempDir(), "loopd.yaml"))
	require.NoError(t, err)
	c := cfg.Capacity
	assert.Equal(t, 10, c.MaxLive())
	assert.Equal(t, 2, c.MaxStarts())
	assert.Zero(t, c.IdlePark(), "never parks by default")

	var zero Capacity // built in code, not loaded
	assert.Equal(t, 10, zero.MaxLive())
	assert.Equal(t, 2, zero.MaxStarts())
}

func TestCapacityValues(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"capacity: {maxLiveSessions: 0, maxStartsInFlight: 5, idleParkSeconds: 900}\n"), filepath.Join(t.TempDir(), "loopd.yaml"))
	require.NoError(t, err)
	c := cfg.Capacity
	assert.Equal(t, 0, c.MaxLive(), "0 is no limit, not absent")
	assert.Equal(t, 5, c.MaxStarts())
	assert.Equal(t, 15*time.Minute, c.IdlePark())
}

func TestCapacityInvalid(t *testing.T) {
	for name, src := range map[string]string{
		"negative_live":  "capacity: {maxLiveSessions: -1}\n",
		"no_starts":      "capacity: {maxStartsInFlight: 0}\n",
		"negative_park":  "capacity: {idleParkSeconds: -5}\n",
		"unknown_key":    "capacity: {maxSessions: 3}\n",
		"not_an_integer": "capacity: {maxLiveSessions: many}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(minimal+src), filepath.Join(t.TempDir(), "loopd.yaml"))
			require.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), "capacity.")
		})
	}
}

// TestWatcherReloadsCapacity: capacity is no restart-only key; a reload
// applies it as it is, and says no restart is required.
func TestWatcherReloadsCapacity(t *testing.T) {
	f := newWatchFixture(t)
	require.Equal(t, 10, f.w.Current().Capacity.MaxLive())
	changed := policyConfig("OnFailure", "loopd") + "capacity: {maxLiveSessions: 3, maxStartsInFlight: 1, idleParkSeconds: 60}\n"
	require.NoError(t, os.WriteFile(f.path, []byte(changed), 0o600))
	require.NoError(t, f.w.Reload())

	c := f.w.Current().Capacity
	assert.Equal(t, 3, c.MaxLive())
	assert.Equal(t, 1, c.MaxStarts())
	assert.Equal(t, time.Minute, c.IdlePark())
	recs := f.log.records(t, "config.reloaded")
	require.Len(t, recs, 1)
	assert.Nil(t, recs[0]["restart_required"], "capacity changes live")
}
