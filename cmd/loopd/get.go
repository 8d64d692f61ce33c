package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/near"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// getOptions are get's flags.
type getOptions struct {
	output string
	watch  bool
	phases []string
	all    bool
	stale  time.Duration
	// noHeaders leaves the table's header out.
	noHeaders bool
}

func newGetCmd(g *globals) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use: "get [WORK_ITEM...]",
		// What other tools call listing their work, for "Did you mean".
		SuggestFor: []string{"status", "list", "ls", "ps"},
		Short:      "List work items: key, host, session, phase, session id, pending count",
		Long: `get lists the work items, or the ones named (owner/repo#N, case ignored).
Closed items and stopped ones are left out unless --all is given, they are
named, or --phase asks for their phase; a held item, and one whose events
wait too long (below), is always shown.

An item that is Stopped while events have been
pending for longer than --stale-pending is flagged in the reason column
(stale_pending=N since=D): it is closed or held, so they wait, or a reopen
was lost on the way from GitHub (the next comment heals that). A Queued item
waits for a free slot of the host's capacity; position=N is its place in the
queue, 1 next. SESSION ID says "unconfirmed" while loopd has not yet learned
the id of a conversation its harness started without one given (Codex).
HOST is the host whose lease runs the item ("-" for none yet).

-o wide adds the harness, pane, workdir, lease expiry and the issue's or pull
request's title (quoted: it is text from GitHub); -o name prints one
key a line; -o json and -o yaml print a WorkItemList whose schema is
schema/getoutput.schema.json. --watch prints again what changed, every
second, until interrupted: table rows without the header, one WorkItem
object a line for json, one YAML document each for yaml.`,
		Example: `  loopd get
  loopd get --all -o wide
  loopd get codertocat/hello-world#1 -o json
  loopd get --phase needsattention,backingoff --watch`,
		ValidArgsFunction: completeItems(g, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGet(cmd, g, args, o)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, name, json or yaml (default: a table)")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after the list, print what changes until interrupted")
	cmd.Flags().StringSliceVar(&o.phases, "phase", nil, "only items in these phases (case ignored; may repeat or be a comma list)")
	cmd.Flags().BoolVarP(&o.all, "all", "A", false, "include closed and stopped items")
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "leave out the table's header")
	cmd.Flags().DurationVar(&o.stale, "stale-pending", schema.DefaultStalePending,
		"flag Stopped items whose oldest pending event is older than this")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(getFormats, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("phase", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, p := range desired.Phases() {
			out = append(out, string(p))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// openStore loads the config, which must validate (a command that writes),
// and opens its store; readStore is the read-only verbs' form.
func (g *globals) openStore(ctx context.Context) (*schema.Config, store.Store, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	store, err := openExistingStore(ctx, cfg, g.warnTightened)
	if err != nil {
		return nil, nil, err
	}
	return cfg, store, nil
}

// getFormats are get's -o values; "" is the table.
var getFormats = []string{"wide", "name", "json", "yaml"}

// runGet is loopd get: it resolves the named items, prints the list once,
// and with --watch what changes after it.
func runGet(cmd *cobra.Command, g *globals, args []string, o getOptions) error {
	ctx := cmd.Context()
	if o.output != "" && !slices.Contains(getFormats, o.output) {
		return fmt.Errorf("-o %q: want one of %s", o.output, strings.Join(getFormats, ", "))
	}
	phases, err := parsePhases(o.phases)
	if err != nil {
		return err
	}
	cfg, st, err := g.readStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var named []desired.Key
	for _, a := range args {
		r, err := resolveItem(ctx, st, a)
		if err != nil {
			return err
		}
		named = append(named, r.Key)
	}
	sel := selection{named: named, phases: phases, all: o.all, stale: o.stale}
	policy := policyOf(cfg, accounts(cfg), "")
	read := func() ([]itemView, []bool, error) {
		records, err := st.Records(ctx)
		if err != nil {
			return nil, nil, err
		}
		now := time.Now()
		views := itemViews(records, now, o.stale, policy, deaths(ctx, cfg, records, now))
		shown := make([]bool, len(records))
		for i, r := range records {
			shown[i] = sel.shows(r, now)
		}
		return views, shown, nil
	}
	views, shown, err := read()
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	list := pick(views, shown)
	// One table for the list and the rows --watch prints after it, so that
	// they line up under the header.
	tab := &table{}
	print := func() error { return printViews(out, tab, list, o.output, !o.noHeaders) }
	if o.watch && (o.output == "json" || o.output == "yaml") {
		// A stream from the first line on: one WorkItem a line (a YAML
		// document each), never a list before the changes.
		print = func() error { return printChanged(out, tab, list, o.output) }
	}
	if err := print(); err != nil {
		return err
	}
	if o.output == "" || o.output == "wide" {
		if len(list) == 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "No work items found.")
		}
		if hidden := len(views) - len(list); hidden > 0 && sel.hidesFinished() {
			fmt.Fprintf(cmd.ErrOrStderr(), "%d closed or stopped work %s not shown; --all shows them\n", hidden, plural(hidden, "item", "items"))
		}
		if !o.watch {
			failed, err := st.Calls(ctx, store.CallFilter{State: desired.CallFailed})
			if err != nil {
				return err
			}
			if err := printCalls(out, failed); err != nil {
				return err
			}
			pauses, err := st.Pauses(ctx)
			if err != nil {
				return err
			}
			waiting, err := st.Calls(ctx, store.CallFilter{State: desired.CallPending})
			if err != nil {
				return err
			}
			if err := printPauses(out, pauses, len(waiting), time.Now()); err != nil {
				return err
			}
		}
	}
	if !o.watch {
		return nil
	}
	return watchViews(ctx, out, tab, o.output, views, shown, read)
}

// selection is which work items get shows.
type selection struct {
	named  []desired.Key
	phases map[desired.Phase]bool
	all    bool
	stale  time.Duration
}

// shows reports whether get shows r: a named item or, with none named,
// any item under --all and otherwise every one but the finished (closed
// or stopped, neither held nor with events waiting too long); a phase
// asked for with --phase is never finished. --phase narrows it all.
func (s selection) shows(r desired.Record, now time.Time) bool {
	if len(s.phases) > 0 && !s.phases[r.Status.Phase] {
		return false
	}
	if len(s.named) > 0 {
		return slices.Contains(s.named, r.Key)
	}
	if !s.hidesFinished() {
		return true
	}
	finished := r.Spec.Closed || r.Status.Phase == desired.PhaseStopped
	return !finished || r.Spec.Held || reconciler.StalePending(r, now, s.stale) != ""
}

// hidesFinished reports whether s leaves out closed and stopped items:
// unless --all is given, items are named or --phase asks for phases.
func (s selection) hidesFinished() bool {
	return !s.all && len(s.named) == 0 && len(s.phases) == 0
}

// parsePhases returns the phases named in list, case ignored; the error
// for a name that is no phase suggests a near miss (near.Names), else
// lists the valid ones.
func parsePhases(list []string) (map[desired.Phase]bool, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := map[desired.Phase]bool{}
	for _, name := range list {
		i := slices.IndexFunc(desired.Phases(), func(p desired.Phase) bool { return strings.EqualFold(string(p), strings.TrimSpace(name)) })
		if i < 0 {
			valid := make([]string, 0, len(desired.Phases()))
			for _, p := range desired.Phases() {
				valid = append(valid, string(p))
			}
			if miss := near.DidYouMean(near.Names(strings.TrimSpace(name), valid)); miss != "" {
				return nil, fmt.Errorf("unknown phase %q%s", name, miss)
			}
			return nil, fmt.Errorf("unknown phase %q; valid phases: %s", name, strings.Join(valid, ", "))
		}
		out[desired.Phases()[i]] = true
	}
	return out, nil
}

// pick returns the views whose shown flag is set.
func pick(views []itemView, shown []bool) []itemView {
	out := []itemView{}
	for i, v := range views {
		if shown[i] {
			out = append(out, v)
		}
	}
	return out
}

// printViews writes views in format: "" (the table), wide, name, json or
// yaml (a WorkItemList).
func printViews(w io.Writer, tab *table, views []itemView, format string, header bool) error {
	switch format {
	case "", "wide":
		return printRecords(w, tab, views, format == "wide", header)
	case "name":
		for _, v := range views {
			fmt.Fprintln(w, v.Key)
		}
		return nil
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(newItemList(views))
	case "yaml":
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(newItemList(views)); err != nil {
			return err
		}
		return enc.Close()
	}
	return fmt.Errorf("-o %q: want one of %s", format, strings.Join(getFormats, ", "))
}

// watchViews is get --watch: every schema.GetWatchPoll it reads the items again
// and prints those that changed since the last print, as kubectl get
// --watch does: an item shown before that is no longer shown (closed, say)
// is printed once more, with what it became. It returns when ctx ends.
func watchViews(ctx context.Context, w io.Writer, tab *table, format string, views []itemView, shown []bool,
	read func() ([]itemView, []bool, error)) error {
	last := map[string]string{}  // the fingerprint of each item printed
	visible := map[string]bool{} // the items shown at the last read
	remember := func(views []itemView, shown []bool) {
		clear(visible)
		for i, v := range views {
			last[v.Key] = v.fingerprint()
			visible[v.Key] = shown[i]
		}
	}
	remember(views, shown)
	tick := time.NewTicker(schema.GetWatchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		views, shown, err := read()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var changed []itemView
		for i, v := range views {
			if (shown[i] || visible[v.Key]) && last[v.Key] != v.fingerprint() {
				changed = append(changed, v)
			}
		}
		remember(views, shown)
		if err := printChanged(w, tab, changed, format); err != nil {
			return err
		}
	}
}

// printChanged writes the items --watch found changed: table rows with no
// header, names, one JSON object a line, or one YAML document each.
func printChanged(w io.Writer, tab *table, views []itemView, format string) error {
	if len(views) == 0 {
		return nil
	}
	switch format {
	case "", "wide":
		return printRecords(w, tab, views, format == "wide", false)
	case "json":
		enc := json.NewEncoder(w)
		for _, v := range views {
			if err := enc.Encode(v); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for _, v := range views {
			fmt.Fprintln(w, "---")
			if err := yaml.NewEncoder(w).Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	return printViews(w, tab, views, format, false)
}

// printRecords writes views as get's table, one line per item, with the
// header when header is true; wide adds the harness, pane, workdir and
// lease expiry before the reason.
func printRecords(w io.Writer, tab *table, views []itemView, wide, header bool) error {
	var rows [][]string
	if header {
		head := []string{"WORK ITEM", "HOST", "SESSION", "PHASE", "AGE", "SESSION ID", "PENDING", "FAILURES"}
		if wide {
			head = append(head, "HARNESS", "PANE", "WORKDIR", "LEASE EXPIRES", "TITLE")
		}
		rows = append(rows, append(head, "REASON"))
	}
	for _, v := range views {
		st := v.Status
		phase := st.Phase
		switch {
		case st.Question != "":
			phase += "/AwaitingApproval" // a question posted on GitHub; REASON names its id
		case st.Blocked != "":
			phase += "/Blocked" // waits for a person; REASON says at what
		}
		if !st.AttendedSince.IsZero() {
			phase += "/Attended" // a person's tmux client is attached
		}
		if v.Spec.Held {
			phase += " (held)"
		} else if v.Spec.Closed {
			phase += " (closed)"
		}
		id := desired.ConversationLabel(st.ConversationID, st.ConversationUnconfirmed)
		host, expires := "-", "-"
		if l := st.Lease; l != nil {
			host = l.Host
			expires = l.Expires.Local().Format(time.RFC3339)
			if l.Lapsed {
				// Its owner stopped heartbeating: the item waits for
				// another host to take it over.
				host += " (lapsed)"
			}
		}
		row := []string{v.Key, host, st.Session, phase, v.age, id, strconv.Itoa(st.Pending), strconv.Itoa(st.Failures)}
		if wide {
			row = append(row, v.Spec.Harness, dash(st.PaneID), dash(st.Workdir), expires, shownTitle(v.Spec.Title))
		}
		rows = append(rows, append(row, reconciler.ListedReason(st.Reason)))
	}
	return tab.write(w, rows)
}

// shortAge writes d as kubectl's AGE column does (its
// duration.ShortHumanDuration): seconds under two minutes, then minutes,
// hours under two days, days under two years, then years; a negative d
// (a clock stepped back) is 0s.
func shortAge(d time.Duration) string {
	switch s := int64(max(d, 0) / time.Second); {
	case s < 120:
		return strconv.FormatInt(s, 10) + "s"
	case s < 60*60:
		return strconv.FormatInt(s/60, 10) + "m"
	case s < 48*60*60:
		return strconv.FormatInt(s/3600, 10) + "h"
	case s < 2*365*24*60*60:
		return strconv.FormatInt(s/86400, 10) + "d"
	default:
		return strconv.FormatInt(s/(365*86400), 10) + "y"
	}
}

// table lays rows out in columns two spaces apart, as kubectl's tables,
// and keeps each column's width from one write to the next, so that rows
// written later (get --watch) line up under the header written first; a
// wider cell widens its column from then on. The last column is not
// padded.
type table struct {
	widths []int // in runes
}

func (t *table) write(w io.Writer, rows [][]string) error {
	for _, row := range rows {
		for i, cell := range row {
			if i == len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", t.widths[i]-utf8.RuneCountInString(cell)+2))
			}
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxShownTitle bounds, in bytes, a title in get -o wide.
const maxShownTitle = 60

// shownTitle is title as a table shows it: quoted when it holds anything a
// terminal would act on (journal.Quote; it is text from outside), cut to
// maxShownTitle bytes, "-" when there is none.
func shownTitle(title string) string {
	if title == "" {
		return "-"
	}
	return journal.Quote(journal.Clip(title, maxShownTitle))
}

// dash returns s, or "-" for "".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// accounts returns the capabilities of each harness of cfg that get needs:
// its account (harness.Adapter.Account: which items a usage limit holds)
// whether its command is missing (the reason's err=) and the command
// itself (the reason's command= when it exited at once). A harness whose
// adapter cannot be made is left out.
func accounts(cfg *schema.Config) map[string]reconciler.Capabilities {
	out := map[string]reconciler.Capabilities{}
	for name, h := range cfg.Harnesses {
		if ad, err := harness.New(name, h); err == nil {
			out[name] = reconciler.Capabilities{Account: ad.Account(), Missing: missing(ad), Command: harness.Command(ad)}
		}
	}
	return out
}

// deaths returns when tmux saw the pane of each running or spawning record
// die, from one observation of cfg's tmux server; none when no record runs
// or tmux cannot be read (get then measures a run to now).
func deaths(ctx context.Context, cfg *schema.Config, records []desired.Record, now time.Time) map[desired.Key]time.Time {
	if !slices.ContainsFunc(records, func(r desired.Record) bool {
		return r.Status.Phase == desired.PhaseRunning || r.Status.Phase == desired.PhaseSpawning
	}) {
		return nil
	}
	snap, err := observed.TakeSnapshot(ctx, tmux.NewExec(cfg.Tmux.Socket, slog.New(slog.DiscardHandler)), now)
	if err != nil {
		return nil
	}
	out := map[desired.Key]time.Time{}
	for _, r := range records {
		if p, ok := snap.Pane(desired.SessionName(r.Key)); ok && p.Dead && !p.DeadTime.IsZero() {
			out[r.Key] = p.DeadTime
		}
	}
	return out
}

// plural is one when n is 1, else many: "1 item", "2 items".
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
