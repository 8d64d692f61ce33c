package schema

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/loopd/loopd/internal/journal"
)

// debounce is how long the directory must stay quiet before a change is
// read: an editor's save is several events (write, rename, chmod).
const debounce = 100 * time.Millisecond

// Watcher holds the current config and reloads it when the file changes or
// Reload is called. An invalid file keeps the last good config.
//
// Only routing (with its respawn policy), capacity and authorized users change live.
// stateDir, tmux.socket, tmux.historyLimit, reconcile.intervalSeconds,
// harnesses and webhooks.ghWebhook listen, path, secretEnv and secretFile
// need a
// restart: a reload that changes them keeps their old values and logs which
// ones were kept.
//
// Each reload logs config.reloaded (keys path, and restart_required listing
// the kept keys, at warning level, when there are any) or config.invalid
// (error level, keys path and err); the names are journal.ConfigReloaded and
// journal.ConfigInvalid.
type Watcher struct {
	// Check, when set before Run or Reload, is a rule from outside this
	// package (the harness adapters, say) that a reloaded config must
	// pass: its error makes the reload config.invalid, and the last good
	// config stays.
	Check func(*Config) error

	path     string
	log      *slog.Logger
	onChange func(*Config)
	current  atomic.Pointer[Config]

	mu   sync.Mutex // serializes reloads
	seen []byte     // the content last read; guarded by mu
}

// NewWatcher loads the config at path and returns a Watcher holding it.
// onChange, which may be nil, is called with each newly loaded config, one
// call at a time; it must not call Reload. The error is Load's, so an invalid
// file wraps ErrInvalid.
func NewWatcher(path string, log *slog.Logger, onChange func(*Config)) (*Watcher, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	w := &Watcher{path: path, log: log, onChange: onChange, seen: data}
	w.current.Store(cfg)
	return w, nil
}

// Current returns the last good config. Callers must not modify it.
func (w *Watcher) Current() *Config { return w.current.Load() }

// Reload reads the file now, whether it changed or not (cmd calls it on
// SIGHUP). It returns the read or validation error, and then the current
// config stays as it was.
func (w *Watcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reload(false)
}

// Run watches the directory that holds the file (editors replace a file by
// renaming over it, which a watch on the file itself would lose) and reloads
// the config whenever the file's content differs from the last read, once
// the directory has been quiet for debounce. It first checks the file once,
// so a change made before Run started is not lost. It returns nil when ctx is
// done, or an error when the watch cannot be set up.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config %s: %w", w.path, err)
	}
	defer fw.Close()
	if err := fw.Add(filepath.Dir(w.path)); err != nil {
		return fmt.Errorf("watch config %s: %w", w.path, err)
	}
	timer := time.NewTimer(0) // the first check
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-fw.Events:
			timer.Reset(debounce)
		case err := <-fw.Errors:
			w.log.Warn(string(journal.ConfigWatchFailed), "path", w.path, "err", err)
			timer.Reset(debounce)
		case <-timer.C:
			w.mu.Lock()
			_ = w.reload(true) // reload logged the outcome
			w.mu.Unlock()
		}
	}
}

// reload reads and applies the file; with onlyIfChanged it does nothing
// when the content is what it read last. The caller holds w.mu.
func (w *Watcher) reload(onlyIfChanged bool) error {
	data, err := readConfig(w.path)
	if onlyIfChanged && err == nil && w.seen != nil && bytes.Equal(data, w.seen) {
		return nil
	}
	w.seen = data
	var cfg *Config
	if err == nil {
		cfg, err = Parse(data, w.path)
	}
	if err == nil && w.Check != nil {
		err = w.Check(cfg)
	}
	if err != nil {
		w.log.Error(string(journal.ConfigInvalid), "path", w.path, "err", err)
		return err
	}
	kept := keepRestartOnly(w.Current(), cfg)
	w.current.Store(cfg)
	if w.onChange != nil {
		w.onChange(cfg)
	}
	if len(kept) > 0 {
		w.log.Warn(string(journal.ConfigReloaded), "path", w.path, "restart_required", kept)
	} else {
		w.log.Info(string(journal.ConfigReloaded), "path", w.path)
	}
	return nil
}

// keepRestartOnly copies into next the fields of old that only a restart can
// change, and returns the keys of those that differed.
func keepRestartOnly(old, next *Config) []string {
	var kept []string
	keep(&kept, "stateDir", old.StateDir, &next.StateDir)
	keep(&kept, "tmux.socket", old.Tmux.Socket, &next.Tmux.Socket)
	keep(&kept, "tmux.historyLimit", old.Tmux.HistoryLimit, &next.Tmux.HistoryLimit)
	keep(&kept, "reconcile.intervalSeconds", old.Reconcile.IntervalSeconds, &next.Reconcile.IntervalSeconds)
	o, n := old.Webhooks.GHWebhook, &next.Webhooks.GHWebhook
	keep(&kept, "webhooks.ghWebhook.listen", o.Listen, &n.Listen)
	keep(&kept, "webhooks.ghWebhook.path", o.Path, &n.Path)
	keep(&kept, "webhooks.ghWebhook.secretEnv", o.SecretEnv, &n.SecretEnv)
	keep(&kept, "webhooks.ghWebhook.secretFile", o.SecretFile, &n.SecretFile)
	// The listener's bounds are set when it starts.
	if o.ConnsPerAddress() != n.ConnsPerAddress() {
		n.MaxConnsPerAddress = o.MaxConnsPerAddress
		kept = append(kept, "webhooks.ghWebhook.maxConnsPerAddress")
	}
	// The GitHub client and its credentials are made once at start.
	if !reflect.DeepEqual(old.GitHub, next.GitHub) {
		next.GitHub = old.GitHub
		kept = append(kept, "github")
	}
	// The harness adapters are built once at start.
	if !reflect.DeepEqual(old.Harnesses, next.Harnesses) {
		next.Harnesses = old.Harnesses
		kept = append(kept, "harnesses")
	}
	return kept
}

func keep[T comparable](kept *[]string, key string, old T, next *T) {
	if *next != old {
		*kept = append(*kept, key)
		*next = old
	}
}
