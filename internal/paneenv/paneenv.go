// Package paneenv decides which variables of loopd's own environment reach
// its tmux server and so the agents in its panes. It is an allow-list:
// tmux copies the environment of the client that starts its server into the
// server's global environment, and that into every pane (tmux(1), "GLOBAL
// AND SESSION ENVIRONMENT"), so whatever the daemon holds, a webhook secret
// or a token, would otherwise be one `env` away from every agent.
//
// The rule has three parts: the server gets only the Base variables; a
// harness gets, on top, the variables its adapter needs and those its
// config lists (passEnv), through loopd's launcher, never through argv;
// and Denied names are never passed from the daemon, whichever list names
// them.
package paneenv

import (
	"slices"
	"strings"
)

// Base are the variables of the daemon's environment that loopd's tmux
// client, its server and so every pane get: the search path, the user's
// identity and home (login(1) sets these), the locale, the time zone, the
// temporary directory, and TMUX_TMPDIR, which the tmux client needs to find
// the server's socket (tmux(1), -L). TERM is kept for the client; tmux sets
// each pane's own TERM from default-terminal.
var Base = []string{
	"PATH", "HOME", "USER", "LOGNAME",
	"LANG", "LANGUAGE", "LC_ALL", "LC_ADDRESS", "LC_COLLATE", "LC_CTYPE", "LC_IDENTIFICATION",
	"LC_MEASUREMENT", "LC_MESSAGES", "LC_MONETARY", "LC_NAME", "LC_NUMERIC", "LC_PAPER",
	"LC_TELEPHONE", "LC_TIME",
	"TERM", "TZ", "TMPDIR", "TMUX_TMPDIR",
}

// Denied reports whether name must never be passed from the daemon's
// environment to a pane, even when a list names it: loopd's own variables
// (LOOPD_..., where the webhook secret lives by default; LOOPD_WORK_ITEM is
// set by loopd itself) and GitHub credentials (any name containing GITHUB,
// such as GITHUB_TOKEN or HOMEBREW_GITHUB_API_TOKEN, and any name starting
// with GH_, such as GH_TOKEN, which the gh CLI reads), and the store's
// PostgreSQL password as pgx reads it from the environment (PGPASSWORD,
// and PGPASSFILE, the file that holds it). The variable named
// by webhooks.ghWebhook.secretEnv is refused by the config check and taken
// out of the daemon's environment once read.
func Denied(name string) bool {
	upper := strings.ToUpper(name)
	return strings.HasPrefix(upper, "LOOPD_") || strings.HasPrefix(upper, "GH_") || strings.Contains(upper, "GITHUB") ||
		upper == "PGPASSWORD" || upper == "PGPASSFILE"
}

// Server returns the entries of environ (NAME=value, as os.Environ gives
// them) whose name is in Base and not Denied, in environ's order: the
// environment of loopd's tmux client, and so of a server it starts.
func Server(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(Base, name) && !Denied(name) {
			out = append(out, kv)
		}
	}
	return out
}

// Pass returns the values environ holds for names, less the Denied ones:
// what a harness gets from the daemon's environment on top of the server's.
// A name that environ does not hold is left out.
func Pass(environ, names []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(names, name) && !Denied(name) {
			out[name] = value
		}
	}
	return out
}

// Allowed reports whether a pane can get the daemon's value of name, given
// the names a harness passes: a Base or passed name that is not Denied.
func Allowed(name string, passed []string) bool {
	return !Denied(name) && (slices.Contains(Base, name) || slices.Contains(passed, name))
}
