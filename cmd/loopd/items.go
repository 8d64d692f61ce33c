package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// itemNotFoundError is resolveItem's error for a key the store does not
// hold, in any case: errors.Is(err, store.ErrNotFound) holds.
type itemNotFoundError struct{ key desired.Key }

func (e itemNotFoundError) Error() string { return "work item " + e.key.String() + " not found" }

func (e itemNotFoundError) Is(target error) bool { return target == store.ErrNotFound }

// resolveItem returns the record of the work item arg names, owner/repo#N
// matched the way routing matches it: owner and repo case-insensitively
// (GitHub's names are case-insensitive), the stored spelling wins an exact
// match. Every verb that takes a work item resolves it here and then uses
// the record's Key. The error wraps desired.ErrBadKey for text that is no
// key and store.ErrNotFound (saying "work item owner/repo#N not found")
// for a key the store does not hold; a key that matches two stored
// spellings is an error that names both.
func resolveItem(ctx context.Context, st store.Store, arg string) (desired.Record, error) {
	k, err := desired.ParseKey(arg)
	if err != nil {
		return desired.Record{}, err
	}
	r, err := st.Get(ctx, k)
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return desired.Record{}, fmt.Errorf("read work item %s: %w", k, err)
	}
	records, err := st.Records(ctx)
	if err != nil {
		return desired.Record{}, fmt.Errorf("read work item %s: %w", k, err)
	}
	var found []desired.Record
	for _, r := range records {
		if r.Key.SameItem(k) {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return desired.Record{}, itemNotFoundError{key: k}
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, r := range found {
		names[i] = r.Key.String()
	}
	return desired.Record{}, fmt.Errorf("work item %s is ambiguous: it matches %s; give the exact key", k, strings.Join(names, " and "))
}

// completeItems is the dynamic shell completion of work-item keys (cobra's
// ValidArgsFunction): the stored keys that start with what was typed, case
// ignored. many is true for a verb that takes several items; one that takes
// a single item completes only its first argument. Any failure to read the
// store completes nothing, quietly: completion must never print an error
// into a shell prompt.
func completeItems(g *globals, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if !many && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// cobra's __complete parses the completed command's flags only
		// after the root's PersistentPreRunE chose a config without them:
		// choose again, with --config as typed.
		g.findConfig()
		_, store, err := g.readStore(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer store.Close()
		records, err := store.Records(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, r := range records {
			key := r.Key.String()
			if !strings.HasPrefix(strings.ToLower(key), strings.ToLower(toComplete)) || given(args, r.Key) {
				continue
			}
			out = append(out, cobra.CompletionWithDesc(key, string(r.Status.Phase)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// given reports whether one of args already names k.
func given(args []string, k desired.Key) bool {
	for _, a := range args {
		if ak, err := desired.ParseKey(a); err == nil && ak.SameItem(k) {
			return true
		}
	}
	return false
}

// readItem reads the config and the record of the item arg names
// (resolveItem), for a command that needs nothing else of the store.
func (g *globals) readItem(ctx context.Context, arg string) (*schema.Config, desired.Record, error) {
	cfg, store, err := g.readStore(ctx)
	if err != nil {
		return nil, desired.Record{}, err
	}
	defer store.Close()
	r, err := resolveItem(ctx, store, arg)
	return cfg, r, err
}
