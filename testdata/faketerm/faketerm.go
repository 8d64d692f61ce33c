// Package faketerm is the terminal side of the fake harness CLIs in
// testdata: raw mode, the TUI's reads and signals (TUI), and an input box
// that takes keys and bracketed pastes the way the real TUIs do (docs/reference/harness-cli-facts.md, "Typing
// into the TUI").
package faketerm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Claude Code reads raw terminal input: CR submits, LF
// inserts a newline, a bracketed paste (ESC[200~ … ESC[201~) is inserted
// as it is except that each tab becomes four spaces (measured on 2.1.197:
// docs/design.md, "Delivery is verified"), and an Enter that arrives in the same read as more than
// PasteHeuristic bytes of unbracketed text counts as a newline, because
// such a read is taken as a paste from a terminal without bracketed paste
// (docs/reference/harness-cli-facts.md, "Typing into the TUI").

// PasteHeuristic is the most unbracketed bytes a read may hold for an Enter
// in it to submit.
const PasteHeuristic = 50

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// EventKind is what a key did.
type EventKind int

const (
	Submit    EventKind = iota // Enter: text is the whole input, which is cleared
	Interrupt                  // Ctrl-C: the input is cleared
	Escape                     // a lone Escape (tmux send-keys Escape): the input is kept
	Edit                       // the input changed
)

// Event is what one key or paste did to the input box.
type Event struct {
	Kind EventKind
	Text string // the submitted input, for Submit
}

// tokenKind is one lexical piece of raw input.
type tokenKind int

const (
	tokText tokenKind = iota
	tokPaste
	tokCR
	tokLF
	tokBackspace
	tokCtrlC
	tokEsc
)

type token struct {
	kind tokenKind
	data []byte
}

// Editor is the input box: its text and the lexer state that spans reads.
type Editor struct {
	Buf     []byte // the text in the box
	inPaste bool
	pending []byte // an escape sequence or paste end cut by the end of a read
}

// Feed takes one read from the terminal and returns what happened.
func (e *Editor) Feed(chunk []byte) []Event {
	toks := e.lex(chunk)
	unbracketed := 0
	for _, t := range toks {
		if t.kind == tokText {
			unbracketed += len(t.data)
		}
	}
	var events []Event
	edited := false
	for _, t := range toks {
		switch t.kind {
		case tokText:
			e.Buf, edited = append(e.Buf, t.data...), true
		case tokPaste:
			e.Buf, edited = append(e.Buf, bytes.ReplaceAll(t.data, []byte("\t"), []byte("    "))...), true
		case tokLF:
			e.Buf, edited = append(e.Buf, '\n'), true
		case tokCR:
			if unbracketed > PasteHeuristic {
				e.Buf, edited = append(e.Buf, '\n'), true
				continue
			}
			events = append(events, Event{Kind: Submit, Text: string(e.Buf)})
			e.Buf, edited = nil, false
		case tokBackspace:
			if _, n := utf8.DecodeLastRune(e.Buf); n > 0 {
				e.Buf, edited = e.Buf[:len(e.Buf)-n], true
			}
		case tokCtrlC:
			events = append(events, Event{Kind: Interrupt})
			e.Buf, edited = nil, false
		case tokEsc:
			events = append(events, Event{Kind: Escape})
		}
	}
	if edited {
		events = append(events, Event{Kind: Edit})
	}
	return events
}

// lex splits pending bytes plus chunk into tokens, keeping an incomplete
// escape sequence (or paste end marker) for the next read. Escape
// sequences other than the paste markers are dropped; a read that ends in
// a lone ESC is the Escape key.
func (e *Editor) lex(chunk []byte) []token {
	data := append(e.pending, chunk...)
	e.pending = nil
	var toks []token
	for i := 0; i < len(data); {
		if e.inPaste {
			end := bytes.Index(data[i:], pasteEnd)
			if end < 0 {
				keep := partialSuffix(data[i:], pasteEnd)
				toks = append(toks, token{tokPaste, newlines(data[i : len(data)-keep])})
				e.pending = bytes.Clone(data[len(data)-keep:])
				break
			}
			toks = append(toks, token{tokPaste, newlines(data[i : i+end])})
			i += end + len(pasteEnd)
			e.inPaste = false
			continue
		}
		c := data[i]
		switch {
		case c == 0x1b && i == len(data)-1 && len(chunk) > 0:
			// A read that ends in ESC alone is the Escape key (a
			// sequence comes whole in one write of tmux's).
			toks, i = append(toks, token{kind: tokEsc}), i+1
		case c == 0x1b:
			n := escapeLen(data[i:])
			if n == 0 {
				e.pending = bytes.Clone(data[i:])
				return toks
			}
			e.inPaste = bytes.Equal(data[i:i+n], pasteStart)
			i += n
		case c == '\r':
			toks, i = append(toks, token{kind: tokCR}), i+1
		case c == '\n':
			toks, i = append(toks, token{kind: tokLF}), i+1
		case c == 0x7f || c == 0x08:
			toks, i = append(toks, token{kind: tokBackspace}), i+1
		case c == 0x03:
			toks, i = append(toks, token{kind: tokCtrlC}), i+1
		case c < 0x20:
			i++
		default:
			j := i + 1
			for j < len(data) && data[j] >= 0x20 && data[j] != 0x1b && data[j] != 0x7f {
				j++
			}
			toks, i = append(toks, token{tokText, bytes.Clone(data[i:j])}), j
		}
	}
	return toks
}

// escapeLen is the length of the escape sequence at the start of b (CSI,
// SS3 or ESC plus one byte), or 0 when b ends before the sequence does.
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '[':
		for j := 2; j < len(b); j++ {
			if b[j] >= 0x40 && b[j] <= 0x7e {
				return j + 1
			}
		}
		return 0
	case 'O':
		if len(b) < 3 {
			return 0
		}
		return 3
	}
	return 2
}

// partialSuffix is the length of the longest suffix of b that is a proper
// prefix of marker.
func partialSuffix(b, marker []byte) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(b, marker[:n]) {
			return n
		}
	}
	return 0
}

// newlines turns the CR and CRLF line ends a terminal pastes into LF.
func newlines(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// MakeRaw puts the terminal on fd into raw mode, as cfmakeraw(3) does, and
// returns the state to restore.
func MakeRaw(fd int) (*unix.Termios, error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	return old, unix.IoctlSetTermios(fd, unix.TCSETS, &raw)
}

// TUI is a fake CLI's hold on its terminal: stdin in raw mode with
// bracketed paste on, what it reads, and the signals it catches.
type TUI struct {
	fd  int
	old *unix.Termios
	out io.Writer
	// Input delivers each read of stdin; it is closed when stdin ends (the
	// terminal is gone), and a CLI runs on until a signal ends it.
	Input <-chan []byte
	// Signals delivers the signals Open was asked to catch.
	Signals <-chan os.Signal
}

// Open puts stdin's terminal into raw mode, turns bracketed paste on (on
// out, xterm's ESC[?2004h, as the real TUIs do), starts reading stdin and
// catches sigs. Close undoes it.
func Open(out io.Writer, sigs ...os.Signal) (*TUI, error) {
	fd := int(os.Stdin.Fd())
	old, err := MakeRaw(fd)
	if err != nil {
		return nil, err
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, sigs...)
	input := make(chan []byte)
	go func() {
		defer close(input)
		for {
			b := make([]byte, 4096)
			n, err := os.Stdin.Read(b)
			if n > 0 {
				input <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	fmt.Fprint(out, "\x1b[?2004h")
	return &TUI{fd: fd, old: old, out: out, Input: input, Signals: signals}, nil
}

// Close turns bracketed paste off, ends the line and restores the
// terminal's mode.
func (t *TUI) Close() {
	fmt.Fprint(t.out, "\x1b[?2004l\r\n")
	_ = unix.IoctlSetTermios(t.fd, unix.TCSETS, t.old)
}

// SignalStatus is the exit status of a CLI that exits on sig, 128 plus
// the signal's number, as the real CLIs exit on SIGHUP and SIGTERM (and
// as a shell reports a death by a signal).
func SignalStatus(sig os.Signal) int { return 128 + int(sig.(syscall.Signal)) }

// Size returns the columns and rows of stdout's terminal, w and h when it
// has none (or reports 0).
func Size(w, h int) (int, int) {
	if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 && ws.Row > 0 {
		return int(ws.Col), int(ws.Row)
	}
	return w, h
}
