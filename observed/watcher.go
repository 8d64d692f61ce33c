package observed

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// Watcher supervises loopd's tmux server for the reconcile loop: it starts
// and claims the server, and turns pane deaths into wake-ups.
//
// A death is seen three ways. The process of every live pane a snapshot
// listed is watched through a pidfd (Track), all of them by one goroutine
// in one epoll(7) wait: a pidfd becomes readable when the process exits,
// whether or not tmux has reaped it, and Watch then kicks
// the server, so that tmux up to 3.4 records the exit status and fires its
// pane-died hook, and wakes a pass. The pane-died hook (tmux wait-for) wakes
// a pass for the panes spawned since the last snapshot. The loop's resync
// interval is the safety net behind both.
type Watcher struct {
	Tmux tmux.Client
	// Server are the options the server is started with and claimed under;
	// its PaneDiedChannel is the channel Watch waits on.
	Server tmux.ServerOptions
	// KickEvery, when not zero, is how often Watch kicks the server
	// (tmux.Client.Kick) where this kernel gives no pidfd. tmux up to 3.4
	// sometimes fails to reap a pane's exited child and then fires no
	// pane-died hook until another child of the server exits (see
	// TakeSnapshot); the kick is such a child, so such a death wakes the
	// loop within KickEvery instead of after the loop's resync interval.
	// With pidfds, a death kicks the server itself and no periodic kick
	// runs.
	KickEvery time.Duration
	Log       *slog.Logger

	// PidfdOpen, when set, replaces pidfd_open(2) (pidfdOpen): it returns
	// a pidfd of process pid, a file descriptor the Watcher closes. Tests
	// act out a kernel without pidfds with it (an error such as ENOSYS).
	PidfdOpen func(pid int) (int, error)

	once  sync.Once
	mu    sync.Mutex
	procs map[int]int // the pidfd of each watched process, by pid
	// exits is the one wait on all of procs, and waiting whether its
	// goroutine runs (started with the first process watched).
	exits   *exitWait
	waiting bool
	// sessions are the sessions of the watched processes, by pid, and
	// dead those whose process died since Watch last woke a pass.
	sessions map[int]string
	dead     []string
	// noPidfd is set when this kernel gives no pidfd: Watch kicks every
	// KickEvery instead.
	noPidfd bool
	stopped bool          // Watch has returned: Track watches nothing
	died    chan struct{} // a watched process died; one buffered signal
	// notify watches the directories of the transcripts TrackTranscripts
	// was given (files, by path; dirs, by directory); made on first use.
	notify   *fsnotify.Watcher
	noNotify bool // inotify is missing: TrackTranscripts does nothing
	files    map[string]bool
	dirs     map[string]bool
	// channels are the channel directories TrackChannels was given.
	channels map[string]bool
	// notifying is closed once notify is made, for Watch to listen.
	notifying chan struct{}
}

// EnsureServer starts the tmux server with w.Server and claims it for
// w.Server.Owner (tmux.Client.EnsureServer). It returns tmux.ErrServerOwned,
// naming the other state dir, when another loopd holds the server.
func (w *Watcher) EnsureServer(ctx context.Context) error {
	return w.Tmux.EnsureServer(ctx, w.Server)
}

// init probes once whether this kernel gives pidfds, with one for this
// process.
func (w *Watcher) init() {
	w.once.Do(func() {
		if w.PidfdOpen == nil {
			w.PidfdOpen = pidfdOpen
		}
		w.procs, w.sessions = map[int]int{}, map[int]string{}
		w.died = make(chan struct{}, 1)
		w.files, w.dirs, w.channels = map[string]bool{}, map[string]bool{}, map[string]bool{}
		w.notifying = make(chan struct{})
		fd, err := w.PidfdOpen(os.Getpid())
		if err == nil {
			closeFd(fd)
			w.exits, err = newExitWait()
		}
		if err != nil {
			w.noPidfd = true
			w.Log.Warn(string(journal.ProcWatchUnavailable), "err", err)
		}
	})
}

// Track watches the process of every live pane of s, and stops watching
// the processes it no longer lists. A process that is gone before it is
// watched counts as a death. Watch turns each death into a kick of the
// server and a wake-up that names the pane's session. Without pidfds, and
// after Watch has returned, it does nothing.
func (w *Watcher) Track(s Snapshot) {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.noPidfd || w.stopped {
		return
	}
	live := make(map[int]string, len(s.Panes))
	for _, p := range s.Panes {
		if !p.Dead && p.PID > 0 {
			live[p.PID] = p.Session
		}
	}
	for pid := range w.procs {
		if _, ok := live[pid]; !ok {
			w.unwatch(pid)
		}
	}
	for pid, session := range live {
		if _, ok := w.procs[pid]; ok {
			continue
		}
		fd, err := w.PidfdOpen(pid)
		if errors.Is(err, syscall.ESRCH) {
			w.dead = append(w.dead, session)
			w.signal() // it died since the listing
			continue
		}
		if err != nil {
			w.Log.Debug(string(journal.ProcWatchFailed), "pid", pid, "err", err)
			continue
		}
		if err := w.exits.add(pid, fd); err != nil {
			closeFd(fd)
			w.Log.Debug(string(journal.ProcWatchFailed), "pid", pid, "err", err)
			continue
		}
		w.procs[pid], w.sessions[pid] = fd, session
		if !w.waiting {
			w.waiting = true
			go w.exits.run(w.exited)
		}
	}
}

// unwatch stops watching the process pid and closes its pidfd; w.mu is
// held.
func (w *Watcher) unwatch(pid int) {
	fd := w.procs[pid]
	w.exits.remove(fd)
	closeFd(fd)
	delete(w.procs, pid)
	delete(w.sessions, pid)
}

// TrackTranscripts watches the transcripts at paths (their directories,
// through inotify: a transcript may not exist yet) and stops watching the
// others, so that a write to one of them wakes a pass: the pass that
// confirms a delivery in flight follows the agent's write to its
// transcript, not the poll period. Without inotify, and after Watch has
// returned, it does nothing; the poll period covers it.
func (w *Watcher) TrackTranscripts(paths []string) {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.notifyOn(len(paths) > 0) {
		return
	}
	files, dirs := make(map[string]bool, len(paths)), map[string]bool{}
	for _, p := range paths {
		files[p], dirs[filepath.Dir(p)] = true, true
	}
	w.watchDirs(w.dirs, dirs)
	w.files = files
}

// TrackChannels watches the channel directories dirs (channel.Dir) and
// stops watching the others, so that a report a harness drops into its
// channel (channel.WriteReport, a rename into place) wakes a pass at
// once. Without inotify, and after Watch has returned, it does nothing;
// the resync interval covers it.
func (w *Watcher) TrackChannels(dirs []string) {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.notifyOn(len(dirs) > 0) {
		return
	}
	want := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		want[d] = true
	}
	w.watchDirs(w.channels, want)
}

// notifyOn reports whether the inotify watcher is there to be given
// directories, making it on first use when some are to be watched (want);
// w.mu is held.
func (w *Watcher) notifyOn(want bool) bool {
	if w.stopped || w.noNotify || (w.notify == nil && !want) {
		return false
	}
	if w.notify == nil {
		n, err := fsnotify.NewWatcher()
		if err != nil {
			w.Log.Warn(string(journal.TranscriptWatchFailed), "err", err)
			w.noNotify = true
			return false
		}
		w.notify = n
		close(w.notifying)
	}
	return true
}

// watchDirs makes have, a set of watched directories, the set want: it
// stops watching those no longer wanted and watches the new ones (one that
// is not there yet is left for a later call); w.mu is held.
func (w *Watcher) watchDirs(have, want map[string]bool) {
	for d := range have {
		if !want[d] {
			_ = w.notify.Remove(d)
			delete(have, d)
		}
	}
	for d := range want {
		if have[d] {
			continue
		}
		if err := w.notify.Add(d); err != nil {
			// Not there yet (a first conversation): the poll covers it.
			w.Log.Debug(string(journal.TranscriptWatchFailed), "path", d, "err", err)
			continue
		}
		have[d] = true
	}
}

// written reports whether ev wrote a transcript TrackTranscripts watches,
// or put a report into a channel TrackChannels watches.
func (w *Watcher) written(ev fsnotify.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.Has(fsnotify.Create) && w.channels[filepath.Dir(ev.Name)] && channel.IsReport(filepath.Base(ev.Name)) {
		return true
	}
	return ev.Has(fsnotify.Write|fsnotify.Create) && w.files[ev.Name]
}

// exited signals the death of pid, whose pidfd the wait found readable,
// once: the pidfd it watches now must be readable too, since the event
// may be of one Track closed before a new process took the pid.
func (w *Watcher) exited(pid int) {
	w.mu.Lock()
	fd, ok := w.procs[pid]
	died := ok && exited(fd)
	if died {
		w.dead = append(w.dead, w.sessions[pid])
		w.unwatch(pid)
	}
	w.mu.Unlock()
	if died {
		w.signal()
	}
}

// takeDead returns the sessions whose process died since it was last
// called, and forgets them.
func (w *Watcher) takeDead() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	dead := w.dead
	w.dead = nil
	return dead
}

// signal records a death for Watch; deaths before Watch takes it fold into
// one.
func (w *Watcher) signal() {
	select {
	case w.died <- struct{}{}:
	default:
	}
}

// Watch calls wake after each pane death, each write to a transcript
// TrackTranscripts watches and each report put into a channel
// TrackChannels watches, until ctx ends; then it stops watching every
// process and transcript and returns. A death of a process Track watches
// kicks the server, then wakes with the sessions whose process died, for
// the pass to handle them first, unless the pane-died hook's wake named
// them already; the other wakes name none. Meanwhile it waits on the pane-died channel
// (tmux wait-for), and, without pidfds and with KickEvery set, kicks the
// server every KickEvery, so that a death tmux failed to reap fires its
// hook. With no PaneDiedChannel it waits for nothing but the processes. A
// failed wait is retried after a second and a failed kick at the next
// death or tick; both are logged at debug level, since the loop's resync
// interval covers them.
func (w *Watcher) Watch(ctx context.Context, wake func(died ...string)) {
	w.init()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer w.stop()
	if ch := w.Server.PaneDiedChannel; ch != "" {
		wg.Go(func() { w.waitHook(ctx, ch, wake) })
	}
	var tick <-chan time.Time
	if w.noPidfd && w.KickEvery > 0 && w.Server.PaneDiedChannel != "" {
		t := time.NewTicker(w.KickEvery)
		defer t.Stop()
		tick = t.C
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	notifying := w.notifying
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.died:
			w.kick(ctx)
			wake(w.takeDead()...)
		case <-tick:
			w.kick(ctx)
		case <-notifying:
			notifying = nil
			events, errs = w.notify.Events, w.notify.Errors
		case ev := <-events:
			if w.written(ev) {
				wake()
			}
		case err := <-errs:
			w.Log.Debug(string(journal.TranscriptWatchFailed), "err", err)
		}
	}
}

// stop ends the wait on the pidfds, closes them, and makes Track a no-op.
func (w *Watcher) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && w.exits != nil {
		w.exits.close(w.waiting)
	}
	w.stopped = true
	// Closed, each pidfd leaves the epoll instance, which run closes
	// on its own time: no epoll_ctl on it from here on.
	for pid, fd := range w.procs {
		closeFd(fd)
		delete(w.procs, pid)
		delete(w.sessions, pid)
	}
	if w.notify != nil {
		w.notify.Close()
	}
}

// waitHook calls wake each time the pane-died channel is signalled, with
// the sessions whose process died since the last wake, until ctx ends.
func (w *Watcher) waitHook(ctx context.Context, ch string, wake func(...string)) {
	for ctx.Err() == nil {
		if err := w.Tmux.WaitFor(ctx, ch); err != nil {
			if ctx.Err() != nil {
				return
			}
			w.Log.Debug(string(journal.PaneDiedWaitFailed), "err", err)
			t := time.NewTimer(schema.PaneDiedWaitRetry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		// The hook fires once tmux reaped the process, after its pidfd
		// was readable: the wake names what the pidfds saw die.
		wake(w.takeDead()...)
	}
}

// kick kicks the server once.
func (w *Watcher) kick(ctx context.Context) {
	if err := w.Tmux.Kick(ctx); err != nil && ctx.Err() == nil {
		w.Log.Debug(string(journal.TmuxKickFailed), "err", err)
	}
}
