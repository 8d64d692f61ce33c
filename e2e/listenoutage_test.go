package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestListenerOutageShows: while a host's listener for the other hosts'
// changes (PostgreSQL LISTEN) cannot connect, /readyz answers 503 naming
// it and loopd_store_listening is 0; once it can, both are back.
func TestListenerOutageShows(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 1, 5, envOpts{})
	f.start(t)
	e := f.hosts[0]
	ready := func() (int, string) {
		resp, err := http.Get("http://" + e.listen + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	e.waitFor(t, func() bool { code, _ := ready(); return code == http.StatusOK }, waitShort, "ready once it listens")
	require.Equal(t, 1.0, e.metric(t, "loopd_store_listening"))

	ctx := context.Background()
	cfg, err := pgx.ParseConfig(f.url)
	require.NoError(t, err)
	db := cfg.Database
	cfg.Database = "postgres" // a database may not close its own door
	admin, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer admin.Close(ctx)
	door := func(open bool) {
		_, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` WITH ALLOW_CONNECTIONS `+map[bool]string{true: "true", false: "false"}[open])
		require.NoError(t, err)
	}
	door(false)
	defer door(true)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query = 'LISTEN loopd'`, db)
	require.NoError(t, err)

	var body string
	e.waitFor(t, func() bool {
		var code int
		code, body = ready()
		return code == http.StatusServiceUnavailable
	}, waitShort, "/readyz says the listener is down")
	require.Contains(t, body, "store listener down")
	require.Equal(t, 0.0, e.metric(t, "loopd_store_listening"))
	_, page := get(t, "http://"+e.listen+"/")
	require.Contains(t, page, "Store outage")
	require.Contains(t, page, "store listener")

	door(true)
	e.waitFor(t, func() bool { code, _ := ready(); return code == http.StatusOK }, waitLong, "ready again once it listens again")
	require.Equal(t, 1.0, e.metric(t, "loopd_store_listening"))
	// One row at the start and one at the end, however many tries the
	// listener made in between.
	e.waitEvent(t, journal.StoreListenRestored, desired.Key{}, 1, waitShort)
	assert.Len(t, e.eventsNamed(t, journal.StoreListenLost, desired.Key{}), 1)
	assert.Len(t, e.eventsNamed(t, journal.StoreListenRestored, desired.Key{}), 1)

	// The whole store out of reach: every connection of the daemon cut,
	// none let in again until the door opens.
	require.Equal(t, 1.0, e.metric(t, "loopd_store_reachable"))
	door(false)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, db)
	require.NoError(t, err)
	e.waitFor(t, func() bool { return e.metric(t, "loopd_store_reachable") == 0 }, waitLong, "loopd_store_reachable says the store is down")
	code, page := get(t, "http://"+e.listen+"/")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, page, "store down since")
	door(true)
	e.waitFor(t, func() bool { return e.metric(t, "loopd_store_reachable") == 1 }, waitLong, "loopd_store_reachable says the store is back")
	up := e.waitEvent(t, journal.StoreReachable, desired.Key{}, 1, waitShort)
	down := e.eventsNamed(t, journal.StoreUnreachable, desired.Key{})
	require.Len(t, down, 1, "one row at the outage's start, however many heartbeats failed")
	assert.Len(t, up, 1)
	assert.True(t, down[0].Time.Before(up[0].Time), "the start's row is timed at the start")
	assert.NotEmpty(t, up[0].Attrs[journal.KeyDownFor])
	// The listener's rows of this outage were made while the store took
	// none: they wait, and are written in order once it does.
	restored := e.waitEvent(t, journal.StoreListenRestored, desired.Key{}, 2, waitShort)
	lost := e.eventsNamed(t, journal.StoreListenLost, desired.Key{})
	require.Len(t, lost, 2, "the lost row written while the store was down")
	for _, e := range append(lost, restored...) {
		assert.Equal(t, "host-a", e.Attrs[journal.KeyHost], "each row names its host: %s", e)
	}
	assert.True(t, lost[1].Time.Before(restored[1].Time), "the lost row is timed at the loss")
	assert.True(t, lost[1].Time.Before(up[0].Time), "timed while the store was down")
}

// get answers a GET of url: its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
