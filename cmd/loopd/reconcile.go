package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// reconcileOpts are the flags of loopd reconcile.
type reconcileOpts struct {
	once         bool
	dryRun       bool
	output       string
	detailedExit bool
	lockWait     time.Duration
}

func newReconcileCmd(g *globals) *cobra.Command {
	o := &reconcileOpts{}
	cmd := &cobra.Command{
		Use:   "reconcile --once",
		Short: "Run one reconcile pass (for cron), or plan one with --dry-run",
		Long: `reconcile --once runs one pass: it reads the desired records, observes tmux
with one list-panes, plans, and executes the plan. With --dry-run it prints
each planned action with its reason and changes nothing: not tmux, not the
store. A pass started while the daemon holds the reconcile lock waits for it.

Exit codes: 0 ok (with --detailed-exitcode: nothing to do), 1 error,
2 changes planned or applied (with --detailed-exitcode only).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.once {
				return errors.New("reconcile needs --once (the loop is loopd serve)")
			}
			return reconcileOnce(cmd.Context(), g, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.once, "once", false, "run exactly one pass and exit")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the planned actions; change nothing")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text, json or yaml")
	f.BoolVar(&o.detailedExit, "detailed-exitcode", false, "exit 2 when changes were planned or applied, 0 when none")
	f.DurationVar(&o.lockWait, "lock-wait", schema.DefaultOnceLockWait, "how long to wait for a running pass to finish")
	return cmd
}

func reconcileOnce(ctx context.Context, g *globals, o *reconcileOpts, out io.Writer) error {
	if o.output != "text" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("--output %q: want text, json or yaml", o.output)
	}
	cfg, a, err := g.setup(ctx)
	if err != nil {
		return err
	}
	defer a.store.Close()
	// What serve would refuse, a pass refuses too.
	if err := checkSecretFiles(cfg, nil); err != nil {
		return err
	}
	// On a shared store (PostgreSQL) a cron pass is no member: it runs
	// beside this host's daemon, only on the items that daemon's live
	// lease holds. With SQLite it is the fleet of one, as the daemon.
	if err := a.joinFleet(cfg, cfg.Store.URL != ""); err != nil {
		return err
	}
	unlock, err := a.claimForOnce(ctx, cfg)
	if err != nil {
		return a.refuse(ctx, err)
	}
	defer unlock()
	// A failure repeated within the run (a flood of forged reports in an
	// agent's channel, refused one by one) is one journal row and its
	// count, as in serve.
	repeats := journal.NewLimiter(journal.DefaultRepeatWindow, journal.DefaultMaxFailures, time.Now)
	defer repeats.FlushAll(context.WithoutCancel(ctx))
	a.journal = journal.NewRecorder(a.log, repeats.Appender(a.store), time.Now)
	rc := a.reconciler(cfg, func() *schema.Config { return cfg })
	rc.LockWait = o.lockWait
	// With resumeProbeSeconds 0 a spawn is due for its probe at once: the
	// same run reads the pane again, a bounded number of times.
	var all reconciler.PassResult
	// A worktree is made outside the pass: the run waits for the ones it
	// started (each git command bounded by its timeout) and records their
	// outcome before it exits, so that a cron run makes progress.
	defer rc.Executor.WaitWorkspaces() // on an error return too
	for pass := 0; pass < maxOncePasses; pass++ {
		res, err := rc.Pass(ctx, o.dryRun)
		if err != nil {
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w (waited %s)", err, o.lockWait)
			}
			return err
		}
		all.Plan = append(all.Plan, res.Plan...)
		all.Result.Applied += res.Result.Applied
		all.Result.Failed += res.Result.Failed
		if !o.dryRun && rc.Executor.Preparing() > 0 {
			// Plan again on their outcome: the spawn that follows.
			all.Result.Failed += rc.Executor.WaitWorkspaces()
			continue
		}
		if o.dryRun || !res.Requeue || res.RequeueAfter > 0 {
			break
		}
	}
	all.Result.Failed += rc.Executor.WaitWorkspaces()
	var queued []desired.Call
	if o.dryRun {
		// Nothing is sent: the dry run shows what the outbox holds to send.
		if queued, err = a.store.Calls(ctx, store.CallFilter{State: desired.CallPending}); err != nil {
			return err
		}
	} else {
		a.drainOnce(ctx, cfg)
	}
	if err := printPlan(out, o.output, all, queued); err != nil {
		return err
	}
	if all.Result.Failed > 0 {
		return exitError{code: 1, err: fmt.Errorf("%d action(s) failed; see the log", all.Result.Failed)}
	}
	if o.detailedExit && all.Changed() {
		return exitError{code: 2}
	}
	return nil
}

// claimForOnce makes sure this pass runs on a server no other loopd owns:
// it takes the socket lock for the run, or finds it held by the serve of
// this same state dir (the reconcile lock then orders the two); and the
// server, if one runs, carries this loopd's owner mark or none. Anything
// else is refused, naming the other state dir.
func (a *app) claimForOnce(ctx context.Context, cfg *schema.Config) (unlock func(), err error) {
	unlock, holder, err := lockSocket(ctx, cfg, a.owner, 0)
	switch {
	case err == nil:
	case errors.Is(err, errServerTaken) && holder == a.owner.StateDir:
		unlock = func() {}
	default:
		return nil, err
	}
	owner, err := a.tmux.ServerOwner(ctx)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	if owner.ID != "" && owner.ID != a.owner.ID {
		unlock()
		return nil, serverTaken(cfg, owner.StateDir)
	}
	return unlock, nil
}

// maxOncePasses bounds the passes of one reconcile --once run.
const maxOncePasses = 3

// planEntry is one action in the json and yaml dry-run output. Its
// fields are typed (actions.Field.Data): numbers and booleans as
// themselves, times as RFC 3339 strings in UTC, durations as Go's duration
// strings ("30s").
type planEntry struct {
	Action string         `json:"action" yaml:"action"`
	Fields map[string]any `json:"fields" yaml:"fields"`
}

// printPlan writes the plan, then the GitHub calls queued and not sent
// yet (github_call), in format; a call tried before shows its last try's
// answer (http_status, 0 when none came, and err). The text form is each
// line's name and fields in logfmt (actions.FormatFields), as an action's
// String is, or "No changes." for an empty plan and outbox.
func printPlan(w io.Writer, format string, res reconciler.PassResult, queued []desired.Call) error {
	type line struct {
		name   string
		fields []actions.Field
	}
	lines := make([]line, 0, len(res.Plan)+len(queued))
	for _, a := range res.Plan {
		lines = append(lines, line{name: a.Name(), fields: a.Fields()})
	}
	for _, c := range queued {
		f := []actions.Field{{Key: journal.KeyWorkItem, Value: c.Key.String()}, {Key: journal.KeyCall, Value: string(c.Kind)},
			{Key: journal.KeyCallID, Value: c.ID}, {Key: journal.KeyAttempts, Value: c.Attempts}}
		if !c.NextAttempt.IsZero() {
			f = append(f, actions.Field{Key: journal.KeyNextAttempt, Value: c.NextAttempt.Truncate(time.Second)})
		}
		if c.Attempts > 0 {
			// The last try's answer: why the call waits.
			f = append(f, actions.Field{Key: journal.KeyHTTPStatus, Value: c.HTTPStatus}, actions.Field{Key: journal.KeyErr, Value: c.Error})
		}
		lines = append(lines, line{name: "github_call", fields: f})
	}
	if format == "text" {
		if len(lines) == 0 {
			_, err := fmt.Fprintln(w, "No changes.")
			return err
		}
		for _, l := range lines {
			if _, err := fmt.Fprintln(w, actions.FormatFields(l.name, l.fields)); err != nil {
				return err
			}
		}
		return nil
	}
	entries := make([]planEntry, 0, len(lines))
	for _, l := range lines {
		e := planEntry{Action: l.name, Fields: make(map[string]any, len(l.fields))}
		for _, f := range l.fields {
			e.Fields[f.Key] = f.Data()
		}
		entries = append(entries, e)
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	return yaml.NewEncoder(w).Encode(entries)
}
