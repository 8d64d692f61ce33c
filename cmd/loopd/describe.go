package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// describeEvents is how many of the item's latest journal events describe
// shows.
const describeEvents = 20

func newDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe WORK_ITEM",
		Short: "Show one work item in full: spec, status, where its agent runs, pending and recent events",
		Long: `describe shows one work item (owner/repo#N, case ignored): its spec and status
as get works them out, its harness, workdir and tmux session, the command
that attaches to the session, the transcript of its conversation, the
events waiting for its agent (never their text) and its last 20 journal
events.`,
		Example:           `  loopd describe codertocat/hello-world#1`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeItems(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cfg, st, err := g.readStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			r, err := resolveItem(ctx, st, args[0])
			if err != nil {
				return err
			}
			records, err := st.Records(ctx)
			if err != nil {
				return err
			}
			events, err := st.Events(ctx, store.EventFilter{WorkItem: r.Key.String(), Limit: describeEvents})
			if err != nil {
				return err
			}
			policy := policyOf(cfg, accounts(cfg), "")
			now := time.Now()
			var view itemView
			for _, v := range itemViews(records, now, schema.DefaultStalePending, policy, deaths(ctx, cfg, records, now)) {
				if v.Key == r.Key.String() {
					view = v
				}
			}
			return describe(cmd.OutOrStdout(), cfg, r, view, reconciler.ProjectSettingsOf(r, policy), events)
		},
	}
}

// credentialsShown says what credential k's agent may ask loopd for
// (schema.Route.Credentials), and whether its gh gets it too: "app",
// "token (unscoped: every repository the token reaches)", "none".
func credentialsShown(cfg *schema.Config, k desired.Key) string {
	route, ok := cfg.Webhooks.GHWebhook.Routing.Route(k.Owner, k.Repo)
	mode := route.Credentials(cfg.GitHub)
	switch {
	case !ok:
		return schema.AgentCredentialsNone
	case mode == schema.AgentCredentialsToken:
		mode += " (unscoped: every repository the token reaches)"
	case mode == schema.AgentCredentialsApp:
		mode += " (an installation token of this repository alone)"
	}
	if route.AgentGH && route.Credentials(cfg.GitHub) != schema.AgentCredentialsNone {
		mode += ", gh too"
	}
	return mode
}

// describe writes the description of r (its view as get shows it, whether
// its next spawn gets its workdir's project settings, what credential its
// agent may ask for, and its latest journal events) under cfg.
func describe(w io.Writer, cfg *schema.Config, r desired.Record, v itemView, ps reconciler.ProjectSettings, events []journal.Event) error {
	st := v.Status
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	line := func(indent, label, value string) { fmt.Fprintf(tw, "%s%s:\t%s\n", indent, label, value) }
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format(time.RFC3339)
	}
	line("", "Name", v.Key)
	line("", "Kind", dash(v.Spec.Kind))
	if v.Spec.Title != "" {
		line("", "Title", journal.Quote(v.Spec.Title))
	}
	if v.Spec.URL != "" {
		line("", "URL", journal.Quote(v.Spec.URL))
	}
	line("", "Harness", dash(v.Spec.Harness))
	line("", "Credentials", credentialsShown(cfg, r.Key))
	line("", "Workdir", dash(st.Workdir))
	line("", "Sandbox", st.Sandbox)
	line("", "Session", st.Session)
	if runsAsProcess(cfg, r) {
		// A process-runner item: a run per event, no tmux session.
		line("", "Run log", runLogPath(cfg, r))
		line("", "Logs", "loopd logs "+v.Key)
	} else if r.Status.Session == "" {
		line("", "Attach", "- (no session yet)")
	} else {
		line("", "Attach", actions.AttachCommand(cfg.Tmux.Socket, st.Session))
	}
	line("", "Transcript", transcriptOf(cfg, r, st.ConversationID))
	line("", "Spec", "")
	line("  ", "Closed", strconv.FormatBool(v.Spec.Closed))
	line("  ", "Held", strconv.FormatBool(v.Spec.Held))
	line("  ", "Release pending", strconv.FormatBool(v.Spec.ReleasePending))
	line("  ", "Generation", strconv.FormatInt(v.Spec.Generation, 10))
	if v.Spec.HeadRef != "" {
		line("  ", "Head ref", v.Spec.HeadRef)
	}
	if r.Spec.Installation != 0 {
		line("  ", "Installation", strconv.FormatInt(r.Spec.Installation, 10)) // the GitHub App's, its calls go through
	}
	// The head's facts are a payload's text: quoted.
	if r.Spec.HeadRepo != "" {
		line("  ", "Head repo", journal.Quote(r.Spec.HeadRepo))
	}
	if r.Spec.Author != "" {
		line("  ", "Opened by", journal.Quote(r.Spec.Author))
	}
	if r.Spec.HeadSHA != "" {
		pusher := "-"
		if r.Spec.HeadPusher != "" {
			pusher = journal.Quote(r.Spec.HeadPusher)
		}
		line("  ", "Head", journal.Quote(r.Spec.HeadSHA)+" pushed by "+pusher)
	}
	settings := "off (" + string(ps.Reason) + ")"
	if ps.Trusted {
		settings = "trusted (" + string(ps.Reason) + ")"
	}
	line("  ", "Project settings", settings)
	line("", "Status", "")
	line("  ", "Phase", st.Phase)
	line("  ", "Reason", dash(st.Reason))
	host := "-"
	if st.Lease != nil {
		host = st.Lease.Host + " (lease expires " + at(st.Lease.Expires) + ")"
		if st.Lease.Lapsed {
			host = st.Lease.Host + " (lease lapsed " + at(st.Lease.Expires) + ")"
		}
	}
	line("  ", "Host", host)
	line("  ", "Conversation ID", desired.ConversationLabel(st.ConversationID, st.ConversationUnconfirmed))
	line("  ", "Pane", dash(st.PaneID))
	line("  ", "Spawned", at(st.SpawnedAt))
	line("  ", "Failures", strconv.Itoa(st.Failures))
	if e := st.LastExit; e != nil {
		status := "unknown"
		if e.Status != nil {
			status = strconv.Itoa(*e.Status)
		}
		line("  ", "Last exit", "status "+status+" reason "+dash(e.Reason)+" at "+at(e.At))
	}
	if !st.NextAttempt.IsZero() {
		line("  ", "Next attempt", at(st.NextAttempt))
	}
	if st.Blocked != "" {
		line("  ", "Blocked", st.Blocked)
	}
	if q := r.Status.Question; st.Question != "" && q != nil {
		// The question's text is the screen's, from the agent: quoted.
		line("  ", "AwaitingApproval", st.Question+" "+journal.Quote(q.Title)+" asked "+at(q.AskedAt)+
			" (an authorized comment /loopd answer "+st.Question+" N answers it on GitHub)")
	}
	if !st.AttendedSince.IsZero() {
		// Who attached is the mark loopd attach set on the session:
		// quoted, as any text a tmux option holds.
		by := "someone (no loopd attach mark)"
		if st.AttendedBy != "" {
			by = journal.Quote(st.AttendedBy)
		}
		line("  ", "Attended", "by "+by+" since "+at(st.AttendedSince)+" (nothing is pasted or respawned until they detach)")
	}
	if !st.LimitUntil.IsZero() {
		line("  ", "Usage limit", "held until "+at(st.LimitUntil)+" window "+dash(st.LimitWindow))
	}
	if st.LimitEpisodes > 0 {
		line("  ", "Limit episodes", strconv.Itoa(st.LimitEpisodes))
	}
	if b := st.Budget; b != nil {
		line("  ", "Budget", "")
		if b.WindowLimit > 0 {
			line("    ", "Window", desired.FormatTokens(b.WindowUsed)+" of "+desired.FormatTokens(b.WindowLimit)+" weighted tokens")
		}
		if b.TotalLimit > 0 {
			line("    ", "Total", desired.FormatTokens(b.TotalUsed)+" of "+desired.FormatTokens(b.TotalLimit)+" weighted tokens")
		}
		line("    ", "Raised", desired.FormatTokens(b.Raised))
		line("    ", "Counted", fmt.Sprintf("%d input, %d output, %d cache write, %d cache read", b.Input, b.Output, b.CacheWrite, b.CacheRead))
		if b.Past != "" {
			line("    ", "Past", b.Past+" (loopd release --budget +N "+v.Key+", or /loopd budget +N on GitHub)")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "Pending events (%d):\n", len(r.Pending))
	if len(r.Pending) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  DELIVERY\tEVENT\tSENDER\tRECEIVED\tBYTES")
		for _, d := range r.Pending {
			event := d.Event
			if d.Action != "" {
				event += "." + d.Action
			}
			// The sender is GitHub's text: quoted when it holds anything
			// a terminal would act on.
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\n", journal.Quote(d.ID), journal.Quote(event), journal.Quote(d.Sender), at(d.ReceivedAt), d.Size)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "Events (last %d):\n", describeEvents)
	if len(events) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, e := range events {
		fmt.Fprintln(w, "  "+e.String())
	}
	return nil
}

// runLogPath is the log of the item's current run of the process runner
// (internal/runner), under the state dir's runs directory (app's runsDir).
func runLogPath(cfg *schema.Config, r desired.Record) string {
	return runsOf(cfg, "").LogPath(desired.SessionName(r.Key), r.Status.RunID)
}

// transcriptOf says where the item's conversation id has its transcript,
// as its harness adapter finds it for the item's workdir
// (harness.Adapter.Transcript), and whether it is there.
func transcriptOf(cfg *schema.Config, r desired.Record, id string) string {
	h, ok := cfg.Harnesses[r.Spec.Harness]
	switch {
	case !ok:
		return fmt.Sprintf("unknown: harness %q is not in the config", r.Spec.Harness)
	case id == "":
		return "- (no conversation yet)"
	case r.Workdir() == "":
		return "- (no workdir yet)"
	}
	ad, err := harness.New(r.Spec.Harness, h)
	if err != nil {
		return "unknown: " + err.Error()
	}
	tr, err := ad.Transcript(r.Workdir(), id)
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case !tr.Known:
		return "unknown: harness " + r.Spec.Harness + " has no transcript rule"
	case !tr.Exists:
		return tr.Path + " (not there)"
	}
	return fmt.Sprintf("%s (%d bytes, written %s)", tr.Path, tr.Size, tr.ModTime.Local().Format(time.RFC3339))
}
