package reconciler

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/schema"
)

// The size of the model-based test: seeds, random steps per seed, items.
const (
	modelSeeds = 500
	modelSteps = 200
	modelItems = 3
)

// modelSeed, when not negative, runs TestPlanModel on that seed alone and
// prints its steps: go test ./reconciler -run TestPlanModel -args -model.seed=N.
var modelSeed = flag.Int("model.seed", -1, "run TestPlanModel on this seed alone")

// TestPlanModel runs the planner against a fake world over many seeds: a
// tmux server whose panes hold fake agents, conversations that hold the
// user turns that reached them, and the store's records. Each step is a
// random new delivery, hold, release (fresh or not), close or reopen; an
// agent's death (a clean exit, a crash, a kill, a death whose status tmux
// has not reaped yet); the agents' progress (a boot prompt landing, a
// resume that fails); the loss of the tmux server; or a reconcile pass,
// which may be cut short by a daemon kill at any action, within a spawn
// between its recorded intent and new-session or between new-session and
// its recorded pane, and within a paste between its recorded send and the
// paste or between the paste and its Enter. A restarted daemon plans from
// the records alone, and the world keeps its panes. The world applies the
// plan as the executor does, through the same status transitions
// (actions' Apply, desired.Status). After every step it checks that an
// item never has two agents, that no spawn replaces a spawn in flight or
// a live agent (release --fresh aside), that no retired conversation is
// resumed and that no delivery reaches a conversation twice; after the
// steps the world goes quiet (no more faults) and every delivery still
// pending must be on an item in NeedsAttention, Stopped, or blocked.
func TestPlanModel(t *testing.T) {
	seeds := make([]uint64, 0, modelSeeds)
	if *modelSeed >= 0 {
		seeds = append(seeds, uint64(*modelSeed))
	} else {
		for s := range uint64(modelSeeds) {
			seeds = append(seeds, s)
		}
	}
	for _, seed := range seeds {
		w := newWorld(seed)
		if err := w.run(); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test ./reconciler -run TestPlanModel -args -model.seed=%d\nsteps:\n%s",
				seed, err, seed, strings.Join(w.steps, "\n"))
		}
		if len(seeds) == 1 {
			t.Logf("steps:\n%s", strings.Join(w.steps, "\n"))
		}
	}
}

// modelAgent is a fake harness process in a pane.
type modelAgent struct {
	key  desired.Key
	conv string // the conversation it runs
	// boot is what the boot prompt not yet in the conversation holds: the
	// delivery it carries, if any, and its spawn's boot id; nil once it
	// landed.
	boot []string
	// resumed is true for a resume's agent, and reported once it made its
	// SessionStart report (which says it runs, not that its boot prompt
	// landed).
	resumed, reported bool
	// failResume is a resume that does not hold: the agent exits at its
	// first tick, its conversation untouched; refuses is true when it
	// says so itself (its conversation is missing).
	failResume, refuses bool
	draft               string // a delivery pasted into the input box, not submitted
}

// modelPane is one pane of the fake tmux server.
type modelPane struct {
	id     string
	pid    int
	dead   bool
	status int
	signal int
	known  bool // the exit status is known (tmux reaped the child)
	diedAt time.Time
	agent  *modelAgent
	// refused is true for a pane whose agent died refusing to resume its
	// conversation (harness.RefusalNotResumable on its last words).
	refused bool
}

// world is the fake world: the store's records, the tmux server and the
// conversations.
type world struct {
	rng   *rand.Rand
	now   time.Time
	p     Policy
	quiet bool // no more faults: agents live, pastes land, resumes hold
	keys  []desired.Key
	recs  map[desired.Key]*desired.Record
	panes map[string]*modelPane // by session name
	// serverGone is true from the loss of the tmux server until a pass
	// that spawns starts a new one (Watcher.EnsureServer).
	serverGone bool
	convs      map[string][]string // conversation id → the user turns that reached it
	retired    map[string]bool     // every conversation id ever retired
	// before holds each item's status as the pass in progress found it.
	before map[desired.Key]desired.Status
	n      int // for fresh ids, pane ids and deliveries
	steps  []string
}

// errModel is what an action the fake executor refuses returns (not ready,
// a dead pane, a daemon kill): the item's later actions are skipped, as
// Executor.Execute skips them.
var errModel = errors.New("refused")

func newWorld(seed uint64) *world {
	p := testPolicy()
	p.Harnesses = map[string]Capabilities{"claude-code": p.Harnesses["claude-code"]}
	w := &world{rng: rand.New(rand.NewPCG(seed, 0x10095)), now: t0, p: p, recs: map[desired.Key]*desired.Record{},
		panes: map[string]*modelPane{}, convs: map[string][]string{}, retired: map[string]bool{}}
	for i := 1; i <= modelItems; i++ {
		k := desired.Key{Owner: "octo-org", Repo: "api", Number: i}
		w.keys = append(w.keys, k)
		w.recs[k] = &desired.Record{Key: k, Spec: desired.Spec{Kind: desired.KindIssue, Harness: "claude-code", Cwd: fmt.Sprintf("/w/%d", i)}}
	}
	return w
}

func (w *world) logf(format string, args ...any) {
	w.steps = append(w.steps, fmt.Sprintf("%4d %s ", len(w.steps), w.now.Sub(t0))+fmt.Sprintf(format, args...))
}

// newID returns a fresh conversation id, a UUID as Claude Code takes.
func (w *world) newID() string {
	w.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", w.n)
}

// run takes modelSteps random steps, then lets the world go quiet, and
// returns the first broken invariant.
func (w *world) run() error {
	for range modelSteps {
		w.now = w.now.Add(time.Duration(w.rng.IntN(20_000)) * time.Millisecond)
		if err := w.step(); err != nil {
			return err
		}
	}
	w.quiet = true
	w.logf("quiet")
	if w.rng.IntN(2) == 0 {
		// Half the worlds end with every item open and released, so that
		// their deliveries must end delivered or waiting for a human.
		for _, k := range w.keys {
			r := w.recs[k]
			if r.Spec.Closed || r.Spec.Held {
				r.Spec.Closed, r.Spec.Held = false, false
				r.Spec.Generation++
				r.Spec.ReleaseGeneration = r.Spec.Generation
				w.logf("reopen and release %s", k)
			}
		}
	}
	for range 400 {
		w.now = w.now.Add(5 * time.Second)
		w.tick()
		settled, err := w.pass(-1, 0)
		if err != nil {
			return err
		}
		if settled && !w.agentsBusy() {
			return w.checkEnd()
		}
	}
	return errors.New("the world never settled")
}

func (w *world) step() error {
	k := w.keys[w.rng.IntN(len(w.keys))]
	r := w.recs[k]
	switch n := w.rng.IntN(100); {
	case n < 14:
		w.n++
		d := desired.Delivery{ID: "d-" + strconv.Itoa(w.n), Event: "issue_comment", Action: "created", ReceivedAt: w.now}
		d.Prompt = "[loopd] issue_comment.created on " + k.String() + "\n" + desired.FrameBegin(d.ID) + "hi\n" + desired.FrameEnd(d.ID, "hi\n")
		r.Pending = append(r.Pending, d.Compact()) // as the store gives it to a pass
		r.Spec.Generation++
		w.logf("event %s %s", k, d.ID)
	case n < 16:
		r.Spec.Held = true
		r.Spec.Generation++
		w.logf("hold %s", k)
	case n < 19:
		r.Spec.Held = false
		r.Spec.Generation++
		r.Spec.ReleaseGeneration, r.Spec.ReleaseFresh = r.Spec.Generation, w.rng.IntN(3) == 0
		w.logf("release %s fresh=%t", k, r.Spec.ReleaseFresh)
	case n < 21:
		r.Spec.Closed = !r.Spec.Closed
		r.Spec.Generation++
		w.logf("closed %s %t", k, r.Spec.Closed)
	case n < 33:
		w.kill(desired.SessionName(k))
	case n < 34:
		w.logf("tmux server lost")
		w.panes, w.serverGone = map[string]*modelPane{}, true
	case n < 55:
		w.tick()
	default:
		// A pass, one in six cut short by a daemon kill.
		crash, within := -1, 0
		if w.rng.IntN(6) == 0 {
			crash, within = w.rng.IntN(8), w.rng.IntN(3)
		}
		if _, err := w.pass(crash, within); err != nil {
			return err
		}
	}
	return w.check()
}

// kill ends the agent of session: a clean exit, a crash, a SIGKILL, or a
// death whose exit status tmux has not reaped yet.
func (w *world) kill(session string) {
	pn := w.panes[session]
	if pn == nil || pn.dead {
		return
	}
	pn.dead, pn.agent, pn.known, pn.diedAt = true, nil, true, w.now
	switch w.rng.IntN(4) {
	case 0:
		w.logf("agent exits %s", session)
	case 1:
		pn.status = 1
		w.logf("agent crashes %s", session)
	case 2:
		pn.signal = 9
		w.logf("agent killed %s", session)
	default:
		pn.status, pn.known, pn.diedAt = 1, false, time.Time{}
		w.logf("agent dies, status not reaped %s", session)
	}
}

// tick lets every agent make progress: a resume that does not hold exits;
// a resumed agent reports its start (SessionStart), before or after its
// boot prompt lands; a boot prompt lands in the conversation (unless the
// world is not quiet and it takes one more tick); tmux reaps what it had
// not.
func (w *world) tick() {
	for _, s := range slices.Sorted(maps.Keys(w.panes)) {
		pn := w.panes[s]
		switch a := pn.agent; {
		case pn.dead && !pn.known:
			pn.known, pn.diedAt = true, w.now
			w.logf("tmux reaps %s", s)
		case a == nil:
		case a.failResume:
			pn.dead, pn.agent, pn.status, pn.known, pn.diedAt, pn.refused = true, nil, 1, true, w.now, a.refuses
			w.logf("resume fails %s (refused=%t)", s, a.refuses)
		case a.resumed && !a.reported && (w.quiet || w.rng.IntN(2) == 0):
			a.reported = true
			w.recs[a.key].Report = &desired.SessionReport{SessionID: a.conv, Source: "resume", At: w.now}
			w.logf("session start reported %s %s", s, a.conv)
		case len(a.boot) > 0 && (w.quiet || w.rng.IntN(3) > 0):
			for _, id := range a.boot {
				w.land(a, id)
			}
			w.logf("boot prompt lands %s %v in %s", s, a.boot, a.conv)
			a.boot = nil
		}
	}
}

// land puts a user turn holding id in a's conversation.
func (w *world) land(a *modelAgent, id string) {
	w.convs[a.conv] = append(w.convs[a.conv], id)
}

// agentsBusy reports whether some agent still has a boot prompt to land
// or a status to be reaped.
func (w *world) agentsBusy() bool {
	for _, pn := range w.panes {
		if (pn.dead && !pn.known) || (pn.agent != nil && (len(pn.agent.boot) > 0 || pn.agent.failResume)) {
			return true
		}
	}
	return false
}

// observe is what the Observer reads for records: one snapshot, and the
// disk facts each record's Need (needs) asks for.
func (w *world) observe(records []desired.Record) observed.Observation {
	snap := observed.Snapshot{Panes: map[string]tmux.Pane{}, At: w.now, ServerGone: w.serverGone}
	for s, pn := range w.panes {
		p := tmux.Pane{Session: s, PaneID: pn.id, PID: pn.pid, Dead: pn.dead, Owner: testOwner, CurrentCommand: "claude"}
		if pn.dead && pn.known {
			p.DeadStatus, p.DeadSignal, p.StatusKnown, p.DeadTime = pn.status, pn.signal, true, pn.diedAt.Truncate(time.Second)
		}
		snap.Panes[s] = p
	}
	o := observed.Observation{Snapshot: snap, Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{},
		Workdirs: map[desired.Key]observed.Workdir{}, Frames: map[desired.Key]map[string]harness.Found{}, Exits: map[desired.Key]observed.Exit{}}
	need := needs(w.p, w.now)
	for _, r := range records {
		n := need(r, snap)
		if pn := w.panes[desired.SessionName(r.Key)]; n.Exit && pn != nil && pn.refused {
			o.Exits[r.Key] = observed.Exit{Refusal: harness.RefusalNotResumable}
		}
		if !n.Disk {
			continue
		}
		dir := r.Workdir()
		o.Workdirs[r.Key] = observed.Workdir{Path: dir, Exists: true, Physical: dir}
		id := r.Status.HarnessSessionID
		if id == "" {
			continue
		}
		turns, ok := w.convs[id]
		o.Transcripts[r.Key] = harness.Transcript{Known: true, Exists: ok, Size: int64(100 * len(turns)), Path: id}
		if len(n.Frames) == 0 {
			continue
		}
		found := map[string]harness.Found{}
		for _, conv := range []string{id, n.Reported} {
			for _, turn := range w.convs[conv] {
				for _, f := range n.Frames {
					if f.ID == turn {
						found[f.ID] = harness.Found{Whole: true}
					}
				}
			}
		}
		o.Frames[r.Key] = found
	}
	return o
}

// pass runs one reconcile pass, the daemon killed before action crash of
// the plan (-1: never), or within it at point within (1 or 2, for a spawn
// or a paste). It reports whether the pass was settled: nothing it did
// changed the world, and nothing to wait for.
func (w *world) pass(crash, within int) (settled bool, err error) {
	records := make([]desired.Record, 0, len(w.keys))
	w.before = map[desired.Key]desired.Status{}
	for _, k := range w.keys {
		records = append(records, *w.recs[k])
		w.before[k] = w.recs[k].Status
	}
	plan := Plan(records, w.observe(records), w.p, w.now)
	// Settled: nothing to wait for, and nothing to change but a paste
	// refused at a draft, which waits for a human.
	settled = true
	for _, a := range plan {
		if wt, ok := a.(actions.Wait); a.Mutates() || (ok && !wt.Until.IsZero()) {
			settled = false
		}
	}
	drafts := 0
	if spawns(plan) {
		w.serverGone = false // Watcher.EnsureServer
	}
	failed := map[desired.Key]bool{}
	for i, a := range plan {
		if i == crash && within == 0 {
			w.logf("daemon killed before %s", a)
			return false, nil
		}
		k := a.Item()
		if failed[k] || !a.Mutates() {
			continue
		}
		w.logf("%s", a)
		err := w.apply(w.recs[k], a, i == crash)
		if errors.Is(err, errCrash) {
			return false, nil
		}
		if errors.Is(err, errDraft) {
			drafts++
		}
		if errors.Is(err, errModel) {
			failed[k] = true
			continue
		}
		if err != nil {
			return false, err
		}
	}
	if !settled && drafts > 0 {
		settled = drafts == mutating(plan)
	}
	return settled, nil
}

// errCrash is what apply returns when the daemon was killed within an
// action.
var errCrash = errors.New("daemon killed")

// errDraft is what a paste refused at a draft in the input box returns: it
// is refused again at every pass until a human acts.
var errDraft = fmt.Errorf("input box holds a draft: %w", errModel)

// mutating counts the actions of plan that change the world.
func mutating(plan []actions.Action) int {
	n := 0
	for _, a := range plan {
		if a.Mutates() {
			n++
		}
	}
	return n
}

// apply carries out a as the executor does, writing r (the store) with
// the same transitions; crash kills the daemon within a spawn or a paste.
func (w *world) apply(r *desired.Record, a actions.Action, crash bool) error {
	switch a := a.(type) {
	case actions.FreshSpawn:
		return w.spawn(r, a.Spawn, desired.SpawnFresh, w.newID(), crash)
	case actions.ResumeSpawn:
		if w.retired[a.ResumeID] || r.Status.Retired(a.ResumeID) {
			return fmt.Errorf("%s resumes the retired conversation %s", a.Key, a.ResumeID)
		}
		return w.spawn(r, a.Spawn, desired.SpawnResume, a.ResumeID, crash)
	case actions.MarkRunning:
		return w.put(r, a.Apply(r.Status), a.DeliveryID)
	case actions.DeliverPrompt:
		return w.deliver(r, a, crash)
	case actions.ConfirmDelivery:
		return w.put(r, r.Status, a.DeliveryID)
	case actions.StopSession:
		delete(w.panes, a.Session)
		return w.put(r, a.Apply(r.Status), a.Delivered)
	case actions.RecordExit:
		if a.Retire != "" {
			w.retired[r.Status.HarnessSessionID] = true
		}
		return w.put(r, a.Apply(r.Status, w.now), a.Delivered)
	case actions.GiveUp:
		r.Status = a.Apply(r.Status, r.Spec.Generation)
	case actions.Release:
		if a.RetireID != "" {
			w.retired[a.RetireID] = true
		}
		r.Status = a.Apply(r.Status)
	default:
		return fmt.Errorf("the model does not know %s", a)
	}
	return nil
}

// put writes st as Executor.putDelivered does: with delivery id, when set,
// delivered and counted for the loop breaker. A delivery is delivered only
// once it is in a conversation: the planner marks none on any other word
// (a start report, a spawn that lives, a transcript that grew).
func (w *world) put(r *desired.Record, st desired.Status, id string) error {
	if id != "" && !w.reached(id) {
		return fmt.Errorf("%s: delivery %s marked delivered, but it is in no conversation", r.Key, id)
	}
	if id != "" {
		st = st.Deliver(id).Counted(w.now, schema.DeliveryStormWindow)
		r.Pending = slices.DeleteFunc(slices.Clone(r.Pending), func(d desired.Delivery) bool { return d.ID == id })
	}
	r.Status = st
	return nil
}

// reached reports whether delivery id is in some conversation.
func (w *world) reached(id string) bool {
	for _, turns := range w.convs {
		if slices.Contains(turns, id) {
			return true
		}
	}
	return false
}

// spawn records the spawn's intent, replaces the item's session and starts
// a fake agent in conversation id, as Executor.spawn does.
func (w *world) spawn(r *desired.Record, s actions.Spawn, mode desired.SpawnMode, id string, crash bool) error {
	prev := r.Status
	// Only release --fresh replaces a live agent, or a spawn in flight.
	if pn := w.panes[s.Session]; pn != nil && !pn.dead && !prev.FreshRequested {
		if w.before[r.Key].Phase == desired.PhaseSpawning {
			return fmt.Errorf("%s spawns while its spawn in pane %s is in flight", r.Key, pn.id)
		}
		return fmt.Errorf("%s spawns a second agent over its live one in pane %s", r.Key, pn.id)
	}
	w.n++
	boot := "boot-" + strconv.Itoa(w.n)
	r.Status = s.Apply(prev, mode, id, boot, w.now)
	if crash && w.rng.IntN(2) == 0 {
		w.logf("daemon killed after the intent")
		return errCrash
	}
	delete(w.panes, s.Session)
	a := &modelAgent{key: r.Key, conv: id, boot: []string{boot}, resumed: mode == desired.SpawnResume}
	if s.DeliveryID != "" {
		a.boot = []string{s.DeliveryID, boot}
	}
	if mode == desired.SpawnResume {
		_, exists := w.convs[id]
		a.failResume, a.refuses = !exists || (!w.quiet && w.rng.IntN(4) == 0), !exists
	}
	pn := &modelPane{id: "%" + strconv.Itoa(w.n), pid: 1000 + w.n, agent: a}
	w.panes[s.Session] = pn
	if crash {
		w.logf("daemon killed after new-session %s", pn.id)
		return errCrash
	}
	r.Status.PaneID = pn.id
	return nil
}

// screen classifies what the agent's pane shows, as Screen would: Draft
// with text in its input box, Ready once it booted; a dead pane keeps its
// last frame.
func (w *world) screen(pn *modelPane) harness.Screen {
	switch a := pn.agent; {
	case a == nil:
		return harness.ScreenReady // a dead CLI's input box stays drawn
	case a.draft != "":
		return harness.ScreenDraft
	case len(a.boot) > 0:
		return harness.ScreenBusy
	}
	return harness.ScreenReady
}

// deliver pastes a pending delivery as Executor.deliver does: the screen
// first, the send recorded before the paste, then the paste and its Enter,
// which may be lost (nothing lands) or leave the text in the input box.
func (w *world) deliver(r *desired.Record, a actions.DeliverPrompt, crash bool) error {
	pn := w.panes[a.Session]
	if pn == nil || (a.PaneID != "" && pn.id != a.PaneID) {
		return errModel // capture: no such pane
	}
	switch sc := w.screen(pn); {
	case sc == harness.ScreenDraft && a.Retry:
		w.land(pn.agent, pn.agent.draft)
		w.logf("resubmitted %s", pn.agent.draft)
		pn.agent.draft = ""
		r.Status = r.Status.Resubmit(w.now)
		return nil
	case sc == harness.ScreenDraft:
		return errDraft
	case sc != harness.ScreenReady, a.Retry && !a.Repaste:
		return errModel // not ready
	}
	r.Status = r.Status.Send(a.DeliveryID, w.now, a.Retry)
	if crash && w.rng.IntN(2) == 0 {
		w.logf("daemon killed after the send was recorded")
		return errCrash
	}
	if pn.dead {
		return errModel // paste: pane dead
	}
	switch n := w.rng.IntN(8); {
	case crash:
		pn.agent.draft = a.DeliveryID
		w.logf("daemon killed after the paste")
		return errCrash
	case w.quiet || n < 5:
		w.land(pn.agent, a.DeliveryID)
	case n < 6:
		w.logf("paste lost")
	default:
		pn.agent.draft = a.DeliveryID
		w.logf("enter lost")
	}
	return nil
}

// check is run after every step.
func (w *world) check() error {
	live := map[string]string{} // conversation → session
	for s, pn := range w.panes {
		if pn.agent == nil {
			continue
		}
		if other, ok := live[pn.agent.conv]; ok {
			return fmt.Errorf("conversation %s runs in %s and %s", pn.agent.conv, other, s)
		}
		live[pn.agent.conv] = s
	}
	seen := map[string]string{}
	for conv, turns := range w.convs {
		for _, id := range turns {
			if other, ok := seen[id]; ok && strings.HasPrefix(id, "d-") {
				return fmt.Errorf("delivery %s reached the conversation twice (%s, %s)", id, other, conv)
			}
			seen[id] = conv
		}
	}
	return nil
}

// checkEnd is run once the world is quiet and settled: a delivery still
// pending waits for a human, as does an input box that holds text nobody
// submitted (loopd never pastes over a draft, Executor.deliver: a lost
// Enter on the last send it gave up on leaves one).
func (w *world) checkEnd() error {
	for _, k := range w.keys {
		r := w.recs[k]
		st := r.Status
		if len(r.Pending) == 0 || st.Phase == desired.PhaseNeedsAttention || st.Phase == desired.PhaseStopped || st.Blocked != "" {
			continue
		}
		if pn := w.panes[desired.SessionName(k)]; pn != nil && pn.agent != nil && pn.agent.draft != "" {
			continue
		}
		return fmt.Errorf("%s settled in %s (%s) with %d deliveries pending", k, st.Phase, st.Reason, len(r.Pending))
	}
	return nil
}
