package observed

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/runner"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/workspace"
)

// Observation is everything one pass saw: the tmux snapshot from a single
// list-panes, plus facts read from disk for the items that can use them.
type Observation struct {
	Snapshot Snapshot
	// Transcripts holds, per item, the transcript of the conversation it
	// is in (Status.HarnessSessionID) in its cwd. A missing entry means "not
	// known".
	Transcripts map[desired.Key]harness.Transcript
	// MissingWorkdirs lists the items whose workdir does not exist.
	MissingWorkdirs map[desired.Key]bool
	// Workdirs holds, per item whose Need named a Workdir, what the disk
	// shows of it. A missing entry means "not read".
	Workdirs map[desired.Key]Workdir
	// Frames holds, per item, what its conversation shows of the frames of
	// the deliveries the pass may act on (the paste and the boot prompt in
	// flight, the pending events), by delivery id. A missing entry means
	// "not read".
	Frames map[desired.Key]map[string]harness.Found
	// Holds holds, per item whose Need named Commits, whether its workdir's
	// HEAD holds each of them (workspace.Manager.Holds). A missing entry
	// means "not read", and so does a missing commit.
	Holds map[desired.Key]map[string]bool
	// Screens holds, per item whose Need asked for it, what its live
	// pane's screen and the latest turn of its transcript show. A missing
	// entry means "not read".
	Screens map[desired.Key]Screen
	// Started holds, per item whose Need named Learn, the conversations
	// its harness started in its workdir since then, oldest first
	// (harness.SessionLearner). A missing entry means "not read".
	Started map[desired.Key][]harness.Started
	// Exits holds, per item whose Need asked for it (Need.Exit), what its
	// dead pane shows its harness said last. A missing entry means "not
	// read".
	Exits map[desired.Key]Exit
	// Reports holds, per item whose Need named Reports, the report files
	// its channel holds, oldest first, at most MaxReports
	// (channel.ReadReports). A missing entry means "none read".
	Reports map[desired.Key][]channel.Report
	// Reported holds, per item, the transcripts of the conversations its
	// harness reported other than the recorded one (Need.Reported and
	// those of the Reports read), by id, where the item's own harness
	// keeps them for its workdir (harness.Adapter.Transcript). A missing
	// id means "not read".
	Reported map[desired.Key]map[string]harness.Transcript
	// Usage holds, per item whose Need asked for it (Need.Usage), what
	// the transcript of its conversation holds of the CLI's token usage
	// past the offset its status recorded (harness.UsageReader). A
	// missing entry means "not read".
	Usage map[desired.Key]desired.UsageRead
}

// Exit is what a dead agent said last, as its adapter reads it: the last
// line it printed, and its refusal to resume its conversation, if that is
// what it said (harness.ResumeRefusal).
type Exit struct {
	Words   string
	Refusal harness.Refusal
}

// MaxReports bounds the report files one pass reads of one item's
// channel: a harness reports a few times a session, and an agent that
// floods its channel gets them read and refused a few at a time.
const MaxReports = 16

// WithTranscript returns o with tr as the transcript of the conversation
// k is in (Transcripts), for the rest of a plan that followed k to another
// conversation; o itself is not changed.
func (o Observation) WithTranscript(k desired.Key, tr harness.Transcript) Observation {
	o.Transcripts = maps.Clone(o.Transcripts)
	if o.Transcripts == nil {
		o.Transcripts = map[desired.Key]harness.Transcript{}
	}
	o.Transcripts[k] = tr
	return o
}

// Need is what one pass reads from disk for one item. The zero Need reads
// nothing.
type Need struct {
	// Disk reads whether the item's workdir exists and the transcript of
	// its conversation.
	Disk bool
	// Frames are the delivery frames to look for in the item's
	// conversation; they are looked for only with Disk, and only when the
	// harness can read its transcripts.
	Frames []desired.Frame
	// Reported, when not empty, is a session id whose transcript is part of
	// the conversation too: the running harness reported it since its
	// spawn, and no pass has followed it yet. Its transcript is read into
	// Observation.Reported, with or without Disk.
	Reported string
	// Reports reads the report files of the item's channel
	// (Observation.Reports).
	Reports bool
	// Workdir, with Disk, is the workdir the planner will use (rendered
	// from the current config before the first spawn, pinned after);
	// "" means the recorded one (desired.Record.Workdir).
	Workdir string
	// CheckoutURL, when set, is the repository the workdir should be a
	// clone of (Workdir.Clone says whether it is).
	CheckoutURL string
	// Commits, with Disk, are commits to look for in the history of the
	// workdir's HEAD (Observation.Holds).
	Commits []string
	// Screen reads the item's pane (capture-pane) for what blocks the
	// agent and for a usage limit, and, with Disk, the latest turn of its
	// transcript for a usage limit.
	Screen bool
	// ScreenIfChanged, with Screen, is for a screen no decision of the
	// pass needs, only its news: the pane is captured only when it had
	// output since this Observer last captured it or first saw it, and a
	// pane first seen is not captured; so is the latest turn of the
	// transcript read, by its size and mtime. So a new Observer (a cold
	// pass) captures only the screens decisions need.
	ScreenIfChanged bool
	// Learn, when not zero, reads the conversations the item's harness
	// started in its workdir since then (Observation.Started), for a
	// harness that cannot pin its conversation id.
	Learn time.Time
	// Exit reads the item's dead pane for what its harness said last
	// (Observation.Exits).
	Exit bool
	// Usage, with Disk, reads the token usage the transcript of the
	// item's conversation recorded past the offset of its status
	// (desired.BudgetState.UsageOffset, in its UsagePath; from the start
	// of another file), into Observation.Usage.
	Usage bool
}

// Workdir is what the disk shows of an item's workdir (read without
// running git: workspace.Inspect).
type Workdir struct {
	Path   string
	Exists bool
	Empty  bool // a directory with nothing in it
	// Clone is true when it is a clone of the repository of
	// Need.CheckoutURL that borrows its mirror's objects; Leftover when
	// a killed git or loopd left something in it to remove (a lock file
	// no git holds).
	Clone    bool
	Leftover bool
	// Worktree is true when it is a git worktree of that repository's
	// mirror, as older loopd versions made them; Partial when its `git
	// worktree add` never finished.
	Worktree bool
	Partial  bool
	// Physical is the path with every symlink resolved, when it exists.
	Physical string
	// Busy is true when a workspace operation holds the lock of
	// Need.CheckoutURL's mirror (workspace.Fact.Busy): a preparation is in
	// flight, in this process or another.
	Busy bool
}

// Needs returns the Need of rec, given the tmux snapshot of the same pass.
// It is the planner's rule of which item can use which fact (a pass runs
// often, so only those are read); Observer calls it once per record.
type Needs func(rec desired.Record, snap Snapshot) Need

// Observer reads every fact a reconcile pass plans on: one tmux snapshot
// (TakeSnapshot), and the disk facts of the items whose Need asks for them.
// Each transcript is read at most once per observation.
type Observer struct {
	Tmux tmux.Client
	// Harnesses are the adapters by harness name; they say where a
	// session's transcript is and read the frames in it.
	Harnesses map[string]harness.Adapter
	// Mirrors is the directory of the repositories' bare mirrors
	// (workspace.Manager.Root), against which a clone is recognized.
	Mirrors string
	// Owner, when set, is this loopd's owner mark (tmux.Owner.ID): after
	// the listing, Observe reads which owner claimed the server
	// (tmux.Client.ServerOwner) and sets Snapshot.ServerGone when it is
	// not this one.
	Owner string
	// Restarted, when set, says this loopd started its server at its own
	// start, with none running before: the server its agents ran on went
	// while no loopd ran (killed, a reboot). The first observation then
	// reports Snapshot.ServerGone, so that the agents the records expect
	// live count as lost with their server, never as crashes, as when a
	// running loopd sees its server go.
	Restarted bool
	// Workspaces runs git in a workdir (Need.Commits); nil reads no commit.
	Workspaces *workspace.Manager
	// Runs reads the runs of the process runner (Snapshot.Runs); nil
	// reads none.
	Runs *runner.Runner
	// Channels is the directory of the items' channels (channel.Root),
	// whose reports Need.Reports reads; "" reads none.
	Channels string
	// Watcher, when set, is given each snapshot (Watcher.Track), so that
	// it watches the processes of the live panes for their deaths.
	Watcher *Watcher
	Log     *slog.Logger

	mu sync.Mutex
	// screens are the captures of the last pass, by pane id (readScreens),
	// and limits what it read of the transcripts' latest turns, by path
	// (readTranscriptLimit).
	screens map[string]capture
	limits  map[string]turnLimit
}

// Observe takes the tmux snapshot at now (with Owner set, whether the
// server is still the one this loopd claimed: Snapshot.ServerGone), then
// reads the disk facts of each record that needs(rec, snapshot) asks for. An error means tmux could not
// be read, and nothing is known to be dead; an unreadable transcript is
// logged (transcript.unreadable) and left out, and the planner then falls
// back to what it knows without it.
func (o *Observer) Observe(ctx context.Context, records []desired.Record, needs Needs, now time.Time) (Observation, error) {
	return o.observe(ctx, records, needs, now, false)
}

// ObserveFirst is Observe of a few of the records, those a pass handles
// before the others (a pane death's): it keeps what the last pass kept of
// the others' screens and transcripts, and leaves the transcripts and
// channels Watcher watches as they are, for the observation of them all
// that follows.
func (o *Observer) ObserveFirst(ctx context.Context, records []desired.Record, needs Needs, now time.Time) (Observation, error) {
	return o.observe(ctx, records, needs, now, true)
}

// observe is Observe, or with first ObserveFirst.
func (o *Observer) observe(ctx context.Context, records []desired.Record, needs Needs, now time.Time, first bool) (Observation, error) {
	snap, err := TakeSnapshot(ctx, o.Tmux, now)
	if err != nil {
		return Observation{}, err
	}
	if o.Watcher != nil {
		o.Watcher.Track(snap)
	}
	if o.Owner != "" {
		// The listing's rows carry the server's mark, read in the same
		// call. With no row (no server, or no session on it) it is read
		// after the listing, never before: a server that dies in between
		// then shows as gone, with its sessions still listed alive, and
		// the next pass sees them missing; the other order would show
		// the sessions missing from a server still called ours.
		owner := snap.serverOwner
		if !snap.ownerListed {
			mark, err := o.Tmux.ServerOwner(ctx)
			if err != nil {
				return Observation{}, fmt.Errorf("observe tmux: %w", err)
			}
			owner = mark.ID
		}
		snap.ServerGone = owner != o.Owner
		if !first {
			o.mu.Lock()
			snap.ServerGone = snap.ServerGone || o.Restarted
			o.Restarted = false
			o.mu.Unlock()
		}
	}
	o.readRuns(ctx, records, &snap)
	obs := Observation{Snapshot: snap, Transcripts: map[desired.Key]harness.Transcript{}, MissingWorkdirs: map[desired.Key]bool{},
		Frames: map[desired.Key]map[string]harness.Found{}, Workdirs: map[desired.Key]Workdir{}, Holds: map[desired.Key]map[string]bool{},
		Screens: map[desired.Key]Screen{}, Started: map[desired.Key][]harness.Started{}, Exits: map[desired.Key]Exit{},
		Reports: map[desired.Key][]channel.Report{}, Reported: map[desired.Key]map[string]harness.Transcript{},
		Usage: map[desired.Key]desired.UsageRead{}}
	kept, limits := map[string]capture{}, map[string]turnLimit{}
	var confirm, channels []string
	var screens []screenRead
	var turns []latestTurn
	defer o.keep(kept, limits, first)
	for _, rec := range records {
		need := needs(rec, snap)
		if need.Reports && o.Channels != "" {
			dir := channel.Dir(o.Channels, desired.SessionName(rec.Key))
			channels = append(channels, dir)
			o.readReports(ctx, rec, dir, &obs)
		}
		o.readReported(ctx, rec, need, &obs)
		if !need.Learn.IsZero() {
			o.readStarted(ctx, rec, need.Learn, &obs)
		}
		if need.Screen {
			screens = append(screens, screenRead{rec: rec, ifChanged: need.ScreenIfChanged})
		}
		if need.Exit {
			if x, ok := o.readExit(ctx, rec, snap); ok {
				obs.Exits[rec.Key] = x
			}
		}
		if !need.Disk {
			continue
		}
		dir := need.Workdir
		if dir == "" {
			dir = rec.Workdir()
		}
		if dir != "" {
			if w, err := o.workdir(dir, need.CheckoutURL); err != nil {
				o.Log.WarnContext(ctx, string(journal.WorkspaceUnreadable), "work_item", rec.Key.String(), "cwd", dir, "err", err)
			} else {
				obs.Workdirs[rec.Key] = w
				if !w.Exists {
					obs.MissingWorkdirs[rec.Key] = true
				} else if held := o.holds(ctx, rec.Key, dir, need.Commits); held != nil {
					obs.Holds[rec.Key] = held
				}
			}
		}
		id := rec.Status.HarnessSessionID
		ad, ok := o.Harnesses[rec.Spec.Harness]
		if !ok || id == "" || !ad.ValidSessionID(id) {
			continue
		}
		tr, err := ad.Transcript(rec.Workdir(), id)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "harness_session_id", id, "err", err)
			continue
		}
		obs.Transcripts[rec.Key] = tr
		if need.Usage && tr.Known {
			o.readUsage(ctx, rec, ad, tr, &obs)
		}
		if need.Screen {
			turns = append(turns, latestTurn{rec: rec, ad: ad, tr: tr, ifChanged: need.ScreenIfChanged})
		}
		if len(need.Frames) > 0 && tr.Known {
			if found, ok := o.readFrames(ctx, rec, ad, tr, need); ok {
				obs.Frames[rec.Key] = found
			}
			// A delivery to confirm: its write to the transcript wakes
			// the next pass.
			confirm = append(confirm, tr.Path)
		}
	}
	// The screens, in one tmux invocation; then the transcripts' latest
	// turns, whose limit counts when the screen shows none.
	o.readScreens(ctx, screens, snap, now, kept, &obs)
	for _, t := range turns {
		o.readTranscriptLimit(ctx, t.rec, t.ad, t.tr, t.ifChanged, &obs, limits)
	}
	if o.Watcher != nil && !first {
		o.Watcher.TrackTranscripts(confirm)
		o.Watcher.TrackChannels(channels)
	}
	return obs, nil
}

// readUsage reads the token usage rec's transcript tr recorded past the
// offset rec's status keeps, when its adapter reads usage
// (harness.UsageReader); a transcript that cannot be read is logged
// (transcript.unreadable) and left out.
func (o *Observer) readUsage(ctx context.Context, rec desired.Record, ad harness.Adapter, tr harness.Transcript, obs *Observation) {
	u, ok := harness.ReadUsage(ad)
	if !ok {
		return
	}
	var from int64
	if rec.Status.UsagePath == tr.Path {
		from = rec.Status.UsageOffset
	}
	read, err := u.ReadUsage(tr, from)
	if err != nil {
		o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "path", tr.Path, "err", err)
		return
	}
	obs.Usage[rec.Key] = read
}

// readReports reads the report files of rec's channel dir; a channel that
// cannot be read is logged (channel.failed) and left unread.
func (o *Observer) readReports(ctx context.Context, rec desired.Record, dir string, obs *Observation) {
	reports, err := channel.ReadReports(dir, MaxReports)
	if err != nil {
		o.Log.WarnContext(ctx, string(journal.ChannelFailed), "work_item", rec.Key.String(), "path", dir, "err", err)
		return
	}
	if len(reports) > 0 {
		obs.Reports[rec.Key] = reports
	}
}

// readReported reads the transcripts of the conversations rec's harness
// reported other than the recorded one (need.Reported, and the ids of the
// reports just read) in rec's workdir, each at most once, when the
// adapter accepts the id; one that cannot be read is logged
// (transcript.unreadable) and left out.
func (o *Observer) readReported(ctx context.Context, rec desired.Record, need Need, obs *Observation) {
	ad, ok := o.Harnesses[rec.Spec.Harness]
	if !ok || rec.Workdir() == "" {
		return
	}
	ids := []string{need.Reported}
	for _, r := range obs.Reports[rec.Key] {
		ids = append(ids, r.SessionID)
	}
	for _, id := range ids {
		if id == "" || id == rec.Status.HarnessSessionID || !ad.ValidSessionID(id) {
			continue
		}
		if _, done := obs.Reported[rec.Key][id]; done {
			continue
		}
		tr, err := ad.Transcript(rec.Workdir(), id)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "harness_session_id", id, "err", err)
			continue
		}
		if obs.Reported[rec.Key] == nil {
			obs.Reported[rec.Key] = map[string]harness.Transcript{}
		}
		obs.Reported[rec.Key][id] = tr
	}
}

// readStarted reads the conversations rec's harness started in its
// workdir since since, when its adapter can tell (harness.SessionLearner);
// a failure is logged (transcript.unreadable) and leaves them unread.
func (o *Observer) readStarted(ctx context.Context, rec desired.Record, since time.Time, obs *Observation) {
	learner, ok := o.Harnesses[rec.Spec.Harness].(harness.SessionLearner)
	if !ok || rec.Workdir() == "" {
		return
	}
	started, err := learner.SessionsStarted(rec.Workdir(), since)
	if err != nil {
		o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "cwd", rec.Workdir(), "err", err)
		return
	}
	obs.Started[rec.Key] = started
}

// holds reads whether the HEAD of the workdir dir holds each of commits;
// nil when there are none to read. A commit git cannot answer for is
// logged (workspace.unreadable) and left out.
func (o *Observer) holds(ctx context.Context, k desired.Key, dir string, commits []string) map[string]bool {
	if len(commits) == 0 || o.Workspaces == nil {
		return nil
	}
	out := map[string]bool{}
	for _, c := range commits {
		held, err := o.Workspaces.Holds(ctx, dir, c)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.WorkspaceUnreadable), "work_item", k.String(), "cwd", dir, "commit", c, "err", err)
			continue
		}
		out[c] = held
	}
	return out
}

// readFrames reads what rec's conversation holds of need.Frames: the
// transcript tr of the conversation the item is in and those of the other
// ids it went by since its spawn, the recorded one (before a /clear) and
// need.Reported, when the adapter accepts them. It reports false when a
// transcript could not be read.
func (o *Observer) readFrames(ctx context.Context, rec desired.Record, ad harness.Adapter, tr harness.Transcript, need Need) (map[string]harness.Found, bool) {
	transcripts := []harness.Transcript{tr}
	seen := map[string]bool{tr.Path: true}
	for _, id := range []string{rec.Status.HarnessSessionID, need.Reported} {
		if id == "" || !ad.ValidSessionID(id) {
			continue
		}
		if other, err := ad.Transcript(rec.Workdir(), id); err == nil && other.Known && !seen[other.Path] {
			seen[other.Path] = true
			transcripts = append(transcripts, other)
		}
	}
	all := map[string]harness.Found{}
	for _, t := range transcripts {
		if !t.Exists {
			// No file, or no turn in it: nothing was delivered there.
			continue
		}
		found, err := ad.TranscriptFrames(t, need.Frames)
		if err != nil {
			o.Log.WarnContext(ctx, string(journal.TranscriptUnreadable), "work_item", rec.Key.String(), "path", t.Path, "err", err)
			return nil, false
		}
		for id, f := range found {
			got := all[id]
			got.Whole = got.Whole || f.Whole
			got.Mangled += f.Mangled
			all[id] = got
		}
	}
	return all, true
}

// workdir reads what the disk shows of dir, as a clone or a worktree of
// the mirror of url when url is set.
func (o *Observer) workdir(dir, url string) (Workdir, error) {
	mirror := ""
	if url != "" {
		m, err := workspace.Mirror(o.Mirrors, url)
		if err != nil {
			return Workdir{}, err
		}
		mirror = m
	}
	f, err := workspace.Inspect(dir, mirror)
	if err != nil {
		return Workdir{}, err
	}
	return Workdir{Path: dir, Exists: f.Exists, Empty: f.Empty, Clone: f.Clone, Leftover: f.Leftover, Worktree: f.Worktree, Partial: f.Partial,
		Physical: f.Physical, Busy: f.Busy}, nil
}
