package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
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

	door(true)
	e.waitFor(t, func() bool { code, _ := ready(); return code == http.StatusOK }, waitLong, "ready again once it listens again")
	require.Equal(t, 1.0, e.metric(t, "loopd_store_listening"))
}
