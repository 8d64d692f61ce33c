package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDaemonKeepsItsName: serve, which re-executes itself to keep the
// webhook secret out of its /proc environ, is named loopd still, as ps
// and pgrep loopd find it, not "exe".
func TestDaemonKeepsItsName(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.start(t)
	pid := strconv.Itoa(e.daemon.Process.Pid)
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	require.NoError(t, err)
	require.NotContains(t, string(environ), secretEnv+"=", "the daemon re-executed itself without the secret")
	comm, err := os.ReadFile("/proc/" + pid + "/comm")
	require.NoError(t, err)
	assert.Equal(t, "loopd", strings.TrimSpace(string(comm)))
}
