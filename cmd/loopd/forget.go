package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// Outcomes of a forgotten item's worktree (journal.KeyWorkspace).
const (
	worktreeRemoved = "removed"
	worktreeKept    = "kept"
	worktreeNone    = "none"
)

// errNotConfirmed is forget's answer without --yes: it said what it would
// remove, and removed nothing.
var errNotConfirmed = errors.New("nothing removed: run it again with --yes to forget the item")

func newForgetCmd(g *globals) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "forget WORK_ITEM --yes",
		Short: "Remove a closed work item's record, and its worktree when it is clean",
		Long: `forget removes what loopd keeps of a closed work item: its spec and status,
its lease, its events pending or delivered, its GitHub calls (the outbox), its
session report and the copies of its transcripts in the store. Its worktree
goes with it when it is clean (no uncommitted change, no untracked or ignored
file, no commit that no remote branch holds); otherwise it is kept and forget
says why. Its journal rows stay until retention.journalDays ages them out, and
a new event on the item later makes it anew, with a new conversation.

forget refuses an item that is open, and one whose agent still runs or whose
tmux session still exists (the next pass stops a closed item's session). It
runs under the reconcile lock, so no pass acts on the item meanwhile.

Without --yes it says what it would remove and exits 1, removing nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return forget(cmd.Context(), g, args[0], yes, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "remove the item; without it, only say what would be removed")
	return cmd
}

// forget removes the closed item arg names (in any case: resolveItem), or
// with yes false says what it would remove and returns errNotConfirmed
// with exit code 1.
func forget(ctx context.Context, g *globals, arg string, yes bool, out, errOut io.Writer) error {
	log, err := g.verbLogger(errOut)
	if err != nil {
		return err
	}
	cfg, st, err := g.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if yes {
		// No pass acts on the item between the checks and the removal.
		lockCtx, cancel := context.WithTimeout(ctx, schema.DefaultOnceLockWait)
		unlock, err := st.Lock(lockCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("forget %s: %w (waited %s)", arg, err, schema.DefaultOnceLockWait)
		}
		defer unlock()
	}
	r, err := resolveItem(ctx, st, arg)
	if err != nil {
		return err
	}
	k := r.Key
	panes := func() (observed.Snapshot, error) {
		return observed.TakeSnapshot(ctx, tmux.NewExec(cfg.Tmux.Socket, slog.New(slog.DiscardHandler)), time.Now())
	}
	if err := reconciler.Forgettable(r, panes); err != nil {
		return err
	}
	wt := worktreeOf(cfg, r)
	if !yes {
		return exitError{code: 1, err: describeForget(ctx, st, wt, r, out)}
	}
	if err := st.Forget(ctx, k); err != nil {
		if errors.Is(err, store.ErrNotClosed) {
			return fmt.Errorf("work item %s was reopened: it is kept", k)
		}
		return err
	}
	// Once the record is gone, still under the lock: an item reopened
	// meanwhile keeps its worktree, and one made anew by a later event
	// finds none to resume in before this is done.
	outcome, kept, werr := wt.remove(ctx)
	// The process runner's files of the item's runs (pid, exit, log), and
	// the item's channel.
	session := desired.SessionName(k)
	filesErr := os.RemoveAll(runsOf(cfg, "").ItemDir(session))
	// Its channel: reports no pass will take, the socket of a dead spawn.
	filesErr = errors.Join(filesErr, channel.Remove(channel.Root(cfg.StateDir), session))
	kv := []any{journal.KeyCwd, wt.dir, journal.KeyWorkspace, outcome}
	if kept != "" {
		kv = append(kv, journal.KeyReason, kept)
	}
	if err := errors.Join(werr, filesErr); err != nil {
		kv = append(kv, journal.KeyErr, err)
	}
	journal.NewRecorder(log, st, time.Now).Record(ctx, slog.LevelInfo, journal.ItemForgotten, k.String(), kv...)
	fmt.Fprintf(out, "%s forgotten\n", k)
	switch {
	case werr != nil:
		fmt.Fprintf(out, "worktree %s kept: %v\n", wt.dir, werr)
	case outcome == worktreeRemoved:
		fmt.Fprintf(out, "worktree %s removed\n", wt.dir)
	case outcome == worktreeKept:
		fmt.Fprintf(out, "worktree %s kept: %s; remove it yourself once nothing in it is needed\n", wt.dir, kept)
	}
	if filesErr != nil {
		fmt.Fprintf(out, "its process runs' or channel's files kept: %v\n", filesErr)
	}
	// The rows' pages go back to the file system (SQLite); a failure
	// here loses nothing, the next prune tries again.
	if _, err := st.Vacuum(ctx); err != nil {
		fmt.Fprintf(errOut, "loopd: warning: %v\n", err)
	}
	return nil
}

// worktree is a closed item's workdir and what forget can do with it.
type worktree struct {
	dir string
	// url is the route's checkout URL; "" when the route makes no
	// worktree (a plain directory, which forget never removes).
	url string
	m   *workspace.Manager
}

// worktreeOf returns r's workdir (Record.Workdir) and the checkout URL its
// route renders now, if any.
func worktreeOf(cfg *schema.Config, r desired.Record) worktree {
	w := worktree{dir: r.Workdir(), m: &workspace.Manager{Root: filepath.Join(cfg.StateDir, mirrorsDir)}}
	route, ok := cfg.Webhooks.GHWebhook.Routing.Route(r.Key.Owner, r.Key.Repo)
	if !ok || route.Checkout == nil {
		return w
	}
	if url, err := route.Checkout.RenderURL(r.Key.Owner, r.Key.Repo); err == nil {
		w.url = url
	}
	return w
}

// check says what remove would do: worktreeNone when there is no
// directory, worktreeKept with the reason (workspace.Manager.Kept, or
// "not_a_worktree" for a route with no checkout), worktreeRemoved when it
// is clean.
func (w worktree) check(ctx context.Context) (outcome, kept string, err error) {
	return w.do(ctx, false)
}

// remove removes the worktree when it is clean (workspace.Manager.Remove)
// and says what it did, as check.
func (w worktree) remove(ctx context.Context) (outcome, kept string, err error) {
	return w.do(ctx, true)
}

func (w worktree) do(ctx context.Context, remove bool) (outcome, kept string, err error) {
	if w.dir == "" {
		return worktreeNone, "", nil
	}
	if _, err := os.Lstat(w.dir); errors.Is(err, os.ErrNotExist) {
		return worktreeNone, "", nil
	}
	if w.url == "" {
		return worktreeKept, workspace.KeptNotOurs, nil
	}
	if remove {
		kept, err = w.m.Remove(ctx, w.url, w.dir)
	} else {
		kept, err = w.m.Kept(ctx, w.url, w.dir)
	}
	switch {
	case err != nil:
		return worktreeKept, "", fmt.Errorf("worktree %s: %w", w.dir, err)
	case kept != "":
		return worktreeKept, kept, nil
	}
	return worktreeRemoved, "", nil
}

// describeForget writes what forgetting r would remove and keep, and
// returns errNotConfirmed.
func describeForget(ctx context.Context, st store.Store, wt worktree, r desired.Record, out io.Writer) error {
	calls, err := st.Calls(ctx, store.CallFilter{WorkItem: r.Key.String()})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "forget %s would remove:\n", r.Key)
	fmt.Fprintf(out, "  its record: spec, status (%s), lease, session report, stored transcripts\n", r.Status.Phase)
	fmt.Fprintf(out, "  its events: %d pending, and those delivered\n", len(r.Pending))
	fmt.Fprintf(out, "  its GitHub calls: %d\n", len(calls))
	outcome, kept, err := wt.check(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(out, "and keep its worktree %s: %v\n", wt.dir, err)
	case outcome == worktreeRemoved:
		fmt.Fprintf(out, "  its worktree %s (clean)\n", wt.dir)
	case outcome == worktreeKept:
		fmt.Fprintf(out, "and keep its workdir %s: %s\n", wt.dir, kept)
	}
	fmt.Fprintf(out, "Its journal rows stay until retention.journalDays ages them out.\n")
	return errNotConfirmed
}
