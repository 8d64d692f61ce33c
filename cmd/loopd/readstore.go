package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// readStore loads the config and opens its store for a command that only
// reads (get, describe, events, hosts). Such a command is needed most when
// the config no longer validates, so an invalid one is not a refusal: a
// warning names it on stderr, and the store is opened from what can still
// be read of the file (schema.LoadUnchecked: stateDir and store.url, else
// their defaults). The config returned is then that unchecked one. A file
// that cannot be read, or that is not YAML at all, is still an error:
// nothing in it says where the store is.
func (g *globals) readStore(ctx context.Context) (*schema.Config, store.Store, error) {
	cfg, err := g.load()
	if errors.Is(err, schema.ErrInvalid) {
		unchecked, uerr := schema.LoadUnchecked(g.config)
		if uerr != nil {
			return nil, nil, err
		}
		fmt.Fprintf(g.warnings(), "warning: config %s is invalid: %v; reading the state dir %s\n", g.config, err, unchecked.StateDir)
		cfg, err = unchecked, nil
	}
	if err != nil {
		return nil, nil, err
	}
	store, err := openExistingStore(ctx, cfg, g.warnTightened)
	if err != nil {
		return nil, nil, err
	}
	return cfg, store, nil
}

// errNoStore is openExistingStore's error for a state dir that holds no
// store.
var errNoStore = errors.New("no store")

// openExistingStore is openStore for an operator's verb (get, describe,
// events, hosts, hold, release, forget): a SQLite store that is not there
// is an error wrapping errNoStore, never a new, empty one made in its
// place (a mistyped stateDir, a state dir removed), which would answer
// "No work items found." for a fleet that has items.
func openExistingStore(ctx context.Context, cfg *schema.Config, warn func(tightened)) (store.Store, error) {
	if cfg.Store.URL == "" {
		path := filepath.Join(cfg.StateDir, storeFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s: loopd serve (or reconcile --once) has not run with this config, or its stateDir is not the one meant", errNoStore, path)
		}
	}
	return openStore(ctx, cfg, warn)
}

// warnTightened is openStore's warn for a command that does not log: a
// warning line on its error writer.
func (g *globals) warnTightened(t tightened) {
	fmt.Fprintf(g.warnings(), "warning: state dir: %v\n", t)
}

// warnings returns where a command's warnings go: its error writer, or
// stderr before the command started.
func (g *globals) warnings() io.Writer {
	if g.stderr == nil {
		return os.Stderr
	}
	return g.stderr
}
