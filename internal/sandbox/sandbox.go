// Package sandbox runs each agent in a sandbox of its own, made with
// bubblewrap (bwrap, Debian's package bubblewrap): a mount namespace built
// from an empty root that shows the agent its workdir, its harness's state,
// the harness binary and the system, and nothing of loopd (its state dir,
// config, secrets, tmux socket) or of the other items; a pid namespace of
// its own; no capabilities; no_new_privs; the host's network.
//
// A Spec says what one spawn's sandbox shows; Host.Wrap turns it into the
// bwrap argv put between loopd's launcher and the harness's argv (pure, no
// file system access). Check finds bwrap and proves it can make the
// namespaces on this machine (as root, or with a user namespace as any
// other user). Exec is the first process inside: it takes the terminal's
// foreground and execs the harness (docs/design.md, "Sandbox").
//
// Every path inside is the same path as outside: a Spec binds host paths
// at their own paths, so transcripts, restore targets and the harness's
// config dir need no translation, and a spawn without a sandbox runs the
// same harness argv without the wrapper.
package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// The modes of a route (routing.repos.<key>.sandbox.mode, the global
// sandbox.mode).
const (
	// ModeBubblewrap runs every agent of the route in a sandbox (default).
	ModeBubblewrap = "bubblewrap"
	// ModeNone runs the route's agents as loopd's own user with nothing
	// hidden, as an explicit choice that loopd shows on every such item.
	ModeNone = "none"
)

// ExitOf reads the exit status of a sandboxed pane: bwrap, the pane's own
// process, exits 128+N when a signal N ended the harness inside (as a
// shell does, N at most 64), so such a status is signal N with exit 0,
// as tmux reports a pane a signal ended; any other status is itself.
func ExitOf(status int) (exit, signal int) {
	if status > 128 && status <= 128+64 {
		return 0, status - 128
	}
	return status, 0
}

// Starting is what tmux names a pane whose sandbox is still being made
// (pane_current_command): bwrap leads the terminal's foreground group
// until Exec, inside, takes it for the harness; a live pane never shows it
// after (a harness that exits ends bwrap, and the pane).
const Starting = "bwrap"

// Command is the hidden loopd subcommand the sandbox runs first (Exec), and
// PathFlag its flag naming the harness's executable.
const (
	Command  = "sandbox-exec"
	PathFlag = "--path"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrMissing means bwrap is not installed: the error says to install
	// Debian's bubblewrap (Install).
	ErrMissing = errors.New("bubblewrap is not installed")
	// ErrNamespaces means bwrap is there but cannot make the namespaces
	// here: the error names the kernel setting that is missing.
	ErrNamespaces = errors.New("bubblewrap cannot create namespaces")
	// ErrBadSpec means a Spec that cannot make a sandbox: a relative or
	// unclean path, no workdir or program, a bind of a hidden path.
	ErrBadSpec = errors.New("invalid sandbox spec")
)

// Install is the command that installs bubblewrap on Debian and Ubuntu.
const Install = "apt-get install bubblewrap"

// Bind is one host path a sandbox shows, in addition to those a Spec names
// by their own path.
type Bind struct {
	// Source is the host path; Target is where the sandbox shows it, ""
	// for the same path.
	Source string `json:"path"`
	Target string `json:"target,omitempty"`
	// Write makes it writable; a bind is read-only otherwise.
	Write bool `json:"write,omitempty"`
}

// target returns where b shows its source.
func (b Bind) target() string {
	if b.Target == "" {
		return b.Source
	}
	return b.Target
}

// Spec is what the sandbox of one spawn shows the harness. Every path is
// absolute and clean; paths are bound at their own host path unless a
// Bind says otherwise, in this order: the system and Private, ReadOnly,
// ReadWrite, Workdir, Channel, then Binds, so that a later path is seen
// through an earlier one that holds it.
type Spec struct {
	// Workdir is the item's workdir: writable, and the harness's cwd.
	Workdir string
	// Program is the harness's executable as Resolve found it (symlinks
	// resolved), which Exec runs with the argv[0] the harness was given.
	Program string
	// ReadOnly and ReadWrite are further host paths shown at their own
	// path: the harness's install dir (Resolve), loopd's own executable,
	// what git needs of a workdir.
	ReadOnly  []string
	ReadWrite []string
	// Channel is the item's channel dir, writable; "" for none.
	Channel string
	// Binds are the harness's state (its per-item view, Harness
	// adapters) and the route's sandbox.binds, in order.
	Binds []Bind
	// Private are paths the harness gets an empty writable directory at,
	// its own and gone with the sandbox: $HOME and $TMPDIR (/tmp and
	// /var/tmp are always private).
	Private []string
	// Hide are directories, and Mask files, that a bind above may hold
	// and the harness must never see (loopd's state dir, the config's and
	// secretFile's dirs): each is covered by an empty directory, or an
	// empty file, right after any bind that holds it.
	Hide []string
	Mask []string
}

// Entry is one top-level system path as the host has it: a directory
// bound read-only, or a symlink made again inside (/bin -> usr/bin).
type Entry struct {
	Path string
	// Link is the symlink's target, "" for a directory.
	Link string
}

// Host is what Wrap needs of the machine, found once by Layout and Check.
type Host struct {
	// Bwrap is bwrap's absolute path.
	Bwrap string
	// Exe is loopd's own executable, shown read-only at its path: the
	// sandbox runs its Exec first, and the harness's hooks call it.
	Exe string
	// Root is true when loopd runs as root: the sandbox needs no user
	// namespace, and its capabilities must be dropped (bwrap keeps them
	// for root otherwise). Any other user gets a user namespace.
	Root bool
	// System are the system paths shown read-only (Layout).
	System []Entry
	// Extra are system files outside System shown read-only at their
	// path: /etc/resolv.conf's target when it is a symlink into /run.
	Extra []string
}

// privateDirs are the directories every sandbox gets empty and writable
// of its own: the host's hold other processes' files (the tmux socket dir
// under /tmp among them).
var privateDirs = []string{"/tmp", "/var/tmp", "/run"}

// Wrap returns the argv that runs the harness's whole argv, put after it
// (argv[0] as configured), in the sandbox s describes: bwrap's own
// options, then Exe's Command with s.Program, ending with "--". It reads
// no file; it returns an error wrapping ErrBadSpec for a Spec it cannot
// honour.
func (h Host) Wrap(s Spec) ([]string, error) {
	if err := h.check(s); err != nil {
		return nil, err
	}
	a := h.options()
	m := mounts{hide: s.Hide, mask: s.Mask}
	h.system(&m, s.Private)
	for _, p := range append([]string{h.Exe}, s.ReadOnly...) {
		m.bind("--ro-bind", p, p)
	}
	for _, p := range s.ReadWrite {
		m.bind("--bind", p, p)
	}
	m.bind("--bind", s.Workdir, s.Workdir)
	if s.Channel != "" {
		m.bind("--bind", s.Channel, s.Channel)
	}
	for _, b := range s.Binds {
		op := "--ro-bind"
		if b.Write {
			op = "--bind"
		}
		m.bind(op, b.Source, b.target())
	}
	a = append(a, m.args...)
	return append(a, "--chdir", s.Workdir, "--", h.Exe, Command, PathFlag, s.Program, "--"), nil
}

// options are bwrap's options other than the mounts.
func (h Host) options() []string {
	a := []string{h.Bwrap,
		// The sandbox ends when its parent (the pane's process, the run's
		// wrapper) does, whatever killed it.
		"--die-with-parent",
		// No other process of the host is visible, nor their System V
		// IPC and message queues.
		"--unshare-pid", "--unshare-ipc",
	}
	if !h.Root {
		a = append(a, "--unshare-user")
	}
	// As root the sandbox would keep every capability (measured:
	// CapEff 000001fffeffffff); other users have none to drop.
	return append(a, "--cap-drop", "ALL")
}

// system adds the mounts every sandbox starts from: the system read-only,
// a /dev and a /proc of its own, and the private directories.
func (h Host) system(m *mounts, private []string) {
	for _, e := range h.System {
		if e.Link != "" {
			m.add("--symlink", e.Link, e.Path)
		} else {
			m.bind("--ro-bind", e.Path, e.Path)
		}
	}
	for _, p := range h.Extra {
		m.bind("--ro-bind", p, p)
	}
	// bwrap leaves the new /proc/sys writable: its check finds the
	// directory read-only (procfs refuses a write to it), but root can
	// write the sysctls in it (measured, bubblewrap 0.8.0). The host's,
	// read-only, shows the same kernel.
	m.add("--dev", "/dev", "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys")
	for _, p := range privateDirs {
		m.add("--tmpfs", p)
	}
	for _, p := range private {
		if !slices.Contains(privateDirs, p) { // TMPDIR=/tmp
			m.add("--tmpfs", p)
		}
	}
}

// mounts collects bwrap's mount options, each hidden path covered right
// after a bind that holds it.
type mounts struct {
	args       []string
	hide, mask []string
}

func (m *mounts) add(args ...string) { m.args = append(m.args, args...) }

// bind adds a bind of source at target, then covers where it shows each
// hidden dir and masked file that source holds.
func (m *mounts) bind(op, source, target string) {
	m.add(op, source, target)
	for _, h := range m.hide {
		if Within(h, source) && h != source {
			m.add("--tmpfs", shownAt(h, source, target))
		}
	}
	for _, f := range m.mask {
		if Within(f, source) && f != source {
			m.add("--ro-bind", "/dev/null", shownAt(f, source, target))
		}
	}
}

// shownAt is where a bind of source at target shows p, which source holds.
func shownAt(p, source, target string) string {
	if source == target {
		return p
	}
	return filepath.Join(target, strings.TrimPrefix(p, source))
}

// check refuses what Wrap cannot make a sandbox of.
func (h Host) check(s Spec) error {
	if h.Bwrap == "" || h.Exe == "" {
		return fmt.Errorf("%w: no bwrap or loopd executable", ErrBadSpec)
	}
	if s.Workdir == "" || s.Program == "" {
		return fmt.Errorf("%w: no workdir or program", ErrBadSpec)
	}
	paths := []string{h.Bwrap, h.Exe, s.Workdir, s.Program}
	paths = append(paths, h.Extra...)
	paths = append(paths, s.ReadOnly...)
	paths = append(paths, s.ReadWrite...)
	paths = append(paths, s.Private...)
	paths = append(paths, s.Hide...)
	paths = append(paths, s.Mask...)
	if s.Channel != "" {
		paths = append(paths, s.Channel)
	}
	for _, b := range s.Binds {
		paths = append(paths, b.Source, b.target())
	}
	for _, p := range paths {
		if !Clean(p) {
			return fmt.Errorf("%w: path %q is not absolute and clean", ErrBadSpec, p)
		}
	}
	// A bind that holds a hidden path gets it covered; one of the hidden
	// path itself would show it whole. What lies inside one (the workdir
	// under the state dir) is loopd's to show.
	hidden := append(slices.Clone(s.Hide), s.Mask...)
	sources := append(append([]string{s.Workdir, s.Channel}, s.ReadOnly...), s.ReadWrite...)
	for _, b := range s.Binds {
		sources = append(sources, b.Source)
	}
	for _, p := range sources {
		if p != "" && slices.Contains(hidden, p) {
			return fmt.Errorf("%w: %s is hidden", ErrBadSpec, p)
		}
	}
	return nil
}

// Clean reports whether p is an absolute path in its clean form.
func Clean(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// Within reports whether path p is dir or lies below it (both clean and
// absolute).
func Within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Overlaps reports whether a and b are the same path or one holds the
// other.
func Overlaps(a, b string) bool { return Within(a, b) || Within(b, a) }
