package harness

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/loopd/loopd/internal/paneenv"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
)

// base is what every adapter takes from its config as it is.
type base struct {
	name    string
	command string   // absolute when it contains a slash
	extra   []string // cfg.ExtraArgs
	env     map[string]string
	// pass names the variables of loopd's environment the harness gets on
	// top of the server's: cfg.PassEnv and those the adapter needs.
	pass  []string
	ready *regexp.Regexp // cfg.ReadyPattern; nil means the adapter's default
	// processNames are the names the pane shows while the CLI runs in it:
	// cfg.ProcessName, or the name tmux gives the command.
	processNames []string
	processNamed bool // cfg.ProcessName was set
	// stopGroup is true when the CLI outlives tmux kill-session, so that
	// loopd ends its pane's process group (cfg.StopProcessGroup, or the
	// adapter's own rule).
	stopGroup bool
	// provision is false when cfg.Provision opts out of Provision.
	provision bool
	// projectSettings is true when the CLI may read the settings its
	// workdir holds itself (ProjectSettingsGate); false, the default,
	// starts it with them off.
	projectSettings bool
}

// shells are process names that can never stand for a harness: a wrapper
// that leaves one of them in the pane after the CLI exits (exec sh -i) shows
// the same name, so the foreground check could not tell the agent from the
// shell (docs/design.md, "Which process is the harness").
var shells = []string{"sh", "ash", "dash", "bash", "zsh", "ksh", "mksh", "pdksh", "csh", "tcsh", "fish", "busybox", "rbash"}

func newBase(name string, cfg schema.Harness) (base, error) {
	b := base{name: name, command: cfg.Command, extra: slices.Clone(cfg.ExtraArgs), env: maps.Clone(cfg.Env),
		pass: slices.Clone(cfg.PassEnv), stopGroup: cfg.StopProcessGroup,
		provision: cfg.ProvisionOn()}
	if b.command == "" {
		return base{}, fmt.Errorf("no command: %w", ErrBadConfig)
	}
	if strings.Contains(b.command, "/") {
		abs, err := filepath.Abs(b.command)
		if err != nil {
			return base{}, fmt.Errorf("command %q: %w", b.command, err)
		}
		b.command = abs
	}
	b.processNames = []string{tmux.CommandName(b.command)}
	if cfg.ProcessName != "" {
		b.processNames, b.processNamed = []string{cfg.ProcessName}, true
	}
	if !tmux.ValidCommandName(b.processNames[0]) {
		return base{}, fmt.Errorf("process name %q cannot be checked in tmux; set processName: %w", b.processNames[0], ErrBadConfig)
	}
	if slices.Contains(shells, b.processNames[0]) {
		return base{}, fmt.Errorf("process name %q is a shell, and a shell left in the pane after the CLI exits looks the same, "+
			"so an event could be pasted into it as commands; make the wrapper exec the CLI (or run it under set -m) "+
			"and set processName to the CLI's name: %w", b.processNames[0], ErrBadConfig)
	}
	if cfg.ReadyPattern != "" {
		re, err := regexp.Compile(cfg.ReadyPattern)
		if err != nil {
			return base{}, fmt.Errorf("ready pattern: %w: %w", ErrBadConfig, err)
		}
		b.ready = re
	}
	return b, nil
}

// Name is the harness name from config.
func (b *base) Name() string { return b.name }

// ProcessNames is cfg.ProcessName when set, else the name tmux shows for
// the command (tmux.CommandName): the base name of a path, a bare name as
// it is.
func (b *base) ProcessNames() []string { return slices.Clone(b.processNames) }

// withProcessNames is ProcessNames with each of names the CLI's own
// process may show added, unless cfg.ProcessName was set: then that name
// alone.
func (b *base) withProcessNames(names ...string) []string {
	out := b.ProcessNames()
	if b.processNamed {
		return out
	}
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// refuseFlags returns an error wrapping ErrBadConfig when an element of
// extraArgs is one of flags, which the adapter sets itself (an id, a
// resume, a prompt): alone, or an option (a flag that starts with "-")
// in its --flag=value form.
func (b *base) refuseFlags(flags []string) error {
	if arg, ok := b.extraFlag(flags); ok {
		return fmt.Errorf("extraArgs: %q is set by the adapter: %w", arg, ErrBadConfig)
	}
	return nil
}

// extraFlag returns the first word of extraArgs that is one of flags, a
// flag of them with "=value", or a short one with its value attached
// ("-C/tmp", "-anever", as clap reads them), and whether there is one.
func (b *base) extraFlag(flags []string) (string, bool) {
	for _, arg := range b.extra {
		for _, flag := range flags {
			short := len(flag) == 2 && flag[0] == '-' && flag[1] != '-'
			if arg == flag || strings.HasPrefix(flag, "-") && strings.HasPrefix(arg, flag+"=") || short && strings.HasPrefix(arg, flag) {
				return arg, true
			}
		}
	}
	return "", false
}

// dirOf is the directory a CLI keeps its state in as the pane sees it:
// the pane's value of key (taken against cwd when relative), else sub
// under the pane's HOME.
func (b *base) dirOf(key, sub, cwd string) (string, error) {
	if dir := b.getenv(key); dir != "" {
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		return dir, nil
	}
	home := b.getenv("HOME")
	if home == "" {
		return "", fmt.Errorf("neither %s nor HOME is set", key)
	}
	return filepath.Join(home, sub), nil
}

// paneEnv is the environment the harness gets on top of the tmux
// server's: loopd's values of the pass names (paneenv.Pass), then the
// harness env, which wins.
func (b *base) paneEnv() map[string]string {
	env := paneenv.Pass(os.Environ(), b.pass)
	maps.Copy(env, b.env)
	return env
}

// getenv returns the value key has in the pane: the harness env wins over
// loopd's own environment, of which the pane sees only what paneenv
// allows.
func (b *base) getenv(key string) string {
	if v, ok := b.env[key]; ok {
		return v
	}
	if !paneenv.Allowed(key, b.pass) {
		return ""
	}
	return os.Getenv(key)
}

// provisions reports whether loopd provisions the CLI's config dir
// (Provision): cfg.ProvisionOn.
func (b *base) provisions() bool { return b.provision }

// StopsProcessGroup reports whether loopd must end the pane's process
// group to stop the CLI (GroupStopper).
func (b *base) StopsProcessGroup() bool { return b.stopGroup }

// canonicalUUID reports whether id passes SessionIDPattern and is a UUID in
// its lowercase canonical form, of the RFC 9562 variant with a version from
// 1 to 8, and not the nil UUID: the ids the CLIs and loopd mint are such
// UUIDs, and the CLIs find conversations by the id's exact text.
func canonicalUUID(id string) bool {
	if !SessionIDPattern.MatchString(id) {
		return false
	}
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id && u.Variant() == uuid.RFC4122 && u.Version() >= 1 && u.Version() <= 8
}

// blockedOn is the Blocked of an adapter whose blocking screens are
// the dialogs its Screen reports: the reason of a ScreenBlocked, else "".
func blockedOn(s Screen, why string) Block {
	if s == ScreenBlocked {
		return why
	}
	return ""
}

// Blocked is "": an adapter without its own rule knows no blocking
// screen.
func (b *base) Blocked(string) Block { return "" }

// Limit is never found: an adapter without its own rule cannot read a
// usage limit.
func (b *base) Limit(string, time.Time) (Limit, bool) { return Limit{}, false }

// TranscriptLimit is never found (see Limit).
func (b *base) TranscriptLimit(Transcript) (Limit, bool, error) { return Limit{}, false, nil }

// LimitMenuKeys is nil: no menu is known, so none is answered.
func (b *base) LimitMenuKeys(string) []string { return nil }

// Account is the adapter's harness name: without a rule of its own, each
// harness is an account of its own.
func (b *base) Account() string { return "harness:" + b.name }

func (b *base) commandName() string { return b.command }

func (b *base) lookCommand() error {
	// command is one executable: its arguments go in extraArgs.
	hint := ""
	if strings.ContainsAny(b.command, " \t") {
		hint = " (command names the executable alone; put its arguments in extraArgs)"
	}
	if strings.Contains(b.command, "/") {
		if _, err := exec.LookPath(b.command); err != nil {
			return fmt.Errorf("harness %s: command %q%s: %w: %w", b.name, b.command, hint, ErrCommandNotFound, err)
		}
		return nil
	}
	path := b.getenv("PATH")
	for _, dir := range filepath.SplitList(path) {
		// An empty entry would mean the pane's cwd, which loopd cannot see
		// from here; it is skipped.
		if dir == "" {
			continue
		}
		if _, err := exec.LookPath(filepath.Join(dir, b.command)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("harness %s: command %q not on PATH %q%s: %w", b.name, b.command, path, hint, ErrCommandNotFound)
}
