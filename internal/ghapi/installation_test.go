package ghapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// TestEachInstallationItsOwnToken: an App installed on two organizations
// and configured with no installation id sends each call with a token of
// the installation its item names, and counts it against that
// installation's limits; a call whose item names none goes through the
// installation GitHub's lookup names for its repository, asked once per
// repository; a repository the App is not installed on is GitHub's 404,
// not retried.
func TestEachInstallationItsOwnToken(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Install("acme", 11)
	srv.Install("globex", 22)
	c := appClient(t, srv, 0)
	ctx := context.Background()

	acme := react
	acme.Key, acme.Installation = keyAPI, 11
	globex := react
	globex.Key, globex.Installation = desired.Key{Owner: "globex", Repo: "web", Number: 7}, 22
	for _, call := range []desired.Call{acme, globex, acme} {
		_, err := c.Send(ctx, call)
		require.NoError(t, err)
	}
	inst, err := c.Installation(ctx, globex)
	require.NoError(t, err)
	assert.Equal(t, "installation 22", inst)
	assert.Equal(t, 2, srv.OwnTokens(), "one token per installation, kept")
	byRepo := map[string]int64{}
	for _, r := range srv.Requests() {
		if r.Method == http.MethodPost && anyReactions.MatchString(r.Path) {
			byRepo[r.Path] = srv.TokenInstallation(r.Auth[len("token "):])
		}
	}
	assert.Equal(t, map[string]int64{"/repos/acme/api/issues/comments/7/reactions": 11, "/repos/globex/web/issues/comments/7/reactions": 22}, byRepo)

	unknown := globex
	unknown.Installation = 0
	for range 2 {
		inst, err = c.Installation(ctx, unknown)
		require.NoError(t, err)
		assert.Equal(t, "installation 22", inst, "the lookup's")
		_, err = c.Send(ctx, unknown)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, srv.Count(http.MethodGet, regexp.MustCompile(`^/repos/globex/web/installation$`)), "asked once")
	assert.Equal(t, 2, srv.OwnTokens())

	elsewhere := react
	elsewhere.Key = desired.Key{Owner: "initech", Repo: "tps", Number: 1}
	_, err = c.Send(ctx, elsewhere)
	require.Error(t, err)
	v := ghapi.Classify(err, srv.Now())
	assert.Equal(t, http.StatusNotFound, v.HTTPStatus)
	assert.False(t, v.Retry)
}

// TestPauseHoldsItsInstallationOnly: a secondary limit met by a call of
// one installation pauses that installation's writes (github.paused
// installation="installation 11"), while the calls of the App's other
// installation, whose limits are its own, are all sent.
func TestPauseHoldsItsInstallationOnly(t *testing.T) {
	srv := ghapitest.New(t)
	srv.Install("acme", 11)
	srv.Install("globex", 22)
	ctx := context.Background()
	st, err := sqlstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	keyGlobex := desired.Key{Owner: "globex", Repo: "web", Number: 7}
	for i, k := range []desired.Key{keyAPI, keyGlobex} {
		_, err = st.Ingest(ctx, store.Ingest{DeliveryID: "d" + k.Owner, Key: k, Kind: desired.KindIssue, Harness: "h", Cwd: "/w", Installation: int64(11 * (i + 1)),
			Delivery: &desired.Delivery{Event: "issues", Action: "opened", Sender: "octocat", Prompt: "p"}})
		require.NoError(t, err)
		require.NoError(t, st.WriteStatus(ctx, k, store.StatusWrite{Status: desired.Status{Phase: desired.PhaseRunning}, Calls: reactions(3)}))
	}
	srv.Fail(ghapitest.Failure{Method: http.MethodPost, Path: regexp.MustCompile(`^/repos/acme/`), Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {"30"}}, Body: `{"message":"You have exceeded a secondary rate limit."}`, Times: 1})
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv.SetNow(clk.Now)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &ghapi.Worker{Store: st, API: appClient(t, srv, 0), Journal: journal.NewRecorder(log, st, clk.Now), Now: clk.Now,
		Tries: 4, Initial: 2 * time.Second, Max: time.Minute, Limits: ghapi.NewLimits(time.Second, time.Minute, 30*time.Minute), Sleep: clk.Sleep}

	_, err = w.Drain(ctx)
	require.NoError(t, err)
	posted := map[desired.Key]int{}
	calls, err := st.Calls(ctx, store.CallFilter{})
	require.NoError(t, err)
	for _, c := range calls {
		if c.State == desired.CallPosted {
			posted[c.Key]++
		}
	}
	assert.Equal(t, map[desired.Key]int{keyGlobex: 3}, posted, "the other installation's calls all went; none of the paused one's")
	pauses, err := st.Pauses(ctx)
	require.NoError(t, err)
	require.Len(t, pauses, 1)
	assert.Equal(t, "installation 11", pauses[0].Installation)
	assert.Equal(t, pauses[0].Since.Add(30*time.Second), pauses[0].Until, "for the Retry-After asked")
	paused, err := st.Events(ctx, store.EventFilter{WorkItem: keyAPI.String(), Names: []string{string(journal.GitHubPaused)}})
	require.NoError(t, err)
	require.Len(t, paused, 1)
	assert.Equal(t, "installation 11", paused[0].Attrs["installation"])
}

var anyReactions = regexp.MustCompile(`/reactions$`)
