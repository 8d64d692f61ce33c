package main

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// arity is how many values an option takes, in commander.js terms (the
// parser behind claude --help).
type arity int

const (
	noValue  arity = iota // --verbose
	required              // --model <model>: takes the next argument, whatever it is
	optional              // -r, --resume [value]: takes the next argument unless it starts with "-"
	variadic              // --add-dir <directories...>: takes arguments until one starts with "-"
)

// options are the options of Claude Code 2.1.197's claude --help. An
// option not listed is taken as one without a value.
var options = map[string]arity{
	"--add-dir": variadic, "--agent": required, "--agents": required,
	"--allow-dangerously-skip-permissions": noValue,
	"--allowedTools":                       variadic, "--allowed-tools": variadic,
	"--append-system-prompt": required, "--ax-screen-reader": noValue,
	"--bg": noValue, "--background": noValue, "--bare": noValue,
	"--betas": variadic, "--brief": noValue, "--chrome": noValue,
	"-c": noValue, "--continue": noValue,
	"--dangerously-skip-permissions": noValue,
	"-d":                             optional, "--debug": optional, "--debug-file": required,
	"--disable-slash-commands": noValue,
	"--disallowedTools":        variadic, "--disallowed-tools": variadic,
	"--effort": required, "--exclude-dynamic-system-prompt-sections": noValue,
	"--fallback-model": required, "--file": variadic, "--fork-session": noValue,
	"--from-pr": optional, "-h": noValue, "--help": noValue, "--ide": noValue,
	"--include-hook-events": noValue, "--include-partial-messages": noValue,
	"--input-format": required, "--json-schema": required,
	"--max-budget-usd": required, "--mcp-config": variadic, "--model": required,
	"-n": required, "--name": required, "--no-chrome": noValue,
	"--no-session-persistence": noValue, "--output-format": required,
	"--permission-mode": required, "--plugin-dir": required, "--plugin-url": required,
	"-p": noValue, "--print": noValue, "--prompt-suggestions": optional,
	"--remote-control": optional, "--remote-control-session-name-prefix": required,
	"--replay-user-messages": noValue, "-r": optional, "--resume": optional,
	"--safe-mode": noValue, "--session-id": required, "--setting-sources": required,
	"--settings": required, "--strict-mcp-config": noValue, "--system-prompt": required,
	"--tmux": noValue, "--tools": variadic, "--verbose": noValue,
	"-v": noValue, "--version": noValue, "-w": optional, "--worktree": optional,
}

// invocation is what the fake needs from its argv.
type invocation struct {
	sessionID    string // --session-id value
	hasSessionID bool
	resume       bool   // -r/--resume given
	resumeValue  string // "" when --resume took no value
	cont         bool   // -c/--continue
	fork         bool   // --fork-session
	print        bool   // -p/--print
	help         bool
	version      bool
	prompt       string // the first positional argument
	hasPrompt    bool
	settings     string // --settings value: a JSON text or a file name
}

// looksLikeOption is commander's test for "this argument is an option, not
// a value".
func looksLikeOption(arg string) bool { return len(arg) > 1 && arg[0] == '-' }

// parseArgs parses argv (without the program name) the way commander does
// for claude: "--" ends the options, "--name=value" is accepted for long
// options, and the first positional argument is the prompt (later ones are
// ignored). It returns commander's error text for a required value that is
// missing.
func parseArgs(args []string) (invocation, error) {
	var inv invocation
	positional := func(arg string) {
		if !inv.hasPrompt {
			inv.prompt, inv.hasPrompt = arg, true
		}
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			for _, rest := range args[i+1:] {
				positional(rest)
			}
			break
		}
		if !looksLikeOption(arg) {
			positional(arg)
			continue
		}
		name, value, hasValue := arg, "", false
		if strings.HasPrefix(arg, "--") {
			name, value, hasValue = strings.Cut(arg, "=")
		}
		switch options[name] {
		case required:
			if !hasValue {
				if i+1 >= len(args) {
					return invocation{}, fmt.Errorf("error: option '%s' argument missing", name)
				}
				i++
				value, hasValue = args[i], true
			}
		case optional:
			if !hasValue && i+1 < len(args) && !looksLikeOption(args[i+1]) {
				i++
				value, hasValue = args[i], true
			}
		case variadic:
			if !hasValue {
				if i+1 >= len(args) {
					return invocation{}, fmt.Errorf("error: option '%s' argument missing", name)
				}
				i++
			}
			for i+1 < len(args) && !looksLikeOption(args[i+1]) {
				i++
			}
		}
		switch name {
		case "--session-id":
			inv.sessionID, inv.hasSessionID = value, true
		case "-r", "--resume":
			inv.resume, inv.resumeValue = true, value
		case "-c", "--continue":
			inv.cont = true
		case "--fork-session":
			inv.fork = true
		case "-p", "--print":
			inv.print = true
		case "--settings":
			inv.settings = value
		case "-h", "--help":
			inv.help = true
		case "-v", "--version":
			inv.version = true
		}
	}
	return inv, nil
}

// Input handling. Claude Code reads raw terminal input: CR submits, LF
// inserts a newline, a bracketed paste (ESC[200~ … ESC[201~) is inserted
// as it is except that each tab becomes four spaces (measured on 2.1.197:
// docs/design.md, "Delivery is verified"), and an Enter that arrives in the same read as more than
// pasteHeuristic bytes of unbracketed text counts as a newline, because
// such a read is taken as a paste from a terminal without bracketed paste
// (docs/reference/harness-cli-facts.md, "Typing into the TUI").

const pasteHeuristic = 50

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// eventKind is what a key did.
type eventKind int

const (
	eventSubmit    eventKind = iota // Enter: text is the whole input, which is cleared
	eventInterrupt                  // Ctrl-C: the input is cleared
	eventEdit                       // the input changed
)

type event struct {
	kind eventKind
	text string
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
)

type token struct {
	kind tokenKind
	data []byte
}

// editor is the input box: its text and the lexer state that spans reads.
type editor struct {
	buf     []byte
	inPaste bool
	pending []byte // an escape sequence or paste end cut by the end of a read
}

// feed takes one read from the terminal and returns what happened.
func (e *editor) feed(chunk []byte) []event {
	toks := e.lex(chunk)
	unbracketed := 0
	for _, t := range toks {
		if t.kind == tokText {
			unbracketed += len(t.data)
		}
	}
	var events []event
	edited := false
	for _, t := range toks {
		switch t.kind {
		case tokText:
			e.buf, edited = append(e.buf, t.data...), true
		case tokPaste:
			e.buf, edited = append(e.buf, bytes.ReplaceAll(t.data, []byte("\t"), []byte("    "))...), true
		case tokLF:
			e.buf, edited = append(e.buf, '\n'), true
		case tokCR:
			if unbracketed > pasteHeuristic {
				e.buf, edited = append(e.buf, '\n'), true
				continue
			}
			events = append(events, event{kind: eventSubmit, text: string(e.buf)})
			e.buf, edited = nil, false
		case tokBackspace:
			if _, n := utf8.DecodeLastRune(e.buf); n > 0 {
				e.buf, edited = e.buf[:len(e.buf)-n], true
			}
		case tokCtrlC:
			events = append(events, event{kind: eventInterrupt})
			e.buf, edited = nil, false
		}
	}
	if edited {
		events = append(events, event{kind: eventEdit})
	}
	return events
}

// lex splits pending bytes plus chunk into tokens, keeping an incomplete
// escape sequence (or paste end marker) for the next read. Escape
// sequences other than the paste markers are dropped.
func (e *editor) lex(chunk []byte) []token {
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
