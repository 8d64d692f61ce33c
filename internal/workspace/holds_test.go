package workspace

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHolds: a worktree holds its HEAD and HEAD's ancestors; a commit
// beside its history, one it never saw and text that is not a commit id
// are not held (the last an error, never handed to git).
func TestHolds(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one")
	one := git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "side")
	git("commit", "-q", "--allow-empty", "-m", "side")
	side := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	git("commit", "-q", "--allow-empty", "-m", "two")
	two := git("rev-parse", "HEAD")

	m := &Manager{Root: t.TempDir()}
	ctx := context.Background()
	for _, tc := range []struct {
		name, commit string
		want         bool
	}{
		{"head", two, true},
		{"ancestor", one, true},
		{"ancestor_abbreviated_upper_case", strings.ToUpper(one[:12]), true},
		{"beside_the_history", side, false},
		{"never_seen", strings.Repeat("1", 40), false},
	} {
		got, err := m.Holds(ctx, dir, tc.commit)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
	_, err := m.Holds(ctx, dir, "--output=/tmp/x")
	assert.Error(t, err)
	_, err = m.Holds(ctx, t.TempDir(), two)
	assert.Error(t, err, "not a repository")
}
