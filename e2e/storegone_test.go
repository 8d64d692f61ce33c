package e2e

import (
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStateDirRemovedUnderServe: the state dir deleted under a running
// serve (its SQLite file with it) makes /readyz answer 503 naming the
// store, and a delivery is refused with a 5xx instead of being
// acknowledged into the unlinked file, where a restart would lose it.
func TestStateDirRemovedUnderServe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	ready := func() (int, string) {
		resp, err := http.Get("http://" + e.listen + "/readyz")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	e.waitFor(t, func() bool { code, _ := ready(); return code == http.StatusOK }, waitShort, "ready at start")

	require.NoError(t, os.RemoveAll(e.stateDir))
	code, body := ready()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "store file removed or replaced")
	got := e.replay(t, commentFixture, "", withComment("never acknowledged into a deleted file"))
	assert.GreaterOrEqual(t, got, http.StatusInternalServerError, "a delivery the store cannot keep is not acknowledged")
}
