package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// A plain release after a release --fresh that no pass has carried out yet
// keeps the fresh request: the last call must not quietly undo it.
func TestFreshReleasePendingStands(t *testing.T) {
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	k := desired.Key{Owner: "octo-org", Repo: "api", Number: 3}
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-1", Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
	require.NoError(t, err)

	pending := func(k desired.Key) bool {
		r, err := st.Get(ctx, k)
		require.NoError(t, err)
		return freshReleasePending(r)
	}
	assert.False(t, pending(k), "no release yet")
	require.NoError(t, st.Release(ctx, k, false))
	assert.False(t, pending(k), "a plain release is not a fresh one")
	require.NoError(t, st.Release(ctx, k, true))
	assert.True(t, pending(k))
	other := desired.Key{Owner: "octo-org", Repo: "api", Number: 4}
	_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d-2", Key: other, Kind: desired.KindIssue, Harness: "claude-code", Cwd: "/w"})
	require.NoError(t, err)
	assert.False(t, pending(other), "another item")
}
