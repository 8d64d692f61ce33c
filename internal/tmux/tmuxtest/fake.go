package tmuxtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loopd/loopd/internal/tmux"
)

// fakeCommandLimit approximates the size of argv that tmux refuses with
// "command too long" (the client sends its argv in one message of at most
// 16 KiB).
const fakeCommandLimit = 16 * 1024

// Fake is an in-memory tmux.Client for tests. It keeps state: sessions with
// one pane each (ids %0, %1, ... never reused), dead panes with their exit
// status, pasted text, keys sent and screen text. It returns the same
// sentinel errors as tmux.Exec, refuses the arguments Exec refuses (the
// tmux.Check functions), accepts only exact targets, and fails a verb on
// demand (FailNext). A pane lives until Exit, ExitSignal or ExitUnknown ends it;
// dead panes stay, as with remain-on-exit on. Its methods are safe for
// concurrent use.
type Fake struct {
	// InitialScreen, when set, gives the screen text of each new pane, as
	// its program would draw it; CapturePane returns it until SetScreen.
	InitialScreen func(s tmux.NewSession) string
	// PastedScreen, when set, gives the screen text of a pane after text
	// was pasted into it, as its program would draw the paste in its input
	// box (and makes Now its Activity); unset, a paste leaves the screen as
	// it was, as a program that does not draw it.
	PastedScreen func(s tmux.NewSession, pasted string) string
	// Now, when set, is the Fake's clock: a pane's Activity is Now when it
	// is made and when its screen is set; its DeadTime is Now at its
	// death (at the Kick that reveals an ExitUnknown, as tmux records a
	// lost child's death when it reaps it), in whole seconds as tmux shows
	// it. Nil means time.Now.
	Now func() time.Time

	mu       sync.Mutex
	running  bool
	ensured  bool
	opts     tmux.ServerOptions
	owner    tmux.Owner
	sessions map[string]*fakePane
	nextID   int
	calls    []string
	failures map[string][]error
	pending  map[string]bool
	waiters  map[string][]chan struct{}
}

type fakePane struct {
	spec   tmux.NewSession
	pane   tmux.Pane
	hidden int // status that the next Kick reveals (ExitUnknown)
	screen string
	pasted []string
	keys   []string
	input  strings.Builder
}

var _ tmux.Client = (*Fake)(nil)

// fakeVerbs are the names FailNext accepts: the tmux.Client methods.
var fakeVerbs = []string{"EnsureServer", "ServerOwner", "StopEmptyServer", "NewSession", "ListPanes", "Kick", "Paste",
	"SendKeys", "CapturePane", "KillSession", "WaitFor"}

// NewFake returns a Fake with no server running.
func NewFake() *Fake {
	return &Fake{
		sessions: map[string]*fakePane{},
		failures: map[string][]error{},
		pending:  map[string]bool{},
		waiters:  map[string][]chan struct{}{},
	}
}

// FailNext makes the next call of verb (a tmux.Client method name such as
// "NewSession") return err and change nothing. Several calls queue up, one
// error per call. It panics on an unknown verb.
func (f *Fake) FailNext(verb string, err error) {
	if !slices.Contains(fakeVerbs, verb) {
		panic(fmt.Sprintf("tmuxtest.Fake: FailNext of unknown verb %q", verb))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[verb] = append(f.failures[verb], err)
}

// begin records a call of verb and returns its injected failure, if any. The
// caller holds mu.
func (f *Fake) begin(verb string) error {
	f.calls = append(f.calls, verb)
	q := f.failures[verb]
	if len(q) == 0 {
		return nil
	}
	f.failures[verb] = q[1:]
	return q[0]
}

// EnsureServer marks the server running and keeps opts.
func (f *Fake) EnsureServer(ctx context.Context, opts tmux.ServerOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("EnsureServer"); err != nil {
		return err
	}
	f.running, f.ensured, f.opts = true, true, opts
	if o := opts.Owner; o.ID != "" {
		if err := tmux.CheckOwnerID(o.ID); err != nil {
			return fmt.Errorf("ensure server: %w", err)
		}
		if f.owner.ID != "" && f.owner.ID != o.ID {
			return fmt.Errorf("ensure server: %w: state dir %s", tmux.ErrServerOwned, f.owner.StateDir)
		}
		f.owner = o
	}
	return nil
}

// ServerOwner returns the owner the server was claimed for.
func (f *Fake) ServerOwner(ctx context.Context) (tmux.Owner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ServerOwner"); err != nil {
		return tmux.Owner{}, err
	}
	return f.owner, nil
}

// StopEmptyServer ends the server (KillServer) when it runs with no
// session and owner's mark, and reports whether it did.
func (f *Fake) StopEmptyServer(ctx context.Context, owner tmux.Owner) (bool, error) {
	if err := tmux.CheckOwnerID(owner.ID); err != nil {
		return false, fmt.Errorf("stop server: %w", err)
	}
	f.mu.Lock()
	if err := f.begin("StopEmptyServer"); err != nil {
		f.mu.Unlock()
		return false, err
	}
	stop := f.running && len(f.sessions) == 0 && f.owner.ID == owner.ID
	f.mu.Unlock()
	if stop {
		f.KillServer()
	}
	return stop, nil
}

// fakePIDBase is where the fake's pane pids start: above Linux's largest
// pid_max (PID_MAX_LIMIT, 2^22 on 64-bit; proc(5)), so that no fake pane's
// pid ever names a real process, which code under test might look up or
// signal (the predecessor of a respawn, a process group).
const fakePIDBase = 1<<22 + 1

// NewSession creates the session with one live pane, starting the server if
// needed, as tmux does.
func (f *Fake) NewSession(ctx context.Context, s tmux.NewSession) (string, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("NewSession"); err != nil {
		return "", 0, err
	}
	if err := tmux.CheckNewSession(s); err != nil {
		return "", 0, fmt.Errorf("new session %s: %w", s.Name, err)
	}
	size := len(s.Name) + len(s.Dir)
	for _, a := range slices.Concat(s.Launcher, s.Argv) {
		size += len(a) + 1
	}
	if size > fakeCommandLimit {
		return "", 0, fmt.Errorf("new session %s: %w", s.Name, tmux.ErrCommandTooLong)
	}
	if _, ok := f.sessions[s.Name]; ok {
		return "", 0, fmt.Errorf("new session %s: %w", s.Name, tmux.ErrSessionExists)
	}
	s.Argv = slices.Clone(s.Argv)
	s.Launcher = slices.Clone(s.Launcher)
	// A launcher has replaced itself with Argv by the time anyone looks.
	p := &fakePane{spec: s, pane: tmux.Pane{
		Session:        s.Name,
		PaneID:         fmt.Sprintf("%%%d", f.nextID),
		PID:            fakePIDBase + f.nextID,
		CurrentCommand: tmux.CommandName(s.Argv[0]),
		Owner:          s.Owner,
		Activity:       f.seconds(),
	}}
	if f.InitialScreen != nil {
		p.screen = f.InitialScreen(s)
	}
	f.nextID++
	f.running = true
	f.sessions[s.Name] = p
	return p.pane.PaneID, p.pane.PID, nil
}

// ListPanes returns every pane, sessions in byte order of their names, each
// with the server's owner mark.
func (f *Fake) ListPanes(ctx context.Context) ([]tmux.Pane, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListPanes"); err != nil {
		return nil, err
	}
	panes := make([]tmux.Pane, 0, len(f.sessions))
	for _, name := range slices.Sorted(maps.Keys(f.sessions)) {
		p := f.sessions[name].pane
		p.ServerOwner = f.owner.ID
		panes = append(panes, p)
	}
	return panes, nil
}

// Kick reveals the status of every pane that ExitUnknown ended and fires the
// pane-died hook for each, as tmux does once it reaps the child.
func (f *Fake) Kick(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("Kick"); err != nil {
		return err
	}
	for _, p := range f.sessions {
		if p.pane.Dead && !p.pane.StatusKnown {
			p.pane.DeadStatus, p.pane.StatusKnown, p.pane.DeadTime = p.hidden, true, f.seconds()
			f.paneDied()
		}
	}
	return nil
}

// Paste records text as pasted into target's pane and appends it to the
// pane's input, when the pane passes g; with PastedScreen set, it sets the
// pane's screen.
func (f *Fake) Paste(ctx context.Context, target string, g tmux.Guard, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("Paste"); err != nil {
		return err
	}
	if err := tmux.CheckTarget(target); err != nil {
		return fmt.Errorf("paste to %s: %w", target, err)
	}
	if err := tmux.CheckGuard(g); err != nil {
		return fmt.Errorf("paste to %s: %w", target, err)
	}
	if text == "" {
		return nil
	}
	p, err := f.guarded(target, g)
	if err != nil {
		return fmt.Errorf("paste to %s: %w", target, err)
	}
	p.pasted = append(p.pasted, text)
	p.input.WriteString(text)
	if f.PastedScreen != nil {
		p.screen, p.pane.Activity = f.PastedScreen(p.spec, text), f.seconds()
	}
	return nil
}

// guarded returns target's pane when it passes g, else the error Exec's
// guard gives. The caller holds mu.
func (f *Fake) guarded(target string, g tmux.Guard) (*fakePane, error) {
	p, err := f.find(target)
	switch {
	case err != nil:
		return nil, err
	case p.pane.Dead:
		return nil, tmux.ErrPaneDead
	case p.pane.Owner != g.Owner:
		return nil, tmux.ErrForeign
	case !slices.Contains(g.Commands, p.pane.CurrentCommand):
		return nil, fmt.Errorf("%w (it is %q)", tmux.ErrNotHarness, p.pane.CurrentCommand)
	}
	for _, line := range g.Shows {
		if !tmux.ScreenShows(p.screen, line) {
			return nil, tmux.ErrScreenChanged
		}
	}
	return p, nil
}

// fakeKeys are the bytes a pane program reads for the key names the Fake
// knows; other words are typed as text, as tmux does for words that are no
// key name. C-a to C-z are handled in keyBytes.
var fakeKeys = map[string]string{
	"Enter": "\r", "Tab": "\t", "Space": " ", "Escape": "\x1b", "BSpace": "\x7f",
}

func keyBytes(key string) string {
	if b, ok := fakeKeys[key]; ok {
		return b
	}
	if c, ok := strings.CutPrefix(key, "C-"); ok && len(c) == 1 && c[0] >= 'a' && c[0] <= 'z' {
		return string(rune(c[0] - 'a' + 1))
	}
	return key
}

// SendKeys records keys and appends their bytes to the pane's input (Enter
// is CR, Tab, Space, Escape, BSpace and C-a to C-z their control bytes, any
// other word its text), when the pane passes g.
func (f *Fake) SendKeys(ctx context.Context, target string, g tmux.Guard, keys ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("SendKeys"); err != nil {
		return err
	}
	if err := tmux.CheckTarget(target); err != nil {
		return fmt.Errorf("send keys to %s: %w", target, err)
	}
	if err := tmux.CheckGuard(g); err != nil {
		return fmt.Errorf("send keys to %s: %w", target, err)
	}
	p, err := f.guarded(target, g)
	if err != nil {
		return fmt.Errorf("send keys to %s: %w", target, err)
	}
	p.keys = append(p.keys, keys...)
	for _, k := range keys {
		p.input.WriteString(keyBytes(k))
	}
	return nil
}

// CapturePane returns the pane's screen text (InitialScreen or SetScreen);
// the Fake keeps no separate history.
func (f *Fake) CapturePane(ctx context.Context, target string, history bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("CapturePane"); err != nil {
		return "", err
	}
	if err := tmux.CheckTarget(target); err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	p, err := f.find(target)
	if err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	return p.screen, nil
}

// CapturePanes returns the screens of the targets that exist, as
// CapturePane does, in one call.
func (f *Fake) CapturePanes(ctx context.Context, targets []string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("CapturePanes"); err != nil {
		return nil, err
	}
	screens := make(map[string]string, len(targets))
	for _, t := range targets {
		if err := tmux.CheckTarget(t); err != nil {
			return nil, fmt.Errorf("capture %s: %w", t, err)
		}
		if p, err := f.find(t); err == nil {
			screens[t] = p.screen
		}
	}
	return screens, nil
}

// KillSession removes the session when it carries owner's mark.
func (f *Fake) KillSession(ctx context.Context, name, owner string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("KillSession"); err != nil {
		return err
	}
	if err := tmux.CheckSessionName(name); err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	if err := tmux.CheckOwnerID(owner); err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	p, ok := f.sessions[name]
	if !ok {
		return fmt.Errorf("kill session %s: %w", name, tmux.ErrNoSession)
	}
	if p.pane.Owner != owner {
		return fmt.Errorf("kill session %s: %w", name, tmux.ErrForeign)
	}
	delete(f.sessions, name)
	return nil
}

// WaitFor returns when channel is signalled: by a pane's death when
// EnsureServer installed the pane-died hook on channel, or by a signal kept
// from before. Like tmux 3.3a, a waiter that ctx cancelled stays registered
// and takes the channel's next signal.
func (f *Fake) WaitFor(ctx context.Context, channel string) error {
	f.mu.Lock()
	if err := f.begin("WaitFor"); err != nil {
		f.mu.Unlock()
		return err
	}
	if channel == "" {
		f.mu.Unlock()
		return errors.New("wait for: empty channel")
	}
	if ctx.Err() != nil {
		f.mu.Unlock()
		return ctx.Err()
	}
	if !f.running {
		f.mu.Unlock()
		return fmt.Errorf("wait for %s: %w", channel, tmux.ErrNoSession)
	}
	if f.pending[channel] {
		delete(f.pending, channel)
		f.mu.Unlock()
		return nil
	}
	wake := make(chan struct{})
	f.waiters[channel] = append(f.waiters[channel], wake)
	f.mu.Unlock()
	select {
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// find returns the pane that target, which passed tmux.CheckTarget, names:
// a pane id ("%N") or a session ("=name:"). The caller holds mu.
func (f *Fake) find(target string) (*fakePane, error) {
	if strings.HasPrefix(target, "%") {
		for _, p := range f.sessions {
			if p.pane.PaneID == target {
				return p, nil
			}
		}
		return nil, tmux.ErrNoSession
	}
	p, ok := f.sessions[strings.TrimSuffix(strings.TrimPrefix(target, "="), ":")]
	if !ok {
		return nil, tmux.ErrNoSession
	}
	return p, nil
}

// paneDied signals the pane-died channel, if one is installed: it wakes every
// waiter, or is kept for the next WaitFor when none waits. The caller holds
// mu.
func (f *Fake) paneDied() {
	if ch := f.opts.PaneDiedChannel; ch != "" {
		f.signal(ch)
	}
}

func (f *Fake) signal(ch string) {
	if len(f.waiters[ch]) == 0 {
		f.pending[ch] = true
		return
	}
	for _, w := range f.waiters[ch] {
		close(w)
	}
	delete(f.waiters, ch)
}

// seconds is Now in whole seconds, as tmux shows a pane's death and its
// window's activity.
func (f *Fake) seconds() time.Time {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	return now().Truncate(time.Second)
}

// live returns session's pane, which must exist and be alive. The caller
// holds mu.
func (f *Fake) live(session string) *fakePane {
	p, ok := f.sessions[session]
	if !ok || p.pane.Dead {
		panic(fmt.Sprintf("tmuxtest.Fake: session %q has no live pane", session))
	}
	return p
}

// Exit ends the program in session's pane with status: the pane is dead with
// a known status and its DeadTime, and the pane-died hook fires. It panics if the session
// does not exist or its pane is already dead.
func (f *Fake) Exit(session string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.live(session)
	p.pane.Dead, p.pane.DeadStatus, p.pane.StatusKnown, p.pane.DeadTime = true, status, true, f.seconds()
	f.paneDied()
}

// ExitSignal ends the program in session's pane by signal number sig; it
// panics as Exit does.
func (f *Fake) ExitSignal(session string, sig int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.live(session)
	p.pane.Dead, p.pane.DeadSignal, p.pane.StatusKnown, p.pane.DeadTime = true, sig, true, f.seconds()
	f.paneDied()
}

// ExitUnknown ends the program in session's pane the way tmux ≤ 3.4 loses a
// child: the pane is dead with no status, no DeadTime and no hook, until the
// next Kick reveals status, sets DeadTime to the Kick's time and fires the
// hook. It panics as Exit does.
func (f *Fake) ExitUnknown(session string, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.live(session)
	p.pane.Dead, p.hidden = true, status
}

// SetForeground makes command the name of the foreground process of
// session's live pane, as when the harness exits and leaves the shell that
// ran it (pane_current_command). It panics as Exit does.
func (f *Fake) SetForeground(session, command string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live(session).pane.CurrentCommand = command
}

// KillServer ends the server: every session goes and every waiter wakes, as
// tmux's wait-for clients return when the server exits.
func (f *Fake) KillServer() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running = false
	f.owner = tmux.Owner{}
	clear(f.sessions)
	clear(f.pending)
	for ch := range f.waiters {
		f.signal(ch)
	}
}

// SetScreen sets the text CapturePane returns for session's pane and makes
// Now the pane's Activity, as the program's output would. It panics if the
// session does not exist.
func (f *Fake) SetScreen(session, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.sessions[session]
	if !ok {
		panic(fmt.Sprintf("tmuxtest.Fake: SetScreen of missing session %q", session))
	}
	p.screen = text
	p.pane.Activity = f.seconds()
}

// Options returns the options of the last EnsureServer and whether it ran.
func (f *Fake) Options() (tmux.ServerOptions, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opts, f.ensured
}

// Sessions returns the names of the sessions, sorted.
func (f *Fake) Sessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.sessions))
}

// Calls returns the tmux.Client methods called so far, in order, including the
// calls that FailNext failed.
func (f *Fake) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// session returns a copy of session's state, or false when it does not
// exist.
func (f *Fake) session(session string) (fakePane, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.sessions[session]
	if !ok {
		return fakePane{}, false
	}
	return fakePane{spec: p.spec, pane: p.pane, pasted: slices.Clone(p.pasted), keys: slices.Clone(p.keys)}, true
}

// Spec returns the NewSession that created session, or false when it does
// not exist.
func (f *Fake) Spec(session string) (tmux.NewSession, bool) {
	p, ok := f.session(session)
	s := p.spec
	s.Argv, s.Launcher = slices.Clone(s.Argv), slices.Clone(s.Launcher)
	return s, ok
}

// Argv returns the argv session's pane was started with; nil if the session
// does not exist.
func (f *Fake) Argv(session string) []string {
	s, _ := f.Spec(session)
	return s.Argv
}

// Pasted returns the texts pasted into session's pane, in order.
func (f *Fake) Pasted(session string) []string {
	p, _ := f.session(session)
	return p.pasted
}

// Keys returns the key names sent to session's pane while it was alive, in
// order.
func (f *Fake) Keys(session string) []string {
	p, _ := f.session(session)
	return p.keys
}

// Input returns every byte the program in session's pane has read: pasted
// text and sent keys, in order (see SendKeys for the key bytes).
func (f *Fake) Input(session string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.sessions[session]; ok {
		return p.input.String()
	}
	return ""
}
