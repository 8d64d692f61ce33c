// Package runner runs one headless turn of a harness as a process detached
// from loopd (the process runner, docs/design.md), and reads back what
// became of it, from any later loopd.
//
// The executor starts "loopd run-harness --dir DIR --id ID -- ARGV..." (the
// wrapper, Exec) in a session and process group of its own (setsid), in the
// item's workdir, with the harness's environment, its stdout and stderr in
// the run's log file. The wrapper starts the harness as its child, in the
// same group, and writes the pid file: its own pid and the harness's, each
// with its start time (internal/proc), which tells them from later
// processes given the same pids. When the harness exits, the wrapper
// writes the exit file: the exit status or the signal, and when. A daemon
// that is restarted (SIGTERM, kill -9) is not the run's parent any more and
// could not learn its exit status from wait(2); the exit file carries it
// to whichever daemon reads it next (Read).
//
// The files of a run are DIR/<id>.pid, DIR/<id>.exit and DIR/<id>.log,
// where DIR is one directory per item under the state dir (mode 0700).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/schema"
)

// Command is the hidden loopd subcommand that wraps one run (Exec); DirFlag
// and IDFlag are its flags.
const (
	Command = "run-harness"
	DirFlag = "--dir"
	IDFlag  = "--id"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNotStarted means the wrapper ended, or schema.RunStartWait passed, before
	// it wrote the run's pid file: no run is known to have started.
	ErrNotStarted = errors.New("run not started")
	// ErrBadRunID means a run id that cannot name a file.
	ErrBadRunID = errors.New("invalid run id")
)

// KeepLogs is how many run logs Start keeps per item (the newest), the
// new run's included.
const KeepLogs = 5

// maxOutput is how much of the end of a run's log Read returns, in bytes:
// a headless CLI's result object is its last line.
const maxOutput = 64 << 10

// Runner starts runs through the wrapper.
type Runner struct {
	// Exe is the loopd executable that wraps a run (os.Executable).
	Exe string
	// Dir holds one directory of run files per item.
	Dir string
}

// Spec is one run to start.
type Spec struct {
	// Item names the item's directory of run files (its session name,
	// [a-z0-9-], desired.SessionName); ID names the run (ValidID).
	Item, ID string
	Cwd      string
	// Argv is the harness's whole argv; a bare argv[0] is looked up on
	// Env's PATH.
	Argv []string
	// Env is the harness's whole environment (KEY=value).
	Env []string
	// Stdin is what the harness reads on stdin; nil gives it /dev/null.
	Stdin []byte
	// Done, when set, is called once the wrapper has exited, if this
	// process is still its parent then (a later one reads the exit file).
	Done func()
}

// ValidID reports whether id can name a run's files: [0-9A-Za-z._-], 1 to
// 64 bytes, not starting with a dot.
func ValidID(id string) bool {
	if id == "" || len(id) > 64 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ItemDir is the directory of the run files of item.
func (r Runner) ItemDir(item string) string { return filepath.Join(r.Dir, item) }

// LogPath is the log file of run id of item.
func (r Runner) LogPath(item, id string) string { return filepath.Join(r.ItemDir(item), id+".log") }

// Start starts s detached from this process (its own session and process
// group) and returns once the wrapper has written the run's pid file, so
// that a daemon killed right after Start returns leaves a run the next one
// finds. The files of earlier runs of the item are removed, except the
// newest logs (KeepLogs). It returns an error wrapping ErrNotStarted when
// the wrapper ended, or schema.RunStartWait passed, with no pid file; the wrapper's
// process group is then killed.
func (r Runner) Start(ctx context.Context, s Spec) error {
	if r.Exe == "" || r.Dir == "" {
		return fmt.Errorf("start run %s: no wrapper executable or directory", s.ID)
	}
	if !ValidID(s.ID) || !ValidID(s.Item) {
		return fmt.Errorf("start run %s of %s: %w", s.ID, s.Item, ErrBadRunID)
	}
	if len(s.Argv) == 0 {
		return fmt.Errorf("start run %s: no command", s.ID)
	}
	dir := r.ItemDir(s.Item)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("start run %s: %w", s.ID, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("start run %s: %w", s.ID, err)
	}
	if err := prune(dir, s.ID); err != nil {
		return fmt.Errorf("start run %s: %w", s.ID, err)
	}
	logFile, err := os.OpenFile(r.LogPath(s.Item, s.ID), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start run %s: %w", s.ID, err)
	}
	defer logFile.Close()
	cmd := exec.Command(r.Exe, append([]string{Command, DirFlag, dir, IDFlag, s.ID, "--"}, s.Argv...)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.Cwd, s.Env, logFile, logFile
	if cmd.Env == nil {
		cmd.Env = []string{} // never this process's environment
	}
	if s.Stdin != nil {
		in, err := stdinFile(dir, s.ID, s.Stdin)
		if err != nil {
			return fmt.Errorf("start run %s: %w", s.ID, err)
		}
		defer in.Close()
		cmd.Stdin = in
	}
	// A session of its own: no signal sent to loopd's process group or
	// terminal (a Ctrl-C, a service manager's stop of the group) reaches
	// the run, and the run's group is its wrapper's pid.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start run %s: %w", s.ID, err)
	}
	exited := make(chan struct{})
	// Reaped here while this process lives; a later daemon is not its
	// parent, and reads the exit file instead.
	go func() {
		_ = cmd.Wait()
		close(exited)
		if s.Done != nil {
			s.Done()
		}
	}()
	pidFile := filepath.Join(dir, s.ID+".pid")
	deadline := time.NewTimer(schema.RunStartWait)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			return nil
		}
		select {
		case <-exited:
			if _, err := os.Stat(pidFile); err == nil {
				return nil
			}
			return fmt.Errorf("start run %s: wrapper exited: %w", s.ID, ErrNotStarted)
		case <-deadline.C:
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if ctx.Err() != nil {
			return fmt.Errorf("start run %s: %w: %w", s.ID, ErrNotStarted, ctx.Err())
		}
		return fmt.Errorf("start run %s: no pid file after %s: %w", s.ID, schema.RunStartWait, ErrNotStarted)
	}
}

// stdinFile writes data to a file only loopd's user reads, opens it for
// the run's stdin and removes its name: the open file is all that is left.
func stdinFile(dir, id string, data []byte) (*os.File, error) {
	path := filepath.Join(dir, id+".in")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	_ = os.Remove(path)
	return f, err
}

// prune removes the pid, exit and stdin files of every run of dir but
// keep, and all but the newest KeepLogs-1 logs of the others.
func prune(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var logs []string
	for _, e := range entries {
		name := e.Name()
		id, ext := strings.TrimSuffix(name, filepath.Ext(name)), filepath.Ext(name)
		if id == keep {
			continue
		}
		switch ext {
		case ".log":
			logs = append(logs, name)
		case ".pid", ".exit", ".in", ".tmp":
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	// Run ids sort by their start (the executor makes them from the
	// clock), so the oldest logs come first.
	slices.Sort(logs)
	for len(logs) > KeepLogs-1 {
		if err := os.Remove(filepath.Join(dir, logs[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		logs = logs[1:]
	}
	return nil
}

// pidRecord is the pid file: the wrapper and the harness, each with its
// start time, and when the harness started.
type pidRecord struct {
	Wrapper      int       `json:"wrapper_pid"`
	WrapperStart uint64    `json:"wrapper_start"`
	Harness      int       `json:"harness_pid"`
	HarnessStart uint64    `json:"harness_start"`
	StartedAt    time.Time `json:"started_at"`
}

// exitRecord is the exit file.
type exitRecord struct {
	ExitStatus int       `json:"exit_status"`
	Signal     int       `json:"signal"`
	EndedAt    time.Time `json:"ended_at"`
}

// Exec is the wrapper: it starts argv as its child (a bare argv[0] looked
// up on the environment's PATH), with its own stdin, stdout and stderr,
// writes dir/<id>.pid, waits for the child, ends what the child left in
// the group (schema.RunLeftoverGrace) and writes dir/<id>.exit. It
// ignores SIGTERM, SIGINT and SIGHUP, which the child's group gets: the
// wrapper outlives the harness it reports on. A child that cannot be
// started is recorded as exit status 127, as a shell does.
func Exec(dir, id string, argv []string) error {
	if !ValidID(id) {
		return fmt.Errorf("run %s: %w", id, ErrBadRunID)
	}
	if len(argv) == 0 {
		return fmt.Errorf("run %s: no command", id)
	}
	// Caught, not ignored: an ignored signal would stay ignored in the
	// child across exec.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	self, err := proc.Lookup(os.Getpid())
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	rec := pidRecord{Wrapper: self.PID, WrapperStart: self.Start, StartedAt: time.Now().UTC()}
	// A bare name is looked up on this process's PATH, which is the
	// harness's own: the wrapper runs with the harness's environment.
	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, os.Stdout, os.Stderr
	startErr := child.Start()
	if startErr == nil {
		rec.Harness = child.Process.Pid
		if p, err := proc.Lookup(child.Process.Pid); err == nil {
			rec.HarnessStart = p.Start
		}
	}
	if err := writeJSON(filepath.Join(dir, id+".pid"), rec); err != nil {
		if startErr == nil {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
		return fmt.Errorf("run %s: %w", id, err)
	}
	out := exitRecord{ExitStatus: 127}
	if startErr != nil {
		fmt.Fprintf(os.Stderr, "loopd: run %s: %v\n", id, startErr)
	} else {
		_ = child.Wait()
		out.ExitStatus = child.ProcessState.ExitCode()
		if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Signal = int(ws.Signal())
		}
	}
	out.EndedAt = time.Now().UTC()
	// What the harness left in the group (a tool it started in the
	// background) ends with the run, before the exit file says the run
	// is over: the next run of the item never meets it.
	if _, err := proc.EndOwnGroup(context.Background(), syscall.SIGTERM, schema.RunLeftoverGrace, schema.RunLeftoverPoll); err != nil {
		fmt.Fprintf(os.Stderr, "loopd: run %s: %v\n", id, err)
	}
	if err := writeJSON(filepath.Join(dir, id+".exit"), out); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	return nil
}

// writeJSON writes v to path whole or not at all (a temporary file renamed
// over it), mode 0600.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Fact is what the disk and /proc show of one run.
type Fact struct {
	ID string
	// Started is true once the wrapper wrote the pid file.
	Started bool
	// Running is true until the wrapper wrote the exit file, while the
	// wrapper or the harness runs (by pid and start time).
	Running bool
	// PID is the harness's process, and of the run's group leader Group
	// (the wrapper's pid); StartedAt is when the harness was started.
	PID, Group int
	StartedAt  time.Time
	// StatusKnown is true when the wrapper recorded the harness's exit:
	// ExitStatus (-1 for a signal), Signal and EndedAt are then set. A run
	// that ended without it (its group was killed with SIGKILL) has none.
	StatusKnown bool
	ExitStatus  int
	Signal      int
	EndedAt     time.Time
	// Log is the run's log file; Output is its last bytes (at most 64
	// KiB), read once the run has ended.
	Log    string
	Output []byte
}

// Ended reports whether the run started and no longer runs.
func (f Fact) Ended() bool { return f.Started && !f.Running }

// Read returns what the files of run id of item and /proc show of it. A
// run with no pid file is not Started; one whose pid file or exit file
// cannot be parsed is an error.
func (r Runner) Read(item, id string) (Fact, error) {
	if !ValidID(id) || !ValidID(item) {
		return Fact{}, fmt.Errorf("read run %s of %s: %w", id, item, ErrBadRunID)
	}
	dir := r.ItemDir(item)
	f := Fact{ID: id, Log: r.LogPath(item, id), ExitStatus: -1}
	var rec pidRecord
	if ok, err := readJSON(filepath.Join(dir, id+".pid"), &rec); err != nil || !ok {
		return f, err
	}
	f.Started, f.PID, f.Group, f.StartedAt = true, rec.Harness, rec.Wrapper, rec.StartedAt
	// The exit file says the harness ended (the wrapper writes it after
	// wait(2), and exits right after); without it, the run ends when
	// neither process runs any more.
	var out exitRecord
	ok, err := readJSON(filepath.Join(dir, id+".exit"), &out)
	if err != nil {
		return f, err
	}
	if ok {
		f.StatusKnown, f.ExitStatus, f.Signal, f.EndedAt = true, out.ExitStatus, out.Signal, out.EndedAt
	} else {
		wrapper, harness := proc.Process{PID: rec.Wrapper, Start: rec.WrapperStart}, proc.Process{PID: rec.Harness, Start: rec.HarnessStart}
		if f.Running = wrapper.Running() || harness.Running(); f.Running {
			return f, nil
		}
	}
	f.Output, err = tail(f.Log, maxOutput)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return f, fmt.Errorf("read run %s: %w", id, err)
	}
	return f, nil
}

// readJSON reads path into v and reports whether the file exists.
func readJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}

// tail returns at most n bytes of the end of the file at path.
func tail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > n {
		if _, err := f.Seek(info.Size()-n, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, n))
}

// Stop ends the run f of item names with its process group
// (proc.Process.EndGroup, the group led by the wrapper): SIGTERM to the
// group, up to grace for every process of it to be gone, then SIGKILL to
// the group and up to grace again, polling every poll. A harness that left
// the group is ended by its pid after that (proc.Process.End). It returns
// whether it had to kill, and an error wrapping proc.ErrStillRunning when
// the run outlived that. A run that no longer runs is left alone (its pids
// may name other processes by now).
func (r Runner) Stop(ctx context.Context, item string, f Fact, grace, poll time.Duration) (killed bool, err error) {
	if now, err := r.Read(item, f.ID); err != nil || !now.Running {
		return false, nil
	}
	var rec pidRecord
	if ok, err := readJSON(filepath.Join(r.ItemDir(item), f.ID+".pid"), &rec); err != nil || !ok {
		return false, nil
	}
	// The run counts as running while any process of its group is left:
	// a tool the harness started, that ignores SIGTERM, goes too. The
	// group's id is the wrapper's pid, which no other group takes while
	// one of the run's processes is left (setpgid(2)).
	wrapper := proc.Process{PID: rec.Wrapper, Start: rec.WrapperStart}
	killed, err = wrapper.EndGroup(ctx, syscall.SIGTERM, grace, poll)
	if err != nil {
		return killed, fmt.Errorf("stop run %s: %w", f.ID, err)
	}
	harness := proc.Process{PID: rec.Harness, Start: rec.HarnessStart}
	k, err := harness.End(ctx, grace, poll)
	if err != nil {
		return killed || k, fmt.Errorf("stop run %s: %w", f.ID, err)
	}
	return killed || k, nil
}
