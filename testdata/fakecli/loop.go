package fakecli

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/loopd/loopd/testdata/faketerm"
)

// Loop is the event loop of a fake CLI's TUI, the one the three fakes
// run: each read of the terminal through the line editor (Feed) to
// Handle, each timer the fake set (After), and each signal, one at a
// time on the loop's goroutine, the screen drawn first and after each.
// A terminal whose input ends leaves the loop running, waiting for a
// signal, as the real CLIs do under tmux. E is the fake's own way of
// ending (an exit status, with what it prints on the way out).
type Loop[E any] struct {
	Term   *faketerm.TUI
	Feed   func([]byte) []faketerm.Event
	Handle func(faketerm.Event) (E, bool)
	Draw   func()
	// Signal is how a caught signal other than SIGWINCH (which redraws)
	// ends the TUI.
	Signal func(os.Signal) E

	once   sync.Once
	timers chan func() (E, bool)
	done   chan struct{}
}

func (l *Loop[E]) init() {
	l.once.Do(func() { l.timers, l.done = make(chan func() (E, bool)), make(chan struct{}) })
}

// After runs f on the loop's goroutine once d has passed, as if an event;
// f's true ends the loop with its E. A timer due after the loop ended is
// dropped.
func (l *Loop[E]) After(d time.Duration, f func() (E, bool)) {
	l.init()
	time.AfterFunc(d, func() {
		select {
		case l.timers <- f:
		case <-l.done:
		}
	})
}

// Run draws the screen and handles events until one ends the TUI.
func (l *Loop[E]) Run() E {
	l.init()
	defer close(l.done)
	input := l.Term.Input
	l.Draw()
	for {
		select {
		case b, ok := <-input:
			if !ok {
				input = nil // the terminal is gone; wait for a signal
				continue
			}
			for _, ev := range l.Feed(b) {
				if end, done := l.Handle(ev); done {
					return end
				}
			}
		case f := <-l.timers:
			if end, done := f(); done {
				return end
			}
		case sig := <-l.Term.Signals:
			if sig != syscall.SIGWINCH {
				return l.Signal(sig)
			}
		}
		l.Draw()
	}
}

// LastWords is how long a fake stays after its last output: tmux 3.3a can
// drop what a pane printed just before its process exited (about 1 run in
// 20 here); the real CLI's slower teardown hides that, so the fake lingers
// a moment too.
const LastWords = 50 * time.Millisecond

// CloseTUI ends a fake's TUI after its loop: the MCP servers it started
// stopped (waiting for none), the terminal restored, message printed on
// stderr, and LastWords waited.
func CloseTUI(term *faketerm.TUI, servers []*exec.Cmd, message string) {
	StopServers(servers, 0)
	term.Close()
	if message != "" {
		fmt.Fprint(os.Stderr, message)
	}
	time.Sleep(LastWords)
}
