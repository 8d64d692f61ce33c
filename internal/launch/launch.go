// Package launch hands a harness its environment without putting any value
// on a command line, where every local user could read it in
// /proc/<pid>/cmdline and exec auditing would record it.
//
// The executor writes the environment to a file that only loopd's user can
// read (0600, in a 0700 directory under the state dir) and starts the pane
// with "loopd launch --env-file FILE -- ARGV...". The launcher (Exec) reads
// the file, removes it, and replaces itself with the harness (execve): the
// pane's process, its pid and its name (pane_current_command) are the
// harness's own from then on.
package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/loopd/loopd/internal/fence"
)

// Command is the hidden loopd subcommand that launches a harness,
// EnvFileFlag its flag naming the env file, FenceFlag the one naming the
// fence stamp its watchdog reads (package fence), and EpochFlag the one
// giving the lease epoch its spawn was drawn under.
const (
	Command     = "launch"
	EnvFileFlag = "--env-file"
	FenceFlag   = "--fence"
	EpochFlag   = "--fence-epoch"
)

// maxEnvFile caps what the launcher reads from an env file, in bytes.
const maxEnvFile = 1 << 20

// ErrBadEnvFile means an env file is not what Prepare writes: not a
// regular file, readable by others than its owner, too large, or not a
// JSON object of strings.
var ErrBadEnvFile = errors.New("invalid env file")

// Launcher prepares spawns that go through "loopd launch".
type Launcher struct {
	// Exe is the loopd executable the pane runs first (os.Executable).
	Exe string
	// Dir holds the env files; Prepare creates it with mode 0700.
	Dir string
	// Fence, when set, is the fence stamp (fence.Stamp) of a host of a
	// shared store: each launcher then starts a watchdog that ends its
	// harness once the stamp lapsed. Empty for a store's only member.
	Fence string
}

// Prepare writes env to a new file (mode 0600) for session and returns the
// argv to put before the harness's argv, and the file's path. With a Fence,
// the argv gives the launcher epoch, the lease epoch the spawn was drawn
// under (fence.Grant): it starts the harness only while the stamp holds
// for it. It first removes the files an earlier spawn of session left,
// whose launcher never ran: that spawn's session has been killed before a
// new one is made.
func (l Launcher) Prepare(session string, env map[string]string, epoch uint64) ([]string, string, error) {
	if l.Exe == "" || l.Dir == "" {
		return nil, "", fmt.Errorf("prepare launch %s: no launcher executable or directory", session)
	}
	if err := checkEnv(env); err != nil {
		return nil, "", fmt.Errorf("prepare launch %s: %w", session, err)
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("prepare launch %s: %w", session, err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(l.Dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("prepare launch %s: %w", session, err)
	}
	if err := l.Discard(session); err != nil {
		return nil, "", err
	}
	data, err := json.Marshal(env)
	if err != nil {
		return nil, "", fmt.Errorf("prepare launch %s: %w", session, err)
	}
	f, err := os.CreateTemp(l.Dir, session+".*.env") // mode 0600
	if err != nil {
		return nil, "", fmt.Errorf("prepare launch %s: %w", session, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, "", fmt.Errorf("prepare launch %s: write %s: %w", session, f.Name(), err)
	}
	argv := []string{l.Exe, Command, EnvFileFlag, f.Name()}
	if l.Fence != "" {
		argv = append(argv, FenceFlag, l.Fence, EpochFlag, strconv.FormatUint(epoch, 10))
	}
	return append(argv, "--"), f.Name(), nil
}

// Discard removes the env files of session: those of a spawn that tmux
// refused, or whose pane died before its launcher ran.
func (l Launcher) Discard(session string) error {
	// Session names are [a-z0-9-] (desired.SessionName), never a pattern.
	files, err := filepath.Glob(filepath.Join(l.Dir, session+".*.env"))
	if err != nil {
		return fmt.Errorf("discard launch files of %s: %w", session, err)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("discard launch files of %s: %w", session, err)
		}
	}
	return nil
}

// checkEnv refuses what execve cannot carry: an empty name, a name with
// "=", a NUL anywhere.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %q: empty, or holds '=' or NUL", k)
		}
	}
	return nil
}

// ReadEnvFile reads the env file at path and removes it, whatever it
// holds, so that the environment sits on disk only until the harness
// starts. It returns ErrBadEnvFile for a file Prepare would not write.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read env file: %w", err)
	}
	defer f.Close()
	rmErr := os.Remove(path)
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read env file: %w", err) // stat <path>: …
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read env file %s: mode %s: %w", path, info.Mode(), ErrBadEnvFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil {
		return nil, fmt.Errorf("read env file: %w", err) // read <path>: …
	}
	if len(data) > maxEnvFile {
		return nil, fmt.Errorf("read env file %s: over %d bytes: %w", path, maxEnvFile, ErrBadEnvFile)
	}
	var env map[string]string
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("read env file %s: %w: %w", path, ErrBadEnvFile, err)
	}
	if err := checkEnv(env); err != nil {
		return nil, fmt.Errorf("read env file %s: %w: %w", path, ErrBadEnvFile, err)
	}
	if rmErr != nil {
		return nil, fmt.Errorf("read env file %s: remove: %w", path, rmErr)
	}
	return env, nil
}

// paneOnly are the variables tmux sets in every pane that the harness must
// not get: with them, anything the agent runs drives loopd's tmux server
// without naming its socket (send-keys into other agents).
var paneOnly = []string{"TMUX", "TMUX_PANE"}

// Environ returns the harness's environment: inherited (the pane's, which
// is the tmux server's allow-listed one plus what tmux sets per pane) less
// TMUX and TMUX_PANE, with env set on top, in a stable order.
func Environ(inherited []string, env map[string]string) []string {
	out := make([]string, 0, len(inherited)+len(env))
	for _, kv := range inherited {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := env[name]; set || slices.Contains(paneOnly, name) {
			continue
		}
		out = append(out, kv)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Exec is the launcher: it reads and removes envFile, checks that the
// fence stamp holds for epoch (none when stamp is empty; an error wrapping
// fence.ErrLapsed when it does not), starts its watchdog (fence.Start),
// and replaces the process with argv under Environ of the process's
// environment. A bare argv[0] is looked up on the new environment's PATH,
// as the shell would; argv[0] itself is passed as given. Exec returns only
// on failure; a watchdog started then exits with the launcher.
func Exec(envFile, stamp string, epoch uint64, argv []string) error {
	if len(argv) == 0 {
		return errors.New("launch: no command")
	}
	env, err := ReadEnvFile(envFile)
	if err != nil {
		return fmt.Errorf("launch %s: %w", argv[0], err)
	}
	if stamp != "" {
		// A spawn drawn under an epoch that lapsed since (a daemon frozen
		// between its plan and its act) never starts.
		if err := (fence.Stamp{Path: stamp}).Check(epoch); err != nil {
			return fmt.Errorf("launch %s: %w", argv[0], err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch %s: %w", argv[0], err)
		}
		if err := fence.Start(exe, stamp, epoch); err != nil {
			return fmt.Errorf("launch %s: %w", argv[0], err)
		}
	}
	environ := Environ(os.Environ(), env)
	path := argv[0]
	if !strings.Contains(path, "/") {
		// exec.LookPath searches this process's PATH: make it the
		// harness's.
		_ = os.Unsetenv("PATH")
		for _, kv := range environ {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				_ = os.Setenv("PATH", v)
			}
		}
		if path, err = exec.LookPath(path); err != nil {
			return fmt.Errorf("launch %s: %w", argv[0], err)
		}
	}
	if err := syscall.Exec(path, argv, environ); err != nil {
		return fmt.Errorf("launch %s: exec %s: %w", argv[0], path, err)
	}
	return nil
}

// ShellQuote quotes s as one word for sh: single quotes, with each ' written
// as '\”. The command lines loopd hands a harness to run (its
// SessionStart hook, git's credential helper) name loopd's executable so.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
