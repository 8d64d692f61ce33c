package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/runner"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// Sentinel errors of the executor, checked with errors.Is.
var (
	// ErrNotReady means the harness's screen does not show it accepts input;
	// the delivery stays pending and the item is looked at again soon.
	ErrNotReady = errors.New("harness not ready for input")
	// ErrWorkspaceMissing is what a Block for a missing workdir returns, so
	// that the item's later actions are skipped.
	ErrWorkspaceMissing = errors.New("workspace missing")
	// ErrUnknownHarness means the record names a harness not in config: a
	// Block for it returns it, and so does an action the planner could not
	// have planned for such an item.
	ErrUnknownHarness = errors.New("unknown harness")
	// ErrHarnessMissing means the item's harness command cannot be found
	// or run: a Block for it returns it.
	ErrHarnessMissing = errors.New("harness command missing")
	// ErrNotHeadless means the item's route runs its agents as processes
	// and its harness has no headless form: a Block for it returns it.
	ErrNotHeadless = errors.New("harness has no headless form")
	// ErrSpawnRefused means tmux, the launcher or a workdir gone since the
	// plan refused a spawn; the refusal is recorded in the status
	// (Status.SpawnRefused) and the next pass plans what follows.
	ErrSpawnRefused = errors.New("spawn refused")
	// ErrSessionForeign means the session of the item's name carries the
	// owner mark of another loopd, or none: it is left alone.
	ErrSessionForeign = errors.New("session owned by another loopd")
	// ErrWorkspaceFailed means the workspace could not be made; the
	// failure is recorded in the status (the phase the planner chose for
	// it) and the item's spawn is skipped.
	ErrWorkspaceFailed = errors.New("workspace failed")
	// ErrWorkspacePreparing means the item's clone is being made by a
	// worker outside the pass: the item's spawn waits for its outcome, which
	// wakes a pass (Executor.Wake). Not a failure.
	ErrWorkspacePreparing = errors.New("workspace being prepared")
)

// Fleet is the executor's side of the store's leases (store.Fleet has
// it; its doc comments give each method's contract): the fenced status
// write, the release of a lease, and the size of a stored transcript.
type Fleet interface {
	FencedWrite(ctx context.Context, k desired.Key, gen int64, w store.StatusWrite) error
	ReleaseLease(ctx context.Context, k desired.Key, host string, gen int64) error
	TranscriptSize(ctx context.Context, k desired.Key, id string) (int64, error)
}

// Executor carries out planned actions against tmux and writes each result
// back to the store as a status transition. Execute is not safe for
// concurrent use; the reconcile lock serialises passes. A clone is made
// outside the pass, by a goroutine per item (git is serialised per mirror
// by workspace.Manager), which records its outcome under the reconcile
// lock and then calls Wake; WaitWorkspaces waits for those goroutines.
type Executor struct {
	Tmux      tmux.Client
	Store     store.Store
	Harnesses map[string]harness.Adapter
	Journal   *journal.Recorder
	Log       *slog.Logger
	// Now is the clock; NewID mints a fresh harness session id (a UUID).
	Now   func() time.Time
	NewID func() string
	// Socket is the tmux -L socket, named in the attach command logged on a
	// successful resume.
	Socket string
	// Owner is this loopd's owner mark (tmux.Owner.ID): every session it
	// creates carries it, and it kills, pastes into and sends keys to no
	// session without it.
	Owner string
	// PasteWait bounds the wait, after a paste, for the pasted text to show
	// in the harness's input box (its screen class becomes ScreenDraft),
	// which comes before Enter: Claude Code takes an Enter in the same
	// burst as a long paste as a newline, and one that comes after the
	// paste is drawn as a submit. The pane is captured every schema.PastePoll
	// until then; a paste that does not show within PasteWait gets no
	// Enter (dispatch.failed reason=paste_not_shown), and the planner's
	// retry of the send in flight takes over. schema.DefaultPasteWait in
	// the daemon.
	PasteWait time.Duration
	// Launcher starts every harness through "loopd launch", which gives it
	// its environment from a private file: no value is ever in tmux's argv.
	Launcher launch.Launcher
	// Sandbox puts the harness of each spawn of a sandboxed route in a
	// sandbox of its own (sandboxFor); nil runs every harness as a route
	// of sandbox none would, and records it so (Status.Sandbox).
	Sandbox *Sandbox
	// Workspaces makes, repairs and removes the git clones of routes with a
	// checkout.
	Workspaces *workspace.Manager
	// Runs starts, reads and stops the runs of the process runner
	// (routing.repos.<key>.runner: process); RunEnviron is the
	// environment every run starts from, the one the tmux server gets
	// (paneenv.Server), below the harness's own.
	Runs       *runner.Runner
	RunEnviron []string
	// StormWindow is how long a delivery counts for the loop breaker
	// (desired.Status.Counted); the planner judges the count.
	StormWindow time.Duration
	// Channels is the directory of the items' channels (channel.Root):
	// each spawn's harness is given its item's channel and a fresh token
	// (harnessEnv); "" gives none.
	Channels string
	// Credentials returns what credential an item's route lets its agent
	// ask for over its channel, read at each spawn; nil hands out none.
	Credentials func(r desired.Record) AgentCredentials
	// OpenChannel, when set, is called with the channel directory of each
	// spawn: loopd serve listens on its socket for the agent's requests.
	OpenChannel func(k desired.Key, dir string)

	// Wake, when set, asks for a pass once a preparation's outcome is
	// recorded (reconciler.Reconciler.Trigger).
	Wake func()

	workers sync.WaitGroup
	mu      sync.Mutex
	// preparing holds the items whose preparation a worker of this
	// executor is running.
	preparing map[desired.Key]bool
	// failedPrepares counts the preparations whose failure was recorded
	// since the last WaitWorkspaces.
	failedPrepares int

	// Fleet, when set, is the store's lease side: every status write is
	// fenced by the item's lease generation (store.Fleet.FencedWrite),
	// and a draining host releases its leases through it. nil writes
	// unfenced (one host without leases).
	Fleet Fleet
	// Host is this host's name (host.name), stamped on every status write
	// (desired.Status.Host); "" without leases.
	Host string
	// LeaseValid, when set, reports whether this host's lease clock is
	// still valid at the pass's lease epoch (reconciler.Hosting.ValidAt,
	// WithLeaseEpoch); the executor asks it right before every paste, key
	// and spawn, and acts on no item once it lapsed (ErrLeaseLost).
	LeaseValid func(epoch uint64) bool
	// Mover copies each item's transcript to the store after every
	// verified delivery and before a drain's release, and back on the
	// host that takes a moved item over; nil copies nothing.
	Mover TranscriptMover
	// lost holds the items whose lease.lost this executor journaled, until
	// it writes their status again.
	lost map[desired.Key]bool

	// Talk returns what an item's route lets loopd say on GitHub
	// (desired.TalkRule), read at each status write so that a reload
	// applies; nil says nothing.
	Talk func(r desired.Record) desired.Talk
	// Meter counts resumes and delivery latencies; nil counts nothing.
	Meter Meter
}

// Result sums up one Execute call.
type Result struct {
	Applied int // actions that changed tmux or the store
	Failed  int // actions that returned an error (a busy harness is not one)
	// Retry is true when some action could not complete now (harness not
	// ready, tmux error) and the item should be looked at again soon.
	Retry bool
	// Replan is true when an action recorded a fact the next pass decides
	// on at once (a refused spawn).
	Replan bool
}

// Execute applies plan in order. records are the records the plan was made
// from; each item's status is carried from one of its actions to the next.
// After an action of an item fails, the item's later actions are skipped:
// they were planned on the assumption that it succeeded.
func (e *Executor) Execute(ctx context.Context, records []desired.Record, plan []Action) Result {
	recs := make(map[desired.Key]*desired.Record, len(records))
	for i := range records {
		recs[records[i].Key] = &records[i]
	}
	failed := map[desired.Key]bool{}
	var res Result
	for _, a := range plan {
		k := a.Item()
		r, ok := recs[k]
		if !ok || failed[k] || !a.Mutates() {
			continue
		}
		err := e.apply(ctx, r, a)
		if err != nil {
			failed[k] = true
			switch {
			case errors.Is(err, ErrLeaseLost):
				// Not this host's item any more (a fenced write, or a
				// lease clock that lapsed before a paste or a spawn): its
				// local agent stops, nothing more is written, and the
				// write is never retried. The next pass reads the lease.
				reason := ReasonLeaseLapsed
				if errors.Is(err, store.ErrFenced) {
					reason = ReasonFenced
				}
				e.Log.WarnContext(ctx, string(journal.ActionFailed), "work_item", k.String(), "action", a.Name(), "err", err)
				if rerr := e.relinquish(ctx, r, desired.SessionName(k), "", reason); rerr != nil {
					res.Failed++
					res.Retry = true
					e.Log.WarnContext(ctx, string(journal.ActionFailed), "work_item", k.String(), "action", "relinquish", "err", rerr)
				}
				continue
			case errors.Is(err, errNoTranscript):
				// Recorded: the next pass spawns fresh with the event.
				res.Replan = true
				continue
			case errors.Is(err, ErrNotReady):
				// Not a failure: the harness is busy or starting.
				res.Retry = true
				continue
			case errors.Is(err, errNotIdle):
				// Not a failure: an agent at work is not parked.
				continue
			case errors.Is(err, ErrSessionForeign):
				// Not a failure either: journaled once (session.foreign),
				// it lasts until the other loopd's session goes.
				continue
			case errors.Is(err, ErrWorkspacePreparing):
				// Its worker wakes a pass when it is done.
				continue
			case errors.Is(err, ErrSpawnRefused):
				// Recorded as a fact: the next pass plans what follows.
				res.Retry, res.Replan = true, true
			case errors.Is(err, ErrWorkspaceMissing), errors.Is(err, ErrUnknownHarness), errors.Is(err, ErrNotHeadless), errors.Is(err, ErrWorkspaceFailed):
				// Waits for the operator; the interval looks again.
			default:
				res.Retry = true
			}
			res.Failed++
			e.Log.WarnContext(ctx, string(journal.ActionFailed), "work_item", k.String(), "action", a.Name(), "err", err)
			continue
		}
		res.Applied++
	}
	return res
}

func (e *Executor) apply(ctx context.Context, r *desired.Record, a Action) error {
	switch a := a.(type) {
	case FreshSpawn:
		return e.freshSpawn(ctx, r, a)
	case ResumeSpawn:
		return e.resumeSpawn(ctx, r, a)
	case MarkRunning:
		return e.markRunning(ctx, r, a)
	case DeliverPrompt:
		return e.deliver(ctx, r, a)
	case FollowSession:
		return e.followSession(ctx, r, a)
	case Ambiguous:
		if err := e.put(ctx, r, a.Apply(r.Status)); err != nil {
			return err
		}
		e.record(ctx, slog.LevelWarn, journal.SessionIDAmbiguous, r.Key, "session", a.Session, "candidates", strings.Join(a.Candidates, ","),
			"reason", string(ReasonIDAmbiguous))
		return nil
	case TakeReport:
		return e.takeReport(ctx, r, a)
	case RefuseReport:
		return e.refuseReport(ctx, r, a)
	case ConfirmDelivery:
		return e.confirmDelivery(ctx, r, a)
	case DropDelivery:
		return e.drop(ctx, r, a)
	case StopSession:
		return e.stop(ctx, r, a)
	case RecordExit:
		return e.recordExit(ctx, r, a)
	case GiveUp:
		return e.giveUp(ctx, r, a)
	case Release:
		return e.release(ctx, r, a)
	case Block:
		return e.block(ctx, r, a.Reason, a.Detail)
	case PrepareWorkspace:
		return e.prepareWorkspace(ctx, r, a)
	case FetchHead:
		return e.fetchHead(ctx, r, a)
	case RemoveWorkspace:
		return e.removeWorkspace(ctx, r, a)
	case ReportWorkdir:
		return e.reportWorkdir(ctx, r, a)
	case RateLimit:
		return e.rateLimit(ctx, r, a)
	case AnswerLimitMenu:
		return e.answerLimitMenu(ctx, r, a)
	case MarkBlocked:
		return e.markBlocked(ctx, r, a)
	case AskQuestion:
		return e.askQuestion(ctx, r, a)
	case RemindQuestion:
		return e.remindQuestion(ctx, r, a)
	case QuestionGone:
		return e.questionGone(ctx, r, a)
	case AnswerQuestion:
		return e.answerQuestion(ctx, r, a)
	case RefuseAnswer:
		return e.refuseAnswer(ctx, r, a)
	case MarkAttended:
		return e.markAttended(ctx, r, a)
	case HandBack:
		return e.handBack(ctx, r, a)
	case RecordUsage:
		return e.recordUsage(ctx, r, a)
	case BudgetExhaust:
		return e.budgetExhaust(ctx, r, a)
	case Queue:
		return e.queue(ctx, r, a)
	case Park:
		return e.park(ctx, r, a)
	case StopRun:
		return e.stopRun(ctx, r, a)
	case Rest:
		return e.rest(ctx, r, a)
	case Relinquish:
		return e.relinquish(ctx, r, a.Session, a.Owner, a.Reason)
	case RestoreTranscript:
		return e.restoreTranscript(ctx, r, a)
	case Handover:
		return e.handover(ctx, r, a)
	default:
		return fmt.Errorf("execute %s: unknown action %T", r.Key, a)
	}
}

// put writes st and keeps the in-memory copy in step.
func (e *Executor) put(ctx context.Context, r *desired.Record, st desired.Status) error {
	return e.putDelivered(ctx, r, st, mark{})
}

// mark is the delivery a status write marks delivered: its id ("" for
// none), how it reached the conversation (via: boot_prompt, paste, resubmit,
// transcript, …), the session, and whether the conversation showed it.
// first, when set, journals what else the write changed, ahead of the
// delivery's line (a spawn's session.spawned: the session before what
// reached it).
type mark struct {
	id, via, session string
	verified         bool
	first            func()
}

// viaTranscript marks delivery id of session found in the conversation's
// transcript: the answer of an action that ends what was in flight.
func viaTranscript(id, session string) mark {
	return mark{id: id, via: "transcript", session: session, verified: true}
}

// putDelivered writes st with m's delivery, when it names one, taken
// through its last transition (desired.Status.Deliver) and recorded
// delivered in the same write: the delivery's own record is the truth of
// it, and dispatch.delivered is journaled here, once the write is done, and
// nowhere else. m.verified says the conversation showed it. A write that
// changes the phase stamps Status.PhaseSince. Every status write passes
// here, so the GitHub
// calls the change causes (desired.TalkRule: the announcement, the
// acknowledgement of a verified delivery, the notice of NeedsAttention)
// are queued in the same write. The in-memory copy follows, so that the
// item's later actions see it delivered.
func (e *Executor) putDelivered(ctx context.Context, r *desired.Record, st desired.Status, m mark) error {
	id, verified := m.id, m.verified
	var (
		delivered []string
		acked     []desired.Delivery
	)
	if st.Phase != r.Status.Phase {
		st.PhaseSince = e.Now()
	}
	if id != "" {
		st = st.Deliver(id).Counted(e.Now(), e.StormWindow)
		delivered = append(delivered, id)
		if i := slices.IndexFunc(r.Pending, func(d desired.Delivery) bool { return d.ID == id }); i >= 0 && verified {
			acked = append(acked, r.Pending[i])
		}
	}
	var talk desired.Talk
	if e.Talk != nil {
		talk = e.Talk(*r)
	}
	if e.Host != "" {
		st.Host = e.Host
	}
	st, calls := desired.TalkRule(*r, st, acked, talk)
	if err := e.write(ctx, r, store.StatusWrite{Status: st, Delivered: delivered, Calls: calls}); err != nil {
		return err
	}
	e.held(r.Key)
	if len(acked) > 0 && e.Meter != nil {
		// Verified in the transcript, and recorded: once per delivery.
		e.Meter.Delivered(r.Spec.Harness, e.Now().Sub(acked[0].ReceivedAt))
	}
	for _, c := range calls {
		e.record(ctx, slog.LevelInfo, journal.GitHubQueued, r.Key, "call", string(c.Kind), "reason", st.Reason)
	}
	r.Status = st
	if id != "" {
		r.Pending = slices.DeleteFunc(slices.Clone(r.Pending), func(d desired.Delivery) bool { return d.ID == id })
	}
	if m.first != nil {
		m.first()
	}
	if id != "" {
		e.record(ctx, slog.LevelInfo, journal.DispatchDelivered, r.Key, "delivery", id, "via", m.via, "session", m.session, "verified", verified)
	}
	if verified && id != "" {
		// The conversation holds the event: its copy in the store does
		// too, for the host that may take the item over.
		e.ship(ctx, r)
	}
	return nil
}

func (e *Executor) record(ctx context.Context, level slog.Level, name journal.Name, k desired.Key, kv ...any) {
	e.Journal.Record(ctx, level, name, k.String(), kv...)
}

func (e *Executor) adapter(name string) (harness.Adapter, error) {
	ad, ok := e.Harnesses[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownHarness, name)
	}
	return ad, nil
}

// spawnAdapter returns the adapter s starts its harness with: its
// harness's, with the workdir's project settings on or off as s says
// (harness.WithProjectSettings), for its argv, environment and
// provisioning alike.
func (e *Executor) spawnAdapter(s Spawn) (harness.Adapter, error) {
	ad, err := e.adapter(s.Harness)
	if err != nil {
		return nil, err
	}
	return harness.WithProjectSettings(ad, s.ProjectSettings), nil
}

func (e *Executor) freshSpawn(ctx context.Context, r *desired.Record, a FreshSpawn) error {
	ad, err := e.spawnAdapter(a.Spawn)
	if err != nil {
		return err
	}
	if a.Spawn, err = e.bootPrompt(ctx, r, a.Spawn); err != nil {
		return err
	}
	if a.ResumeFailed != "" {
		kv := []any{"harness", a.Harness, "attempted_session_id", a.AttemptedID, "reason", string(a.ResumeFailed)}
		// The exit that ended the resume, named by the adapter (Gemini's
		// 42 session_error, 41 auth_missing), whether a pane's or a run's.
		if st := r.Status.LastExitStatus; st != nil && a.ResumeFailed == ResumeNotResumable {
			if cause := e.exitCause(r, *st); cause != "" {
				kv = append(kv, "exit_cause", cause)
			}
		}
		e.record(ctx, slog.LevelWarn, journal.SessionResumeFailed, r.Key, kv...)
		if e.Meter != nil {
			e.Meter.ResumeFellBack(a.Harness, a.ResumeFailed)
		}
	}
	s := a.Spawn
	brief := desired.AgentBrief(r.Key)
	s.Replay -= len(brief) + 2 + len(desired.BootLine(uuid.Nil.String())) + 2 + desired.InstructionsSize(a.Instructions)
	prompt, replayed, left, err := e.withReplay(ctx, r, s)
	if err != nil {
		return err
	}
	// The operator's standing instructions follow loopd's header line,
	// before any text from GitHub.
	prompt = desired.WithInstructions(prompt, a.Instructions)
	// The boot line names this spawn; a new conversation is then told how
	// to mark what it posts on GitHub, so that its own comments never come
	// back to it as events, and no payload text comes after that.
	boot := newBootID()
	prompt = desired.WithBootLine(prompt, boot) + "\n\n" + brief
	id := a.SessionID
	if id == "" && !a.Unpinned {
		// Otherwise the harness chooses the id, and the next passes learn it.
		id = e.NewID()
	}
	replaced := replacement(r.Status, a, replayed, left)
	if a.Runner != "" {
		argv, stdin, err := headlessArgv(ad, id, prompt, false)
		if err != nil {
			return err
		}
		return e.spawn(ctx, r, a.Spawn, desired.SpawnFresh, id, boot, replaced, argv, stdin, ad)
	}
	return e.spawn(ctx, r, a.Spawn, desired.SpawnFresh, id, boot, replaced, ad.FreshArgv(id, prompt), nil, ad)
}

// replacement returns what the fresh spawn a records of the conversation
// it replaces (desired.Status.Replaced, which TalkRule posts one notice
// for), given st, the status before it, and the events it replays
// (replayed, and left out for length): nil for a fresh spawn that replaces
// none (the item's first, or one whose resume was opted out). A fresh
// spawn that replaces a conversation that never ran, a replacement whose
// transcript never came (its own spawn died before its prompt), carries
// that replacement on: it is the same conversation lost.
func replacement(st desired.Status, a FreshSpawn, replayed, left int) *desired.Replacement {
	why := a.ResumeFailed
	if why == "" && a.Reason == ReasonReleased {
		why = ReasonReleased
	}
	if why == "" || !st.HadConversation() {
		return nil
	}
	if prev := st.Replaced; prev != nil && why == ResumeTranscriptMissing && st.SpawnMode == desired.SpawnFresh && st.ConfirmedSessionID == "" {
		return prev
	}
	return &desired.Replacement{From: st.HarnessSessionID, Why: string(why), Event: a.DeliveryID, Replayed: replayed, Left: left}
}

// newBootID mints the boot id of a spawn (desired.Status.BootID): random,
// so that no payload can hold its line.
func newBootID() string { return uuid.NewString() }

// bootPrompt returns s with the prompt it boots with: the prompt of its
// delivery, read from the store now (the plan holds no bodies), or the
// one loopd wrote (s.Prompt) when it carries none.
func (e *Executor) bootPrompt(ctx context.Context, r *desired.Record, s Spawn) (Spawn, error) {
	if s.DeliveryID == "" {
		return s, nil
	}
	prompt, err := e.prompt(ctx, r, s.DeliveryID)
	if err != nil {
		return s, err
	}
	s.Prompt = prompt
	return s, nil
}

// prompt reads the prompt of r's delivery id for the send about to be
// made; a failure is journaled (dispatch.failed reason=prompt_unreadable)
// and nothing is sent.
func (e *Executor) prompt(ctx context.Context, r *desired.Record, id string) (string, error) {
	prompt, err := e.Store.Prompt(ctx, r.Key, id)
	if err != nil {
		e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, "delivery", id, "reason", string(ReasonPromptUnreadable), "err", err)
		return "", err // the store names the operation, the item and the delivery
	}
	return prompt, nil
}

// withReplay returns s's prompt followed by the replay of the item's
// history (desired.Replay) within s.Replay bytes, when s asks for one, and
// how many events it replays and leaves out for length.
func (e *Executor) withReplay(ctx context.Context, r *desired.Record, s Spawn) (prompt string, replayed, left int, err error) {
	if s.Replay <= 0 {
		return s.Prompt, 0, 0, nil
	}
	history, err := e.Store.History(ctx, r.Key, desired.ReplayLatest)
	if err != nil {
		return "", 0, 0, err // the store names the operation and the item
	}
	replay, n := desired.Replay(history, s.Replay-2)
	if replay == "" {
		return s.Prompt, 0, len(history), nil
	}
	return s.Prompt + "\n\n" + replay, n, len(history) - n, nil
}

func (e *Executor) resumeSpawn(ctx context.Context, r *desired.Record, a ResumeSpawn) error {
	ad, err := e.spawnAdapter(a.Spawn)
	if err != nil {
		return err
	}
	if a.Spawn, err = e.bootPrompt(ctx, r, a.Spawn); err != nil {
		return err
	}
	boot := newBootID()
	prompt := desired.WithBootLine(a.Prompt, boot)
	if a.Runner != "" {
		argv, stdin, err := headlessArgv(ad, a.ResumeID, prompt, true)
		if err != nil {
			return err
		}
		return e.spawn(ctx, r, a.Spawn, desired.SpawnResume, a.ResumeID, boot, nil, argv, stdin, ad)
	}
	return e.spawn(ctx, r, a.Spawn, desired.SpawnResume, a.ResumeID, boot, nil, ad.ResumeArgv(a.ResumeID, prompt), nil, ad)
}

// spawn records the intent, replaces a dead session and starts the harness.
// The intent (phase Spawning with no pane id) is written first, so a daemon
// killed before new-session returns finds the spawn unfinished and redoes it
// instead of mistaking the old dead pane for the new one. A spawn of the
// process runner (s.Runner) records its run's id with the intent and
// starts the run (startRun) instead of a pane, with stdin. replaced is the
// conversation a fresh spawn replaces (replacement), nil for none.
func (e *Executor) spawn(ctx context.Context, r *desired.Record, s Spawn, mode desired.SpawnMode, id, boot string, replaced *desired.Replacement,
	argv []string, stdin []byte, ad harness.Adapter) error {
	st := s.Apply(r.Status, mode, id, boot, e.Now())
	st.Replaced = replaced
	st.Sandbox = e.modeOf(s)
	st.HarnessNames = ad.ProcessNames()
	// The spawn's token goes to its harness alone; its status keeps the
	// digest, by which a report or request is told to be this spawn's.
	token, digest, err := channel.NewToken()
	if err != nil {
		return err
	}
	st.ChannelToken = digest
	if r.Status.Workdir == "" {
		// The conversation starts here: its workdir is pinned with every
		// symlink resolved, since the harness finds the conversation by
		// the physical cwd.
		if phys, err := filepath.EvalSymlinks(s.Cwd); err == nil {
			st.Workdir = phys
		}
	}
	s.Cwd = st.Workdir
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if s.Respawn {
		// tmux starts a pane whose -c directory is gone in its own cwd
		// instead (measured, tmux 3.3a): a workdir removed since the plan
		// is a refusal, never a spawn elsewhere. The planner blocks the
		// item on the next pass, when it sees the workdir gone.
		if _, err := os.Stat(s.Cwd); err != nil {
			return e.spawnRefused(ctx, r, s, string(ReasonWorkspaceMissing), err) // stat <cwd>: …
		}
	}
	resumes := ""
	if mode == desired.SpawnResume {
		resumes = id
	}
	// The item's harness state first: a per-item home gets the shared
	// config copied in (Codex), which provisioning then edits.
	sb, err := e.sandboxFor(s, ad, resumes, argv)
	if err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSandboxFailed), err) // sandbox of <session>: …
	}
	if err := harness.Provision(ad, s.Cwd); err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonProvisionFailed), err) // provision … <path>: …
	}
	if s.Runner != "" {
		if err := e.endPredecessor(ctx, r, s); err != nil {
			return err
		}
		if err := e.checkLease(ctx, "spawn", r.Key); err != nil {
			return err
		}
		return e.startRun(ctx, r, s, r.Status, token, append(sb.wrap, argv...), stdin, ad, sb.env)
	}
	// A harness that outlives kill-session is ended by its process group
	// first; one still there leaves the spawn unstarted, as a predecessor
	// still running does (endPredecessor).
	if err := e.endGroup(ctx, r, s.Session, ad); err != nil {
		return fmt.Errorf("spawn %s: %w", s.Session, err)
	}
	// The kill is guarded: a session of this name that another loopd made
	// since the plan was drawn is left running, and the item blocks.
	if err := e.Tmux.KillSession(ctx, s.Session, e.Owner); errors.Is(err, tmux.ErrForeign) {
		return e.block(ctx, r, ReasonSessionForeign, s.Session)
	} else if err != nil && !errors.Is(err, tmux.ErrNoSession) {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err) // kill session <name>: …
	}
	if err := e.endPredecessor(ctx, r, s); err != nil {
		return err
	}
	env, err := e.harnessEnv(r, ad, sb.env, s.Session, token, e.RunEnviron)
	if err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err)
	}
	if err := e.checkLease(ctx, "spawn", r.Key); err != nil {
		return err
	}
	launcher, envFile, err := e.Launcher.Prepare(s.Session, env, leaseEpoch(ctx))
	if err != nil {
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err)
	}
	paneID, pid, err := e.Tmux.NewSession(ctx, tmux.NewSession{Name: s.Session, Dir: s.Cwd, Launcher: append(launcher, sb.wrap...), Argv: argv, Owner: e.Owner})
	if err != nil {
		// No launcher will read it.
		_ = os.Remove(envFile)
		return e.spawnRefused(ctx, r, s, string(ReasonSpawnRefused), err) // new session <name>: …
	}
	st.PaneID = paneID
	// The harness's process is recorded with its pane, not only once the
	// spawn is confirmed (markRunning): a daemon killed in between leaves
	// the next spawn its predecessor to wait for (endPredecessor), which
	// may outlive its tmux server's loss by the CLI's hangup delay.
	if p, err := proc.Lookup(pid); err == nil {
		st.HarnessPID, st.HarnessStart = p.PID, p.Start
	}
	e.Log.InfoContext(ctx, string(journal.SessionStarting), "work_item", r.Key.String(), "session", s.Session, "pane_id", paneID,
		"mode", string(mode), "harness_session_id", id, "delivery", s.DeliveryID, "project_settings", s.ProjectSettings, "reason", string(s.Reason))
	return e.put(ctx, r, st)
}

// endPredecessor makes sure the harness the item last ran (its process,
// recorded at mark_running) is gone before a new one starts on the same
// conversation. tmux kill-server and kill-session send it SIGHUP, and
// Claude Code 2.1.197 runs on for 40–150 ms after it (measured), writing
// its transcript, while a new server and pane start in less. It waits up
// to schema.PredecessorGrace, then kills the process group and waits as long
// again (proc.Process.End). A process still there after that leaves the
// spawn unstarted, retried by the next pass (spawn_interrupted), and is
// journaled (dispatch.failed reason=predecessor_running); it never runs
// next to a second agent.
func (e *Executor) endPredecessor(ctx context.Context, r *desired.Record, s Spawn) error {
	old := proc.Process{PID: r.Status.HarnessPID, Start: r.Status.HarnessStart}
	if old.PID == 0 {
		return nil
	}
	killed, err := old.End(ctx, schema.PredecessorGrace, schema.PredecessorPoll)
	if killed {
		e.Log.InfoContext(ctx, string(journal.SessionPredecessorKilled), "work_item", r.Key.String(), "session", s.Session, "pid", old.PID)
	}
	if err != nil {
		e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, "delivery", s.DeliveryID, "reason", string(ReasonPredecessorRunning), "pid", old.PID, "err", err)
		return fmt.Errorf("spawn %s: %w", s.Session, err)
	}
	st := r.Status
	st.HarnessPID, st.HarnessStart = 0, 0
	return e.put(ctx, r, st)
}

// endGroup ends the process group of session's pane (proc.Process.EndGroup)
// when ad stops by process group (harness.StopsProcessGroup), before the
// session is killed: such a CLI outlives kill-session (Gemini's two node
// processes keep running without their terminal, measured), and a pane
// that died of its own can have left members of its group behind. Only a
// pane of this loopd's session is touched. A member still running after
// SIGKILL is journaled (session.stop_unconfirmed) and returned as an
// error: the session stays, so the next pass finds the pane and tries
// again.
func (e *Executor) endGroup(ctx context.Context, r *desired.Record, session string, ad harness.Adapter) error {
	if !harness.StopsProcessGroup(ad) {
		return nil
	}
	panes, err := e.Tmux.ListPanes(ctx)
	if err != nil {
		return fmt.Errorf("end group of %s: %w", session, err)
	}
	for _, pn := range panes {
		if pn.Session != session || pn.Owner != e.Owner || pn.PID <= 0 {
			continue
		}
		p, err := proc.Lookup(pn.PID)
		if err != nil {
			p = proc.Process{PID: pn.PID} // gone: only its group can be left
		}
		// SIGHUP first, the hangup the pane's terminal sends.
		killed, err := p.EndGroup(ctx, syscall.SIGHUP, schema.PredecessorGrace, schema.GroupPoll)
		if killed {
			e.Log.InfoContext(ctx, string(journal.SessionGroupKilled), "work_item", r.Key.String(), "session", session, "pid", pn.PID)
		}
		if err != nil {
			e.record(ctx, slog.LevelError, journal.SessionStopUnconfirmed, r.Key, "session", session, "pid", pn.PID,
				"reason", string(ReasonProcessGroupRunning), "err", err)
			return fmt.Errorf("end group of %s: %w", session, err)
		}
	}
	return nil
}

// exitCause is what the item's harness says exit status means
// (harness.ExitCause), "" for nothing or an unknown status (-1).
func (e *Executor) exitCause(r *desired.Record, status int) string {
	ad, err := e.adapter(r.Spec.Harness)
	if err != nil || status < 0 {
		return ""
	}
	return harness.ExitCause(ad, status)
}

// spawnRefused records that a spawn was refused before it started, as a
// fact: the status stays Spawning with no pane and names the refusal
// (Status.SpawnRefused). The planner decides what follows on the next pass
// (a resume falls back to fresh; a fresh spawn counts a failure and backs
// off through the restart decision). The delivery stays pending.
func (e *Executor) spawnRefused(ctx context.Context, r *desired.Record, s Spawn, reason string, cause error) error {
	st := r.Status
	st.SpawnRefused = cause.Error()
	st.Reason = string(ReasonSpawnRefused)
	if Reason(reason).Environment() {
		// Not the conversation's fault: the planner keeps it (refused).
		st.Reason = reason
	}
	e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, "delivery", s.DeliveryID, "reason", reason, "err", cause)
	if err := e.put(ctx, r, st); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("%w: %w", ErrSpawnRefused, cause)
}

func (e *Executor) markRunning(ctx context.Context, r *desired.Record, a MarkRunning) error {
	// The spawn is over: its boot prompt was delivered (DeliveryID) or it
	// carried none that is still in flight.
	st := a.Apply(r.Status)
	// The harness's process, by pid and start time, for the next spawn
	// to wait for (endPredecessor): in a sandbox, its init, which ends
	// last; unknown without /proc.
	if p, err := proc.Lookup(sandboxInit(st, a.PID)); a.PID > 0 && err == nil {
		st.HarnessPID, st.HarnessStart = p.PID, p.Start
	}
	spawned := func() {
		follow := e.logOrAttach(a)
		switch {
		case a.Reason == ReasonAdopted:
			e.record(ctx, slog.LevelInfo, journal.SessionAdopted, r.Key, "session", a.Session, "pane_id", a.PaneID, "harness_session_id", st.HarnessSessionID)
		case a.Respawn:
			e.record(ctx, slog.LevelInfo, journal.SessionRespawned, r.Key, append([]any{"session", a.Session, "resumed", a.Mode == desired.SpawnResume,
				"harness_session_id", st.HarnessSessionID, "confirmed", a.Confirmed}, follow...)...)
			if a.Mode == desired.SpawnResume && e.Meter != nil {
				e.Meter.Resumed(r.Spec.Harness)
			}
		default:
			e.record(ctx, slog.LevelInfo, journal.SessionSpawned, r.Key, append([]any{"session", a.Session,
				"harness_session_id", st.HarnessSessionID, "confirmed", a.Confirmed}, follow...)...)
		}
	}
	return e.putDelivered(ctx, r, st, mark{id: a.DeliveryID, via: "boot_prompt", session: a.Session, verified: a.Confirmed, first: spawned})
}

func (e *Executor) followSession(ctx context.Context, r *desired.Record, a FollowSession) error {
	st := r.Status.Follow(a.To)
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.SessionFollowed, r.Key, "session", a.Session, "from", a.From,
		"harness_session_id", a.To, "source", a.Source)
	return nil
}

// paneTarget is the tmux target of an agent's pane: its pane id when the
// pass read one, else the session's active pane by exact name
// (tmux.Target).
func paneTarget(paneID, session string) string {
	if paneID != "" {
		return paneID
	}
	return tmux.Target(session)
}

// readPane returns r's adapter, the tmux target of its agent's pane
// (paneTarget) and a plain capture of it, read right before the executor
// acts on the pane; the error is the adapter's, or the capture's
// ("capture <target>: …") for the caller to name its operation.
func (e *Executor) readPane(ctx context.Context, r *desired.Record, paneID, session string) (harness.Adapter, string, string, error) {
	ad, err := e.adapter(r.Spec.Harness)
	if err != nil {
		return nil, "", "", err
	}
	target := paneTarget(paneID, session)
	screen, err := e.Tmux.CapturePane(ctx, target, false)
	return ad, target, screen, err
}

func (e *Executor) deliver(ctx context.Context, r *desired.Record, a DeliverPrompt) error {
	ad, target, screen, err := e.readPane(ctx, r, a.PaneID, a.Session)
	if err != nil {
		return fmt.Errorf("deliver %s: %w", a.DeliveryID, err)
	}
	class, why := ad.Screen(screen)
	switch {
	case class == harness.ScreenDraft && a.Retry:
		// Our earlier paste sits in the input box: its Enter was lost.
		return e.submit(ctx, r, ad, a, target, "resubmit")
	case class == harness.ScreenBlocked || class == harness.ScreenDraft:
		if r.Status.Reason != "blocked: "+why {
			e.record(ctx, slog.LevelWarn, journal.DispatchBlocked, r.Key, "delivery", a.DeliveryID, "session", a.Session, "reason", why)
			st := r.Status
			st.Reason = "blocked: " + why
			if err := e.put(ctx, r, st); err != nil {
				return err
			}
		}
		return fmt.Errorf("deliver %s to %s: %w (%s)", a.DeliveryID, a.Session, ErrNotReady, why)
	case class != harness.ScreenReady:
		return fmt.Errorf("deliver %s to %s: %w", a.DeliveryID, a.Session, ErrNotReady)
	case a.Retry && !a.Repaste:
		// The box is empty: the paste was submitted or lost. Give the
		// transcript until DeliveryConfirm before pasting a second copy.
		return fmt.Errorf("deliver %s to %s: %w (awaiting the transcript)", a.DeliveryID, a.Session, ErrNotReady)
	}
	prompt, err := e.prompt(ctx, r, a.DeliveryID)
	if err != nil {
		return err
	}
	if a.Preamble != "" && !a.Retry {
		// Outside the event's frame, which alone is checked in the
		// transcript.
		prompt = a.Preamble + "\n\n" + prompt
	}
	// The send is recorded before the paste, so a daemon killed after it
	// finds the delivery in flight and looks for it in the transcript
	// rather than pasting it twice. It stays pending until it shows there.
	st := r.Status.Send(a.DeliveryID, e.Now(), a.Retry)
	st.Reason = string(ReasonAwaitingDelivery)
	if a.Preamble != "" {
		st.HandBackUntold = false
	}
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if err := e.checkLease(ctx, "deliver", r.Key); err != nil {
		return err
	}
	// The screen said ready, but a dead CLI's input box stays drawn: tmux
	// itself checks, in the paste's own invocation, that the harness is
	// still the pane's foreground process.
	if err := e.Tmux.Paste(ctx, target, e.guard(ad), prompt); err != nil {
		e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, "delivery", a.DeliveryID, "reason", refusal(err, "paste_failed"), "err", err)
		return fmt.Errorf("deliver %s: %w", a.DeliveryID, err) // paste to <target>: …
	}
	if err := e.awaitPaste(ctx, ad, target); err != nil {
		e.record(ctx, slog.LevelWarn, journal.DispatchFailed, r.Key, "delivery", a.DeliveryID, "reason", string(ReasonPasteNotShown), "err", err)
		return fmt.Errorf("deliver %s to %s: %w", a.DeliveryID, a.Session, err)
	}
	return e.submit(ctx, r, ad, a, target, "paste")
}

// awaitPaste captures target until ad reads its input box as holding text
// (ScreenDraft), for at most PasteWait. The box was empty before the paste
// (deliver checks), so the text is the paste. It returns ErrNotReady when
// the paste did not show, and ctx's error or the capture's.
func (e *Executor) awaitPaste(ctx context.Context, ad harness.Adapter, target string) error {
	deadline := time.Now().Add(e.PasteWait)
	for {
		screen, err := e.Tmux.CapturePane(ctx, target, false)
		if err != nil {
			return err
		}
		if class, _ := ad.Screen(screen); class == harness.ScreenDraft {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w (the paste did not show in the input box within %s)", ErrNotReady, e.PasteWait)
		}
		t := time.NewTimer(schema.PastePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// guard is what a pane of ad must show for a paste or a key to reach it:
// this loopd's mark on its session, and the harness as its foreground
// process.
func (e *Executor) guard(ad harness.Adapter) tmux.Guard {
	return tmux.Guard{Owner: e.Owner, Commands: ad.ProcessNames()}
}

// refusal names why tmux refused a guarded paste or key, or other when it
// was not a refusal.
func refusal(err error, other string) string {
	switch {
	case errors.Is(err, tmux.ErrNotHarness):
		return string(ReasonForegroundNotHarness)
	case errors.Is(err, tmux.ErrForeign):
		return string(ReasonSessionForeign)
	case errors.Is(err, tmux.ErrPaneDead):
		return "pane_dead"
	}
	return other
}

// submit presses Enter in target and records the send; via says whether it
// follows a paste or resubmits text left in the input box.
func (e *Executor) submit(ctx context.Context, r *desired.Record, ad harness.Adapter, a DeliverPrompt, target, via string) error {
	if err := e.checkLease(ctx, "deliver", r.Key); err != nil {
		return err
	}
	if err := e.Tmux.SendKeys(ctx, target, e.guard(ad), "Enter"); err != nil {
		e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, "delivery", a.DeliveryID, "reason", refusal(err, "enter_failed"), "err", err)
		return fmt.Errorf("deliver %s: %w", a.DeliveryID, err) // send keys to <target>: …
	}
	if via == "resubmit" {
		if err := e.put(ctx, r, r.Status.Resubmit(e.Now())); err != nil {
			return err
		}
	}
	e.record(ctx, slog.LevelInfo, journal.DispatchSent, r.Key, "delivery", a.DeliveryID, "via", via, "session", a.Session,
		"bytes", promptBytes(r, a.DeliveryID), "attempt", r.Status.SendAttempts)
	return nil
}

// promptBytes returns the size in bytes of the prompt of r's pending
// delivery id (desired.Delivery.Size), 0 when it is not pending.
func promptBytes(r *desired.Record, id string) int {
	if i := slices.IndexFunc(r.Pending, func(d desired.Delivery) bool { return d.ID == id }); i >= 0 {
		return r.Pending[i].Size
	}
	return 0
}

func (e *Executor) confirmDelivery(ctx context.Context, r *desired.Record, a ConfirmDelivery) error {
	st := r.Status
	st.Reason = "delivered"
	return e.putDelivered(ctx, r, st, mark{id: a.DeliveryID, via: a.Via, session: a.Session, verified: a.Verified})
}

// drop takes a pending delivery out for good (Store.Drop) and journals
// dispatch.dropped with why.
func (e *Executor) drop(ctx context.Context, r *desired.Record, a DropDelivery) error {
	if err := e.Store.Drop(ctx, r.Key, a.DeliveryID); err != nil {
		return err // the store names the operation and the item
	}
	r.Pending = slices.DeleteFunc(slices.Clone(r.Pending), func(d desired.Delivery) bool { return d.ID == a.DeliveryID })
	e.record(ctx, slog.LevelInfo, journal.DispatchDropped, r.Key, "delivery", a.DeliveryID, "commit", a.Commit, "reason", string(a.Reason))
	return nil
}

func (e *Executor) stop(ctx context.Context, r *desired.Record, a StopSession) error {
	if ad, err := e.adapter(r.Spec.Harness); err == nil {
		if err := e.endGroup(ctx, r, a.Session, ad); err != nil {
			return fmt.Errorf("stop %s: %w", r.Key, err)
		}
	}
	// A session of another owner is not this item's to stop: it is left
	// running (ErrForeign), as a missing one is.
	if err := e.Tmux.KillSession(ctx, a.Session, e.Owner); err != nil && !errors.Is(err, tmux.ErrNoSession) && !errors.Is(err, tmux.ErrForeign) {
		return fmt.Errorf("stop %s: %w", r.Key, err)
	}
	// A pane that died before its launcher ran left its env file.
	if err := e.Launcher.Discard(a.Session); err != nil {
		return fmt.Errorf("stop %s: %w", r.Key, err)
	}
	// A run of the process runner in flight ends with its group.
	if err := e.endRun(ctx, r, a.Session); err != nil {
		return fmt.Errorf("stop %s: %w", r.Key, err)
	}
	// Whatever was in flight ends with the session; what did not land is
	// still pending.
	if err := e.putDelivered(ctx, r, a.Apply(r.Status), viaTranscript(a.Delivered, a.Session)); err != nil {
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.SessionStopped, r.Key, "session", a.Session, "reason", string(a.Reason))
	return nil
}

func (e *Executor) recordExit(ctx context.Context, r *desired.Record, a RecordExit) error {
	retired := r.Status.HarnessSessionID
	output := e.lastWords(ctx, a.PaneID)
	if err := e.putDelivered(ctx, r, a.Apply(r.Status, e.Now()), viaTranscript(a.Delivered, a.Session)); err != nil {
		return err
	}
	level := slog.LevelWarn
	if a.Clean {
		level = slog.LevelInfo
	}
	kv := append([]any{"session", a.Session}, a.exitAttrs()...)
	kv = append(kv, "clean", a.Clean, "reason", string(a.Reason), "failures", a.Failures, "fast_failures", a.FastFailures, "churn_failures", a.ChurnFailures)
	if a.Phase == desired.PhaseBackingOff && !a.NextAttempt.IsZero() {
		// When the restart comes, and the backoff it waits.
		kv = append(kv, "delay", a.Delay, "next_attempt", a.NextAttempt.UTC().Format(time.RFC3339))
	}
	if a.Foreground != "" {
		kv = append(kv, "foreground", a.Foreground)
	}
	if output != "" {
		kv = append(kv, "output", output)
	}
	cause := ""
	if !a.Killed() {
		cause = e.exitCause(r, a.ExitStatus)
	}
	if cause != "" {
		kv = append(kv, "exit_cause", cause)
	}
	e.record(ctx, level, journal.SessionExited, r.Key, kv...)
	if a.DeliveryID != "" {
		kv := append([]any{"delivery", a.DeliveryID, "reason", string(a.Reason)}, a.exitAttrs()...)
		if cause != "" {
			kv = append(kv, "exit_cause", cause)
		}
		if output != "" {
			kv = append(kv, "output", output)
		}
		e.record(ctx, slog.LevelError, journal.DispatchFailed, r.Key, kv...)
	}
	if a.Retire != "" {
		e.record(ctx, slog.LevelWarn, journal.SessionCrashLoop, r.Key, "harness", r.Spec.Harness, "retired_session_id", retired,
			"reason", string(a.Retire), "failures", a.Failures, "next_attempt", a.NextAttempt.UTC().Format(time.RFC3339))
	}
	return nil
}

// lastWords returns what the dead agent printed last (tmux.Tail of
// paneID, the pane the pass saw: RecordExit.PaneID), read before the exit
// is recorded and the spawn that follows replaces the pane, so that every
// crash of a loop can be read back (loopd events). It adds to rows
// recorded anyway: no pane (a run of the process runner, a session gone)
// reads nothing, and a pane gone in the meantime or a capture that fails
// gives "" (the key is left out).
func (e *Executor) lastWords(ctx context.Context, paneID string) string {
	if paneID == "" {
		return ""
	}
	out, err := tmux.Tail(ctx, e.Tmux, paneID)
	if err != nil {
		return ""
	}
	return out
}

func (e *Executor) giveUp(ctx context.Context, r *desired.Record, a GiveUp) error {
	st := a.Apply(r.Status, r.Spec.Generation)
	// What the pane shows goes in the status, so that the notice of this
	// episode names the dialog that holds the agent.
	if a.Path == "" {
		st.Screen = e.screenOf(ctx, r, a.Session)
	}
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	if a.Mangled != "" {
		e.record(ctx, slog.LevelError, journal.DispatchMangled, r.Key, "delivery", a.Mangled, "session", a.Session,
			"copies", a.Copies, "reason", "frame_not_whole")
	}
	name := journal.SessionNeedsAttention
	if a.Reason == ReasonBudgetExhausted {
		name = journal.SessionCrashLoop
	}
	kv := []any{"session", a.Session, "harness", r.Spec.Harness,
		"reason", string(a.Reason), "failures", st.Failures}
	if a.Path != "" {
		kv = append(kv, "cwd", a.Path, "detail", workspace.Mask(a.Detail))
	} else {
		kv = append(kv, "screen", st.Screen)
	}
	e.record(ctx, slog.LevelError, name, r.Key, append(kv, "release", "loopd release "+r.Key.String())...)
	return nil
}

// prepareWorkspace makes the item's workdir. A plain directory is made at
// once (mkdir -p). A git clone (workspace.Manager.Prepare) is never made
// inside the pass, whose reconcile lock every other item waits on while a
// remote stalls: the item goes to Preparing (Status.PrepareStarted, the
// reason, workspace.preparing) and a worker makes it under ctx, the
// daemon's (serve) or the command's (reconcile --once); the spawn that
// follows is skipped (ErrWorkspacePreparing) until the worker's outcome is
// recorded (prepared) and wakes a pass. An item whose worker still runs is
// not handed to a second one. A failure is journaled (workspace.failed)
// with the git command, its exit status and its stderr tail, credentials
// masked, and the status takes the phase the planner chose for it:
// NeedsAttention when permanent, or when a transient failure has no retry
// left; BackingOff for a.RetryAfter from the failure otherwise. Either way
// the event stays pending.
func (e *Executor) prepareWorkspace(ctx context.Context, r *desired.Record, a PrepareWorkspace) error {
	c := a.Checkout
	if c == nil {
		if err := workspace.MakeDir(a.Dir); err != nil {
			return e.workspaceFailed(ctx, r, a, err)
		}
		return e.workspaceReady(ctx, r, a, workspace.Result{Dir: a.Dir})
	}
	if e.Workspaces == nil {
		return e.workspaceFailed(ctx, r, a, &workspace.Error{Op: "prepare", Command: "-", Exit: -1, Class: workspace.Permanent, Reason: "no_workspaces", Err: errors.New("no workspace manager")})
	}
	if !e.claim(r.Key) {
		return fmt.Errorf("prepare %s: %w", r.Key, ErrWorkspacePreparing)
	}
	st := r.Status
	st.Phase, st.PrepareStarted, st.Reason = desired.PhasePreparing, e.Now(), string(a.Reason)
	if err := e.put(ctx, r, st); err != nil {
		e.unclaim(r.Key)
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.WorkspacePreparing, r.Key, "cwd", a.Dir, "url", workspace.Mask(c.URL), "mode", string(c.Mode),
		"branch", c.Branch, "reason", string(a.Reason))
	e.workers.Go(func() { e.prepareInWorker(ctx, r.Key, st.PrepareStarted, a) })
	return fmt.Errorf("prepare %s: %w", r.Key, ErrWorkspacePreparing)
}

// prepareInWorker makes the clone of a and records the outcome on k's
// status, under the reconcile lock, when that status is still the
// Preparing one of started; then it wakes a pass. The outcome is written
// with a context that outlives ctx (schema.OutcomeWriteTimeout): a stopping
// daemon records that it cut the preparation short (workspaceInterrupted),
// counting no failure. A status that moved on meanwhile (a close, a hold,
// a release) keeps its phase: the outcome is only journaled, and the next
// pass plans from what the disk then shows.
func (e *Executor) prepareInWorker(ctx context.Context, k desired.Key, started time.Time, a PrepareWorkspace) {
	defer func() {
		e.unclaim(k)
		if e.Wake != nil {
			e.Wake()
		}
	}()
	c := a.Checkout
	res, err := e.Workspaces.Prepare(ctx, workspace.Checkout{URL: c.URL, Dir: a.Dir, Mode: workspace.Mode(c.Mode), Branch: c.Branch, Base: c.Base, PR: c.PR,
		PushURL: c.PushURL, PushBranch: c.PushBranch})
	// When the lock or the read fails, the status still says Preparing,
	// with no worker: the next pass prepares again
	// (workspace_interrupted), and finds the clone.
	e.workerOutcome(ctx, k, a.Name(), err, func(wctx context.Context, r *desired.Record) error {
		if r.Status.Phase != desired.PhasePreparing || !r.Status.PrepareStarted.Equal(started) {
			if err != nil {
				e.record(wctx, slog.LevelWarn, journal.WorkspaceFailed, k, append(failureKV(a, err), "reason", string(ReasonWorkspaceFailed), "phase", string(r.Status.Phase))...)
			} else {
				e.record(wctx, slog.LevelInfo, journal.WorkspacePrepared, k, "cwd", res.Dir, "reason", string(a.Reason), "phase", string(r.Status.Phase))
			}
			return nil
		}
		switch {
		case err == nil:
			return e.workspaceReady(wctx, r, a, res)
		case ctx.Err() != nil || workspace.Cancelled(err):
			return e.workspaceInterrupted(wctx, r, a, err)
		default:
			e.mu.Lock()
			e.failedPrepares++
			e.mu.Unlock()
			return e.workspaceFailed(wctx, r, a, err)
		}
	})
}

// workerOutcome records what a workspace worker's action did (cause, its
// error) with write, on k's record read under the reconcile lock, with a
// context that outlives ctx (schema.OutcomeWriteTimeout): a stopping
// daemon still records it. A lock, a read or a write that fails is
// logged (action.failed).
func (e *Executor) workerOutcome(ctx context.Context, k desired.Key, action string, cause error, write func(context.Context, *desired.Record) error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), schema.OutcomeWriteTimeout)
	defer cancel()
	err := func() error {
		unlock, err := e.Store.Lock(wctx)
		if err != nil {
			return errors.Join(cause, err)
		}
		defer unlock()
		r, err := e.Store.Get(wctx, k)
		if err != nil {
			return errors.Join(cause, err)
		}
		return write(wctx, &r)
	}()
	if err != nil {
		e.Log.ErrorContext(wctx, string(journal.ActionFailed), "work_item", k.String(), "action", action, "err", err)
	}
}

// fetchHead hands the fetch of a to the item's workspace worker, as a
// preparation is: never inside the pass, which a stalled remote would hold
// for every other item. The status records the fetch in flight
// (Status.HeadFetch) and the worker its outcome (headFetched). An item
// whose worker still runs is not handed to a second one.
func (e *Executor) fetchHead(ctx context.Context, r *desired.Record, a FetchHead) error {
	if e.Workspaces == nil {
		// No mirror to fetch into: the event goes on as after a failure.
		st := r.Status
		st.HeadFetch = desired.HeadFetch{Commit: a.Commit, Started: e.Now(), Outcome: desired.HeadFetchFailed}
		e.record(ctx, slog.LevelWarn, journal.WorkspaceFailed, r.Key, "delivery", a.DeliveryID, "commit", a.Commit,
			"reason", string(ReasonHeadFetchFailed), "err", "no workspace manager")
		return e.put(ctx, r, st)
	}
	if !e.claim(r.Key) {
		return fmt.Errorf("fetch %s: %w", r.Key, ErrWorkspacePreparing)
	}
	st := r.Status
	st.HeadFetch = desired.HeadFetch{Commit: a.Commit, Started: e.Now()}
	if err := e.put(ctx, r, st); err != nil {
		e.unclaim(r.Key)
		return err
	}
	e.record(ctx, slog.LevelInfo, journal.WorkspacePreparing, r.Key, "delivery", a.DeliveryID, "url", workspace.Mask(a.URL), "commit", a.Commit,
		"reason", string(ReasonHeadFetching))
	started := st.HeadFetch.Started
	e.workers.Go(func() { e.fetchInWorker(ctx, r.Key, started, a) })
	return nil
}

// fetchInWorker fetches a's commit into its mirror
// (workspace.Manager.FetchHead; the agent's own commits are never
// touched) and records the outcome on k's status, under the reconcile
// lock, when that status still names the fetch of started; then it wakes
// a pass. A failure is journaled (workspace.failed
// reason=head_fetch_failed) and the event goes on: the agent can fetch it
// itself. A fetch cut short by a stopping daemon records nothing: the
// next start fetches again.
func (e *Executor) fetchInWorker(ctx context.Context, k desired.Key, started time.Time, a FetchHead) {
	defer func() {
		e.unclaim(k)
		if e.Wake != nil {
			e.Wake()
		}
	}()
	fetched, err := e.Workspaces.FetchHead(ctx, a.URL, a.PR, a.Commit)
	if ctx.Err() != nil {
		return
	}
	// When the lock or the read fails, the status still names the fetch
	// with no outcome: the next pass fetches again.
	e.workerOutcome(ctx, k, a.Name(), err, func(wctx context.Context, r *desired.Record) error {
		if hf := r.Status.HeadFetch; hf.Commit == a.Commit && hf.Started.Equal(started) && hf.Outcome == "" {
			st := r.Status
			st.HeadFetch.Outcome = desired.HeadFetched
			if err != nil {
				st.HeadFetch.Outcome = desired.HeadFetchFailed
			}
			if perr := e.put(wctx, r, st); perr != nil {
				return errors.Join(err, perr)
			}
		}
		// A status that moved on meanwhile only has the outcome journaled.
		switch {
		case err != nil:
			e.record(wctx, slog.LevelWarn, journal.WorkspaceFailed, k, "delivery", a.DeliveryID, "commit", a.Commit,
				"reason", string(ReasonHeadFetchFailed), "err", workspace.Mask(err.Error()))
		case fetched:
			e.record(wctx, slog.LevelInfo, journal.WorkspacePrepared, k, "delivery", a.DeliveryID, "commit", a.Commit,
				"reason", "head_fetched")
		}
		return nil
	})
}

// claim reports whether k had no preparation or head fetch running in
// this executor, and marks it running.
func (e *Executor) claim(k desired.Key) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.preparing[k] {
		return false
	}
	if e.preparing == nil {
		e.preparing = map[desired.Key]bool{}
	}
	e.preparing[k] = true
	return true
}

func (e *Executor) unclaim(k desired.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.preparing, k)
}

// Preparing returns how many preparations and head fetches this
// executor's workers are running.
func (e *Executor) Preparing() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.preparing)
}

// WaitWorkspaces waits until every preparation handed to a worker so far
// has recorded its outcome (each git command is bounded by the Manager's
// timeout), and returns how many recorded a failure since the last call.
func (e *Executor) WaitWorkspaces() (failed int) {
	e.workers.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	failed, e.failedPrepares = e.failedPrepares, 0
	return failed
}

// workspaceReady records that the item's workdir is ready: the failure and
// the removal at a close are forgotten, and an item that was Preparing
// goes Idle, from where the next pass spawns it.
func (e *Executor) workspaceReady(ctx context.Context, r *desired.Record, a PrepareWorkspace, res workspace.Result) error {
	st := r.Status
	st.WorkspaceError = ""
	if st.Workspace == desired.WorkspaceRemoved {
		st.Workspace = ""
	}
	if st.Phase == desired.PhasePreparing {
		st.Phase, st.Reason, st.PrepareStarted = desired.PhaseIdle, string(ReasonWorkspaceReady), time.Time{}
		if a.Resume {
			st.Phase, st.NextAttempt = desired.PhaseBackingOff, e.Now()
		}
	}
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	kv := []any{"cwd", res.Dir, "reason", string(a.Reason)}
	if a.Checkout != nil {
		kv = append(kv, "url", workspace.Mask(a.Checkout.URL), "branch", res.Branch, "commit", res.Commit,
			journal.KeyExisting, res.Existing, journal.KeyRepaired, res.Repaired, journal.KeyMigrated, res.Migrated)
		if len(res.Repairs) > 0 {
			kv = append(kv, journal.KeyRepairs, strings.Join(res.Repairs, "; "))
		}
	}
	e.record(ctx, slog.LevelInfo, journal.WorkspacePrepared, r.Key, kv...)
	return nil
}

// workspaceInterrupted records a preparation cut short by a stopping
// daemon: not a failure of the workspace, so no failure is counted and no
// backoff set; the item goes Idle and the next start prepares again at
// once (repairing what it left).
func (e *Executor) workspaceInterrupted(ctx context.Context, r *desired.Record, a PrepareWorkspace, cause error) error {
	st := r.Status
	st.Phase, st.Reason, st.PrepareStarted = desired.PhaseIdle, string(ReasonWorkspaceInterrupted), time.Time{}
	e.record(ctx, slog.LevelWarn, journal.WorkspaceInterrupted, r.Key, append(failureKV(a, cause), "reason", string(ReasonWorkspaceInterrupted), "failures", st.Failures)...)
	return e.put(ctx, r, st)
}

// failureKV returns the journal attributes of a failed preparation: the
// workdir, the class and, for a git failure, its operation, command, exit
// status and stderr tail, and the error, credentials masked.
func failureKV(a PrepareWorkspace, cause error) []any {
	kv := []any{"cwd", a.Dir, "class", string(workspace.ClassOf(cause))}
	var we *workspace.Error
	if errors.As(cause, &we) {
		kv = append(kv, "op", we.Op, "command", we.Command, "exit_status", we.Exit, "stderr", we.Stderr)
	}
	return append(kv, "err", workspace.Mask(cause.Error()))
}

// workspaceFailed records a failed PrepareWorkspace as the planner decided
// it (see prepareWorkspace).
func (e *Executor) workspaceFailed(ctx context.Context, r *desired.Record, a PrepareWorkspace, cause error) error {
	class := workspace.ClassOf(cause)
	reason := ReasonWorkspaceFailed
	if errors.Is(cause, workspace.ErrConflict) {
		reason = ReasonWorkspaceConflict
	}
	st := r.Status
	st.WorkspaceError = workspace.Mask(cause.Error())
	st.Failures = a.Failures
	st.Reason = string(reason)
	st.LastExitReason = string(ReasonWorkspaceFailed)
	st.PrepareStarted = time.Time{}
	kv := append(failureKV(a, cause), "failures", a.Failures, "pending", len(r.Pending))
	if class == workspace.Transient && a.Retry {
		st.Phase, st.NextAttempt = desired.PhaseBackingOff, e.Now().Add(a.RetryAfter)
		kv = append(kv, "next_attempt", st.NextAttempt.UTC().Format(time.RFC3339))
	} else {
		st.Phase, st.NextAttempt = desired.PhaseNeedsAttention, time.Time{}
		st.AttentionGeneration = r.Spec.Generation
		kv = append(kv, "release", "loopd release "+r.Key.String())
	}
	e.record(ctx, slog.LevelError, journal.WorkspaceFailed, r.Key, append(kv, "reason", string(reason))...)
	if err := e.put(ctx, r, st); err != nil {
		return errors.Join(cause, err)
	}
	return fmt.Errorf("%w: %s: %s", ErrWorkspaceFailed, r.Key, workspace.Mask(cause.Error()))
}

// removeWorkspace removes a closed item's clone when it is clean, or
// keeps it and journals why (workspace.kept); the status records either,
// so the close is done with the clone once.
func (e *Executor) removeWorkspace(ctx context.Context, r *desired.Record, a RemoveWorkspace) error {
	kept, err := "", error(nil)
	if e.Workspaces == nil {
		kept = "no_workspaces"
	} else {
		kept, err = e.Workspaces.Remove(ctx, a.URL, a.Dir)
	}
	st := r.Status
	switch {
	case err != nil:
		kept = "remove_failed"
		e.record(ctx, slog.LevelError, journal.WorkspaceFailed, r.Key, "cwd", a.Dir, "reason", kept, "err", workspace.Mask(err.Error()))
		fallthrough
	case kept != "":
		st.Workspace = desired.WorkspaceKept
		e.record(ctx, slog.LevelInfo, journal.WorkspaceKept, r.Key, "cwd", a.Dir, "reason", kept)
	default:
		st.Workspace = desired.WorkspaceRemoved
		e.record(ctx, slog.LevelInfo, journal.WorkspaceRemoved, r.Key, "cwd", a.Dir)
	}
	return e.put(ctx, r, st)
}

// reportWorkdir journals once that the route renders another workdir than
// the pinned one (workspace.pinned), and records that it did.
func (e *Executor) reportWorkdir(ctx context.Context, r *desired.Record, a ReportWorkdir) error {
	st := r.Status
	st.WorkdirReported = a.Rendered
	if err := e.put(ctx, r, st); err != nil {
		return err
	}
	e.record(ctx, slog.LevelWarn, journal.WorkspacePinned, r.Key, "cwd", a.Pinned, "config_cwd", a.Rendered,
		"reason", "conversation_pinned")
	return nil
}

// release carries out an operator's release: the counts of the restart
// budget and NeedsAttention are cleared, and the item goes to the phase the
// planner chose; a fresh release retires the conversation id.
func (e *Executor) release(ctx context.Context, r *desired.Record, a Release) error {
	if err := e.put(ctx, r, a.Apply(r.Status)); err != nil {
		return err
	}
	kv := []any{"session", a.Session, "fresh", a.Fresh, "phase", string(a.Phase)}
	if a.RetireID != "" {
		kv = append(kv, "retired_session_id", a.RetireID)
	}
	e.record(ctx, slog.LevelInfo, journal.ItemReleased, r.Key, kv...)
	return nil
}

// screenOf names what the harness's pane shows, for the operator: a
// dialog's reason, or the screen class; "" when it cannot be read.
func (e *Executor) screenOf(ctx context.Context, r *desired.Record, session string) string {
	ad, err := e.adapter(r.Spec.Harness)
	if err != nil {
		return ""
	}
	text, err := e.Tmux.CapturePane(ctx, tmux.Target(session), false)
	if err != nil {
		return ""
	}
	class, why := ad.Screen(text)
	if why != "" {
		return why
	}
	return string(class)
}

// block records why an item cannot proceed, logging it once per reason, and
// returns an error so the item's later actions are skipped.
func (e *Executor) block(ctx context.Context, r *desired.Record, reason Reason, detail string) error {
	err := fmt.Errorf("%s: %w", r.Key, ErrWorkspaceMissing)
	name := journal.WorkspaceMissing
	switch reason {
	case ReasonHarnessUnknown:
		err = fmt.Errorf("%s: %w %q", r.Key, ErrUnknownHarness, detail)
		name = journal.DispatchFailed
	case ReasonNotHeadless:
		err = fmt.Errorf("%s: %w: %q", r.Key, ErrNotHeadless, detail)
		name = journal.DispatchFailed
	case ReasonHarnessMissing:
		err = fmt.Errorf("%s: %w: %s", r.Key, ErrHarnessMissing, detail)
		name = journal.HarnessMissing
	case ReasonSessionForeign:
		err = fmt.Errorf("%s: %w (%s)", r.Key, ErrSessionForeign, detail)
		name = journal.SessionForeign
	}
	if r.Status.Reason == string(reason) {
		return err
	}
	e.record(ctx, slog.LevelError, name, r.Key, "reason", string(reason), "detail", detail, "pending", len(r.Pending))
	st := r.Status
	st.Reason = string(reason)
	if perr := e.put(ctx, r, st); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}
