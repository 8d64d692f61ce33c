// Package journal names the events loopd reports and records each one twice:
// as a log/slog line whose message is the event name, and as a row in the
// store's event journal, which `loopd events` reads.
package journal

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Name is an event name. The list below is the whole vocabulary: every
// slog message in loopd and every journal row is one of these names
// (docs/design.md, "Events"; TestLogMessagesAreNames holds the code to it).
// Names marked "log only" are written to the log and never to the journal.
type Name string

// The event names.
const (
	// DeliveryAccepted: a signed delivery queued an event (or changed the
	// item's state).
	DeliveryAccepted Name = "delivery.accepted"
	// DeliveryDuplicate: a redelivery of a delivery id already stored.
	DeliveryDuplicate Name = "delivery.duplicate"
	// DeliveryIgnored: a signed delivery loopd has nothing to do for.
	DeliveryIgnored Name = "delivery.ignored"
	// DeliveryRejected: a request refused (unsigned, malformed, store failed).
	DeliveryRejected Name = "delivery.rejected"
	// StateDirTightened: the state dir, or a file or directory in it, let
	// other users in; its mode was tightened (log only).
	StateDirTightened Name = "state_dir.tightened"
	// ListenerRefused: the listener cut a connection before any request of
	// it was read (too many from its address, shed under pressure), or
	// refused a request to its own pages whose Host names another site.
	ListenerRefused Name = "listener.refused"

	// SessionStarting: tmux started a harness's pane (log only).
	SessionStarting Name = "session.starting"
	// SessionSpawned: a fresh spawn holds and runs.
	SessionSpawned Name = "session.spawned"
	// SessionRespawned: a respawn holds and runs (resumed=true|false).
	SessionRespawned Name = "session.respawned"
	// SessionResumeFailed: a respawn that could not resume went fresh.
	SessionResumeFailed Name = "session.resume_failed"
	// SessionExited: the harness's pane died.
	SessionExited Name = "session.exited"
	// SessionCrashLoop: a conversation id was retired, or the restart
	// budget is spent.
	SessionCrashLoop Name = "session.crash_loop"
	// SessionStopped: the session was stopped (closed or held item).
	SessionStopped Name = "session.stopped"
	// SessionConfirmed: a spawn was confirmed by its transcript or report.
	SessionConfirmed Name = "session.confirmed"
	// SessionNeedsAttention: the item waits for an operator or a new event.
	SessionNeedsAttention Name = "session.needs_attention"
	// SessionAdopted: a live pane the record did not account for is the item's.
	SessionAdopted Name = "session.adopted"
	// SessionReported: the harness reported its session id (SessionStart),
	// through the item's channel.
	SessionReported Name = "session.reported"
	// SessionReportRejected: a report in an item's channel failed its
	// checks (another item's, an earlier spawn's, malformed …); it was
	// removed and changed nothing.
	SessionReportRejected Name = "session.report_rejected"

	// ChannelFailed: an item's channel could not be read, listened on or
	// served (log only).
	ChannelFailed Name = "channel.failed"
	// CredentialIssued: an agent was handed a credential over its
	// channel (credentials=app|token, repository, expires).
	CredentialIssued Name = "credential.issued"
	// CredentialRefused: an agent asked for a credential it does not get
	// (reason=not_this_spawn|no_credentials|other_repository|mint_failed…).
	CredentialRefused Name = "credential.refused"
	// SessionFollowed: the item now follows the id its harness reported.
	SessionFollowed Name = "session.followed"
	// SessionIDAmbiguous: more than one conversation the harness started
	// fits the spawn of an item whose id is still to be learned (Codex):
	// none is taken, and the id stays unknown.
	SessionIDAmbiguous Name = "session.id_ambiguous"
	// SessionPredecessorKilled: a spawn killed the item's previous harness,
	// which had not exited within its grace (log only).
	SessionPredecessorKilled Name = "session.predecessor_killed"
	// SessionGroupKilled: stopping a harness that stops by process group
	// took SIGKILL (log only); SessionStopUnconfirmed: a process of the
	// group outlived it, so the session is kept and the stop retried
	// (reason=process_group_running).
	SessionGroupKilled     Name = "session.group_killed"
	SessionStopUnconfirmed Name = "session.stop_unconfirmed"
	// SessionBlocked: the harness's screen shows what keeps the agent from
	// working until a human acts (reason=login_required, workspace_trust,
	// permission_prompt, …); SessionUnblocked: it no longer does.
	SessionBlocked   Name = "session.blocked"
	SessionUnblocked Name = "session.unblocked"
	// SessionRateLimited: the harness hit a usage limit; the item waits
	// for its reset (reset, until, default_reset, reset_capped).
	SessionRateLimited Name = "session.rate_limited"
	// SessionBudgetExhausted: the item's agent used its route's token
	// budget; its turn was interrupted and it is held (budget_used,
	// budget_limit, budget_which, tokens).
	SessionBudgetExhausted Name = "session.budget_exhausted"
	// ItemBudgetRaised: an operator raised an item's budget
	// (budget_raise; loopd release --budget).
	ItemBudgetRaised Name = "item.budget_raised"
	// QuestionAsked: the agent's screen asks a question that is posted on
	// GitHub for an answer (question_id, title); QuestionReminded: its
	// one reminder was queued; QuestionGone: it left the screen with no
	// answer from GitHub (answered at the terminal, or gone).
	QuestionAsked    Name = "question.asked"
	QuestionReminded Name = "question.reminded"
	QuestionGone     Name = "question.gone"
	// QuestionAnswered: an authorized user's answer reached the question,
	// still on the screen (question_id, delivery, sender, choice, answer,
	// keys); QuestionRefused: an answer was not sent (reason=question_gone
	// or bad_choice), and loopd replied so.
	QuestionAnswered Name = "question.answered"
	QuestionRefused  Name = "question.refused"
	// SessionLimitMenuAnswered: loopd answered the usage-limit menu with
	// its choice that waits for the reset (keys).
	SessionLimitMenuAnswered Name = "session.limit_menu_answered"
	// SessionForeign: a session of the item's name carries the owner mark
	// of another loopd (or none); it is never adopted, pasted into or killed.
	SessionForeign Name = "session.foreign"
	// SessionQueued: the item needs an agent and the host is full
	// (reason=capacity) or enough starts are in flight
	// (reason=starts_in_flight); it waits in the queue, once per episode.
	SessionQueued Name = "session.queued"
	// SessionParked: an agent idle for capacity.idleParkSeconds was
	// stopped; its next event resumes its conversation.
	SessionParked Name = "session.parked"

	// DispatchSent: an event was pasted and submitted.
	DispatchSent Name = "dispatch.sent"
	// DispatchDelivered: an event reached the conversation
	// (via=boot_prompt|paste|transcript).
	DispatchDelivered Name = "dispatch.delivered"
	// DispatchFailed: an event could not be sent; it stays pending.
	DispatchFailed Name = "dispatch.failed"
	// DispatchBlocked: a dialog in the harness's screen blocks delivery.
	DispatchBlocked Name = "dispatch.blocked"
	// DispatchMangled: an event's frame reached the conversation, but not
	// whole (end line missing or digest mismatch).
	DispatchMangled Name = "dispatch.mangled"
	// DispatchTimeout: a run of the process runner outlived its route's
	// dispatchTimeoutSeconds; its process group was terminated, then
	// killed. What became of its event the transcript says.
	DispatchTimeout Name = "dispatch.timeout"
	// DispatchDropped: a pending event will never be sent (reason=own_push:
	// the agent's own push).
	DispatchDropped Name = "dispatch.dropped"

	// WorkspaceMissing: the item's workdir is gone; the item is blocked.
	WorkspaceMissing Name = "workspace.missing"
	// WorkspacePrepared: an item's workdir was made (or found) before a
	// spawn, or repaired: a plain directory or a git clone.
	WorkspacePrepared Name = "workspace.prepared"
	// WorkspacePreparing: an item's clone is being made by a worker,
	// outside the reconcile pass.
	WorkspacePreparing Name = "workspace.preparing"
	// WorkspaceInterrupted: an item's preparation was cut short because
	// the daemon is stopping; no failure is counted, the next start retries.
	WorkspaceInterrupted Name = "workspace.interrupted"
	// WorkspaceFailed: a workspace operation failed (git's command, exit
	// status and stderr tail, credentials masked).
	WorkspaceFailed Name = "workspace.failed"
	// WorkspaceKept: a closed item's clone was not removed, and why.
	WorkspaceKept Name = "workspace.kept"
	// WorkspaceRemoved: a closed item's clean clone was removed.
	WorkspaceRemoved Name = "workspace.removed"
	// WorkspacePinned: the route renders another workdir than the one the
	// item's conversation lives in; the pinned one stays.
	WorkspacePinned Name = "workspace.pinned"
	// WorkspaceUnreadable: observation could not read an item's workdir
	// (a permission); the planner treats it as not observed (log only).
	WorkspaceUnreadable Name = "workspace.unreadable"
	// HarnessMissing: a harness's command cannot be found.
	HarnessMissing Name = "harness.missing"

	// GitHubQueued: a status change queued a call to GitHub's REST API
	// in the outbox (call=announce|react|notify).
	GitHubQueued Name = "github.queued"
	// GitHubPosted: GitHub took a call from the outbox (or already had the
	// comment: found=true, its marker was there).
	GitHubPosted Name = "github.posted"
	// GitHubRetry: a call failed in a way worth trying again (a 5xx, no
	// answer); it waits until next_attempt.
	GitHubRetry Name = "github.retry"
	// GitHubPaused: a call met a rate limit (limit=secondary|primary): the
	// installation's calls pause until `until`, and the call, which it
	// does not count as a try, goes again then.
	GitHubPaused Name = "github.paused"
	// GitHubFailed: a call was given up (a 4xx other than a rate limit, or
	// out of tries), with GitHub's status and message.
	GitHubFailed Name = "github.failed"
	// GitHubConnected: serve reached GitHub at start and knows the login
	// its credentials belong to (the bot login).
	GitHubConnected Name = "github.connected"

	// ItemHeld: an operator held the item (loopd hold).
	ItemHeld Name = "item.held"
	// ItemReleased: a pass carried out an operator's release.
	ItemReleased Name = "item.released"
	// ItemAttended: a person's tmux client is attached to the item's
	// session; nothing is pasted and no death is respawned until the
	// handback. ItemHandedBack: the person detached, gave no input for
	// routing.tmux.attendedTimeoutSeconds, or an operator released the item.
	ItemAttended   Name = "item.attended"
	ItemHandedBack Name = "item.handed_back"
	// ItemForgotten: an operator removed a closed item's record (loopd
	// forget), with its clone when it was clean.
	ItemForgotten Name = "item.forgotten"

	// ConfigReloaded: the config file was reloaded.
	ConfigReloaded Name = "config.reloaded"
	// ConfigInvalid: a changed config file is invalid; the last good one stays.
	ConfigInvalid Name = "config.invalid"
	// ConfigWatchFailed: the config file watch reported an error (an
	// inotify queue overflow, say); the file is re-read after it (log only).
	ConfigWatchFailed Name = "config.watch_failed"

	// ServeListening: serve accepts webhook deliveries (log only).
	ServeListening Name = "serve.listening"
	// ServeAdopted: serve started with agents of its own still running on
	// its tmux server (a restart): it watches them again, nothing spawned.
	ServeAdopted Name = "serve.adopted"
	// ServeStopped: serve shut down (log only).
	ServeStopped Name = "serve.stopped"
	// ServeRefused: serve or reconcile --once found the tmux server or its
	// socket taken by the loopd of another state dir, or serve found its
	// host name held by another live instance (host_taken), and did not
	// start.
	ServeRefused Name = "serve.refused"

	// LeaseAcquired: Assign gave an item no live host held to a host
	// (to_host, generation); LeaseMoved: it took an item over from a host
	// whose lease expired (from_host, to_host, generation).
	LeaseAcquired Name = "lease.acquired"
	LeaseMoved    Name = "lease.moved"
	// LeaseLost: this host found it no longer runs an item (another host
	// holds the lease, its lease clock lapsed, or a write was fenced); its
	// local agent was stopped with no store write and no paste.
	LeaseLost Name = "lease.lost"
	// LeaseReleased: a draining host stopped an item's agent, shipped its
	// transcript and gave the lease up for another host to take.
	LeaseReleased Name = "lease.released"
	// HostHeartbeatFailed: this host's heartbeat (its membership row,
	// which renews its leases) failed; retried every leaseSeconds/3.
	HostHeartbeatFailed Name = "host.heartbeat_failed"
	// HostDraining: this host found it was set draining (loopd drain), or
	// back in service (draining=false).
	HostDraining Name = "host.draining"
	// HostTaken: this host's name is held by another live loopd instance
	// (another state dir): the heartbeat was refused, and this daemon
	// stops planning and stops its local agents, writing nothing, until
	// it can take its name back (the other instance's heartbeat lapsed).
	HostTaken Name = "host.taken"
	// SessionMoved: a host that took an item over from another host
	// recorded the move (from_host, to_host); found=false: the store held
	// no transcript of its conversation, and the item goes fresh with its
	// event (transcript_missing).
	SessionMoved Name = "session.moved"

	// ReconcileFailed: a pass failed before it could act; the loop retries.
	ReconcileFailed Name = "reconcile.failed"
	// ClockBounded: an item's status held instants further in the future
	// than their rules allow (the wall clock stepped back across a
	// restart); they were brought back to their bounds (fields).
	ClockBounded Name = "clock.bounded"
	// ActionFailed: one planned action returned an error (log only; the
	// fault it met is journaled by the action itself).
	ActionFailed Name = "action.failed"

	// TmuxExec: one tmux invocation, its commands and duration (log only,
	// debug).
	TmuxExec Name = "tmux.exec"
	// TmuxUnavailable: the tmux server could not be started or claimed
	// (log only; a pass that needs it journals reconcile.failed).
	TmuxUnavailable Name = "tmux.unavailable"
	// TmuxServerLost: the tmux server this loopd claimed was gone (killed,
	// OOM-killed, its socket deleted) with agents on it; a new one was
	// started and every agent resumed, none of it counted as a crash. One
	// per loss (items, live, down).
	TmuxServerLost Name = "tmux.server_lost"
	// TmuxOutage: more than half of at least 5 agents died in one pass;
	// each was resumed as an outage, not as a crash. One per outage
	// (items, live, down).
	TmuxOutage Name = "tmux.outage"
	// TmuxKickFailed: the reap kick (run-shell true) failed (log only, debug).
	TmuxKickFailed Name = "tmux.kick_failed"
	// PaneDiedWaitFailed: waiting on the pane-died channel failed; retried
	// after a second (log only, debug).
	PaneDiedWaitFailed Name = "pane_died.wait_failed"
	// ProcWatchUnavailable: this kernel gives no pidfd (pidfd_open(2):
	// ENOSYS before Linux 5.3, or refused by a seccomp filter); pane deaths
	// are then found by the pane-died hook, a reap kick every second and the
	// resync interval (log only).
	ProcWatchUnavailable Name = "proc_watch.unavailable"
	// ProcWatchFailed: a live pane's process could not be watched (a pidfd
	// open failed); its death is found by the hook and the resync (log
	// only, debug).
	ProcWatchFailed Name = "proc_watch.failed"
	// TranscriptWatchFailed: a transcript's directory could not be watched
	// for writes (inotify); the pass that confirms a delivery then comes at
	// the poll period (log only, debug; warn when inotify is missing).
	TranscriptWatchFailed Name = "transcript_watch.failed"
	// RunUnreadable: the files of a run of the process runner could not
	// be read; the pass waits for the run rather than judge it (log only).
	RunUnreadable Name = "run.unreadable"
	// TranscriptUnreadable: a harness transcript could not be read; the pass
	// ScreenUnreadable: a pane's screen could not be captured for what
	// blocks its agent or a usage limit (log only, debug).
	ScreenUnreadable Name = "screen.unreadable"
	// plans as if it showed nothing (log only).
	TranscriptUnreadable Name = "transcript.unreadable"

	// TranscriptShipFailed: the copy of an item's transcript in the
	// store could not be brought up to date (reason=shrunk|rewritten:
	// the local file no longer extends what is stored, which is kept as
	// it is; fenced: the item's lease moved; offset, store, unreadable,
	// records_unreadable); the next shipping pass tries again.
	TranscriptShipFailed Name = "transcript.ship_failed"
	// TranscriptRestored: an item's stored transcript was written back
	// where its harness finds it for the item's workdir on this host
	// (kept=true: a local copy at least as long was there, and kept).
	TranscriptRestored Name = "transcript.restored"
	// StoreListenRestored: the PostgreSQL store's LISTEN connection
	// failed (err) and is back after attempt tries, with backoff; the
	// reconcile loop was woken, since a notification may have been
	// missed.
	StoreListenRestored Name = "store.listen_restored"
	// StoreListenLost: the PostgreSQL store's LISTEN connection failed
	// (err), once at the start of each outage; other hosts' changes
	// reach this one only on its resync timer until
	// store.listen_restored.
	StoreListenLost Name = "store.listen_lost"
	// StoreUnreachable: a heartbeat found the store out of reach (err),
	// once at the start of each outage; its row, timed at the start, is
	// written once the store answers again, before store.reachable.
	StoreUnreachable Name = "store.unreachable"
	// StoreReachable: the store answers a heartbeat again after
	// store.unreachable, down_for after the outage started.
	StoreReachable Name = "store.reachable"

	// StatusPageFailed: the status page could not read the store for a
	// request (reason=store_failed, detail: the request's path); it
	// answered 500 (log only).
	StatusPageFailed Name = "status_page.failed"

	// JournalAppendFailed: a journal row could not be written (log only).
	JournalAppendFailed Name = "journal.append_failed"
	// JournalPruned: serve deleted the journal rows older than
	// retention.journalDays, and gave the space back.
	JournalPruned Name = "journal.pruned"
	// JournalPruneFailed: the journal's prune or the vacuum after it
	// failed; the next one, an hour later, tries again.
	JournalPruneFailed Name = "journal.prune_failed"
)

// Event is one journal entry. Attrs keys are snake_case, as in the log.
type Event struct {
	// ID is the row's id in the journal, growing with each row appended
	// (store.EventFilter.AfterID); 0 for an event not read from a store.
	ID       int64
	Time     time.Time
	Name     Name
	Level    slog.Level
	WorkItem string // owner/repo#number, or "" for daemon-wide events
	Attrs    map[string]string
}

// Appender stores events. The desired store implements it.
type Appender interface {
	AppendEvent(ctx context.Context, e Event) error
}

// MaxDeferred bounds the rows RecordLater holds until Flush writes them;
// past it the oldest row is dropped and counted.
const MaxDeferred = 256

// Recorder logs each event with its logger and appends it to the journal.
// A journal write error is logged, never returned: losing a journal row must
// not stop a reconcile pass.
type Recorder struct {
	log   *slog.Logger
	store Appender
	now   func() time.Time

	flushing sync.Mutex // one Flush at a time; never held by RecordLater
	mu       sync.Mutex
	deferred []Event // rows RecordLater logged and Flush has not written yet
	dropped  int     // rows dropped past MaxDeferred since the last Flush
}

// NewRecorder returns a Recorder. store may be nil (dry run: log only).
func NewRecorder(log *slog.Logger, store Appender, now func() time.Time) *Recorder {
	return &Recorder{log: log, store: store, now: now}
}

// Record logs and journals one event. kv are alternating snake_case keys and
// values (keys.go); values are formatted with slog's text rules. The row and
// the line carry the reconcile id of ctx, when it has one (WithReconcileID).
func (r *Recorder) Record(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
	e := r.log1(ctx, level, name, workItem, kv)
	if r.store == nil {
		return
	}
	if err := r.store.AppendEvent(ctx, e); err != nil {
		r.log.Error(string(JournalAppendFailed), "name", string(name), "err", err)
	}
}

// RecordLater logs one event now, exactly as Record does, and keeps its
// journal row for the next Flush instead of writing it. It is for a path
// where the store has just failed and must not be waited on a second time
// (a delivery answered within GitHub's deadline); the row still reaches
// the journal once the store takes writes again. At most MaxDeferred rows
// wait; past that the oldest is dropped, and Flush logs how many were.
func (r *Recorder) RecordLater(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
	e := r.log1(ctx, level, name, workItem, kv)
	if r.store == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.deferred) == MaxDeferred {
		r.deferred = r.deferred[1:]
		r.dropped++
	}
	r.deferred = append(r.deferred, e)
}

// Flush writes the rows RecordLater kept, oldest first, and stops at the
// first write that fails, keeping that row and the later ones for the next
// Flush. It returns the write error, or nil. The rows go to the store
// beneath any Appender that folds repeats (one with an Unwrap method, such
// as Limiter.Appender's): each stands for its own delivery, which the
// operator may have to redeliver, so none is folded into a count.
func (r *Recorder) Flush(ctx context.Context) error {
	store := r.store
	for {
		u, ok := store.(interface{ Unwrap() Appender })
		if !ok {
			break
		}
		store = u.Unwrap()
	}
	r.flushing.Lock()
	defer r.flushing.Unlock()
	// The rows are taken out and written without r.mu: a write may wait
	// out the store's busy timeout, and RecordLater, which a webhook's
	// answer waits for, must never wait behind it.
	r.mu.Lock()
	rows, dropped := r.deferred, r.dropped
	r.deferred, r.dropped = nil, 0
	r.mu.Unlock()
	if dropped > 0 {
		r.log.Error(string(JournalAppendFailed), "err", "deferred rows over the bound were dropped", "dropped", dropped)
	}
	for i, e := range rows {
		if err := store.AppendEvent(ctx, e); err != nil {
			r.keep(rows[i:])
			return err
		}
	}
	return nil
}

// keep puts rows a Flush could not write back before the rows kept since,
// oldest first, within MaxDeferred (the oldest past it dropped and
// counted).
func (r *Recorder) keep(rows []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(slices.Clip(rows), r.deferred...)
	if over := len(all) - MaxDeferred; over > 0 {
		all, r.dropped = all[over:], r.dropped+over
	}
	r.deferred = all
}

// Row returns the journal row Record would write for the event, and
// neither logs it nor writes it: for a store that writes the row in the
// transaction of the change it records (store.Ingest.Journal). Log writes
// the event's line once that transaction has committed.
func (r *Recorder) Row(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) Event {
	e, _ := r.event(ctx, level, name, workItem, kv)
	return e
}

// Log writes the log line Record would write for the event, and no
// journal row (see Row).
func (r *Recorder) Log(ctx context.Context, level slog.Level, name Name, workItem string, kv ...any) {
	_, args := r.event(ctx, level, name, workItem, kv)
	r.log.Log(ctx, level, string(name), args...)
}

// log1 logs one event and returns its journal row.
func (r *Recorder) log1(ctx context.Context, level slog.Level, name Name, workItem string, kv []any) Event {
	e, args := r.event(ctx, level, name, workItem, kv)
	r.log.Log(ctx, level, string(name), args...)
	return e
}

// event returns the journal row of one event and the arguments of its log
// line.
func (r *Recorder) event(ctx context.Context, level slog.Level, name Name, workItem string, kv []any) (Event, []any) {
	attrs := make(map[string]string, len(kv)/2+1)
	args := make([]any, 0, len(kv)+4)
	if workItem != "" {
		args = append(args, KeyWorkItem, workItem)
	}
	if id := ReconcileID(ctx); id != "" {
		attrs[KeyReconcileID] = id
		args = append(args, KeyReconcileID, id)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := kv[i].(string)
		v := slog.AnyValue(kv[i+1]).Resolve()
		attrs[key] = v.String()
		args = append(args, key, kv[i+1])
	}
	return Event{Time: r.now(), Name: name, Level: level, WorkItem: workItem, Attrs: attrs}, args
}

// String renders the event as one line: local time, level, name, work item
// ("-" for none) and the attributes in logfmt, keys sorted.
func (e Event) String() string {
	item := e.WorkItem
	if item == "" {
		item = "-"
	}
	var b strings.Builder
	b.WriteString(e.Time.Local().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteString(" " + e.Level.String() + " " + string(e.Name) + " " + item)
	for _, k := range slices.Sorted(maps.Keys(e.Attrs)) {
		b.WriteString(" " + k + "=" + Quote(e.Attrs[k]))
	}
	return b.String()
}

// Quote returns v as a logfmt value: quoted when it is empty or holds a
// space, a quote, '=' or a control character (IsControl: C0, DEL and C1,
// which strconv.Quote then escapes, so none reaches a terminal).
func Quote(v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r == ' ' || r == '"' || r == '=' || IsControl(r) }) {
		return strconv.Quote(v)
	}
	return v
}
