package main

import (
	"fmt"
	"strings"
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
	outputFormat string // --output-format value (print mode): text, json or stream-json
	// sources are the --setting-sources values (user, project, local);
	// nil when the flag is not given: all three.
	sources []string
	// strictMCP is --strict-mcp-config; mcpConfigs the --mcp-config values
	// (JSON texts or file names).
	strictMCP  bool
	mcpConfigs []string
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
			var values []string
			if hasValue {
				values = append(values, value)
			} else {
				if i+1 >= len(args) {
					return invocation{}, fmt.Errorf("error: option '%s' argument missing", name)
				}
				i++
				values = append(values, args[i])
			}
			for i+1 < len(args) && !looksLikeOption(args[i+1]) {
				i++
				values = append(values, args[i])
			}
			if name == "--mcp-config" {
				inv.mcpConfigs = append(inv.mcpConfigs, values...)
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
		case "--setting-sources":
			inv.sources = strings.Split(value, ",")
		case "--strict-mcp-config":
			inv.strictMCP = true
		case "--output-format":
			inv.outputFormat = value
		case "-h", "--help":
			inv.help = true
		case "-v", "--version":
			inv.version = true
		}
	}
	return inv, nil
}
