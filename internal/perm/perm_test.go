package perm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// other is a uid that owns nothing here.
const other = 54321

// write creates path with mode (the umask aside) and returns it.
func write(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte("x\n"), 0o600))
	require.NoError(t, os.Chmod(path, mode))
	return path
}

// dir creates a directory under parent with mode and returns it.
func dir(t *testing.T, parent, name string, mode os.FileMode) string {
	t.Helper()
	d := filepath.Join(parent, name)
	require.NoError(t, os.Mkdir(d, 0o700))
	require.NoError(t, os.Chmod(d, mode))
	return d
}

// ownedByAnother makes path another user's: chown as root, else the
// check is asked for a user who is not its owner.
func ownedByAnother(t *testing.T, path string) (uid int) {
	t.Helper()
	if os.Geteuid() == 0 {
		require.NoError(t, os.Lchown(path, other, other))
		return 0
	}
	return os.Geteuid() + 1
}

// modes checks a file of each mode of cases, as a secret or not: each is
// refused, naming the file and its mode, or not.
func modes(t *testing.T, secret bool, cases map[os.FileMode]bool) {
	t.Helper()
	base := t.TempDir()
	for mode, ok := range cases {
		p := write(t, filepath.Join(base, fmt.Sprintf("%04o", mode)), mode)
		err := check(p, secret, os.Geteuid())
		if ok {
			assert.NoError(t, err, "%04o", mode)
			continue
		}
		require.ErrorIs(t, err, ErrUnsafe, "%04o", mode)
		assert.Contains(t, err.Error(), fmt.Sprintf("%s: mode %04o", p, mode))
	}
}

func TestTrusted(t *testing.T) {
	me := os.Geteuid()
	base := t.TempDir()
	modes(t, false, map[os.FileMode]bool{0o600: true, 0o644: true, 0o664: false, 0o646: false})
	t.Run("missing_is_for_its_reader", func(t *testing.T) {
		assert.NoError(t, check(filepath.Join(base, "nope"), false, me))
	})
	t.Run("another_users_file", func(t *testing.T) {
		p := write(t, filepath.Join(base, "theirs"), 0o644)
		err := check(p, false, ownedByAnother(t, p))
		require.ErrorIs(t, err, ErrUnsafe)
		assert.Contains(t, err.Error(), "is owned by uid")
	})
}

func TestTrustedDirectories(t *testing.T) {
	me := os.Geteuid()
	base := t.TempDir()

	open := dir(t, base, "open", 0o777)
	err := check(write(t, filepath.Join(open, "loopd.yaml"), 0o600), false, me)
	require.ErrorIs(t, err, ErrUnsafe, "anyone can replace the file in a world-writable directory")
	assert.Contains(t, err.Error(), "directory "+open+": mode 0777")

	groupDir := dir(t, base, "group", 0o775)
	require.ErrorIs(t, check(write(t, filepath.Join(groupDir, "loopd.yaml"), 0o600), false, me), ErrUnsafe, "nor in a group-writable one")

	// A sticky world-writable directory (/tmp) is safe for what loopd's
	// user owns in it, not for another user's entry.
	sticky := dir(t, base, "sticky", 0o777|os.ModeSticky)
	mine := dir(t, sticky, "mine", 0o700)
	assert.NoError(t, check(write(t, filepath.Join(mine, "loopd.yaml"), 0o600), false, me))
	theirs := dir(t, sticky, "theirs", 0o755)
	p := write(t, filepath.Join(theirs, "loopd.yaml"), 0o600)
	require.ErrorIs(t, check(p, false, ownedByAnother(t, theirs)), ErrUnsafe)

	// Both the path as given and the one its symlinks lead to.
	safe := dir(t, base, "safe", 0o755)
	target := write(t, filepath.Join(open, "target.yaml"), 0o600)
	link := filepath.Join(safe, "via-link.yaml")
	require.NoError(t, os.Symlink(target, link))
	require.ErrorIs(t, check(link, false, me), ErrUnsafe, "the real file sits in a world-writable directory")
	good := write(t, filepath.Join(safe, "good.yaml"), 0o600)
	link = filepath.Join(open, "link-to-good.yaml")
	require.NoError(t, os.Symlink(good, link))
	require.ErrorIs(t, check(link, false, me), ErrUnsafe, "anyone can replace the symlink")
}

func TestSecret(t *testing.T) {
	me := os.Geteuid()
	base := t.TempDir()
	modes(t, true, map[os.FileMode]bool{0o600: true, 0o400: true, 0o640: false, 0o604: false, 0o602: false})
	t.Run("root_grants_its_group", func(t *testing.T) {
		if me != 0 {
			t.Skip("needs a file root owns")
		}
		// As systemd's credentials and Kubernetes' fsGroup do, for a
		// daemon that is not root.
		p := write(t, filepath.Join(base, "credential"), 0o440)
		assert.NoError(t, check(p, true, other))
		assert.ErrorIs(t, check(write(t, filepath.Join(base, "credential-for-all"), 0o444), true, other), ErrUnsafe)
	})
	assert.NoError(t, Secret(write(t, filepath.Join(base, "exported"), 0o600)))
	assert.ErrorIs(t, Trusted(write(t, filepath.Join(base, "exported-open"), 0o666)), ErrUnsafe)
}
