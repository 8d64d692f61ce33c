package fakecli

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/loopd/loopd/testdata/faketerm"
)

// The loop every fake runs: a submitted line reaches Handle, a timer runs
// on the loop and may end it, SIGWINCH redraws, a closed terminal leaves
// it waiting for a signal, and a signal ends it as Signal says.
func TestLoop(t *testing.T) {
	input, signals := make(chan []byte), make(chan os.Signal)
	var got []string
	draws := 0
	var ed faketerm.Editor
	l := &Loop[string]{Term: &faketerm.TUI{Input: input, Signals: signals}, Feed: ed.Feed,
		Handle: func(ev faketerm.Event) (string, bool) {
			if ev.Kind == faketerm.Submit {
				got = append(got, ev.Text)
			}
			return "", ev.Text == "quit"
		},
		Draw:   func() { draws++ },
		Signal: func(sig os.Signal) string { return "signal " + sig.String() },
	}
	fired := make(chan struct{})
	l.After(time.Millisecond, func() (string, bool) {
		got = append(got, "timer")
		close(fired)
		return "", false
	})
	end := make(chan string)
	go func() { end <- l.Run() }()
	<-fired
	input <- []byte("hello\r")
	signals <- syscall.SIGWINCH
	close(input)
	signals <- syscall.SIGTERM
	assert.Equal(t, "signal terminated", <-end)
	assert.Equal(t, []string{"timer", "hello"}, got)
	assert.Equal(t, 4, draws, "first, after the timer, the line and SIGWINCH")

	// A timer due after the end is dropped, not left blocked.
	l.After(0, func() (string, bool) { return "late", true })
}

func TestLoopEndsOnHandle(t *testing.T) {
	input := make(chan []byte, 1)
	var ed faketerm.Editor
	l := &Loop[int]{Term: &faketerm.TUI{Input: input}, Feed: ed.Feed, Draw: func() {},
		Handle: func(ev faketerm.Event) (int, bool) { return 7, ev.Text == "quit" }}
	input <- []byte("quit\r")
	assert.Equal(t, 7, l.Run())
}
