// Package actions holds the typed actions the planner emits and the executor
// that carries them out against tmux and the store.
//
// Each action is a value with a String() in logfmt that uses the same keys as
// the log, so a dry run reads in the vocabulary the executor runs, e.g.
//
//	resume_spawn work_item=acme/api#42 session=loop-acme-api-42 resume_id=7f3c… reason=pane_dead
package actions

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/sandbox"
	"github.com/loopd/loopd/internal/workspace"
)

// Reason says why an action was planned. The values are constants so that the
// dry run, the journal and the tests share one vocabulary.
type Reason string

// Environment reports whether r, the reason a spawn was refused, says that
// loopd could not make the harness's environment (provision_failed,
// sandbox_failed), not that the conversation failed: nothing of it was
// tried, and a resume keeps it.
func (r Reason) Environment() bool { return r == ReasonProvisionFailed || r == ReasonSandboxFailed }

// Why an item is spawned, stopped, waited on or given up.
const (
	ReasonNewEvent         Reason = "new_event"         // a pending delivery and no live pane
	ReasonPaneDead         Reason = "pane_dead"         // self-heal after a crash
	ReasonExitedAlways     Reason = "exited_always"     // restartPolicy Always after a clean exit
	ReasonSessionMissing   Reason = "session_missing"   // the tmux session vanished
	ReasonSpawnInterrupted Reason = "spawn_interrupted" // the daemon died between recording and starting a spawn
	ReasonResumeFailed     Reason = "resume_failed"     // fresh fallback after a failed resume
	ReasonClosed           Reason = "closed"            // the work item was closed
	ReasonHeld             Reason = "held"              // loopd hold
	ReasonProbing          Reason = "probing"           // inside the probe window
	ReasonAwaitingConfirm  Reason = "awaiting_confirmation"
	ReasonUnconfirmed      Reason = "resume_unconfirmed" // alive but never confirmed (a dialog?)
	ReasonSpawnUnconfirmed Reason = "spawn_unconfirmed"  // a fresh spawn's prompt never reached the transcript
	ReasonStatusPending    Reason = "exit_status_pending"
	ReasonBackoff          Reason = "backoff"
	ReasonNeedsAttention   Reason = "needs_attention"
	ReasonBudgetExhausted  Reason = "restart_budget_exhausted"
	ReasonCleanExit        Reason = "clean_exit"
	ReasonCrash            Reason = "crash"
	ReasonSpawnDied        Reason = "spawn_died" // a fresh spawn died before it ran
	// ReasonHarnessExitedAtOnce: a fresh spawn's harness exited by itself
	// within fastFailSeconds, before its conversation started (no
	// transcript, no prompt landed): a command that fails at once
	// (/bin/false, a binary missing inside the sandbox, a CLI that
	// refuses its flags). Its id is used again, never retired; after
	// maxFastFailures such exits in a row the item needs attention.
	ReasonHarnessExitedAtOnce Reason = "harness_exited_at_once"
	ReasonPolicyNever         Reason = "restart_policy_never"
	ReasonConfirmed           Reason = "confirmed"
	ReasonAlive               Reason = "alive_at_deadline"
	ReasonAdopted             Reason = "adopted" // a live pane the record did not know
	// ReasonOrphanAgent: a live agent on the item's session whose
	// conversation the record does not know (its store was removed or
	// reset under running agents), under a harness that keeps
	// conversations: no paste to it could be checked and it cannot be
	// resumed, so a fresh spawn carrying the item's events replaces it.
	ReasonOrphanAgent Reason = "orphan_agent"
	// ReasonUnblocked: a spawn that needed attention because its boot
	// prompt was never seen (a dialog held it) runs: a person answered
	// the dialog, and the screen is ready.
	ReasonUnblocked        Reason = "unblocked"
	ReasonWorkspaceMissing Reason = "workspace_missing"
	ReasonHarnessUnknown   Reason = "harness_unknown"
	// ReasonHarnessMissing: the harness's command cannot be found or run
	// (harness.LookCommand); nothing is spawned until it can.
	ReasonHarnessMissing   Reason = "harness_missing"
	ReasonAwaitingStart    Reason = "awaiting_harness_start" // no session-start report yet
	ReasonAwaitingDelivery Reason = "awaiting_delivery"      // pasted, not yet in the transcript
	ReasonUnconfirmedSend  Reason = "delivery_unconfirmed"   // never showed in the transcript
	ReasonDeliveryMangled  Reason = "delivery_mangled"       // reached the transcript, not whole
	// ReasonPasteNotShown: a paste did not show in the input box within
	// Executor.PasteWait, and got no Enter.
	ReasonPasteNotShown Reason = "paste_not_shown"
	// ReasonSessionForeign: the session of the item's name carries another
	// loopd's owner mark, or none; loopd never touches it.
	ReasonSessionForeign Reason = "session_foreign"
	// ReasonForegroundNotHarness: the pane lives but its foreground process
	// is not the harness (a shell the CLI left behind): a dead agent.
	ReasonForegroundNotHarness Reason = "foreground_not_harness"
	// ReasonSpawnRefused: tmux (or the launcher, or a workdir gone since
	// the plan) refused a spawn; the executor records the refusal and the
	// next pass decides what follows.
	ReasonSpawnRefused Reason = "spawn_refused"
	// ReasonReleased: loopd release.
	ReasonReleased Reason = "released"
	// ReasonFirstSpawn: the workspace is made before the item's first
	// spawn; ReasonWorkspaceRemoved: again for a reopened item whose
	// clone was removed at its close; ReasonWorkspacePartial: a
	// worktree a killed `git worktree add` left half-made is finished;
	// ReasonWorkspaceLegacy: a worktree of the mirror an older loopd made
	// is migrated to a clone; ReasonWorkspaceLeftover: what a killed git
	// left in the clone (a lock file no git holds) is removed. With a
	// checkout, ReasonWorkspaceMissing prepares too: the clone of an item
	// that had a conversation vanished, and is made again at the same
	// path; without one, the item needs attention.
	ReasonFirstSpawn        Reason = "first_spawn"
	ReasonWorkspaceRemoved  Reason = "workspace_removed"
	ReasonWorkspacePartial  Reason = "workspace_partial"
	ReasonWorkspaceLegacy   Reason = "workspace_legacy"
	ReasonWorkspaceLeftover Reason = "workspace_leftover"
	// ReasonWorkspaceFailed: the workspace could not be made (a git
	// command or the workdir's creation failed), or its workdir template
	// did not render.
	ReasonWorkspaceFailed Reason = "workspace_failed"
	// ReasonWorkspaceConflict: the workdir exists with files in it and is
	// not a clone of the routed repository; it is never touched.
	ReasonWorkspaceConflict Reason = "workspace_conflict"
	// ReasonHeadFetchFailed: a pull request's new head could not be
	// fetched into the item's mirror before the agent was told of it
	// (FetchHead); the event is delivered all the same.
	ReasonHeadFetchFailed Reason = "head_fetch_failed"
	// ReasonServerLost: the tmux server the agent ran on is gone (killed,
	// OOM-killed, its socket deleted); the agent is resumed on a new
	// server, and its death is not counted as a crash.
	ReasonServerLost Reason = "server_lost"
	// ReasonOutage: most of the agents died in one pass (more than half of
	// at least reconciler.OutageMinLive); each is resumed, and its death
	// is not counted as a crash.
	ReasonOutage Reason = "outage"
	// ReasonHarnessChanged: the agent runs on, but as the command of its
	// harness before the config changed it (the pane shows a name of
	// Status.HarnessNames, not one of the harness's now): the operator's
	// change, not the agent's death. It is resumed on its conversation
	// with the new command at once, and nothing is counted.
	ReasonHarnessChanged Reason = "harness_changed"
	// ReasonPredecessorRunning: the previous harness of the item outlived
	// SIGKILL; the spawn waits for the next pass rather than run a second
	// agent on the conversation.
	ReasonPredecessorRunning Reason = "predecessor_running"
	// ReasonProcessGroupRunning: a process of the pane's group outlived
	// SIGKILL when loopd stopped a harness that stops by process group;
	// the session is kept, and the stop is tried again.
	ReasonProcessGroupRunning Reason = "process_group_running"
	// ReasonProvisionFailed: the settings the harness needs in its config
	// dir (harness.Provisioner) could not be written; the spawn is
	// refused, as any refused spawn.
	ReasonProvisionFailed Reason = "provision_failed"
	// ReasonSandboxFailed: the spawn's sandbox could not be made (bwrap
	// missing or unable to make namespaces, the harness or a bind not
	// found, the item's harness state not ready); the spawn is refused
	// as for provision_failed: nothing was tried of the conversation.
	ReasonSandboxFailed Reason = "sandbox_failed"
	// ReasonWorkspacePreparing: a worker is making the item's clone
	// (the mirror's lock is held); its outcome wakes a pass.
	ReasonWorkspacePreparing Reason = "workspace_preparing"
	// ReasonHeadFetching: the item's worker is fetching the new head an
	// event names (FetchHead); its outcome wakes a pass, which pastes the
	// event.
	ReasonHeadFetching Reason = "head_fetching"
	// ReasonWorkspaceInterrupted: a preparation ended with no outcome
	// recorded (the daemon stopped, or was killed, while it ran); it is
	// made again, with no failure counted.
	ReasonWorkspaceInterrupted Reason = "workspace_interrupted"
	// ReasonWorkspaceReady: the clone was made or repaired; the spawn
	// follows.
	ReasonWorkspaceReady Reason = "workspace_ready"
	// ReasonDeliveryStorm: the loop breaker; one more delivery would pass
	// the route's maxDeliveriesPerHour. Only loopd release clears it.
	ReasonDeliveryStorm Reason = desired.ReasonDeliveryStorm
	// ReasonOwnPush: a push whose new head the item's workdir already
	// holds is the agent's own; it is dropped, never sent.
	ReasonOwnPush Reason = "own_push"
	// ReasonRunDone: a run of the process runner ended with its event in
	// the conversation, whatever its exit status: a turn done.
	ReasonRunDone Reason = "run_done"
	// ReasonRunFailed: a run ended without its event in the
	// conversation; the event stays pending and the failure counts.
	ReasonRunFailed Reason = "run_failed"
	// ReasonRunInFlight: a run is under way; the next pass looks again.
	ReasonRunInFlight Reason = "run_in_flight"
	// ReasonDispatchTimeout: a run outlived its route's
	// dispatchTimeoutSeconds and is ended with its process group.
	ReasonDispatchTimeout Reason = "dispatch_timeout"
	// ReasonNothingToRun: a process-runner item with no run and no event
	// rests until its next event.
	ReasonNothingToRun Reason = "nothing_to_run"
	// ReasonNotHeadless: the route runs its agents as processes, and the
	// harness's adapter has no headless form.
	ReasonNotHeadless Reason = "harness_not_headless"
	// ReasonConversationInUse: the harness refused to resume the
	// conversation because it runs elsewhere (harness.RefusalInUse:
	// Claude Code's background agent). The item waits for a human; no
	// new conversation replaces one that is not lost.
	ReasonConversationInUse Reason = "conversation_in_use"
	// ReasonPromptUnreadable: the store could not give the prompt of the
	// delivery about to be sent or booted with (store.Store.Prompt);
	// nothing was sent, and the next pass tries again.
	ReasonPromptUnreadable Reason = "prompt_unreadable"
)

// Why an item whose harness cannot pin its conversation id (Codex) waits.
const (
	// ReasonAwaitingSessionID: loopd has not learned the conversation id
	// yet: the spawn is not confirmed, and no delivery verified, until
	// then.
	ReasonAwaitingSessionID Reason = "awaiting_session_id"
	// ReasonSessionLearned: the pass learned the conversation id; the
	// item's transcript is read by the next pass, a poll period later.
	ReasonSessionLearned Reason = "session_id_learned"
	// ReasonIDAmbiguous: more than one conversation fits the spawn; none
	// is taken, and the id stays unknown.
	ReasonIDAmbiguous Reason = "id_ambiguous"
)

// How a delivery was confirmed, the via of dispatch.delivered.
const (
	// ViaPaste: the paste in flight showed in the transcript.
	ViaPaste = "paste"
	// ViaTranscript: the event was found in the conversation before loopd
	// sent it (again): it is not sent.
	ViaTranscript = "transcript"
)

// Why a resume was not attempted or did not hold; logged with
// session.resume_failed (docs/design.md, "Choosing resume or fresh").
const (
	ResumeInvalidID         Reason = "invalid_session_id"
	ResumeUnsupported       Reason = "unsupported_harness"
	ResumeCrashLoop         Reason = "crash_loop"
	ResumeTranscriptMissing Reason = "transcript_missing"
	// ResumeNotResumable: the harness said itself that it cannot resume
	// the conversation (harness.RefusalNotResumable: its own message or
	// exit status, on a dead pane's last words, a live screen or a run's
	// output). No other death abandons a conversation.
	ResumeNotResumable Reason = "not_resumable"
	// ResumeIDUnknown: the harness cannot pin its conversation id and the
	// agent died before loopd learned it, so there is no id to resume.
	ResumeIDUnknown Reason = "id_unknown"
	// ResumeChooser: the resume opened a screen that chooses instead of
	// resuming (Codex's "Working directory · resume" chooser, a picker);
	// loopd never answers it.
	ResumeChooser Reason = "resume_chooser"
)

// SourceRollout is the source of a FollowSession for a conversation id
// loopd learned from the rollout file the harness wrote (Codex), not one
// the harness reported.
const SourceRollout = "rollout"

// Action is one planned step for one work item.
type Action interface {
	// Item is the work item the action is for.
	Item() desired.Key
	// Name is the action's snake_case name, e.g. "resume_spawn".
	Name() string
	// Fields returns the action's attributes in a stable order, keys in
	// snake_case as in the log; String and the JSON dry run use them.
	Fields() []Field
	// Mutates reports whether executing the action changes tmux or the
	// store (Wait does not).
	Mutates() bool
	fmt.Stringer
}

// Field is one key and value of an action. Value is typed: a string, an
// int, an int64, a bool, a time.Time or a time.Duration. Text renders it
// for the log and the text dry run, Data for the JSON and YAML dry run.
type Field struct {
	Key   string
	Value any
}

// Text returns f's value as the log and the text dry run write it: a
// number in decimal, a bool as true or false, a time in UTC as RFC 3339
// with the fraction of a second it has (time.RFC3339Nano), a duration as
// Go writes it ("1m30s", time.Duration.String).
func (f Field) Text() string {
	switch v := f.Value.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case time.Duration:
		return v.String()
	default:
		return fmt.Sprint(v)
	}
}

// Data returns f's value as the JSON and YAML dry run carry it: strings,
// numbers and booleans as themselves, a time as Text writes it (RFC 3339
// in UTC, a string), a duration as Text writes it ("30s", a string, as
// Kubernetes' metav1.Duration does).
func (f Field) Data() any {
	switch v := f.Value.(type) {
	case string, int, int64, bool:
		return v
	default:
		return f.Text()
	}
}

// Format renders a's name and fields in logfmt (FormatFields).
func Format(a Action) string { return FormatFields(a.Name(), a.Fields()) }

// FormatFields renders name and fields in logfmt: values with spaces,
// quotes or '=' are quoted. The dry run writes a queued GitHub call so too.
func FormatFields(name string, fields []Field) string {
	var b strings.Builder
	b.WriteString(name)
	for _, f := range fields {
		b.WriteByte(' ')
		b.WriteString(f.Key)
		b.WriteByte('=')
		b.WriteString(journal.Quote(f.Text()))
	}
	return b.String()
}

// Spawn is what FreshSpawn and ResumeSpawn share: where the harness runs and
// which prompt it boots with.
type Spawn struct {
	Key     desired.Key
	Session string
	Harness string
	Cwd     string
	// DeliveryID is the delivery carried as the boot prompt, "" for a
	// self-heal nudge or when the event is too long for argv and will be
	// pasted once the harness runs. The plan holds no prompt bodies: the
	// executor reads the delivery's (store.Store.Prompt).
	DeliveryID string
	// Prompt is the boot prompt loopd wrote itself (a nudge, a long
	// event's header line, a limit reset), "" with a DeliveryID.
	Prompt string
	// Probe is the probe window: the spawn is judged at SpawnedAt + Probe.
	Probe time.Duration
	// Respawn is true when the item had a session before.
	Respawn bool
	// Replay, when positive, is the bound in bytes of the replay of the
	// item's history (desired.Replay) that the executor puts before Prompt:
	// a fresh spawn that replaces a conversation carries the work, not only
	// a pointer to it.
	Replay int
	// Runner is schema.RunnerProcess for a headless run of the harness
	// (the event its prompt, whole), "" for a pane in tmux.
	Runner string
	// NoSandbox is true when the route's sandbox.mode is none: the
	// harness runs as loopd's user with nothing hidden. Binds are the
	// route's sandbox.binds, shown in the sandbox otherwise.
	NoSandbox bool
	Binds     []sandbox.Bind
	// ProjectSettings is true when the harness may read the settings its
	// workdir holds itself (reconciler.ProjectSettingsOf); false starts it
	// with them off (harness.WithProjectSettings).
	ProjectSettings bool
	Reason          Reason
	// Told are the deliveries the prompt names when it is the handback's
	// (desired.HandBackPrompt): the spawn tells what queued while a person
	// attended the item, and they are pasted after it.
	Told []string
}

func (s Spawn) base() []Field {
	return []Field{{"work_item", s.Key.String()}, {"session", s.Session}, {"harness", s.Harness}}
}

func (s Spawn) tail() []Field {
	f := []Field{{"cwd", s.Cwd}}
	if s.DeliveryID != "" {
		f = append(f, Field{"delivery", s.DeliveryID})
	} else {
		f = append(f, Field{"prompt", "nudge"})
	}
	if s.Replay > 0 {
		f = append(f, Field{"replay", s.Replay})
	}
	if len(s.Told) > 0 {
		f = append(f, Field{journal.KeyTold, strings.Join(s.Told, ",")})
	}
	if s.Runner != "" {
		f = append(f, Field{"runner", s.Runner})
	}
	if s.NoSandbox {
		f = append(f, Field{journal.KeySandbox, sandbox.ModeNone})
	}
	if s.ProjectSettings {
		f = append(f, Field{"project_settings", "trusted"})
	}
	return append(f, Field{"reason", string(s.Reason)})
}

// Apply returns st with the spawn recorded as the executor writes it
// before it starts the harness: Spawning in conversation id (mode fresh or
// resume) at now, with no pane yet, DeliveryID carried as its boot prompt,
// boot the boot id its prompt names (desired.BootLine), the workdir pinned
// to Cwd at the item's first spawn (the executor pins the physical path),
// and a new run id for a spawn of the process runner.
func (s Spawn) Apply(st desired.Status, mode desired.SpawnMode, id, boot string, now time.Time) desired.Status {
	st = st.Carry(s.DeliveryID)
	st.BootID = boot
	st.Phase = desired.PhaseSpawning
	st.Session = s.Session
	st.PaneID = ""
	st.HarnessSessionID = id
	st.ConfirmedSessionID = ""
	// Only a fresh spawn without an id leaves it to be learned.
	st.IDUnconfirmed = id == ""
	st.SpawnMode = mode
	st.SpawnedAt = now
	st.ProbeDeadline = now.Add(s.Probe)
	st.SpawnRefused = ""
	st.Blocked = "" // the new agent's screen says again
	st.Respawn = s.Respawn
	if len(s.Told) > 0 {
		st.HandBackUntold = false
	}
	if mode == desired.SpawnFresh {
		st.FreshRequested = false
	}
	st.Reason = string(s.Reason)
	if st.Workdir == "" {
		// The conversation starts here: its workdir is pinned.
		st.Workdir, st.WorkdirRendered = s.Cwd, s.Cwd
	}
	if st.Workspace == desired.WorkspaceKept {
		st.Workspace = "" // a reopened item uses its kept clone again
	}
	st.RunID = ""
	if s.Runner != "" {
		st.RunID = runID(now)
	}
	return st
}

// FreshSpawn starts a new conversation under a newly minted session id,
// or, for a harness that cannot pin one (Unpinned), under the id the
// harness chooses, which loopd learns after the spawn.
type FreshSpawn struct {
	Spawn
	// Unpinned is true when the harness cannot start a conversation under
	// an id chosen in advance (harness.SessionLearner): the spawn records
	// no id, and the item's id is unconfirmed until learned.
	Unpinned bool
	// ResumeFailed, when set, is why this fresh spawn replaces a resume;
	// the executor logs session.resume_failed with AttemptedID.
	ResumeFailed Reason
	AttemptedID  string
	// SessionID, when set, is the id to pin instead of a new one: the
	// item's id, whose spawn exited at once before its conversation
	// started (ReasonHarnessExitedAtOnce), so that it was never used.
	SessionID string
	// Instructions are the route's standing instructions, which a new
	// conversation gets in its boot prompt (desired.WithInstructions);
	// "" for none.
	Instructions string
}

// Item implements Action.
func (a FreshSpawn) Item() desired.Key { return a.Key }

// Name implements Action.
func (FreshSpawn) Name() string { return "fresh_spawn" }

// Mutates implements Action.
func (FreshSpawn) Mutates() bool { return true }

// Fields implements Action.
func (a FreshSpawn) Fields() []Field {
	f := a.base()
	if a.ResumeFailed != "" {
		f = append(f, Field{"attempted_session_id", a.AttemptedID}, Field{"resume_failed", string(a.ResumeFailed)})
	}
	if a.Unpinned {
		f = append(f, Field{"harness_session_id", "unconfirmed"})
	}
	if a.SessionID != "" {
		f = append(f, Field{"harness_session_id", a.SessionID})
	}
	return append(f, a.tail()...)
}

func (a FreshSpawn) String() string { return Format(a) }

// ResumeSpawn resumes the recorded conversation ResumeID in the recorded cwd.
type ResumeSpawn struct {
	Spawn
	ResumeID string
}

// Item implements Action.
func (a ResumeSpawn) Item() desired.Key { return a.Key }

// Name implements Action.
func (ResumeSpawn) Name() string { return "resume_spawn" }

// Mutates implements Action.
func (ResumeSpawn) Mutates() bool { return true }

// Fields implements Action.
func (a ResumeSpawn) Fields() []Field {
	return append(append(a.base(), Field{"resume_id", a.ResumeID}), a.tail()...)
}

func (a ResumeSpawn) String() string { return Format(a) }

// DeliverPrompt pastes a pending delivery into the live harness, once its
// screen shows it is ready. The delivery stays pending until its id shows in
// the transcript (ConfirmDelivery). The executor reads its prompt from the
// store (store.Store.Prompt) for the paste: the plan holds no bodies.
type DeliverPrompt struct {
	Key        desired.Key
	Session    string
	PaneID     string
	DeliveryID string
	// Retry is true when an earlier send has not reached the transcript:
	// the executor submits text left in the input box. Repaste allows it,
	// once DeliveryConfirm has passed, to paste again into an empty box.
	Retry   bool
	Repaste bool
	// Preamble is loopd's own text pasted before the event, outside its
	// frame (desired.HandBackPrompt after a handback), "" for none; Told
	// are the deliveries it names. A retry pastes none.
	Preamble string
	Told     []string
}

// FetchHead fetches the new head of a pull request an event names (a
// synchronize's Commit) into the mirror of its repository (URL, as the
// route renders it; may carry credentials), whose objects the item's
// clone borrows (workspace.Manager.FetchHead), before DeliveryID is
// pasted. The item's workspace worker runs it, outside the pass
// (desired.Status.HeadFetch); the delivery is planned once it is done or
// failed.
type FetchHead struct {
	Key        desired.Key
	DeliveryID string
	URL        string
	PR         int
	Commit     string
}

// Item implements Action.
func (a FetchHead) Item() desired.Key { return a.Key }

// Name implements Action.
func (FetchHead) Name() string { return "fetch_head" }

// Mutates implements Action.
func (FetchHead) Mutates() bool { return true }

// Fields implements Action.
func (a FetchHead) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeyDelivery, a.DeliveryID},
		{journal.KeyURL, workspace.Mask(a.URL)}, {journal.KeyCommit, a.Commit}}
}

func (a FetchHead) String() string { return Format(a) }

// Item implements Action.
func (a DeliverPrompt) Item() desired.Key { return a.Key }

// Name implements Action.
func (DeliverPrompt) Name() string { return "deliver_prompt" }

// Mutates implements Action.
func (DeliverPrompt) Mutates() bool { return true }

// Fields implements Action.
func (a DeliverPrompt) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"pane_id", a.PaneID}, {"delivery", a.DeliveryID}}
	if a.Retry {
		f = append(f, Field{"retry", true}, Field{"repaste", a.Repaste})
	}
	if a.Preamble != "" {
		f = append(f, Field{journal.KeyTold, strings.Join(a.Told, ",")})
	}
	return f
}

// ConfirmDelivery marks a delivery delivered: its whole frame showed in
// the transcript (Verified), or the harness has no transcript to look in.
// Via says whether it was the paste in flight (ViaPaste) or an event found
// in the conversation before it was sent (ViaTranscript).
type ConfirmDelivery struct {
	Key        desired.Key
	Session    string
	DeliveryID string
	Verified   bool
	Via        string
}

// Item implements Action.
func (a ConfirmDelivery) Item() desired.Key { return a.Key }

// Name implements Action.
func (ConfirmDelivery) Name() string { return "confirm_delivery" }

// Mutates implements Action.
func (ConfirmDelivery) Mutates() bool { return true }

// Fields implements Action.
func (a ConfirmDelivery) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"delivery", a.DeliveryID}, {"verified", a.Verified}, {"via", a.Via}}
}

func (a ConfirmDelivery) String() string { return Format(a) }

func (a DeliverPrompt) String() string { return Format(a) }

// DropDelivery takes a pending delivery out for good, never sent
// (store.Store.Drop): a push (pull_request.synchronize) whose commit the
// item's workdir already holds is the agent's own (ReasonOwnPush).
type DropDelivery struct {
	Key        desired.Key
	DeliveryID string
	Commit     string
	Reason     Reason
}

// Item implements Action.
func (a DropDelivery) Item() desired.Key { return a.Key }

// Name implements Action.
func (DropDelivery) Name() string { return "drop_delivery" }

// Mutates implements Action.
func (DropDelivery) Mutates() bool { return true }

// Fields implements Action.
func (a DropDelivery) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeyDelivery, a.DeliveryID}, {journal.KeyCommit, a.Commit}, {journal.KeyReason, string(a.Reason)}}
}

func (a DropDelivery) String() string { return Format(a) }

// StopSession kills the item's session (if any) and marks it Stopped.
type StopSession struct {
	Key     desired.Key
	Session string
	Reason  Reason
	// Delivered is an event in flight that already reached the
	// transcript: it is marked delivered, never sent again.
	Delivered string
}

// Item implements Action.
func (a StopSession) Item() desired.Key { return a.Key }

// Name implements Action.
func (StopSession) Name() string { return "stop_session" }

// Mutates implements Action.
func (StopSession) Mutates() bool { return true }

// Fields implements Action.
func (a StopSession) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}}
	if a.Delivered != "" {
		f = append(f, Field{"delivered", a.Delivered})
	}
	return append(f, Field{"reason", string(a.Reason)})
}

func (a StopSession) String() string { return Format(a) }

// Apply returns st once the session is gone: Stopped with no pane, what
// landed (Delivered) no longer in flight, and whatever else was in flight
// given up, still pending.
func (a StopSession) Apply(st desired.Status) desired.Status {
	st.Phase = desired.PhaseStopped
	st.PaneID, st.RunID = "", ""
	st.Reason = string(a.Reason)
	return st.Deliver(a.Delivered).DropInFlight()
}

// MarkRunning records that a spawn held (alive at its probe deadline, and
// confirmed where the harness can confirm) or that a live pane was adopted.
// The boot delivery, if any, counts as delivered from here on.
type MarkRunning struct {
	Key       desired.Key
	Session   string
	PaneID    string
	SessionID string
	Mode      desired.SpawnMode
	Confirmed bool
	// DeliveryID is the boot delivery now confirmed delivered, or "".
	DeliveryID string
	Respawn    bool
	// PID is the pane's process as list-panes showed it: the harness
	// itself (loopd's launcher execs it). The executor records it with its
	// start time, so that a respawn can tell that very process from a
	// later one with the same pid (Status.HarnessPID).
	PID int
	// Log is the log file of a run of the process runner, journaled in
	// place of the tmux attach command; "" for a pane.
	Log    string
	Reason Reason
}

// Item implements Action.
func (a MarkRunning) Item() desired.Key { return a.Key }

// Name implements Action.
func (MarkRunning) Name() string { return "mark_running" }

// Mutates implements Action.
func (MarkRunning) Mutates() bool { return true }

// Fields implements Action.
func (a MarkRunning) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"pane_id", a.PaneID},
		{"harness_session_id", a.SessionID}, {"mode", string(a.Mode)}, {"confirmed", a.Confirmed}}
	if a.DeliveryID != "" {
		f = append(f, Field{"delivery", a.DeliveryID})
	}
	return append(f, Field{"reason", string(a.Reason)})
}

func (a MarkRunning) String() string { return Format(a) }

// Apply returns st with the agent running in PaneID: the spawn is over
// (nothing carried as its boot prompt is in flight any more) and, when
// Confirmed, its conversation id is the confirmed one. The harness's
// process is not known here (HarnessPID zero); the executor looks it up.
func (a MarkRunning) Apply(st desired.Status) desired.Status {
	st.Phase = desired.PhaseRunning
	st.PaneID = a.PaneID
	st.HarnessPID, st.HarnessStart = 0, 0
	st.Session = a.Session
	if a.Confirmed && st.ConfirmedSessionID == "" {
		st.ConfirmedSessionID = st.HarnessSessionID
	}
	if a.Confirmed {
		// The conversation runs: a transcript missing later may be
		// restored again (reconciler, restoreFirst).
		st.RestoredID = ""
	}
	// The spawn is over: its boot prompt was delivered (DeliveryID) or it
	// carried none that is still in flight. A run carries its event until
	// it shows in the conversation (Deliver) or the run ends.
	if a.Log == "" {
		st = st.Carry("")
	}
	st.Reason = string(a.Reason)
	return st
}

// RecordExit records a pane's death and the restart decision taken on it.
type RecordExit struct {
	Key     desired.Key
	Session string
	// ExitStatus is the pane's exit status, or -1 when the session was
	// missing; Signal is the killing signal, 0 if none. A pane a signal
	// ended has no exit status (tmux shows pane_dead_status empty or 0
	// with pane_dead_signal set): ExitStatus is then not shown or
	// recorded, only Signal (Killed).
	ExitStatus int
	Signal     int
	Clean      bool
	// Phase is the phase after the exit: Exited, BackingOff or
	// NeedsAttention.
	Phase         desired.Phase
	Failures      int
	FastFailures  int
	ChurnFailures int
	NextAttempt   time.Time // zero when no restart is scheduled
	// Delay is the backoff the restart decision chose for a restart
	// (Phase BackingOff): NextAttempt is Delay after the death. Zero for a
	// restart at once, and when none is planned.
	Delay time.Duration
	// Attention, with Phase NeedsAttention, is why the item needs it: the
	// reason of the GiveUp that follows in the same plan. The status takes
	// it with this write, so that nothing reads NeedsAttention with the
	// exit's own reason (Reason, which stays the last exit's).
	Attention Reason
	// Retire, when set, names the crash-loop rule that retires the item's
	// session id ("fast_failures" or "churn"): it is never resumed again.
	Retire Reason
	// Implicated is true when the death counted against the conversation
	// (the harness's own exit, reconciler.History.Own), and Words its last
	// words then, which the next such death must repeat to count on
	// (desired.Status.LastWords).
	Implicated bool
	Words      string
	// DeliveryID is the boot delivery of a spawn that died before running;
	// it stays pending and dispatch.failed is logged.
	DeliveryID string
	// Delivered is the boot delivery of a spawn that died after its prompt
	// reached the transcript: it is marked delivered, never sent again.
	Delivered string
	// Foreground is the process the pane still runs when the agent died
	// without its pane (ReasonForegroundNotHarness), "" for a dead pane.
	Foreground string
	// PaneID is the item's own pane as the pass saw it, whose last lines
	// the executor keeps with the exit; "" when the pass saw none (the
	// session missing, a run of the process runner), and then nothing is
	// read. It is not Status.PaneID: tmux numbers panes from %0 again on a
	// new server, so the recorded id may name another item's pane by now.
	PaneID string
	Reason Reason
}

// Item implements Action.
func (a RecordExit) Item() desired.Key { return a.Key }

// Name implements Action.
func (RecordExit) Name() string { return "record_exit" }

// Mutates implements Action.
func (RecordExit) Mutates() bool { return true }

// Fields implements Action.
func (a RecordExit) Fields() []Field {
	exit := Field{"exit_status", a.ExitStatus}
	if a.Killed() {
		exit = Field{"signal", a.Signal}
	}
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session},
		exit, {"clean", a.Clean},
		{"phase", string(a.Phase)}, {"failures", a.Failures}, {"fast_failures", a.FastFailures},
		{"churn_failures", a.ChurnFailures}}
	if a.Retire != "" {
		f = append(f, Field{"retire", string(a.Retire)})
	}
	if !a.NextAttempt.IsZero() {
		f = append(f, Field{"next_attempt", a.NextAttempt.Truncate(time.Second)})
	}
	if a.DeliveryID != "" {
		f = append(f, Field{"delivery", a.DeliveryID})
	}
	if a.Delivered != "" {
		f = append(f, Field{"delivered", a.Delivered})
	}
	if a.Foreground != "" {
		f = append(f, Field{"foreground", a.Foreground})
	}
	return append(f, Field{"reason", string(a.Reason)})
}

func (a RecordExit) String() string { return Format(a) }

// Killed reports whether a signal ended the run: it then has no exit
// status (wait(2)), and its journal rows and dry-run line say signal=N
// where another's say exit_status=N, never both.
func (a RecordExit) Killed() bool { return a.Signal != 0 }

// exitAttrs returns how the run ended as journal attributes (Killed).
func (a RecordExit) exitAttrs() []any {
	if a.Killed() {
		return []any{"signal", a.Signal}
	}
	return []any{"exit_status", a.ExitStatus}
}

// Apply returns st after the death recorded at now: the phase, the counts
// and the next attempt the planner decided, the reason (Attention in
// NeedsAttention, else the exit's), the paste in flight given up
// unless it landed (Delivered), and the conversation id retired when
// Retire says so.
func (a RecordExit) Apply(st desired.Status, now time.Time) desired.Status {
	retired := st.HarnessSessionID
	st.Phase = a.Phase
	st.LastExitStatus = nil
	if a.ExitStatus >= 0 && !a.Killed() {
		status := a.ExitStatus
		st.LastExitStatus = &status
	}
	st.LastExitSignal = a.Signal
	st.LastExitReason = string(a.Reason)
	st.LastExitAt = now
	st.Failures, st.FastFailures, st.ChurnFailures = a.Failures, a.FastFailures, a.ChurnFailures
	switch {
	case a.FastFailures == 0 && a.ChurnFailures == 0:
		st.LastWords = ""
	case a.Implicated:
		st.LastWords = a.Words
	}
	st.NextAttempt = a.NextAttempt
	st.SpawnRefused = ""
	st.Blocked = "" // a dead agent waits at no screen
	st.RunID = ""   // a run whose exit is recorded is judged once
	st.Reason = string(a.Reason)
	if a.Phase == desired.PhaseNeedsAttention && a.Attention != "" {
		st.Reason = string(a.Attention)
	}
	// A paste in flight died with the pane; unless it landed (Delivered),
	// it is still pending and goes with the next spawn.
	st = st.Deliver(a.Delivered).DropSend()
	if a.Retire != "" {
		st = st.Retire(retired)
	}
	return st
}

// FollowSession makes the id the harness reported (after /clear, say), or
// the id loopd learned for a harness that cannot pin one, the item's
// conversation id, so that the next resume brings back the
// conversation the agent is actually in.
type FollowSession struct {
	Key     desired.Key
	Session string
	From    string
	To      string
	Source  string // the harness's reason, e.g. "clear"; SourceRollout for a learned id
}

// Item implements Action.
func (a FollowSession) Item() desired.Key { return a.Key }

// Name implements Action.
func (FollowSession) Name() string { return "follow_session" }

// Mutates implements Action.
func (FollowSession) Mutates() bool { return true }

// Fields implements Action.
func (a FollowSession) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"from", a.From}, {"harness_session_id", a.To}, {"source", a.Source}}
}

func (a FollowSession) String() string { return Format(a) }

// Ambiguous records that more than one conversation the harness started
// fits the item's spawn, whose id is still to be learned (Codex): loopd
// takes none, and journals session.id_ambiguous once for these
// Candidates (desired.Status.AmbiguousIDs); the id stays unknown.
type Ambiguous struct {
	Key        desired.Key
	Session    string
	Candidates []string
}

// Item implements Action.
func (a Ambiguous) Item() desired.Key { return a.Key }

// Name implements Action.
func (Ambiguous) Name() string { return "id_ambiguous" }

// Mutates implements Action.
func (Ambiguous) Mutates() bool { return true }

// Fields implements Action.
func (a Ambiguous) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeySession, a.Session}, {journal.KeyCandidates, strings.Join(a.Candidates, ",")},
		{journal.KeyReason, string(ReasonIDAmbiguous)}}
}

func (a Ambiguous) String() string { return Format(a) }

// Apply returns st with the candidates recorded, so that the same ones
// are journaled once.
func (a Ambiguous) Apply(st desired.Status) desired.Status {
	st.AmbiguousIDs = a.Candidates
	return st
}

// Release carries out an operator's loopd release (Spec.ReleaseGeneration):
// the restart budget's counts and NeedsAttention are cleared and the item
// goes to Phase. With Fresh, the conversation id is retired and the next
// spawn starts a new conversation.
type Release struct {
	Key        desired.Key
	Session    string
	Generation int64
	Fresh      bool
	// RetireID is the conversation id a fresh release retires, "" for none.
	RetireID string
	// Phase is where the item goes: Running when its harness is alive in
	// the pane the record names (nothing to bring back), BackingOff with no
	// wait when it had a session to bring back, Idle otherwise.
	Phase desired.Phase
	// Shown is the usage limit the item's screen or transcript showed at
	// the release, zero for none: the release ends it too, so it is not
	// taken again (desired.Status.LimitSeen).
	Shown desired.SeenLimit
}

// Apply returns st after the release: the limit shown at the release, if
// any, becomes the one the item last saw (desired.Status.ReleaseShown,
// which releases the one taken before), and desired.Status.Released ends
// it with the rest. An item that does not stay Running (nor Spawning)
// gives up its paste in flight, as an exit does: its agent is gone or
// replaced, so the paste is confirmed from the conversation if it landed
// there and sent again otherwise, never booted with on top of a copy that
// landed.
func (a Release) Apply(st desired.Status) desired.Status {
	st = st.ReleaseShown(a.Shown).Released(a.Generation, a.Phase, a.Fresh, a.RetireID)
	if a.Phase != desired.PhaseRunning && a.Phase != desired.PhaseSpawning {
		st = st.DropSend()
	}
	return st
}

// Item implements Action.
func (a Release) Item() desired.Key { return a.Key }

// Name implements Action.
func (Release) Name() string { return "release" }

// Mutates implements Action.
func (Release) Mutates() bool { return true }

// Fields implements Action.
func (a Release) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"generation", a.Generation},
		{"fresh", a.Fresh}}
	if a.RetireID != "" {
		f = append(f, Field{"retired_session_id", a.RetireID})
	}
	return append(f, Field{"phase", string(a.Phase)})
}

func (a Release) String() string { return Format(a) }

// Wait says why nothing happens to an item now, and until when. Until is
// zero when only a new event or an operator can move the item.
type Wait struct {
	Key    desired.Key
	Until  time.Time
	Reason Reason
}

// Item implements Action.
func (a Wait) Item() desired.Key { return a.Key }

// Name implements Action.
func (Wait) Name() string { return "wait" }

// Mutates implements Action.
func (Wait) Mutates() bool { return false }

// Fields implements Action.
func (a Wait) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}}
	if !a.Until.IsZero() {
		f = append(f, Field{"until", a.Until})
	}
	return append(f, Field{"reason", string(a.Reason)})
}

func (a Wait) String() string { return Format(a) }

// GiveUp moves an item to NeedsAttention: it stays there until loopd release
// or a new event.
type GiveUp struct {
	Key     desired.Key
	Session string
	Reason  Reason
	// Mangled, with ReasonDeliveryMangled, is the delivery whose frame the
	// conversation holds mangled, in Copies messages; it stays pending.
	Mangled string
	Copies  int
	// Path, with ReasonWorkspaceConflict or ReasonWorkspaceFailed, is the
	// workdir, and Detail what is wrong with it.
	Path   string
	Detail string
}

// Item implements Action.
func (a GiveUp) Item() desired.Key { return a.Key }

// Name implements Action.
func (GiveUp) Name() string { return "give_up" }

// Mutates implements Action.
func (GiveUp) Mutates() bool { return true }

// Fields implements Action.
func (a GiveUp) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}}
	if a.Mangled != "" {
		f = append(f, Field{"delivery", a.Mangled}, Field{"copies", a.Copies})
	}
	if a.Path != "" {
		f = append(f, Field{"cwd", a.Path})
	}
	if a.Detail != "" {
		f = append(f, Field{"detail", workspace.Mask(a.Detail)})
	}
	return append(f, Field{"reason", string(a.Reason)})
}

func (a GiveUp) String() string { return Format(a) }

// Apply returns st in NeedsAttention as of generation (the item's
// Spec.Generation: a newer event clears it), with the paste in flight
// given up, still pending. What the pane shows (Screen) is left for the
// executor to read.
func (a GiveUp) Apply(st desired.Status, generation int64) desired.Status {
	st.Phase = desired.PhaseNeedsAttention
	st.AttentionGeneration = generation
	st.NextAttempt = time.Time{}
	// An unconfirmed paste stays pending; the next attempt starts over.
	st = st.DropSend()
	st.Reason = string(a.Reason)
	if a.Mangled != "" {
		st.MangledDeliveryID, st.MangledCopies = a.Mangled, a.Copies
	}
	if a.Detail != "" {
		st.WorkspaceError = workspace.Mask(a.Detail)
	}
	st.Screen = ""
	return st
}

// Block records that an item cannot proceed for a reason outside loopd (a
// missing workspace, a session of its name that another loopd owns); its
// deliveries stay pending and the event is logged once per reason.
type Block struct {
	Key    desired.Key
	Reason Reason
	Detail string
}

// Item implements Action.
func (a Block) Item() desired.Key { return a.Key }

// Name implements Action.
func (Block) Name() string { return "block" }

// Mutates implements Action.
func (Block) Mutates() bool { return true }

// Fields implements Action.
func (a Block) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"reason", string(a.Reason)}, {"detail", a.Detail}}
}

func (a Block) String() string { return Format(a) }

// CheckoutMode is how a clone gets its branch (workspace.Mode).
type CheckoutMode string

// The checkout modes.
const (
	// CheckoutIssue: a new branch from the base, or the branch itself
	// when it exists.
	CheckoutIssue CheckoutMode = "issue"
	// CheckoutPullRequest: the pull request's head branch in the same
	// repository, tracking the remote branch.
	CheckoutPullRequest CheckoutMode = "pull_request"
	// CheckoutFork: refs/pull/<n>/head into loopd/pr-<n>.
	CheckoutFork CheckoutMode = "fork"
)

// Checkout is the repository and branch a workdir is a clone of.
type Checkout struct {
	// URL is the remote as rendered from the route; it may carry
	// credentials, so it is shown masked (workspace.Mask).
	URL    string
	Mode   CheckoutMode
	Branch string
	Base   string // CheckoutIssue only; "" is the remote's default branch
	PR     int    // CheckoutFork and CheckoutPullRequest: the pull request's number
	// PushURL and PushBranch, CheckoutFork only, are the fork's
	// repository as rendered from the route (may carry credentials) and
	// its head branch, when the fork lets maintainers push
	// (workspace.Checkout.PushURL); "" otherwise.
	PushURL, PushBranch string
}

// PrepareWorkspace makes the item's workdir before a spawn: a plain
// directory, or with Checkout a git clone (workspace.Manager.Prepare),
// made, or repaired before a later spawn.
// The planner decides what a failure leads to before it happens: a
// permanent one needs attention; a transient one counts Failures (the
// restart budget) and, with Retry, is retried RetryAfter after it
// happened (a git command can take minutes, so not after the plan), or
// needs attention when Retry is false (the budget is spent). The event
// stays pending.
type PrepareWorkspace struct {
	Key        desired.Key
	Session    string
	Dir        string
	Checkout   *Checkout
	Reason     Reason
	Failures   int
	Retry      bool
	RetryAfter time.Duration
	// Resume is true for an item with an agent to bring back (a moved
	// item): once its workdir is ready it goes BackingOff, due now, and
	// is resumed, instead of Idle.
	Resume bool
}

// Item implements Action.
func (a PrepareWorkspace) Item() desired.Key { return a.Key }

// Name implements Action.
func (PrepareWorkspace) Name() string { return "prepare_workspace" }

// Mutates implements Action.
func (PrepareWorkspace) Mutates() bool { return true }

// Fields implements Action.
func (a PrepareWorkspace) Fields() []Field {
	f := []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeyCwd, a.Dir}}
	if c := a.Checkout; c != nil {
		f = append(f, Field{journal.KeyURL, workspace.Mask(c.URL)}, Field{journal.KeyMode, string(c.Mode)}, Field{journal.KeyBranch, c.Branch})
		if c.Base != "" {
			f = append(f, Field{journal.KeyBase, c.Base})
		}
	}
	f = append(f, Field{journal.KeyReason, string(a.Reason)}, Field{journal.KeyFailuresOnError, a.Failures})
	if !a.Retry {
		return append(f, Field{journal.KeyOnTransientError, "give_up"})
	}
	return append(f, Field{journal.KeyRetryAfter, a.RetryAfter})
}

func (a PrepareWorkspace) String() string { return Format(a) }

// RemoveWorkspace removes a closed item's clone when it is clean
// (routing checkout.removeOnClose), or keeps it and says why
// (workspace.kept). Either way the close is done with it
// (desired.Status.Workspace).
type RemoveWorkspace struct {
	Key desired.Key
	Dir string
	URL string
}

// Item implements Action.
func (a RemoveWorkspace) Item() desired.Key { return a.Key }

// Name implements Action.
func (RemoveWorkspace) Name() string { return "remove_workspace" }

// Mutates implements Action.
func (RemoveWorkspace) Mutates() bool { return true }

// Fields implements Action.
func (a RemoveWorkspace) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeyCwd, a.Dir}, {journal.KeyURL, workspace.Mask(a.URL)}, {journal.KeyReason, string(ReasonClosed)}}
}

func (a RemoveWorkspace) String() string { return Format(a) }

// ReportWorkdir reports, once per rendering, that the route now renders
// another workdir than the one the item's conversation is pinned to: the
// pinned one stays (it is the resume key).
type ReportWorkdir struct {
	Key      desired.Key
	Pinned   string
	Rendered string
}

// Item implements Action.
func (a ReportWorkdir) Item() desired.Key { return a.Key }

// Name implements Action.
func (ReportWorkdir) Name() string { return "report_workdir" }

// Mutates implements Action.
func (ReportWorkdir) Mutates() bool { return true }

// Fields implements Action.
func (a ReportWorkdir) Fields() []Field {
	return []Field{{journal.KeyWorkItem, a.Key.String()}, {journal.KeyCwd, a.Pinned}, {journal.KeyConfigCwd, a.Rendered}, {journal.KeyReason, "workdir_pinned"}}
}

func (a ReportWorkdir) String() string { return Format(a) }
