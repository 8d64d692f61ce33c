package desired

import "time"

// Status is the observed state of a work item as the executor last wrote it.
// Its fields come in groups, each a struct embedded in Status, so that
// st.PaneID reads SessionState's field: the session, the deliveries in
// flight, the restart history, the host lease, the usage limits, the
// workdir and attention. The groups are embedded without a name of their
// own in JSON (the stored text) and YAML (inline), so both keep the flat
// shape of one object.
type Status struct {
	Phase Phase
	// PhaseSince is when the item entered Phase: set by the status write
	// that changed it (actions.Executor); zero for a record written before
	// loopd kept it, or never written by a pass.
	PhaseSince time.Time `json:",omitzero"`
	Reason     string    // why the item is in this phase
	// ReleasedGeneration is the Spec.ReleaseGeneration the last release
	// action carried out; a greater one is a release still to do.
	ReleasedGeneration int64
	// FreshRequested is true from a release --fresh until the next fresh
	// spawn: the item is not resumed.
	FreshRequested bool
	// QueuedAt, in PhaseQueued, is when the item entered the queue: its
	// place in it when no event is pending (reconciler, queueOrder).
	QueuedAt time.Time `json:",omitzero"`
	// ActiveSeenAt is when a park found the agent not idle on its screen
	// (a turn running, text in the input box, a dialog): its idle time
	// counts from then on (reconciler, idleSince).
	ActiveSeenAt time.Time `json:",omitzero"`

	SessionState    `yaml:",inline"`
	DeliveryState   `yaml:",inline"`
	RestartHistory  `yaml:",inline"`
	LeaseState      `yaml:",inline"`
	LimitState      `yaml:",inline"`
	WorkspaceState  `yaml:",inline"`
	AttentionState  `yaml:",inline"`
	BudgetState     `yaml:",inline"`
	AttendanceState `yaml:",inline"`
	ApprovalState   `yaml:",inline"`
}

// SessionState is the status of the item's current spawn (Status.SessionState):
// its tmux session and pane, the harness process in it, and the
// conversation it runs.
type SessionState struct {
	// HarnessSessionID is the pinned conversation id: minted at each fresh
	// spawn, kept across resumes.
	HarnessSessionID string
	// ConfirmedSessionID is the id the harness itself reported (SessionStart
	// hook, a headless run's output), or the pinned id once the
	// conversation showed the spawn's boot prompt (MarkRunning.Confirmed).
	ConfirmedSessionID string
	Session            string // tmux session name
	PaneID             string // %N of the current pane
	SpawnMode          SpawnMode
	SpawnedAt          time.Time
	ProbeDeadline      time.Time
	// SpawnDeliveryID is the delivery carried as the boot prompt of the
	// current spawn; it stays pending until its frame is seen in the
	// conversation.
	SpawnDeliveryID string
	// BootID names the current spawn's boot prompt: the executor mints it
	// with the spawn, and the prompt holds its line (BootLine). The spawn
	// is confirmed once the conversation shows the boot prompt (its
	// event's frame, or this line), and a conversation the harness chose
	// the id of is the one whose first message holds it. "" for a status
	// written before boot ids.
	BootID string `json:",omitempty"`
	// SpawnRefused, on a Spawning status with no pane, is why the spawn
	// was refused before it started (tmux, the launcher, a workdir gone):
	// a fact the next pass plans on. "" otherwise.
	SpawnRefused string
	// HarnessPID is the process of the last harness seen running in the
	// item's pane, and HarnessStart its start time (clock ticks since
	// boot, /proc/<pid>/stat field 22), which tells it from a later
	// process given the same pid. A respawn waits until that process is
	// gone, or kills it, so that two agents never run one conversation
	// (internal/proc). Zero when not known.
	HarnessPID   int    `json:",omitempty"`
	HarnessStart uint64 `json:",omitempty"`
	// HarnessNames are the names the pane's foreground process showed
	// as the harness when the current spawn started (its adapter's
	// ProcessNames then): an agent still running a command the config
	// has changed since is told from a shell left in its pane by them
	// (reconciler, harness_changed). Empty for a status written before
	// loopd kept them.
	HarnessNames []string `json:",omitempty"`
	// Sandbox is how the current spawn runs its harness: "bubblewrap",
	// in a sandbox of its own, or "none", as loopd's user with nothing
	// hidden (the route's sandbox.mode, internal/sandbox); "" before any
	// spawn.
	Sandbox string `json:",omitempty"`
	// RunID names the run of the process runner that the current spawn
	// started (internal/runner: its pid, exit and log files under the
	// state dir); "" for a tmux spawn. A later daemon finds the run, and
	// what became of it, by it.
	RunID string `json:",omitempty"`
	// ChannelToken is the SHA-256 (internal/channel.Digest) of the token
	// the current spawn was given for the item's channel: a report or a
	// request that carries another token is not from this spawn. "" for
	// a spawn that was given none (before loopd had channels).
	ChannelToken string `json:",omitempty"`
	// Respawn is true when the current spawn replaced an earlier session
	// of the item (its logs say session.respawned, not session.spawned).
	Respawn bool
	// IDUnconfirmed is true from a fresh spawn of a harness that cannot
	// start a conversation under an id chosen in advance (Codex) until
	// loopd learns the id the harness chose (docs/design.md, "Learning a
	// conversation id"); HarnessSessionID is "" meanwhile. A death in that
	// window is a fresh spawn (resume_failed reason=id_unknown), and a
	// delivery is verified only once the id is known.
	IDUnconfirmed bool `json:",omitempty"`
	// Replaced, from a fresh spawn that replaced the conversation the item
	// was in (one the harness could not resume, one the crash-loop rules
	// retired, release --fresh) until the next resume, says which, why,
	// and what the new conversation was given: one notice on the item
	// tells it (TalkRule).
	Replaced *Replacement `json:",omitempty"`
	// AmbiguousIDs are the conversations, more than one, that last fitted
	// the spawn of an id still to be learned: none was taken
	// (session.id_ambiguous, journaled once for them).
	AmbiguousIDs []string `json:",omitempty"`
}

// Replacement is a new conversation that replaced the one an item was in,
// as its fresh spawn recorded it (SessionState.Replaced).
type Replacement struct {
	// From is the conversation replaced; "" when its id was never
	// learned (a Codex agent that died before loopd learned it).
	From string
	// Why is the reason: the resume_failed reason of the fresh spawn
	// (not_resumable, transcript_missing, crash_loop, …) or "released"
	// for loopd release --fresh.
	Why string
	// Event is the delivery the new conversation booted with, "" for
	// loopd's own prompt (a nudge that says why it is new).
	Event string
	// Replayed is how many of the item's earlier events it was given
	// again (Replay), Left how many were left out for length.
	Replayed, Left int
}

// DeliveryState is the status of the item's deliveries to its live
// harness (Status.DeliveryState): the one in flight, the last found
// mangled, and when the latest reached the conversation.
type DeliveryState struct {
	// SendingDeliveryID is the delivery last pasted into the live harness
	// and not yet seen in its transcript; SentAt is when, SendAttempts how
	// many times it was sent or submitted.
	SendingDeliveryID string
	SentAt            time.Time
	SendAttempts      int
	// MangledDeliveryID is the last delivery whose frame the conversation
	// was found to hold mangled, and MangledCopies in how many messages;
	// only more copies than that are news (a send after a release).
	MangledDeliveryID string
	MangledCopies     int
	// DeliveredAt holds when the item's latest deliveries reached its
	// conversation, oldest first, those within schema.DeliveryStormWindow
	// of the latest only (Counted): the facts of the loop breaker.
	DeliveredAt []time.Time `json:",omitempty"`
}

// RestartHistory is the status of the item's recent runs
// (Status.RestartHistory): the failure counts that drive backoff and the
// crash-loop rules, the last exit, and the conversation ids those rules
// retired.
type RestartHistory struct {
	// FastFailures counts consecutive deaths within fastFailSeconds of spawn.
	FastFailures int
	// ChurnFailures counts consecutive failed runs shorter than
	// churnSeconds; maxChurnFailures of them retire the conversation id.
	// Both counts take only the harness's own exits, with the same last
	// words: LastWords is the last line the harness printed at the death
	// they last took, "" while they are zero.
	ChurnFailures int
	LastWords     string `json:",omitempty"`
	// Failures counts consecutive failed runs (crashes or failed spawns)
	// since the last healthy run; it drives backoff and the restart budget.
	Failures    int
	NextAttempt time.Time
	// LastExitStatus is the last run's exit status, nil when it had none:
	// the session was missing, or a signal ended it (LastExitSignal).
	LastExitStatus *int
	// LastExitSignal is the signal that ended the last run, 0 if none.
	LastExitSignal int
	LastExitReason string
	LastExitAt     time.Time
	// RetiredSessionIDs lists ids retired by the crash-loop rules (fast
	// failures, churn) or by release --fresh; they are never resumed
	// again. At most RetiredSessionIDsMax, newest last (Retire).
	RetiredSessionIDs []string
}

// LeaseState is the status's side of the item's host lease (Record.Lease,
// Status.LeaseState): the host that wrote it and what moved with the item
// from another host.
type LeaseState struct {
	// Host is the host whose executor wrote this status (every write sets
	// it); "" for a status written before hosts were named. An item whose
	// status another host wrote, and that had an agent or a conversation,
	// moved to this host (reconciler, the moved-item path).
	Host string `json:",omitempty"`
	// MovedFrom is the host an item's conversation last moved from, as the
	// host that took it over recorded with its transcript's restore; the
	// resume that follows tells the agent (desired.MovedPrompt).
	MovedFrom string `json:",omitempty"`
	// RestoredID is the conversation id whose stored transcript this item
	// last tried to write back (actions.RestoreTranscript), whether the
	// store held one or not; a confirmed spawn clears it. A transcript
	// missing again on the same id is then not restored again: the item
	// starts fresh (reconciler, restoreFirst), never loops.
	RestoredID string `json:",omitempty"`
}

// LimitState is the status of the usage limits the item's harness
// reported (Status.LimitState), and of the ones operators released.
type LimitState struct {
	// LimitReset is the reset of the usage limit the harness last
	// reported, and LimitUntil that reset plus the margin: until then
	// every item on the same account is held from spawns and deliveries
	// (reconciler, limitHolds). LimitDefault is true when the harness
	// named no readable reset and a bounded default stands for it.
	LimitReset   time.Time `json:",omitzero"`
	LimitUntil   time.Time `json:",omitzero"`
	LimitDefault bool      `json:",omitempty"`
	// LimitWindow is the quota the limit is of (harness.LimitWindow:
	// session, weekly, daily, per_minute; "" when the harness did not
	// say), shown by loopd get and the notice.
	LimitWindow string `json:",omitempty"`
	// LimitEpisodes counts the usage-limit episodes of the item: each
	// limit taken that is not the one in force (another text, or the same
	// banner back after the reset and the resume).
	LimitEpisodes int `json:",omitempty"`
	// LimitSeen is the usage limit the item last took, or the one its
	// screen showed when an operator released it (Released then): the
	// same limit seen again is not taken again (reconciler, limitHolds).
	LimitSeen SeenLimit `json:",omitzero"`
	// ReleasedLimits are the usage limits operators released on the item,
	// oldest first, at most MaxReleasedLimits: none of them is taken again,
	// however often the agent shows or quotes it (reconciler, newLimit).
	ReleasedLimits []SeenLimit `json:",omitempty"`
}

// WorkspaceState is the status of the item's workdir (Status.WorkspaceState):
// the one pinned at its first spawn, its preparation, and what its close
// did.
type WorkspaceState struct {
	// Workdir is the physical path (symlinks resolved) the item's first
	// spawn ran in, pinned from then on: Claude Code finds a conversation
	// to resume by it. "" before the first spawn (and for items spawned
	// before it was recorded: Spec.Cwd then stands for it, Record.Workdir).
	Workdir string
	// WorkdirRendered is the workdir the route rendered when Workdir was
	// pinned; WorkdirReported is a later rendering already reported
	// (workspace.pinned) as not applied.
	WorkdirRendered string
	WorkdirReported string
	// Workspace is what the close of the item did to its worktree:
	// WorkspaceRemoved or WorkspaceKept; "" while it is in use.
	Workspace string
	// WorkspaceError is the last failed workspace operation (the git
	// command, its exit status, the tail of its stderr, credentials
	// masked), until the workspace is ready.
	WorkspaceError string
	// PrepareStarted, in PhasePreparing, is when the preparation in flight
	// was handed to its worker; its outcome is recorded only on the status
	// that still names it (a close, a hold or a release since then wins).
	PrepareStarted time.Time
	// HeadFetch is the fetch of a pull request's new head into the item's
	// mirror, run by the item's workspace worker before the event that
	// names the commit is pasted (actions.FetchHead).
	HeadFetch HeadFetch `json:",omitzero"`
}

// AttendanceState is who attends the item's session (Status.AttendanceState;
// reconciler, attendance): a person's tmux client attached to it.
type AttendanceState struct {
	// AttendedSince is when a pass first saw a client attached to the
	// item's session; zero while no one attends it. While it is set nothing
	// is pasted, nudged or parked, and a death of the agent waits.
	AttendedSince time.Time `json:",omitzero"`
	// AttendedBy is who attached (loopd attach's mark), "" when the client
	// was attached another way.
	AttendedBy string `json:",omitempty"`
	// HandedBackAt is when the item was last handed back; HandedBackLeft
	// is true when the client stayed attached (idle past the timeout, or
	// released): the item is not attended again until the session is seen
	// with no client.
	HandedBackAt   time.Time `json:",omitzero"`
	HandedBackLeft bool      `json:",omitempty"`
	// HandBackUntold is true from a handback that found events pending
	// until the next paste, which HandBackPrompt goes before: the agent is
	// told, in one prompt, what queued while it was attended.
	HandBackUntold bool `json:",omitempty"`
}

// Attended reports whether a person attends the item's session
// (AttendanceState.AttendedSince is set).
func (s Status) Attended() bool { return !s.AttendedSince.IsZero() }

// HeadFetch is one fetch of a pull request head commit (Status.HeadFetch).
type HeadFetch struct {
	Commit string
	// Started is when the fetch was handed to its worker; the outcome is
	// recorded only on the status that still names that start.
	Started time.Time
	// Outcome is "" while the fetch runs, then HeadFetched (the mirror
	// holds the commit) or HeadFetchFailed (journaled; the event goes on:
	// the agent can fetch it itself).
	Outcome string `json:",omitempty"`
}

// The outcomes of a HeadFetch.
const (
	HeadFetched     = "fetched"
	HeadFetchFailed = "failed"
)

// AttentionState is what needs a human on the item and what loopd said
// of it on GitHub (Status.AttentionState; TalkRule).
type AttentionState struct {
	// AttentionGeneration is Spec.Generation when the item entered
	// NeedsAttention; a newer delivery clears it.
	AttentionGeneration int64
	// Announced is true once the item's first spawn was confirmed running,
	// whether or not its route announced it (Talk): no later spawn is a
	// first one.
	Announced bool `json:",omitempty"`
	// Episodes counts the item's entries into NeedsAttention, and the
	// blocked screens noticed; each is one episode, and one notice (Talk).
	Episodes int `json:",omitempty"`
	// NoticedBlock is the last blocked reason an episode was counted for
	// (TalkRule); a release clears it.
	NoticedBlock string `json:",omitempty"`
	// Screen is what the harness's pane showed when the item last needed
	// attention (a dialog's reason, or the screen class), "" if unread.
	Screen string `json:",omitempty"`
	// Blocked is what the harness's screen last showed that keeps the
	// agent from working until a human acts (a harness.Block code:
	// login_required, workspace_trust, permission_prompt, …); "" when
	// nothing does. It does not change the phase: a logged-out agent
	// still takes its events.
	Blocked string `json:",omitempty"`
}

// BlockedBy returns what keeps the item's agent waiting for a person
// (AttentionState.Blocked), "" when nothing does or the item is Stopped
// (its screen is gone): the one test of "blocked" that get, the status
// page and /metrics show.
func (s Status) BlockedBy() string {
	if s.Phase == PhaseStopped {
		return ""
	}
	return s.Blocked
}
