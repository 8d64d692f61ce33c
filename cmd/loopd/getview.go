package main

import (
	"encoding/json"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/reconciler"
)

// The apiVersion and kinds of get's JSON and YAML objects
// (schema/getoutput.schema.json).
const (
	getAPIVersion = "loopd/v1"
	kindItemList  = "WorkItemList"
	kindItem      = "WorkItem"
)

// itemList is get -o json|yaml: the items shown, kubectl's List shape.
type itemList struct {
	APIVersion string     `json:"apiVersion" yaml:"apiVersion"`
	Kind       string     `json:"kind" yaml:"kind"`
	Items      []itemView `json:"items" yaml:"items"`
}

func newItemList(views []itemView) itemList {
	return itemList{APIVersion: getAPIVersion, Kind: kindItemList, Items: views}
}

// itemView is one work item as get shows it: the table's columns and its
// JSON and YAML object, with typed values (numbers, booleans, RFC 3339
// times in UTC; a time, string or object that does not apply is left
// out). schema/getoutput.schema.json is its contract.
type itemView struct {
	APIVersion string     `json:"apiVersion" yaml:"apiVersion"`
	Kind       string     `json:"kind" yaml:"kind"`
	Key        string     `json:"key" yaml:"key"` // owner/repo#number as stored
	Owner      string     `json:"owner" yaml:"owner"`
	Repo       string     `json:"repo" yaml:"repo"`
	Number     int        `json:"number" yaml:"number"`
	Spec       specView   `json:"spec" yaml:"spec"`
	Status     statusView `json:"status" yaml:"status"`
	// age is get's AGE column: how long the item has been in its phase at
	// the read (shortAge), "-" when that is not known. It is no field of
	// the object, and no change for --watch.
	age string
}

// specView is the desired state of an item (desired.Spec).
type specView struct {
	Kind           string `json:"kind" yaml:"kind"` // issue or pull_request
	Harness        string `json:"harness" yaml:"harness"`
	Closed         bool   `json:"closed" yaml:"closed"`
	Held           bool   `json:"held" yaml:"held"`
	ReleasePending bool   `json:"releasePending" yaml:"releasePending"`
	Generation     int64  `json:"generation" yaml:"generation"`
	HeadRef        string `json:"headRef,omitempty" yaml:"headRef,omitempty"`
	Title          string `json:"title,omitempty" yaml:"title,omitempty"` // as GitHub sent it: text from outside
	URL            string `json:"url,omitempty" yaml:"url,omitempty"`     // its page on GitHub
}

// statusView is what loopd last found and did (desired.Status), worked out
// as get's columns are.
type statusView struct {
	Phase string `json:"phase" yaml:"phase"`
	// PhaseSince is when the item entered its phase (get's AGE column).
	PhaseSince time.Time `json:"phaseSince,omitzero" yaml:"phaseSince,omitempty"`
	// Reason is get's REASON column (reconciler.Explain).
	Reason  string `json:"reason" yaml:"reason"`
	Session string `json:"session" yaml:"session"`
	PaneID  string `json:"paneId,omitempty" yaml:"paneId,omitempty"`
	// ConversationID is the conversation the item is in
	// (desired.Record.ConversationID); ConversationUnconfirmed is true
	// while loopd has not learned the id its harness chose.
	ConversationID          string    `json:"conversationId,omitempty" yaml:"conversationId,omitempty"`
	ConversationUnconfirmed bool      `json:"conversationUnconfirmed" yaml:"conversationUnconfirmed"`
	Pending                 int       `json:"pending" yaml:"pending"`
	OldestPending           time.Time `json:"oldestPending,omitzero" yaml:"oldestPending,omitempty"`
	Failures                int       `json:"failures" yaml:"failures"` // reconciler.NextFailures
	QueuePosition           int       `json:"queuePosition,omitempty" yaml:"queuePosition,omitempty"`
	Workdir                 string    `json:"workdir,omitempty" yaml:"workdir,omitempty"`
	SpawnedAt               time.Time `json:"spawnedAt,omitzero" yaml:"spawnedAt,omitempty"`
	NextAttempt             time.Time `json:"nextAttempt,omitzero" yaml:"nextAttempt,omitempty"`
	Blocked                 string    `json:"blocked,omitempty" yaml:"blocked,omitempty"`
	// Question is the id of the question posted on GitHub that the
	// agent waits on an answer to (desired.Status.AwaitingApproval).
	Question string `json:"question,omitempty" yaml:"question,omitempty"`
	// AttendedSince is when a person's tmux client was seen attached to
	// the item's session, AttendedBy who (desired.AttendanceState).
	AttendedSince time.Time  `json:"attendedSince,omitzero" yaml:"attendedSince,omitempty"`
	AttendedBy    string     `json:"attendedBy,omitempty" yaml:"attendedBy,omitempty"`
	LimitUntil    time.Time  `json:"limitUntil,omitzero" yaml:"limitUntil,omitempty"`
	LimitWindow   string     `json:"limitWindow,omitempty" yaml:"limitWindow,omitempty"`
	LimitEpisodes int        `json:"limitEpisodes,omitempty" yaml:"limitEpisodes,omitempty"`
	LastExit      *exitView  `json:"lastExit,omitempty" yaml:"lastExit,omitempty"`
	Lease         *leaseView `json:"lease,omitempty" yaml:"lease,omitempty"`
	RunID         string     `json:"runId,omitempty" yaml:"runId,omitempty"`
	// Sandbox is how the item's agent runs: bubblewrap, or none
	// (reconciler.Unsandboxed).
	Sandbox string `json:"sandbox" yaml:"sandbox"`
	// Budget is where the item stands against its route's token
	// budget; nil when the route has none.
	Budget *budgetView `json:"budget,omitempty" yaml:"budget,omitempty"`
}

// budgetView is an item's token usage and budget (reconciler.BudgetSpent):
// the weighted tokens used and the limit (raises included) of the window
// and of the total, the raises, and the tokens counted by kind.
type budgetView struct {
	WindowUsed  int64  `json:"windowUsed" yaml:"windowUsed"`
	WindowLimit int64  `json:"windowLimit" yaml:"windowLimit"`
	TotalUsed   int64  `json:"totalUsed" yaml:"totalUsed"`
	TotalLimit  int64  `json:"totalLimit" yaml:"totalLimit"`
	Raised      int64  `json:"raised" yaml:"raised"`
	Past        string `json:"past,omitempty" yaml:"past,omitempty"`
	Input       int64  `json:"input" yaml:"input"`
	Output      int64  `json:"output" yaml:"output"`
	CacheWrite  int64  `json:"cacheWrite" yaml:"cacheWrite"`
	CacheRead   int64  `json:"cacheRead" yaml:"cacheRead"`
}

// exitView is the item's last recorded exit.
type exitView struct {
	Status *int      `json:"status" yaml:"status"` // null when unknown
	Reason string    `json:"reason,omitempty" yaml:"reason,omitempty"`
	At     time.Time `json:"at,omitzero" yaml:"at,omitempty"`
}

// leaseView is the host that runs the item (desired.Lease).
type leaseView struct {
	Host    string    `json:"host" yaml:"host"`
	Expires time.Time `json:"expires" yaml:"expires"`
	Lapsed  bool      `json:"lapsed" yaml:"lapsed"` // its host stopped heartbeating
}

// itemViews returns the view of each record at now: the failure count the
// next restart decision under p would start from (reconciler.NextFailures,
// a run seen dead measured to its death in died), each Queued item's
// place in the queue, its usage limit and the reason column
// (reconciler.Explain), stale flagging Stopped items whose oldest pending
// event is older than that.
func itemViews(records []desired.Record, now time.Time, stale time.Duration, p reconciler.Policy, died map[desired.Key]time.Time) []itemView {
	explained := reconciler.Explain(records, p, now, stale)
	out := make([]itemView, 0, len(records))
	for _, r := range records {
		st, e := r.Status, explained[r.Key]
		v := itemView{
			APIVersion: getAPIVersion, Kind: kindItem,
			Key: r.Key.String(), Owner: r.Key.Owner, Repo: r.Key.Repo, Number: r.Key.Number,
			Spec: specView{Kind: string(r.Spec.Kind), Harness: r.Spec.Harness, Closed: r.Spec.Closed, Held: r.Spec.Held,
				ReleasePending: r.ReleasePending(), Generation: r.Spec.Generation, HeadRef: r.Spec.HeadRef,
				Title: r.Spec.Title, URL: r.Spec.URL},
			Status: statusView{
				Phase: string(st.Phase), PhaseSince: utc(st.PhaseSince), Reason: e.Reason,
				Session: desired.SessionName(r.Key), PaneID: st.PaneID,
				ConversationID: st.HarnessSessionID, ConversationUnconfirmed: st.IDUnconfirmed,
				Pending: len(r.Pending), Failures: reconciler.NextFailures(r, p, now, died[r.Key]),
				QueuePosition: e.QueuePosition, Workdir: r.Workdir(), SpawnedAt: utc(st.SpawnedAt),
				Blocked: st.BlockedBy(), Question: st.AwaitingApproval(), AttendedSince: st.AttendedSince, AttendedBy: st.AttendedBy, RunID: st.RunID, Sandbox: sandbox.ModeBubblewrap,
			},
		}
		v.age = "-"
		if !st.PhaseSince.IsZero() {
			v.age = shortAge(now.Sub(st.PhaseSince))
		}
		if oldest, ok := r.OldestPending(); ok {
			v.Status.OldestPending = utc(oldest)
		}
		if st.Phase == desired.PhaseBackingOff {
			v.Status.NextAttempt = utc(st.NextAttempt)
		}
		v.Status.LimitUntil, v.Status.LimitWindow, v.Status.LimitEpisodes = utc(e.LimitUntil), e.LimitWindow, st.LimitEpisodes
		if e.Unsandboxed {
			v.Status.Sandbox = sandbox.ModeNone
		}
		if e.Budgeted {
			b, t := e.Budget, st.UsageTotal
			v.Status.Budget = &budgetView{WindowUsed: b.WindowUsed, WindowLimit: b.WindowLimit, TotalUsed: b.TotalUsed, TotalLimit: b.TotalLimit,
				Raised: r.Spec.BudgetRaise, Past: b.Past, Input: t.Input, Output: t.Output, CacheWrite: t.CacheWrite, CacheRead: t.CacheRead}
		}
		if st.LastExitStatus != nil || st.LastExitReason != "" || !st.LastExitAt.IsZero() {
			v.Status.LastExit = &exitView{Status: st.LastExitStatus, Reason: st.LastExitReason, At: utc(st.LastExitAt)}
		}
		if r.Lease.Owner != "" {
			v.Status.Lease = &leaseView{Host: r.Lease.Owner, Expires: utc(r.Lease.Expires), Lapsed: r.Lease.Lapsed(now)}
		}
		out = append(out, v)
	}
	return out
}

// utc returns t in UTC, the zero time as it is.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// fingerprint is what get --watch compares to tell a changed item: the
// whole view but its lease's expiry, which every heartbeat moves.
func (v itemView) fingerprint() string {
	if v.Status.Lease != nil {
		l := *v.Status.Lease
		l.Expires = time.Time{}
		v.Status.Lease = &l
	}
	b, _ := json.Marshal(v) // a struct of plain values always marshals
	return string(b)
}
