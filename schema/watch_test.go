package schema

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logBuffer is a goroutine-safe buffer for a slog JSON handler.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the decoded log lines whose message is msg.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// policyConfig is a valid config whose restart policy and tmux socket vary.
func policyConfig(restartPolicy, socket string) string {
	return minimal + "      tmux: {restartPolicy: " + restartPolicy + "}\ntmux: {socket: " + socket + "}\n"
}

type watchFixture struct {
	path    string
	w       *Watcher
	log     *logBuffer
	mu      sync.Mutex
	changes []*Config
}

func (f *watchFixture) lastChange() *Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.changes) == 0 {
		return nil
	}
	return f.changes[len(f.changes)-1]
}

func restartPolicyOf(c *Config) string {
	if c == nil {
		return ""
	}
	return c.Webhooks.GHWebhook.Routing.Tmux.RestartPolicy
}

// newWatchFixture writes a config with restartPolicy OnFailure and returns a
// Watcher on it.
func newWatchFixture(t *testing.T) *watchFixture {
	t.Helper()
	f := &watchFixture{path: filepath.Join(t.TempDir(), "loopd.yaml"), log: &logBuffer{}}
	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("OnFailure", "loopd")), 0o600))
	log := slog.New(slog.NewJSONHandler(f.log, nil))
	w, err := NewWatcher(f.path, log, func(c *Config) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.changes = append(f.changes, c)
	})
	require.NoError(t, err)
	f.w = w
	require.Equal(t, RestartOnFailure, restartPolicyOf(w.Current()))
	return f
}

// run runs Watcher.Run until the test ends.
func (f *watchFixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert.NoError(t, f.w.Run(ctx))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestWatcherReloadsOnChange(t *testing.T) {
	rewrite := func(t *testing.T, path string, data []byte) {
		require.NoError(t, os.WriteFile(path, data, 0o600))
	}
	tests := []struct {
		name        string
		write       func(t *testing.T, path string, data []byte)
		beforeStart bool // write before Run starts
	}{
		{name: "rewrite_in_place", write: rewrite},
		{name: "rename_over", write: func(t *testing.T, path string, data []byte) {
			tmp := filepath.Join(filepath.Dir(path), ".loopd.yaml.tmp")
			require.NoError(t, os.WriteFile(tmp, data, 0o600))
			require.NoError(t, os.Rename(tmp, path))
		}},
		{name: "change_before_run", write: rewrite, beforeStart: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newWatchFixture(t)
			if !tt.beforeStart {
				f.run(t)
			}
			tt.write(t, f.path, []byte(policyConfig("Never", "loopd")))
			if tt.beforeStart {
				f.run(t)
			}

			require.Eventually(t, func() bool { return restartPolicyOf(f.lastChange()) == RestartNever },
				5*time.Second, 10*time.Millisecond, "onChange gets the new policy")
			assert.Equal(t, RestartNever, restartPolicyOf(f.w.Current()))
			require.Eventually(t, func() bool { return len(f.log.records(t, "config.reloaded")) > 0 },
				5*time.Second, 10*time.Millisecond)
			rec := f.log.records(t, "config.reloaded")[0]
			assert.Equal(t, "INFO", rec["level"])
			assert.Equal(t, f.path, rec["path"])
		})
	}
}

func TestWatcherKeepsLastGoodConfig(t *testing.T) {
	f := newWatchFixture(t)
	f.run(t)
	before := f.w.Current()
	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("Sometimes", "loopd")), 0o600))

	// Poll for the record of the complete file: a read may also catch the
	// file truncated but not yet written, which is invalid too.
	var rec map[string]any
	require.Eventually(t, func() bool {
		for _, r := range f.log.records(t, "config.invalid") {
			if err, _ := r["err"].(string); strings.Contains(err, "restartPolicy: value must be one of") {
				rec = r
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, f.path, rec["path"])
	assert.Same(t, before, f.w.Current())
	assert.Nil(t, f.lastChange(), "onChange is not called for an invalid file")

	// A later good write is picked up again.
	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("Always", "loopd")), 0o600))
	require.Eventually(t, func() bool { return restartPolicyOf(f.w.Current()) == RestartAlways },
		5*time.Second, 10*time.Millisecond)
}

func TestWatcherReload(t *testing.T) {
	f := newWatchFixture(t)
	before := f.w.Current()

	require.NoError(t, os.WriteFile(f.path, []byte("tmux: {socket: [x]}\n"), 0o600))
	err := f.w.Reload()
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Same(t, before, f.w.Current())
	assert.Len(t, f.log.records(t, "config.invalid"), 1)

	require.NoError(t, os.Remove(f.path))
	assert.ErrorIs(t, f.w.Reload(), os.ErrNotExist)
	assert.Same(t, before, f.w.Current())
	assert.Len(t, f.log.records(t, "config.invalid"), 2)

	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("Never", "loopd")), 0o600))
	require.NoError(t, f.w.Reload())
	assert.Equal(t, RestartNever, restartPolicyOf(f.w.Current()))
	assert.Equal(t, RestartNever, restartPolicyOf(f.lastChange()))
}

// TestWatcherReloadsProjectSettings: a route's projectSettings changes
// live, as the rest of the routing does; absent it is untrusted, and a
// value outside the two is invalid.
func TestWatcherReloadsProjectSettings(t *testing.T) {
	f := newWatchFixture(t)
	route := func(c *Config) Route { r, _ := c.Webhooks.GHWebhook.Routing.Route("a", "b"); return r }
	assert.False(t, route(f.w.Current()).TrustsProjectSettings())
	assert.Equal(t, ProjectSettingsUntrusted, route(f.w.Current()).ProjectSettings)

	require.NoError(t, os.WriteFile(f.path, []byte(minimal+"          projectSettings: trusted\n"), 0o600))
	require.NoError(t, f.w.Reload())
	assert.True(t, route(f.w.Current()).TrustsProjectSettings())
	assert.Empty(t, f.log.records(t, "config.invalid"))

	require.NoError(t, os.WriteFile(f.path, []byte(minimal+"          projectSettings: always\n"), 0o600))
	assert.ErrorIs(t, f.w.Reload(), ErrInvalid)
	assert.True(t, route(f.w.Current()).TrustsProjectSettings(), "the last good config stays")
}

// TestWatcherRefusesAnSSHPasswordURL: a reload to a route whose checkout
// URL carries an ssh password keeps the last good config, and the error
// (config.invalid) names the route without the password.
func TestWatcherRefusesAnSSHPasswordURL(t *testing.T) {
	f := newWatchFixture(t)
	before := f.w.Current()
	bad := strings.Replace(minimal, `        "*":`, "        \"octo-org/*\":\n          harness: claude-code\n"+
		"          workdir: /w/{{.Repo}}/{{.Number}}\n"+
		"          checkout: {url: \"ssh://git:hunter2@example.com/{{.Owner}}/{{.Repo}}.git\"}\n        \"*\":", 1)
	require.NoError(t, os.WriteFile(f.path, []byte(bad), 0o600))
	err := f.w.Reload()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Same(t, before, f.w.Current(), "the last good config is kept")
	assert.Nil(t, f.lastChange())
	recs := f.log.records(t, "config.invalid")
	require.Len(t, recs, 1)
	msg, _ := recs[0]["err"].(string)
	assert.Contains(t, msg, `repos["octo-org/*"].checkout.url`)
	assert.Contains(t, msg, "a password in a non-http(s) url cannot be used")
	assert.NotContains(t, msg, "hunter2")
}

// TestWatcherCheckRefusesAReload: a config that parses but fails the
// watcher's Check (a rule of another package) is config.invalid, and the
// last good config stays; one that passes it is loaded.
func TestWatcherCheckRefusesAReload(t *testing.T) {
	f := newWatchFixture(t)
	before := f.w.Current()
	f.w.Check = func(c *Config) error {
		if restartPolicyOf(c) == RestartNever {
			return errors.New("routing.repos.*: refused by the check")
		}
		return nil
	}
	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("Never", "other")), 0o600))
	require.ErrorContains(t, f.w.Reload(), "refused by the check")
	assert.Same(t, before, f.w.Current(), "the last good config is kept")
	recs := f.log.records(t, "config.invalid")
	require.Len(t, recs, 1)

	require.NoError(t, os.WriteFile(f.path, []byte(policyConfig("Always", "other")), 0o600))
	require.NoError(t, f.w.Reload())
	assert.Equal(t, RestartAlways, restartPolicyOf(f.w.Current()))
}

func TestWatcherKeepsRestartOnlyFields(t *testing.T) {
	f := newWatchFixture(t)
	stateDir := f.w.Current().StateDir

	changed := strings.Replace(policyConfig("Never", "other"), "\nwebhooks:\n  ghWebhook:\n",
		"\nstateDir: /elsewhere\nreconcile: {intervalSeconds: 3}\nwebhooks:\n  ghWebhook:\n    listen: 127.0.0.1:9999\n    maxConnsPerAddress: 0\n", 1)
	changed = strings.Replace(changed, "command: claude", "command: /opt/other/claude", 1)
	require.NoError(t, os.WriteFile(f.path, []byte(changed), 0o600))
	require.NoError(t, f.w.Reload())

	cur := f.w.Current()
	assert.Equal(t, RestartNever, restartPolicyOf(cur), "the soft policy changes")
	assert.Equal(t, stateDir, cur.StateDir)
	assert.Equal(t, "loopd", cur.Tmux.Socket)
	assert.Equal(t, "127.0.0.1:8787", cur.Webhooks.GHWebhook.Listen)
	assert.Equal(t, 10, cur.Reconcile.IntervalSeconds)
	assert.Equal(t, DefaultMaxConnsPerAddress, cur.Webhooks.GHWebhook.ConnsPerAddress(), "the listener's bounds are set at its start")
	assert.Equal(t, "claude", cur.Harnesses["claude-code"].Command, "adapters are built once at start")
	recs := f.log.records(t, "config.reloaded")
	require.Len(t, recs, 1)
	assert.Equal(t, "WARN", recs[0]["level"])
	assert.Equal(t, []any{"stateDir", "tmux.socket", "reconcile.intervalSeconds", "webhooks.ghWebhook.listen",
		"webhooks.ghWebhook.maxConnsPerAddress", "harnesses"}, recs[0]["restart_required"])
}

func TestNewWatcherInvalid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopd.yaml")
	require.NoError(t, os.WriteFile(path, []byte("bogus: 1\n"), 0o600))
	_, err := NewWatcher(path, slog.New(slog.DiscardHandler), nil)
	assert.ErrorIs(t, err, ErrInvalid)

	_, err = NewWatcher(filepath.Join(t.TempDir(), "missing.yaml"), slog.New(slog.DiscardHandler), nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
}
