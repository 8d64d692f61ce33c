package main

import (
	"context"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// readStore loads the config and opens its store, for the verbs that only
// read (get, describe, events, attach, logs) and the dynamic completion of
// work-item keys. The caller closes the store.
func (g *globals) readStore(ctx context.Context) (*schema.Config, desired.Store, error) {
	cfg, err := schema.Load(g.config)
	if err != nil {
		return nil, nil, err
	}
	store, err := openStore(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, store, nil
}
