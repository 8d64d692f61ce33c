package journal

import (
	"slices"
	"strconv"
)

// The attribute keys of log lines, journal rows and the dry run's fields
// (actions.Field), snake_case: one key per concept, and one concept per
// key. A key that names an id of a role (resume_id, retired_session_id)
// says which role. TestKeysAreListed fails on a key written anywhere in
// loopd that is not one of these (docs/design.md, "Events").
const (
	// Every line.
	KeyWorkItem    = "work_item"    // owner/repo#number; the journal's own column
	KeyReconcileID = "reconcile_id" // the pass that wrote the line (WithReconcileID)
	KeyReason      = "reason"       // why: a reason constant of the writer
	KeyErr         = "err"          // the error met
	KeyDetail      = "detail"       // what a reason is about: a path, a harness, a session
	KeyRepeated    = "repeated"     // identical failures a Limiter folded into this line

	// The work item's session and conversation.
	KeySession            = "session"              // tmux session name, loop-<slug>
	KeyPaneID             = "pane_id"              // tmux pane id, %N
	KeyHarness            = "harness"              // harness name (a key of harnesses)
	KeyHarnessSessionID   = "harness_session_id"   // the conversation id the harness runs or reported
	KeyResumeID           = "resume_id"            // the conversation id a resume_spawn resumes
	KeyAttemptedSessionID = "attempted_session_id" // a conversation id that could not be resumed, or a rejected report's
	KeyRetiredSessionID   = "retired_session_id"   // a conversation id retired, never resumed again
	KeyFrom               = "from"                 // the conversation id follow_session leaves
	KeyCandidates         = "candidates"           // the conversation ids that fit one spawn, comma-separated (session.id_ambiguous)
	KeySource             = "source"               // SessionStart source: startup, resume, clear, compact; rollout for a learned id
	KeyMode               = "mode"                 // spawn mode: fresh or resume
	KeyResumed            = "resumed"              // a respawn resumed its conversation
	KeyConfirmed          = "confirmed"            // the spawn was confirmed by its transcript or a report
	KeyAttach             = "attach"               // the command that attaches to the session
	KeyCwd                = "cwd"                  // the item's workdir
	KeyPrompt             = "prompt"               // a boot prompt, cut for the dry run
	KeyReplay             = "replay"               // the byte bound of a fresh spawn's replay
	KeyResumeFailed       = "resume_failed"        // why a fresh spawn is not a resume
	KeyScreen             = "screen"               // what the pane's screen shows (ready, dialog, draft…)
	KeyForeground         = "foreground"           // the pane's foreground process
	KeyRelease            = "release"              // the command that releases an item
	KeyLimit              = "limit"                // a usage limit's kind: usage_limit, rate_limit, overloaded; a GitHub rate limit's: secondary, primary
	KeyReset              = "reset"                // when a usage limit resets (RFC 3339)
	KeyWindow             = "window"               // a usage limit's window: session, weekly, daily, per_minute; "" when the harness did not say
	KeyEpisode            = "episode"              // the item's count of usage-limit episodes, this one included
	KeyDefaultReset       = "default_reset"        // the reset was unreadable: a bounded default stands for it
	KeyResetCapped        = "reset_capped"         // the reset named lay past the longest hold: the bound stands for it
	KeyAccount            = "account"              // the account a harness's usage counts against
	KeyKeys               = "keys"                 // the keys sent to a pane
	KeyText               = "text"                 // the line a harness reported a limit with, cut to 200 bytes
	KeySandbox            = "sandbox"              // how a spawn runs its harness: bubblewrap, or none
	KeyTold               = "told"                 // the deliveries a handback's prompt names, oldest first
	KeyReport             = "report"               // a report's file name in an item's channel

	// Deliveries.
	KeyDelivery  = "delivery"  // a delivery id (X-GitHub-Delivery), as in the prompt's header line
	KeyDelivered = "delivered" // a delivery found delivered in the conversation
	KeyVia       = "via"       // how a delivery reached the conversation: boot_prompt, paste, transcript
	KeyVerified  = "verified"  // the delivery was seen in the transcript
	KeyCopies    = "copies"    // damaged copies of an event in the conversation
	KeyRetry     = "retry"     // a paste follows an earlier one
	KeyRepaste   = "repaste"   // the paste is sent again, not only submitted
	KeyBytes     = "bytes"     // size of a paste or of a transcript, in bytes
	KeyAttempt   = "attempt"   // which try of a paste this is
	KeyPending   = "pending"   // how many events wait

	// Deaths and the restart decision.
	KeyExitStatus    = "exit_status"    // the pane's exit status, -1 when unknown
	KeyExitCause     = "exit_cause"     // what the harness's exit status means (harness.ExitCause: auth_missing, session_error)
	KeySignal        = "signal"         // the signal that ended the pane (then no exit_status)
	KeyOutput        = "output"         // a dead pane's last lines, bounded and sanitized (tmux.Tail)
	KeyClean         = "clean"          // the exit counts as clean
	KeyPhase         = "phase"          // the phase the item moves to
	KeyFailures      = "failures"       // consecutive failed runs
	KeyFastFailures  = "fast_failures"  // consecutive fast failures
	KeyChurnFailures = "churn_failures" // consecutive churn failures
	KeyRetire        = "retire"         // why the conversation id is retired: fast_failures or churn
	KeyNextAttempt   = "next_attempt"   // when the next spawn may run (RFC 3339)
	KeyDelay         = "delay"          // the backoff before that spawn (a Go duration)
	KeyUntil         = "until"          // when a wait ends (RFC 3339)
	KeyGeneration    = "generation"     // the release generation carried out
	KeyFields        = "fields"         // the status fields clock.bounded brought back
	KeyFresh         = "fresh"          // a release asks for a new conversation

	// Workspaces (the workdir is KeyCwd).
	KeyConfigCwd        = "config_cwd"         // the workdir the current route renders, not applied to a pinned item
	KeyURL              = "url"                // a repository's URL, credentials masked
	KeyBranch           = "branch"             // the branch a workdir is on
	KeyBase             = "base"               // the remote branch an issue branch starts from
	KeyCommit           = "commit"             // a commit: a workdir's HEAD, a push's new head
	KeyExisting         = "existing"           // the workdir already was a clone, used as it is
	KeyRepaired         = "repaired"           // what a kill left in or beside the workdir was removed or finished
	KeyRepairs          = "repairs"            // what a repair removed or finished, one text each, "; " between
	KeyMigrated         = "migrated"           // an older loopd's worktree was made a clone in place
	KeyClass            = "class"              // a failure's class: transient or permanent
	KeyOp               = "op"                 // an operation: the workspace one that failed (fetch, clone, mkdir…), a channel request's (git, token)
	KeyCommand          = "command"            // the git command that failed, URLs masked
	KeyStderr           = "stderr"             // the last lines of a command's stderr, masked
	KeyFailuresOnError  = "failures_on_error"  // the failure count a failed prepare_workspace records
	KeyOnTransientError = "on_transient_error" // give_up: a transient failure gives up (the budget is spent)
	KeyRetryAfter       = "retry_after"        // the backoff a failure waits, from when it happens (a duration)

	// Webhook deliveries.
	KeyEvent         = "event"          // X-GitHub-Event, e.g. issue_comment
	KeyPayloadAction = "payload_action" // the payload's action, e.g. created
	KeySender        = "sender"         // the sender's GitHub login
	KeyRemoteAddr    = "remote_addr"    // the client's address
	KeyQueued        = "queued"         // the delivery queued an event
	KeyCreated       = "created"        // the delivery created the work item
	KeyClosed        = "closed"         // the item's state after the delivery
	KeyStateChanged  = "state_changed"  // the delivery changed the item's state
	KeyStaleState    = "stale_state"    // the delivery's state was older than the recorded one
	KeyCICollected   = "ci_collected"   // a check's failure was recorded with its commit's checks
	KeyCIReady       = "ci_ready"       // every check of the commit seen has completed: its prompt goes now
	KeyFailedChecks  = "failed_checks"  // the failed checks a commit's one prompt names
	KeyBudgetRaise   = "budget_raise"   // tokens an authorized comment or loopd release --budget added to an item's budget

	// Token budgets (docs/design.md, "Budgets").
	KeyBudgetUsed  = "budget_used"  // weighted tokens the item used of the budget that stopped it
	KeyBudgetLimit = "budget_limit" // that budget, raises included
	KeyBudgetWhich = "budget_which" // which budget: window or total
	KeyTokens      = "tokens"       // the tokens counted, by kind: input=… output=… cache_write=… cache_read=…

	// Calls to GitHub's REST API (the outbox).
	KeyCall         = "call"         // what a call does: announce, react or notify
	KeyCallID       = "call_id"      // a call's id in the outbox
	KeyHTTPStatus   = "http_status"  // GitHub's HTTP status code, 0 when none came
	KeyAttempts     = "attempts"     // the tries of a call so far
	KeyFound        = "found"        // the comment was already on GitHub (its marker was found)
	KeyLogin        = "login"        // a GitHub login
	KeyAPIURL       = "api_url"      // GitHub's REST API base URL
	KeyInstallation = "installation" // whose rate limits a call counts against: "installation <id>" or "token"
	KeyPause        = "pause"        // how long an installation's calls pause (a duration)
	KeyStreak       = "streak"       // rate limits met in a row without a write going through
	KeyCredentials  = "credentials"  // what credential a route's agents get: app, token or none (agentCredentials)
	KeyRepository   = "repository"   // owner/repo a credential is for
	KeyExpires      = "expires"      // when a credential handed to an agent stops working (RFC 3339)

	// The daemon.
	KeyAction          = "action"           // a planned action's name, as in the dry run
	KeyName            = "name"             // the event name whose journal row was lost
	KeyPath            = "path"             // a file: the config, a transcript
	KeyRestartRequired = "restart_required" // config keys whose change needs a restart
	KeyAddr            = "addr"             // the address serve listens on
	KeyWebhookPath     = "webhook_path"     // the URL path of the webhook
	KeySocket          = "socket"           // the tmux -L socket
	KeyStateDir        = "state_dir"        // loopd's state dir
	KeyAdopted         = "adopted"          // live agents a start found on its server and watches again (serve.adopted)
	KeyModeWas         = "mode_was"         // a file's permission bits before loopd tightened them, octal
	KeyModeNow         = "mode_now"         // the same file's bits after, octal
	KeyCommands        = "commands"         // the tmux commands of one invocation
	KeyDuration        = "duration"         // how long a tmux invocation took
	KeyDeferred        = "deferred"         // a row RecordLater kept for Flush
	KeyDropped         = "dropped"          // deferred rows dropped over MaxDeferred

	// Agents lost together (tmux.server_lost, tmux.outage).
	KeyItems = "items" // work items resumed as not crashed
	KeyLive  = "live"  // agents expected live in the pass; items holding a slot (session.queued)
	KeyDown  = "down"  // of them, those found dead or missing
	KeyPID   = "pid"   // a process id: the harness a spawn waited for or killed

	// Hosts and leases (lease.*, host.*).
	KeyHost           = "host"             // a host's name (host.name)
	KeyFromHost       = "from_host"        // the host an item's lease or conversation moved from
	KeyToHost         = "to_host"          // the host an item's lease or conversation moved to
	KeyLeaseGen       = "lease_generation" // an item's lease fencing generation
	KeyDraining       = "draining"         // the host is set draining (loopd drain)
	KeyLeaseRemaining = "lease_remaining"  // how long this host's lease clock stays valid (a duration)
	KeyStore          = "store"            // the store: "sqlite", or the PostgreSQL URL with its password redacted
	KeyDownFor        = "down_for"         // how long the store was out of reach (a duration)

	// Capacity (session.queued, session.parked, the dry run's queue).
	KeyPosition  = "position"   // an item's place in the queue, 1 first
	KeyMaxLive   = "max_live"   // capacity.maxLiveSessions, 0 for no limit
	KeyStarts    = "starts"     // starts in flight (reconciler startInFlight) once the pass is done
	KeyMaxStarts = "max_starts" // capacity.maxStartsInFlight
	KeyIdleFor   = "idle_for"   // how long a parked agent had been idle (a duration)

	// Transcript copies (transcript.ship_failed, transcript.restored).
	KeyStored = "stored" // bytes of an item's transcript the store holds
	KeyKept   = "kept"   // a local transcript at least as long as the stored copy was kept

	// The process runner (routing.repos.<key>.runner: process).
	KeyRunner  = "runner"  // how an item's agent runs: tmux or process
	KeyRun     = "run"     // a run's id, which names its files under the state dir
	KeyLog     = "log"     // a run's log file
	KeyTimeout = "timeout" // a route's dispatchTimeoutSeconds (a duration)
	KeyKilled  = "killed"  // a run outlived SIGTERM and was killed with SIGKILL

	// A workdir's own harness settings (routing.repos.<key>.projectSettings).
	KeyProjectSettings = "project_settings" // whether a spawn lets the harness read its workdir's own settings

	// Retention (journal.pruned, item.forgotten).
	KeyRows       = "rows"        // journal rows deleted
	KeyBefore     = "before"      // the bound a prune deleted the rows before (RFC 3339)
	KeyFreedBytes = "freed_bytes" // bytes the store gave back to the file system
	KeyWorkspace  = "workspace"   // what became of a forgotten item's workdir: removed, kept or none

	// Approvals from GitHub (docs/design.md, "Approvals").
	KeyQuestionID = "question_id" // the id of a question of an item's agent posted on GitHub: q1, q2, …
	KeyChoice     = "choice"      // the number of the choice an answer picks
	KeyAnswer     = "answer"      // the label of the choice an answer picks, or "words" for a person's own words
	KeyTitle      = "title"       // a question's title line, as the screen shows it (cut to 200 bytes)

	// Takeover and handback (item.attended, item.handed_back).
	KeyBy          = "by"           // who attached to the item's session (loopd attach), "" when tmux did not say
	KeySince       = "since"        // when a person attached (RFC 3339)
	KeyAttendedFor = "attended_for" // how long the item was attended (a duration)
	KeyHow         = "how"          // how the item was handed back: detached, idle or released
	KeyDeliveries  = "deliveries"   // the pending deliveries at the handback, oldest first, comma-separated
)

// The keys whose values are integers and booleans: events -o json gives
// them as JSON numbers and booleans (Typed); every other value is text.
var (
	intKeys = []string{KeyRepeated, KeyReplay, KeyBytes, KeyAttempt, KeyPending, KeyExitStatus, KeySignal, KeyFailures,
		KeyFastFailures, KeyChurnFailures, KeyGeneration, KeyFailuresOnError, KeyHTTPStatus, KeyAttempts, KeyStreak,
		KeyAdopted, KeyDropped, KeyItems, KeyLive, KeyPID, KeyLeaseGen, KeyPosition, KeyMaxLive, KeyStarts, KeyMaxStarts,
		KeyStored, KeyRows, KeyFreedBytes, KeyBudgetRaise, KeyBudgetUsed, KeyBudgetLimit, KeyChoice}
	boolKeys = []string{KeyResumed, KeyConfirmed, KeyVerified, KeyClean, KeyFresh, KeyQueued, KeyCreated, KeyClosed,
		KeyStateChanged, KeyStaleState, KeyKept, KeyKilled, KeyProjectSettings}
)

// Typed returns the value of attribute key as JSON has it: an int64 for
// a key of a count, a size, a status or a process id, a bool for a key of
// a yes or no, and value itself for any other key or a value that does
// not parse as its key's type.
func Typed(key, value string) any {
	switch {
	case slices.Contains(intKeys, key):
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			return n
		}
	case slices.Contains(boolKeys, key):
		if b, err := strconv.ParseBool(value); err == nil {
			return b
		}
	}
	return value
}
