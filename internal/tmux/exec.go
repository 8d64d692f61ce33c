package tmux

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/paneenv"
)

// Exec is the real Client: each verb runs the tmux client once, as
// "tmux -L <socket> command [; command ...]". The client runs with Env
// only; a server it starts inherits that environment, and so do the panes.
type Exec struct {
	// Binary is the tmux executable, a name looked up in PATH or a path.
	// NewExec sets "tmux".
	Binary string
	// Env is the whole environment of the tmux client (NAME=value), and so
	// of a server it starts and of every pane; EnsureServer makes the
	// global environment of a server started by someone else equal to it.
	// NewExec sets paneenv.Server of the process environment.
	Env []string

	socket string
	log    *slog.Logger
	// execute runs one tmux client with argv (after the binary) and stdin.
	// Tests replace it to see the argv built.
	execute func(ctx context.Context, argv []string, stdin io.Reader) (stdout, stderr []byte, err error)
}

var _ Client = (*Exec)(nil)

// NewExec returns a client for the tmux server on socket name socket
// (tmux -L socket; the socket lives in $TMUX_TMPDIR or /tmp, per tmux(1)).
func NewExec(socket string, log *slog.Logger) *Exec {
	e := &Exec{Binary: "tmux", Env: paneenv.Server(os.Environ()), socket: socket, log: log}
	e.execute = e.runClient
	return e
}

// Socket returns the socket name the client was made for (tmux -L).
func (e *Exec) Socket() string { return e.socket }

// EnsureServer starts the server if needed and applies opts in the same
// invocation, so they hold before any session exists. An empty
// PaneDiedChannel removes the pane-died hook. With opts.Owner set, an
// if-shell right after start-server marks an unmarked server as the
// owner's, or prints the other owner's state dir (the first line of the
// output), so that two instances cannot both claim it.
//
// The same invocation reads the server's global environment. A server this
// client started holds Env (and PWD, which tmux adds and sets again in
// every pane); one started by an older loopd or by hand may hold anything,
// so a second invocation unsets every other variable and sets Env's values,
// before any session is made. A server another owner claimed is left as it
// is.
func (e *Exec) EnsureServer(ctx context.Context, opts ServerOptions) error {
	cmds := [][]string{{"start-server"}}
	if o := opts.Owner; o.ID != "" {
		if err := CheckOwnerID(o.ID); err != nil {
			return fmt.Errorf("ensure server %s: %w", e.socket, err)
		}
		free := "#{||:#{==:#{" + serverOwnerOption + "},},#{==:#{" + serverOwnerOption + "}," + o.ID + "}}"
		claim := "set-option -s " + serverOwnerOption + " " + o.ID + " ; set-option -s " + serverDirOption + " " + quote(o.StateDir)
		cmds = append(cmds, []string{"if-shell", "-F", free, claim,
			"display-message -p " + quote(serverOwnedMarker+" #{"+serverDirOption+"}")})
	}
	cmds = append(cmds,
		[]string{"set-option", "-g", "exit-empty", "off"},
		[]string{"set-option", "-g", "remain-on-exit", "on"})
	if opts.HistoryLimit > 0 {
		cmds = append(cmds, []string{"set-option", "-g", "history-limit", strconv.Itoa(opts.HistoryLimit)})
	}
	if opts.PaneDiedChannel != "" {
		cmds = append(cmds, []string{"set-hook", "-g", "pane-died", "wait-for -S " + quote(opts.PaneDiedChannel)})
	} else {
		cmds = append(cmds, []string{"set-hook", "-gu", "pane-died"})
	}
	if opts.EnvAllowed != nil {
		// A line with no '=', which scrubEnv passes over.
		cmds = append(cmds, []string{"display-message", "-p", serverPIDMarker + " #{pid}"})
	}
	cmds = append(cmds, []string{"show-environment", "-g"})
	shown, err := e.run(ctx, nil, cmds...)
	if err != nil {
		return fmt.Errorf("ensure server %s: %w", e.socket, err)
	}
	if first, _, _ := strings.Cut(string(shown), "\n"); opts.Owner.ID != "" && strings.HasPrefix(first, serverOwnedMarker+" ") {
		dir := strings.TrimPrefix(first, serverOwnedMarker+" ")
		return fmt.Errorf("ensure server %s: %w: state dir %s", e.socket, ErrServerOwned, dir)
	}
	if opts.EnvAllowed != nil {
		if bad := serverEnvRefused(shown, opts.EnvAllowed); len(bad) > 0 {
			return fmt.Errorf("ensure server %s: %w: %s (restart the server: tmux -L %s kill-server; loopd then resumes every agent)",
				e.socket, ErrServerEnvironment, strings.Join(bad, ", "), e.socket)
		}
	}
	if fix := scrubEnv(shown, e.Env); len(fix) > 0 {
		if _, err := e.run(ctx, nil, fix...); err != nil {
			return fmt.Errorf("ensure server %s: scrub environment: %w", e.socket, err)
		}
	}
	return nil
}

// serverPIDMarker starts the line of EnsureServer's output that holds the
// server's pid.
const serverPIDMarker = "loopd-server-pid"

// serverEnvRefused returns, sorted, the names in the environment of the
// server process whose pid EnsureServer's output names that allowed
// refuses, PWD aside (tmux sets it itself, as in scrubEnv); none when the
// pid or its environ cannot be read (not Linux, or the server is gone).
func serverEnvRefused(shown []byte, allowed func(string) bool) []string {
	var pid string
	for line := range strings.Lines(string(shown)) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), serverPIDMarker+" "); ok {
			pid = v
		}
	}
	if _, err := strconv.Atoi(pid); err != nil {
		return nil
	}
	raw, err := os.ReadFile("/proc/" + pid + "/environ")
	if err != nil {
		return nil
	}
	var bad []string
	for _, kv := range strings.Split(string(raw), "\x00") {
		name, _, ok := strings.Cut(kv, "=")
		if ok && name != "" && name != "PWD" && !allowed(name) && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	return bad
}

// ServerOwner reads the server's owner marks with one display-message.
func (e *Exec) ServerOwner(ctx context.Context) (Owner, error) {
	out, err := e.run(ctx, nil, []string{"display-message", "-p", "#{" + serverOwnerOption + "}\t#{" + serverDirOption + "}"})
	if errors.Is(err, ErrNoSession) {
		return Owner{}, nil
	}
	if err != nil {
		return Owner{}, fmt.Errorf("server owner %s: %w", e.socket, err)
	}
	id, dir, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\t")
	return Owner{ID: id, StateDir: dir}, nil
}

// StopEmptyServer runs kill-server under an if-shell -F that holds when
// the server has no session (the session loop #{S:…} expands to nothing;
// tmux 3.3a has no server_sessions) and carries owner's mark; otherwise
// it prints a marker, and the server runs on. The client returns before
// the server has exited: it waits, polling every stopPoll until ctx ends,
// until the socket refuses connections (ServerListening). kill-server
// leaves the socket file (tmux 3.3a), which the next server takes over.
func (e *Exec) StopEmptyServer(ctx context.Context, owner Owner) (bool, error) {
	if err := CheckOwnerID(owner.ID); err != nil {
		return false, fmt.Errorf("stop server %s: %w", e.socket, err)
	}
	empty := "#{&&:#{==:#{S:x},},#{==:#{" + serverOwnerOption + "}," + owner.ID + "}}"
	out, err := e.run(ctx, nil, []string{"if-shell", "-F", empty, "kill-server", "display-message -p " + serverKeptMarker})
	if errors.Is(err, ErrNoSession) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stop server %s: %w", e.socket, err)
	}
	if strings.Contains(string(out), serverKeptMarker) {
		return false, nil
	}
	tick := time.NewTicker(stopPoll)
	defer tick.Stop()
	for ServerListening(e.socket) {
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("stop server %s: %w", e.socket, context.Cause(ctx))
		case <-tick.C:
		}
	}
	return true, nil
}

// stopPoll is how often StopEmptyServer looks whether the server it ended
// is gone.
const stopPoll = 10 * time.Millisecond

// serverKeptMarker is what StopEmptyServer's invocation prints when the
// server is not to be ended.
const serverKeptMarker = "loopd-server-kept"

// scrubEnv returns the set-environment commands that turn the global
// environment shown by show-environment -g (NAME=value lines; "-NAME" marks
// a variable removed) into want (NAME=value entries), less PWD, which tmux
// adds at start and sets in every pane from its own directory. A value
// holding a newline shows as more lines; a name read from such a line is
// unset in vain, which tmux accepts.
func scrubEnv(shown []byte, want []string) [][]string {
	wanted := make(map[string]string, len(want))
	for _, kv := range want {
		name, value, _ := strings.Cut(kv, "=")
		wanted[name] = value
	}
	have := map[string]string{}
	var cmds [][]string
	for line := range strings.Lines(string(shown)) {
		line = strings.TrimSuffix(line, "\n")
		name, value, ok := strings.Cut(line, "=")
		if !ok || name == "" || strings.HasPrefix(name, "-") {
			continue
		}
		have[name] = value
		if _, keep := wanted[name]; !keep && name != "PWD" {
			cmds = append(cmds, []string{"set-environment", "-g", "-u", name})
		}
	}
	for _, kv := range want {
		name, value, _ := strings.Cut(kv, "=")
		if got, ok := have[name]; !ok || got != value {
			cmds = append(cmds, []string{"set-environment", "-g", name, value})
		}
	}
	return cmds
}

// NewSession runs new-session -d -P -F '#{pane_id} #{pane_pid}' with s
// and returns the new pane's id and process. See Client.NewSession for the
// errors.
func (e *Exec) NewSession(ctx context.Context, s NewSession) (string, int, error) {
	if err := CheckNewSession(s); err != nil {
		return "", 0, fmt.Errorf("new session %s: %w", s.Name, err)
	}
	w, h := s.Width, s.Height
	if w == 0 {
		w = defaultWidth
	}
	if h == 0 {
		h = defaultHeight
	}
	cmd := []string{"new-session", "-d", "-P", "-F", "#{pane_id} #{pane_pid}", "-s", s.Name,
		"-x", strconv.Itoa(w), "-y", strconv.Itoa(h)}
	if s.Dir != "" {
		cmd = append(cmd, "-c", s.Dir)
	}
	cmd = append(append(append(cmd, "--"), s.Launcher...), s.Argv...)
	cmds := [][]string{cmd}
	if s.Owner != "" {
		cmds = append(cmds, []string{"set-option", "-t", Target(s.Name), sessionOwnerOption, s.Owner})
	}
	out, err := e.run(ctx, nil, cmds...)
	if err != nil {
		return "", 0, fmt.Errorf("new session %s: %w", s.Name, err)
	}
	id, pidText, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	pid, err := strconv.Atoi(pidText)
	if !isPaneID(id) || err != nil || pid <= 0 {
		return "", 0, fmt.Errorf("new session %s: tmux printed %q, not a pane id and pid", s.Name, out)
	}
	return id, pid, nil
}

// ListPanes runs one list-panes -a and parses it with ParseListPanes.
func (e *Exec) ListPanes(ctx context.Context) ([]Pane, error) {
	out, err := e.run(ctx, nil, []string{"list-panes", "-a", "-F", listPanesFormat})
	if errors.Is(err, ErrNoSession) {
		return []Pane{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list panes: %w", err)
	}
	return ParseListPanes(out)
}

// Kick runs run-shell true. With no server there is nothing to reap, and it
// returns nil.
func (e *Exec) Kick(ctx context.Context) error {
	_, err := e.run(ctx, nil, []string{"run-shell", "true"})
	if err != nil && !errors.Is(err, ErrNoSession) {
		return fmt.Errorf("kick: %w", err)
	}
	return nil
}

// Paste delivers text as a bracketed paste in one invocation:
//
//	has-session -t T ; if-shell -F -t T GUARD
//	  'load-buffer -b B - ; paste-buffer -p -d -r -b B -t T'
//	  'display-message -p REFUSAL'
//
// has-session fails for a missing target before a buffer exists. GUARD is
// g as a tmux format: the pane is alive (paste-buffer into a dead pane
// crashes the tmux 3.3a server), its session carries g.Owner's mark and its
// foreground process is one of g.Commands; otherwise REFUSAL prints why. B
// is a fresh buffer name per call and -d deletes it. -p wraps the text in
// the bracketed-paste markers when the program asked for them; -r keeps
// each LF, because without it paste-buffer turns LF into CR, which a
// program that did not ask for bracketed paste reads as Enter, one per line
// (tmux(1), paste-buffer).
func (e *Exec) Paste(ctx context.Context, target string, g Guard, text string) error {
	if err := CheckTarget(target); err != nil {
		return fmt.Errorf("paste to %s: %w", target, err)
	}
	if err := CheckGuard(g); err != nil {
		return fmt.Errorf("paste to %s: %w", target, err)
	}
	if text == "" {
		return nil
	}
	buf := "loopd-" + rand.Text()
	load := "load-buffer -b " + buf + " - ; paste-buffer -p -d -r -b " + buf + " -t " + quote(target)
	return e.guarded(ctx, "paste to", target, g, load, strings.NewReader(text))
}

// SendKeys runs send-keys -t target keys... behind the guard of Paste, in
// one invocation.
func (e *Exec) SendKeys(ctx context.Context, target string, g Guard, keys ...string) error {
	if err := CheckTarget(target); err != nil {
		return fmt.Errorf("send keys to %s: %w", target, err)
	}
	if err := CheckGuard(g); err != nil {
		return fmt.Errorf("send keys to %s: %w", target, err)
	}
	send := "send-keys -t " + quote(target)
	for _, k := range keys {
		send += " " + quote(k)
	}
	return e.guarded(ctx, "send keys to", target, g, send, nil)
}

// guarded runs command (a tmux command string) on target when the pane
// passes g, all in one invocation, and maps a refusal to its sentinel.
func (e *Exec) guarded(ctx context.Context, op, target string, g Guard, command string, stdin io.Reader) error {
	out, err := e.run(ctx, stdin,
		[]string{"has-session", "-t", target},
		[]string{"if-shell", "-F", "-t", target, guardCondition(g), command, refusalOf(target, g)})
	if err == nil {
		err = refusedError(out)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, target, err)
	}
	return nil
}

// CapturePane runs capture-pane -p -J (wrapped lines joined), with -S - for
// the whole history when history is true.
func (e *Exec) CapturePane(ctx context.Context, target string, history bool) (string, error) {
	if err := CheckTarget(target); err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	cmd := []string{"capture-pane", "-p", "-J", "-t", target}
	if history {
		cmd = append(cmd, "-S", "-")
	}
	out, err := e.run(ctx, nil, cmd)
	if err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	return string(out), nil
}

// CapturePanes feeds one source-file - on stdin the capture-pane -p -J of
// each target, each after a display-message -p of a marker line that names
// it: the commands' number is not bounded by the argv limit, and a missing
// target fails its own line only (source-file runs every line, tmux(1)
// "source-file"). The markers carry a random nonce, so that no screen can
// print one. A section with nothing in it is a failed capture: a live
// pane's capture prints a line per row.
func (e *Exec) CapturePanes(ctx context.Context, targets []string) (map[string]string, error) {
	screens := make(map[string]string, len(targets))
	if len(targets) == 0 {
		return screens, nil
	}
	prefix := "loopd-capture-" + rand.Text() + "-"
	var script strings.Builder
	for i, t := range targets {
		if err := CheckTarget(t); err != nil {
			return nil, fmt.Errorf("capture %s: %w", t, err)
		}
		fmt.Fprintf(&script, "display-message -p %s\ncapture-pane -p -J -t %s\n", quote(prefix+strconv.Itoa(i)), quote(t))
	}
	out, err := e.run(ctx, strings.NewReader(script.String()), []string{"source-file", "-"})
	if err != nil && !errors.Is(err, ErrNoSession) {
		return nil, fmt.Errorf("capture %d panes: %w", len(targets), err)
	}
	var section strings.Builder
	at := -1
	flush := func() {
		if at >= 0 && section.Len() > 0 {
			screens[targets[at]] = section.String()
		}
		section.Reset()
	}
	for line := range strings.Lines(string(out)) {
		if i, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), prefix); ok {
			if n, err := strconv.Atoi(i); err == nil && n > at && n < len(targets) {
				flush()
				at = n
				continue
			}
		}
		section.WriteString(line)
	}
	flush()
	return screens, nil
}

// HistorySize returns the number of lines in target's history (the
// scrollback above the screen, #{history_size}) and the screen's height in
// lines (#{pane_height}).
func (e *Exec) HistorySize(ctx context.Context, target string) (history, height int, err error) {
	if err := CheckTarget(target); err != nil {
		return 0, 0, fmt.Errorf("history of %s: %w", target, err)
	}
	out, err := e.run(ctx, nil, []string{"display-message", "-p", "-t", target, "#{history_size} #{pane_height}"})
	if err != nil {
		return 0, 0, fmt.Errorf("history of %s: %w", target, err)
	}
	if _, err := fmt.Sscan(string(out), &history, &height); err != nil {
		return 0, 0, fmt.Errorf("history of %s: %q: %w", target, out, err)
	}
	return history, height, nil
}

// CaptureNewest runs capture-pane -p -J for the newest n lines of target's
// history (-S -n -E -1: the lines just above the screen); n ≤ 0 captures
// nothing.
func (e *Exec) CaptureNewest(ctx context.Context, target string, n int) (string, error) {
	if n <= 0 {
		return "", nil
	}
	if err := CheckTarget(target); err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	out, err := e.run(ctx, nil, []string{"capture-pane", "-p", "-J", "-t", target, "-S", strconv.Itoa(-n), "-E", "-1"})
	if err != nil {
		return "", fmt.Errorf("capture %s: %w", target, err)
	}
	return string(out), nil
}

// KillSession runs kill-session -t =name behind an if-shell that checks
// the session's owner mark in the same invocation.
func (e *Exec) KillSession(ctx context.Context, name, owner string) error {
	if err := CheckSessionName(name); err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	if err := CheckOwnerID(owner); err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	out, err := e.run(ctx, nil,
		[]string{"has-session", "-t", "=" + name},
		[]string{"if-shell", "-F", "-t", Target(name), ownerCondition(owner), "kill-session -t " + quote("="+name),
			"display-message -p " + quote(refusedMarker+" foreign")})
	if err == nil {
		err = refusedError(out)
	}
	if err != nil {
		return fmt.Errorf("kill session %s: %w", name, err)
	}
	return nil
}

// WaitFor runs wait-for channel; ending ctx kills the client.
func (e *Exec) WaitFor(ctx context.Context, channel string) error {
	if channel == "" {
		return errors.New("wait for: empty channel")
	}
	if _, err := e.run(context.WithValue(ctx, tiedKey{}, true), nil, []string{"wait-for", channel}); err != nil {
		return fmt.Errorf("wait for %s: %w", channel, err)
	}
	return nil
}

// run executes the commands in one tmux invocation, joined with ";", each
// word escaped so that tmux keeps it. It maps tmux's complaints to the
// sentinel errors and puts tmux's stderr in every other error; when ctx has
// ended it returns ctx's error. The output is what tmux printed, on
// failure too (a source-file whose failed lines did not stop the others).
func (e *Exec) run(ctx context.Context, stdin io.Reader, cmds ...[]string) ([]byte, error) {
	// -f /dev/null: loopd's private server does not read the user's
	// ~/.tmux.conf, so its behaviour does not depend on whose account runs
	// it; it only matters when this call starts the server.
	argv := []string{"-L", e.socket, "-f", "/dev/null"}
	verbs := make([]string, 0, len(cmds))
	for i, c := range cmds {
		if i > 0 {
			argv = append(argv, ";")
		}
		for _, a := range c {
			argv = append(argv, escapeArg(a))
		}
		verbs = append(verbs, c[0])
	}
	start := time.Now()
	stdout, stderr, err := e.execute(ctx, argv, stdin)
	e.log.DebugContext(ctx, string(journal.TmuxExec), "socket", e.socket, "commands", verbs, "duration", time.Since(start), "err", err)
	if err == nil {
		return stdout, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return stdout, classify(e.Binary, err, strings.TrimSpace(string(stderr)))
}

// classify maps a failed tmux client to a sentinel error by its stderr
// (tmux 3.3a wording).
func classify(binary string, err error, stderr string) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s: %v", ErrNotInstalled, binary, err)
	// No server: a stale socket says "no server running on", a missing
	// one "error connecting to ... (No such file or directory)".
	case strings.Contains(stderr, "no server running on"),
		strings.Contains(stderr, "error connecting to") && strings.Contains(stderr, "No such file or directory"),
		strings.Contains(stderr, "no current target"),
		strings.Contains(stderr, "can't find session"),
		strings.Contains(stderr, "can't find window"),
		strings.Contains(stderr, "can't find pane"),
		strings.Contains(stderr, "session not found"):
		return fmt.Errorf("%w: %s", ErrNoSession, stderr)
	case strings.Contains(stderr, "duplicate session"):
		return fmt.Errorf("%w: %s", ErrSessionExists, stderr)
	case strings.Contains(stderr, "command too long"):
		return fmt.Errorf("%w: %s", ErrCommandTooLong, stderr)
	case stderr != "":
		return fmt.Errorf("%w: %s", err, stderr)
	}
	return err
}

// runClient is the default execute: the tmux client as a child process with
// Env as its whole environment. A nil Env would make exec inherit the
// process environment, so it becomes an empty one.
func (e *Exec) runClient(ctx context.Context, argv []string, stdin io.Reader) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, e.Binary, argv...)
	cmd.Env = append([]string{}, e.Env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var err error
	if tied, _ := ctx.Value(tiedKey{}).(bool); tied {
		err = runTied(cmd)
	} else {
		err = cmd.Run()
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// tiedKey marks the context of a client that blocks until the server
// acts (wait-for): runClient starts it tied to loopd's life (runTied),
// so that loopd killed with SIGKILL leaves no client of it waiting.
type tiedKey struct{}
