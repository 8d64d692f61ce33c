package reconciler

import (
	"fmt"
	"strconv"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/observed"
)

// workspacePlan is where an item works, by the rules of docs/design.md
// ("Workspaces"): the workdir rendered from the current config until the
// item's first spawn, the pinned one from then on; and the checkout of the
// route, when it has one.
type workspacePlan struct {
	dir      string
	rendered string // the current config's rendering, "" without a route
	pinned   bool
	checkout *actions.Checkout
	// removeOnClose is the route's checkout.removeOnClose.
	removeOnClose bool
	err           error
}

// workspaceOf returns r's workspacePlan under the routing of p. An item
// whose repository has no route any more keeps the workdir it was
// ingested with, as a plain directory.
func workspaceOf(r *desired.Record, p *Policy) workspacePlan {
	w := workspacePlan{dir: r.Spec.Cwd}
	if r.Status.Workdir != "" || r.Status.HadConversation() {
		w.dir, w.pinned = r.Workdir(), true
	}
	route, ok := p.route(r.Key)
	if !ok {
		return w
	}
	rendered, err := route.RenderWorkdir(r.Key.Owner, r.Key.Repo, r.Key.Number, string(r.Spec.Kind))
	if err != nil {
		w.err = err
		return w
	}
	w.rendered = rendered
	if !w.pinned {
		w.dir = rendered
	}
	c := route.Checkout
	if c == nil {
		return w
	}
	w.removeOnClose = c.RemoveOnClose
	url, err := c.RenderURL(r.Key.Owner, r.Key.Repo)
	if err != nil {
		w.err = err
		return w
	}
	co := &actions.Checkout{URL: url}
	switch {
	case r.Spec.Kind != desired.KindPullRequest:
		co.Mode, co.Base = actions.CheckoutIssue, c.Base
		if co.Branch, err = c.RenderIssueBranch(r.Key.Owner, r.Key.Repo, r.Key.Number); err != nil {
			w.err = err
			return w
		}
	case r.Spec.HeadRef != "" && !r.Spec.Fork(r.Key):
		co.Mode, co.Branch, co.PR = actions.CheckoutPullRequest, r.Spec.HeadRef, r.Key.Number
	default:
		// A fork's pull request, or one whose head no payload named yet.
		co.Mode, co.Branch, co.PR = actions.CheckoutFork, "loopd/pr-"+strconv.Itoa(r.Key.Number), r.Key.Number
		if owner, repo, ok := r.Spec.PushRepo(r.Key); ok {
			// The fork takes the maintainers' pushes: a plain git push
			// goes to its head branch, on the fork's URL as the route
			// renders it for the fork.
			if co.PushURL, err = c.RenderURL(owner, repo); err != nil {
				w.err = err
				return w
			}
			co.PushBranch = r.Spec.HeadRef
		}
	}
	w.checkout = co
	return w
}

// need is what observation reads of the workdir for w: the directory, and
// the repository it should be a clone of.
func (w workspacePlan) need(n *observed.Need) {
	n.Workdir = w.dir
	if w.checkout != nil {
		n.CheckoutURL = w.checkout.URL
	}
}

// prepare returns what comes before a spawn of the item in it: nothing
// when the workdir is ready; a PrepareWorkspace when it must be made or
// repaired (the item's first spawn; a reopened item whose clone was
// removed at its close; a half-made worktree to finish; a worktree of an
// older loopd to migrate to a clone; what a killed git left in the clone;
// the clone of an item that had a conversation, vanished, to make again
// at the same path and resume there; a preparation that ended with no
// outcome recorded), carrying the restart decision on a failure
// (decideRetry), and, for an item that had an agent to bring back, the
// resume once it is ready (Resume); a Wait while an item's preparation is
// in flight (Preparing, and its mirror's lock held: its worker wakes a
// pass when done); a GiveUp when the workdir cannot be used (a
// conflicting directory before the first spawn, a route that does not
// render). A plain workdir (no checkout) is never made again once the
// item has spawned (a missing one blocks the respawn, planned by spawn),
// nor is a pinned workdir that is not the repository's clone (made
// before its route had a checkout): it is used as it is.
func (it *itemPlan) prepare(w workspacePlan, st desired.Status) (pre []actions.Action, stop bool) {
	key := it.r.Key
	pinned := st.HadConversation() && st.Workspace != desired.WorkspaceRemoved
	if pinned && (w.checkout == nil || w.err != nil) {
		return nil, false
	}
	if w.err != nil {
		return []actions.Action{actions.GiveUp{Key: key, Session: it.session, Reason: actions.ReasonWorkspaceFailed, Path: w.dir, Detail: w.err.Error()}}, true
	}
	fact, seen := it.obs.Workdirs[key]
	reason := actions.ReasonFirstSpawn
	switch {
	case st.Phase == desired.PhasePreparing:
		// Still preparing when its mirror is busy; otherwise no worker
		// recorded an outcome (the daemon stopped or was killed).
		if w.checkout != nil && fact.Busy {
			return []actions.Action{actions.Wait{Key: key, Reason: actions.ReasonWorkspacePreparing}}, true
		}
		reason = actions.ReasonWorkspaceInterrupted
	case st.Workspace == desired.WorkspaceRemoved:
		reason = actions.ReasonWorkspaceRemoved
	}
	switch {
	case !seen && pinned:
		return nil, false // not observed: the spawn goes on where it is pinned
	case !seen:
		// Not observed: Prepare checks again, and never clobbers.
	case w.checkout != nil && fact.Worktree && fact.Partial:
		reason = actions.ReasonWorkspacePartial
	case w.checkout != nil && fact.Worktree:
		reason = actions.ReasonWorkspaceLegacy
	case w.checkout != nil && fact.Clone && fact.Leftover:
		reason = actions.ReasonWorkspaceLeftover
	case w.checkout != nil && fact.Clone:
		return nil, false // used as it is, whatever its branch or state
	case w.checkout != nil && fact.Exists && !fact.Empty && pinned:
		return nil, false
	case w.checkout != nil && fact.Exists && !fact.Empty:
		return []actions.Action{actions.GiveUp{Key: key, Session: it.session, Reason: actions.ReasonWorkspaceConflict, Path: w.dir,
			Detail: fmt.Sprintf("%s exists and is not a clone of %s", w.dir, w.checkout.URL)}}, true
	case w.checkout == nil && fact.Exists:
		return nil, false
	case pinned:
		reason = actions.ReasonWorkspaceMissing
	}
	d := decideRetry(st.Failures, *it.p)
	a := actions.PrepareWorkspace{Key: key, Session: it.session, Dir: w.dir, Checkout: w.checkout, Reason: reason, Failures: d.Failures,
		Resume: pinned && hadAgent(st.Phase)}
	if d.Restarts() {
		a.Retry, a.RetryAfter = true, d.Delay
	}
	return []actions.Action{a}, false
}

// moved reports whether the route now renders another workdir than the
// one w is pinned to (the rendering it was pinned from, or Spec.Cwd for
// an item pinned before that was recorded).
func (w workspacePlan) moved(r *desired.Record) bool {
	if !w.pinned || w.rendered == "" {
		return false
	}
	was := r.Status.WorkdirRendered
	if was == "" {
		was = r.Spec.Cwd
	}
	return w.rendered != was
}

// reportMoved returns the report that the pinned workdir does not follow a
// route that now renders another path (ReportWorkdir), once per rendering,
// at the spawn that does not apply it: the conversation is found by its
// workdir, so the pinned one stays.
func (it *itemPlan) reportMoved(w workspacePlan) []actions.Action {
	if !w.moved(it.r) || w.rendered == it.st.WorkdirReported {
		return nil
	}
	return []actions.Action{actions.ReportWorkdir{Key: it.r.Key, Pinned: w.dir, Rendered: w.rendered}}
}

// WorkdirMoved returns the workdir the current routing of p renders for
// r, and whether it differs from the one r's conversation is pinned to
// (loopd get shows it; the planner reports it once, at the next spawn).
func WorkdirMoved(r desired.Record, p Policy) (rendered string, moved bool) {
	w := workspaceOf(&r, &p)
	return w.rendered, w.moved(&r)
}

// closeWorkspace returns the removal of a closed item's worktree, when
// its route asks for it (removeOnClose) and its close has not dealt with
// it yet. The cheap checks come first: a pass looks at every closed item.
func (it *itemPlan) closeWorkspace() []actions.Action {
	r := *it.r
	if !r.Spec.Closed || r.Spec.Held || it.st.Workspace != "" || (it.st.Workdir == "" && !it.st.HadConversation()) {
		return nil
	}
	if route, ok := it.p.route(r.Key); !ok || route.Checkout == nil || !route.Checkout.RemoveOnClose {
		return nil
	}
	w := workspaceOf(&r, it.p)
	if w.checkout == nil || !w.pinned {
		return nil
	}
	return []actions.Action{actions.RemoveWorkspace{Key: r.Key, Dir: w.dir, URL: w.checkout.URL}}
}
