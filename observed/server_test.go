package observed_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
)

// TestObserverSeesTheServerGone: with Owner set, the snapshot says whether
// the server this loopd claimed still runs: not when none runs, nor when
// the one running is unclaimed (started since by someone else).
func TestObserverSeesTheServerGone(t *testing.T) {
	mine := tmux.NewOwner("/srv/loopd/state")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, r *observerRig)
		gone  bool
	}{
		{"claimed_by_this_loopd", func(t *testing.T, r *observerRig) {
			require.NoError(t, r.f.EnsureServer(t.Context(), tmux.ServerOptions{Owner: mine}))
		}, false},
		{"no_server", func(t *testing.T, r *observerRig) {
			require.NoError(t, r.f.EnsureServer(t.Context(), tmux.ServerOptions{Owner: mine}))
			r.f.KillServer()
		}, true},
		{"a_new_server_nobody_claimed", func(t *testing.T, r *observerRig) {
			r.f.KillServer()
			require.NoError(t, r.f.EnsureServer(t.Context(), tmux.ServerOptions{}))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newObserverRig(t)
			r.o.Owner = mine.ID
			tc.setup(t, r)
			o, err := r.o.Observe(t.Context(), nil, func(desired.Record, observed.Snapshot) observed.Need { return observed.Need{} }, now)
			require.NoError(t, err)
			assert.Equal(t, tc.gone, o.Snapshot.ServerGone)
		})
	}
}

// TestObserverReadsTheServerMarkFromTheListing: with sessions on the
// server, the listing's rows carry its mark, so an idle pass is one exec;
// only a listing with no row asks for the mark on its own.
func TestObserverReadsTheServerMarkFromTheListing(t *testing.T) {
	mine, theirs := tmux.NewOwner("/srv/loopd/state"), tmux.NewOwner("/srv/other/state")
	for _, tc := range []struct {
		name  string
		owner tmux.Owner
		gone  bool
	}{
		{"claimed_by_this_loopd", mine, false},
		{"claimed_by_another_loopd", theirs, true},
		{"unclaimed", tmux.Owner{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newObserverRig(t)
			r.o.Owner = mine.ID
			require.NoError(t, r.f.EnsureServer(t.Context(), tmux.ServerOptions{Owner: tc.owner}))
			spawn(t, r.f, "loop-acme-api-1", "claude", "hi")
			before := len(r.f.Calls())
			o, err := r.o.Observe(t.Context(), nil, func(desired.Record, observed.Snapshot) observed.Need { return observed.Need{} }, now)
			require.NoError(t, err)
			assert.Equal(t, tc.gone, o.Snapshot.ServerGone)
			assert.Equal(t, []string{"ListPanes"}, r.f.Calls()[before:], "one exec")
		})
	}
}
