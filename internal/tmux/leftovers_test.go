package tmux_test

import (
	"os"
	"testing"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// TestMain sweeps the tmux servers and sockets that killed test runs left,
// and fails the run when one of its own tests leaves one (tmuxtest.Main).
func TestMain(m *testing.M) { os.Exit(tmuxtest.Main(m.Run)) }
