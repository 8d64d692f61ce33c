package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
)

// TestFleetOfRefusesAStoreWithoutLeases: serve and reconcile run only on a
// store that implements store.Fleet, and say which store did not.
func TestFleetOfRefusesAStoreWithoutLeases(t *testing.T) {
	_, err := fleetOf(struct{ store.Store }{})
	require.ErrorIs(t, err, errNoFleet)
	assert.Contains(t, err.Error(), "struct")
}

func TestPrintHosts(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	require.NoError(t, printHosts(&out, []desired.Host{
		{Name: "h1", Capacity: 8, Live: true, Leases: 3, Heartbeat: now.Add(-2 * time.Second)},
		{Name: "h2", Draining: true, Heartbeat: now.Add(-time.Minute)},
	}, now))
	assert.Equal(t, "NAME  LIVE   DRAINING  CAPACITY  LEASES  HEARTBEAT\n"+
		"h1    true   false     8         3       2s ago\n"+
		"h2    false  true      0         0       1m0s ago\n", out.String())
}
