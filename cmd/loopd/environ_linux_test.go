package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/schema"
)

// What the exec before hands over comes back into Go's environment, and
// its file is closed; a descriptor that is not loopd's file is refused.
func TestTakeInherited(t *testing.T) {
	t.Cleanup(func() { reexecuted = false })
	fd, err := unix.MemfdCreate(secretsFileName, 0)
	require.NoError(t, err)
	require.NoError(t, writeAll(fd, []byte(`{"LOOPD_TEST_SECRET":"s3cr3t"}`)))
	_, err = unix.Seek(fd, 0, 0)
	require.NoError(t, err)
	t.Setenv(secretsFDEnv, strconv.Itoa(fd))
	t.Setenv("LOOPD_TEST_SECRET", "")
	require.NoError(t, takeInherited())
	assert.Equal(t, "s3cr3t", os.Getenv("LOOPD_TEST_SECRET"))
	_, set := os.LookupEnv(secretsFDEnv)
	assert.False(t, set)
	assert.True(t, reexecuted)
	_, err = unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	assert.ErrorIs(t, err, unix.EBADF, "the file is closed")
	assert.NoError(t, scrubEnviron([]string{"LOOPD_TEST_SECRET"}), "a re-executed loopd is not re-executed again")

	reexecuted = false
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	defer f.Close()
	t.Setenv(secretsFDEnv, strconv.Itoa(int(f.Fd())))
	require.ErrorContains(t, takeInherited(), "is not loopd's")
	assert.False(t, reexecuted)
}

// A loopd whose environment holds a secret re-executes itself, with the
// same argv, without it; the value goes in an anonymous file the new
// process is told of, never in its argv or environment. One without any
// is not re-executed.
func TestScrubEnvironReexecsWithoutTheSecrets(t *testing.T) {
	var argv, env []string
	var handed []byte
	prev := execve
	t.Cleanup(func() { execve = prev })
	execve = func(bin string, a, e []string) error {
		self, serr := os.Executable()
		require.NoError(t, serr)
		require.Equal(t, self, bin, "the executable's own path, for the process to keep its name")
		argv, env = a, e
		fd := ""
		for _, kv := range e {
			if v, ok := strings.CutPrefix(kv, secretsFDEnv+"="); ok {
				fd = v
			}
		}
		var err error
		handed, err = os.ReadFile("/proc/self/fd/" + fd)
		require.NoError(t, err)
		return nil
	}
	t.Setenv("LOOPD_TEST_SECRET", "s3cr3t")
	t.Setenv("LOOPD_TEST_OTHER", "kept")
	require.NoError(t, scrubEnviron([]string{"LOOPD_TEST_SECRET", "LOOPD_TEST_ABSENT"}))
	assert.Equal(t, os.Args, argv)
	assert.Contains(t, env, "LOOPD_TEST_OTHER=kept")
	for _, kv := range append(append([]string{}, argv...), env...) {
		assert.NotContains(t, kv, "s3cr3t")
	}
	assert.JSONEq(t, `{"LOOPD_TEST_SECRET":"s3cr3t"}`, string(handed))

	argv = nil
	require.NoError(t, scrubEnviron([]string{"LOOPD_TEST_ABSENT"}))
	assert.Nil(t, argv, "nothing to keep out: no re-exec")
}

func TestSecretEnvNames(t *testing.T) {
	cfg := &schema.Config{
		Webhooks:  schema.Webhooks{GHWebhook: schema.GHWebhook{SecretEnv: "HOOK_SECRET"}},
		GitHub:    &schema.GitHub{TokenEnv: "LOOPD_GITHUB_TOKEN"},
		Harnesses: map[string]schema.Harness{"a": {PassEnv: []string{"ANTHROPIC_API_KEY", "PATH"}}},
	}
	assert.Equal(t, []string{"ANTHROPIC_API_KEY", "HOOK_SECRET", "LOOPD_GITHUB_TOKEN"}, secretEnvNames(cfg))
	cfg.Webhooks.GHWebhook.SecretFile, cfg.GitHub.App = "/run/credentials/loopd/webhook-secret", &schema.GitHubApp{AppID: 1}
	assert.Equal(t, []string{"ANTHROPIC_API_KEY"}, secretEnvNames(cfg), "a file and a key file are not in the environment")
}
