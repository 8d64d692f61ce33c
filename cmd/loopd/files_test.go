package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/schema"
)

// withKeys writes dir's config (writeConfig) with the secret in secretFile
// and a GitHub App whose key is in keyFile, both 0600, a tmux socket of
// the test's own, and returns the three paths.
func withKeys(t *testing.T, dir string) (config, secret, key string) {
	t.Helper()
	config = writeConfig(t, dir)
	secret = filepath.Join(dir, "webhook-secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cr3t\n"), 0o600))
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	key = filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(pk)}), 0o600))
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	cfg := strings.Replace(string(data), "webhooks:\n  ghWebhook:\n", "tmux: {socket: loopd-files-"+strconv.Itoa(os.Getpid())+"}\n"+
		"github: {apiURL: http://127.0.0.1:9/api/v3, app: {appID: 1, installationID: 2, privateKeyFile: "+key+"}}\n"+
		"webhooks:\n  ghWebhook:\n    secretFile: "+secret+"\n", 1)
	require.NoError(t, os.WriteFile(config, []byte(cfg), 0o600))
	return config, secret, key
}

// TestCommandsRefuseFilesOthersCanChange: a config file, an instructions
// file, or a directory above the config, that another user can write is
// refused by config validate, serve and reconcile --once, each naming the
// path and the mode, before anything runs.
func TestCommandsRefuseFilesOthersCanChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		// open makes a file or directory others can change and returns
		// what the refusal says of it.
		open func(t *testing.T, dir, config string) (says string)
		// is: the error's sentinel; an instructions file is a problem of
		// its key, as a file too large is.
		is error
	}{
		{"config_writable_by_all", func(t *testing.T, _, config string) string {
			require.NoError(t, os.Chmod(config, 0o666))
			return config + ": mode 0666 lets other users write it"
		}, perm.ErrUnsafe},
		{"config_writable_by_its_group", func(t *testing.T, _, config string) string {
			require.NoError(t, os.Chmod(config, 0o664))
			return config + ": mode 0664 lets other users write it"
		}, perm.ErrUnsafe},
		{"config_in_a_directory_all_can_write", func(t *testing.T, dir, config string) string {
			require.NoError(t, os.Chmod(dir, 0o777))
			return "directory " + dir + ": mode 0777 lets other users replace " + config
		}, perm.ErrUnsafe},
		{"instructions_writable_by_all", func(t *testing.T, dir, config string) string {
			file := filepath.Join(dir, "instructions.md")
			require.NoError(t, os.WriteFile(file, []byte("Work on the issue.\n"), 0o600))
			require.NoError(t, os.Chmod(file, 0o666))
			data, err := os.ReadFile(config)
			require.NoError(t, err)
			cfg := strings.Replace(string(data), "{harness: claude-code, ", "{harness: claude-code, instructionsFile: instructions.md, ", 1)
			require.NoError(t, os.WriteFile(config, []byte(cfg), 0o600))
			return file + ": mode 0666 lets other users write it"
		}, schema.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "etc")
			require.NoError(t, os.Mkdir(dir, 0o755))
			config, _, _ := withKeys(t, dir)
			says := tc.open(t, dir, config)
			for _, args := range [][]string{{"config", "validate", config}, {"serve", "--config", config}, {"reconcile", "--once", "--config", config}} {
				_, err := run(t, "", args...)
				require.ErrorIs(t, err, tc.is, "%v", args)
				assert.Contains(t, err.Error(), says, "%v", args)
			}
		})
	}
}

// TestCommandsRefuseSecretsOthersCanRead: a secretFile or a GitHub App key
// file that another user can read is refused by config validate (which
// reads neither), serve and reconcile --once, naming the path and the
// mode; at 0600 they pass validate.
func TestCommandsRefuseSecretsOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	config, secret, key := withKeys(t, dir)
	out, err := run(t, "", "config", "validate", config)
	require.NoError(t, err, out)

	for _, file := range []string{secret, key} {
		for _, m := range []os.FileMode{0o644, 0o640} {
			require.NoError(t, os.Chmod(file, m))
			for _, args := range [][]string{{"config", "validate", config}, {"serve", "--config", config}, {"reconcile", "--once", "--config", config}} {
				_, err := run(t, "", args...)
				require.ErrorIs(t, err, perm.ErrUnsafe, "%s %04o: %v", file, m, args)
				assert.Contains(t, err.Error(), file+": mode 0"+strconv.FormatUint(uint64(m), 8), "%v", args)
			}
		}
		require.NoError(t, os.Chmod(file, 0o600))
	}
}

// A github.tokenFile that another user can read is refused as a
// secretFile is, by config validate, serve and reconcile --once.
func TestCommandsRefuseATokenFileOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	config, _, key := withKeys(t, dir)
	token := filepath.Join(dir, "github-token")
	require.NoError(t, os.WriteFile(token, []byte("ghp_x\n"), 0o600))
	data, err := os.ReadFile(config)
	require.NoError(t, err)
	cfg := strings.Replace(string(data), "app: {appID: 1, installationID: 2, privateKeyFile: "+key+"}", "tokenFile: "+token, 1)
	require.NoError(t, os.WriteFile(config, []byte(cfg), 0o600))
	out, err := run(t, "", "config", "validate", config)
	require.NoError(t, err, out)

	require.NoError(t, os.Chmod(token, 0o644))
	for _, args := range [][]string{{"config", "validate", config}, {"serve", "--config", config}, {"reconcile", "--once", "--config", config}} {
		_, err := run(t, "", args...)
		require.ErrorIs(t, err, perm.ErrUnsafe, "%v", args)
		assert.Contains(t, err.Error(), token+": mode 0644", "%v", args)
	}
}
