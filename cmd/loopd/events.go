package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/near"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// followWindow is how many ids before the newest seen events --follow
// reads again (every schema.EventsFollowPoll), so that a row given a lower
// id but committed later (concurrent writers on PostgreSQL) is still
// printed, once.
const followWindow = 256

// eventsOptions are events' flags.
type eventsOptions struct {
	follow bool
	output string
	since  string
	limit  int
	types  []string
}

func newEventsCmd(g *globals) *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events [WORK_ITEM]",
		Short: "Print the event journal, one event a line",
		Long: `events prints the journal, oldest first: every event, or those of one work
item (owner/repo#N, case ignored; an item the store no longer holds is
found by its journal rows). --type keeps the events of the names given
(docs/design.md, "Events"); --since those newer than a duration ago or an
RFC 3339 time; --limit the newest N of them. --follow then prints each new
event as it is written, until interrupted. -o json prints one JSON object a
line (schema/events.schema.json).`,
		Example: `  loopd events codertocat/hello-world#1 --limit 20
  loopd events --type session.exited,session.crash_loop --since 2h
  loopd events --follow -o json | jq .`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEvents(cmd, g, args, o)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "after the events, print new ones as they are written, until interrupted")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: json (default: one logfmt line per event)")
	cmd.Flags().StringVar(&o.since, "since", "", "only events newer than this: a duration (1h, 30m) or an RFC 3339 time")
	cmd.Flags().IntVar(&o.limit, "limit", 0, "only the newest N events (0: all)")
	cmd.Flags().StringSliceVar(&o.types, "type", nil, "only events of these names, e.g. session.exited (may repeat or be a comma list)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// runEvents is loopd events.
func runEvents(cmd *cobra.Command, g *globals, args []string, o eventsOptions) error {
	ctx := cmd.Context()
	if o.output != "" && o.output != "json" {
		return fmt.Errorf("-o %q: want json", o.output)
	}
	if o.limit < 0 {
		return fmt.Errorf("--limit %d: want 0 or more", o.limit)
	}
	f := store.EventFilter{Limit: o.limit}
	since, err := parseSince(o.since, time.Now())
	if err != nil {
		return err
	}
	f.Since = since
	for _, t := range o.types {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			continue
		}
		if !journal.Known(t) {
			// A typo would filter out everything, silently, forever under --follow.
			return unknownEventType(t)
		}
		f.Names = append(f.Names, t)
	}
	_, store, err := g.readStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	if len(args) == 1 {
		item, err := journalItem(ctx, store, args[0])
		if err != nil {
			return err
		}
		f.WorkItem = item
	}
	events, err := store.Events(ctx, f)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	for _, e := range events {
		if err := printEvent(out, e, o.output); err != nil {
			return err
		}
	}
	if !o.follow {
		return nil
	}
	f.Limit = 0
	return followEvents(ctx, store, f, events, func(e journal.Event) error { return printEvent(out, e, o.output) })
}

// journalItem returns the journal's spelling of the work item arg names:
// the stored item's key (resolveItem), or, for an item the store does not
// hold (never created, or forgotten), the key as given when the journal
// has rows of it. Otherwise the error is resolveItem's.
func journalItem(ctx context.Context, st store.Store, arg string) (string, error) {
	r, err := resolveItem(ctx, st, arg)
	if err == nil {
		return r.Key.String(), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	k, _ := desired.ParseKey(arg) // resolveItem parsed it
	rows, jerr := st.Events(ctx, store.EventFilter{WorkItem: k.String(), Limit: 1})
	if jerr != nil {
		return "", fmt.Errorf("read the journal of %s: %w", k, jerr)
	}
	if len(rows) == 0 {
		return "", err
	}
	return k.String(), nil
}

// parseSince reads --since: a duration before now or an RFC 3339 time;
// "" is the zero time (no bound).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %q: want a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: want a duration (1h, 30m) or an RFC 3339 time", s)
	}
	return t, nil
}

// followEvents prints, every schema.EventsFollowPoll until ctx ends, the rows f
// selects that were appended since those in printed, each once. It reads
// by row id (store.EventFilter.AfterID), never by time: a row written
// late with an earlier time (a delivery's rejection kept while the store
// was failing) is still printed. It returns nil when ctx ends.
func followEvents(ctx context.Context, store store.Store, f store.EventFilter, printed []journal.Event, print func(journal.Event) error) error {
	var top int64
	for _, e := range printed {
		top = max(top, e.ID)
	}
	seen := map[int64]bool{}
	// read prints the rows of the window it has not seen, but for those
	// up to quiet, which it only marks seen.
	read := func(quiet int64) error {
		f.AfterID = max(0, top-followWindow)
		rows, err := store.Events(ctx, f)
		if err != nil {
			return err
		}
		slices.SortFunc(rows, func(a, b journal.Event) int { return cmp.Compare(a.ID, b.ID) })
		for _, e := range rows {
			if seen[e.ID] {
				continue
			}
			seen[e.ID] = true
			top = max(top, e.ID)
			if e.ID <= quiet {
				continue
			}
			if err := print(e); err != nil {
				return err
			}
		}
		for id := range seen {
			if id <= top-followWindow {
				delete(seen, id)
			}
		}
		return nil
	}
	// The rows of the window up to the newest printed were printed, or
	// left out by --limit: none of them is printed now. A row after it was
	// appended since the first read, and is.
	if top > 0 {
		if err := read(top); err != nil {
			return ctxOr(ctx, err)
		}
	}
	tick := time.NewTicker(schema.EventsFollowPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := read(0); err != nil {
			return ctxOr(ctx, err)
		}
	}
}

// ctxOr returns nil when ctx has ended (the operator's ctrl-C ended a
// read), err otherwise.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// eventJSON is events -o json: one journal row with typed values
// (schema/events.schema.json).
type eventJSON struct {
	ID       int64          `json:"id"`
	Time     time.Time      `json:"time"`
	Level    string         `json:"level"`
	Name     string         `json:"name"`
	WorkItem *string        `json:"work_item"` // null for a daemon-wide event
	Attrs    map[string]any `json:"attrs"`     // journal.Typed
}

// printEvent writes e as its logfmt line, or with format json as one JSON
// object on one line.
func printEvent(w io.Writer, e journal.Event, format string) error {
	if format != "json" {
		_, err := fmt.Fprintln(w, e.String())
		return err
	}
	j := eventJSON{ID: e.ID, Time: e.Time.UTC(), Level: e.Level.String(), Name: string(e.Name), Attrs: make(map[string]any, len(e.Attrs))}
	if e.WorkItem != "" {
		j.WorkItem = &e.WorkItem
	}
	for k, v := range e.Attrs {
		j.Attrs[k] = journal.Typed(k, v)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// unknownEventType is the error of events --type given a name no event
// has, with the name it is a near miss of, else the names of its family
// when there are some.
func unknownEventType(t string) error {
	msg := fmt.Sprintf("unknown event type %q", t)
	var all, family []string
	for _, n := range journal.Names() {
		all = append(all, string(n))
	}
	for _, n := range journal.Near(t) {
		family = append(family, string(n))
	}
	// A near miss by itself (near.Names), else the typo's family.
	names := near.Names(t, all)
	if len(names) == 0 {
		names = family
	}
	msg += near.DidYouMean(names)
	return errors.New(msg + " (docs/design.md, \"Events\", lists them all)")
}
