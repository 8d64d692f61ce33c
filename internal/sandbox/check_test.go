package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	h := realHost(t)
	assert.Equal(t, os.Geteuid() == 0, h.Root)
	assert.NotEmpty(t, h.System)
	assert.True(t, Clean(h.Bwrap), h.Bwrap)
}

// TestCheckWithoutBubblewrap: the error names the package to install.
func TestCheckWithoutBubblewrap(t *testing.T) {
	_, err := Check(context.Background(), "/usr/local/bin/loopd", t.TempDir())
	require.ErrorIs(t, err, ErrMissing)
	assert.Contains(t, err.Error(), "apt-get install bubblewrap")
}

func TestDiagnose(t *testing.T) {
	files := func(m map[string]string) func(string) (string, error) {
		return func(name string) (string, error) {
			if v, ok := m[name]; ok {
				return v, nil
			}
			return "", os.ErrNotExist
		}
	}
	cases := []struct {
		name  string
		root  bool
		files map[string]string
		want  string
	}{
		{name: "root_without_the_right", root: true, want: "CAP_SYS_ADMIN"},
		{name: "debian_switch_off", files: map[string]string{"kernel/unprivileged_userns_clone": "0", "user/max_user_namespaces": "100"},
			want: "sysctl -w kernel.unprivileged_userns_clone=1"},
		{name: "no_user_namespaces_allowed", files: map[string]string{"kernel/unprivileged_userns_clone": "1", "user/max_user_namespaces": "0"},
			want: "sysctl -w user.max_user_namespaces=15000"},
		{name: "ubuntu_apparmor_restriction", files: map[string]string{"user/max_user_namespaces": "15000", "kernel/apparmor_restrict_unprivileged_userns": "1"},
			want: "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		{name: "nothing_off", files: map[string]string{"user/max_user_namespaces": "15000"}, want: "may be off"},
		{name: "unreadable", files: nil, want: "may be off"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Contains(t, Diagnose(c.root, files(c.files)), c.want)
		})
	}
	assert.NotContains(t, Diagnose(false, func(string) (string, error) { return "", errors.New("EACCES") }), "sysctl -w")
}

// refusedEnv marks the run of this test binary in a user namespace that
// may make no more of them, started by TestCheckWithoutUserNamespaces.
const refusedEnv = "LOOPD_SANDBOX_TEST_NO_USERNS"

// TestCheckWithoutUserNamespaces: where an unprivileged user may make no
// user namespace (user.max_user_namespaces is 0, set here in a user
// namespace of the test's own, never on the host), Check refuses and names
// the setting. It needs root to map the users of that namespace.
func TestCheckWithoutUserNamespaces(t *testing.T) {
	if os.Getenv(refusedEnv) != "" {
		_, err := Check(context.Background(), "/usr/local/bin/loopd", os.Getenv("PATH"))
		require.ErrorIs(t, err, ErrNamespaces)
		assert.Contains(t, err.Error(), "user.max_user_namespaces is 0")
		assert.Contains(t, err.Error(), "sysctl -w user.max_user_namespaces=15000")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("mapping the users of a user namespace needs root")
	}
	realHost(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	bin := nobodyCopy(t)
	cmd := exec.Command("/bin/sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" --reuid=1000 --regid=1000 --clear-groups "$1" -test.run='^TestCheckWithoutUserNamespaces$' -test.v -test.count=1`,
		setpriv, bin)
	cmd.Env = append(os.Environ(), refusedEnv+"=1", "HOME=/nonexistent", "TMPDIR=/tmp")
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 1000, HostID: 65534, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: 1000, HostID: 65534, Size: 1}},
		GidMappingsEnableSetgroups: true}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestCheckWithoutUserNamespaces")
}
