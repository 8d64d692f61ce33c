package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/fence"
)

// helperEnv makes the test binary act as "loopd launch": TestMain runs Exec
// with the env file it names and the arguments after "--".
const helperEnv = "LAUNCH_TEST_ENV_FILE"

// helperStamp names the fence stamp the helper launcher checks for epoch
// 7, none when empty.
const helperStamp = "LAUNCH_TEST_STAMP"

func TestMain(m *testing.M) {
	if f := os.Getenv(helperEnv); f != "" {
		args := os.Args
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		err := Exec(f, os.Getenv(helperStamp), 7, args)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	os.Exit(m.Run())
}

func TestPrepare(t *testing.T) {
	l := Launcher{Exe: "/opt/loopd", Dir: filepath.Join(t.TempDir(), "launch")}
	env := map[string]string{"API_KEY": "sk-test-SECRET-123", "LOOPD_WORK_ITEM": "o/r#1", "MULTI": "a\nb"}
	prefix, path, err := l.Prepare("loop-o-r-1", env, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/loopd", "launch", "--env-file", path, "--"}, prefix)
	assert.Equal(t, l.Dir, filepath.Dir(path))
	for _, a := range prefix {
		assert.NotContains(t, a, "sk-test-SECRET-123", "no value on argv")
	}
	dir, err := os.Stat(l.Dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
	file, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), file.Mode().Perm())
	got, err := ReadEnvFile(path)
	require.NoError(t, err)
	assert.Equal(t, env, got)
	assert.NoFileExists(t, path, "read removes it")

	// A host of a shared store has its launchers check the stamp for the
	// spawn's lease epoch and start a watchdog.
	l.Fence = "/var/lib/loopd/fence-stamp"
	prefix, path, err = l.Prepare("loop-o-r-1", env, 12)
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/loopd", "launch", "--env-file", path, "--fence", l.Fence, "--fence-epoch", "12", "--"}, prefix)
}

func TestPrepareRemovesWhatAnEarlierSpawnLeft(t *testing.T) {
	l := Launcher{Exe: "loopd", Dir: t.TempDir()}
	_, first, err := l.Prepare("loop-a", map[string]string{"K": "1"}, 0)
	require.NoError(t, err)
	_, other, err := l.Prepare("loop-ab", map[string]string{"K": "1"}, 0)
	require.NoError(t, err)
	_, second, err := l.Prepare("loop-a", map[string]string{"K": "2"}, 0)
	require.NoError(t, err)
	assert.NoFileExists(t, first)
	assert.FileExists(t, second)
	assert.FileExists(t, other, "another session's file stays")
	require.NoError(t, l.Discard("loop-a"))
	assert.NoFileExists(t, second)
	assert.FileExists(t, other)
}

func TestPrepareRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		l   Launcher
		env map[string]string
	}{
		"no_executable":   {Launcher{Dir: t.TempDir()}, nil},
		"no_directory":    {Launcher{Exe: "loopd"}, nil},
		"equals_in_name":  {Launcher{Exe: "loopd", Dir: t.TempDir()}, map[string]string{"A=B": "x"}},
		"empty_name":      {Launcher{Exe: "loopd", Dir: t.TempDir()}, map[string]string{"": "x"}},
		"nul_in_value":    {Launcher{Exe: "loopd", Dir: t.TempDir()}, map[string]string{"A": "x\x00y"}},
		"nul_in_the_name": {Launcher{Exe: "loopd", Dir: t.TempDir()}, map[string]string{"A\x00": "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := tc.l.Prepare("loop-a", tc.env, 0)
			assert.Error(t, err)
		})
	}
}

func TestReadEnvFileRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(data), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	for name, path := range map[string]string{
		"group_readable": write("g.env", `{"A":"1"}`, 0o640),
		"not_json":       write("j.env", `A=1`, 0o600),
		"not_strings":    write("s.env", `{"A":1}`, 0o600),
		"too_large":      write("l.env", `{"A":"`+strings.Repeat("x", maxEnvFile)+`"}`, 0o600),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadEnvFile(path)
			assert.ErrorIs(t, err, ErrBadEnvFile)
			assert.NoFileExists(t, path, "removed whatever it holds")
		})
	}
	_, err := ReadEnvFile(filepath.Join(dir, "missing.env"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestEnviron(t *testing.T) {
	got := Environ(
		[]string{"PATH=/bin", "TMUX=/tmp/tmux-1/loopd,1,0", "TMUX_PANE=%3", "TERM=tmux-256color", "HOME=/h"},
		map[string]string{"HOME": "/agent", "LOOPD_WORK_ITEM": "o/r#1", "B": "2"})
	assert.Equal(t, []string{"PATH=/bin", "TERM=tmux-256color", "B=2", "HOME=/agent", "LOOPD_WORK_ITEM=o/r#1"}, got)
}

// The launcher replaces itself with the harness: same pid, the file's
// environment on top of its own less TMUX and TMUX_PANE, a bare command
// found on the new PATH, argv[0] as given.
func TestExec(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "harness"),
		[]byte("#!/bin/sh\nprintf '%s\\n' \"$0\" \"$$\" \"$API_KEY\" \"${TMUX-unset}\" \"${TMUX_PANE-unset}\" \"$KEPT\" \"$@\"\n"), 0o755))
	l := Launcher{Exe: "unused", Dir: t.TempDir()}
	_, path, err := l.Prepare("loop-a", map[string]string{"API_KEY": "sk-test-SECRET-123", "PATH": bin + ":/usr/bin:/bin"}, 0)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "--", "harness", "--flag", "two words")
	cmd.Env = []string{helperEnv + "=" + path, "PATH=/nonexistent", "TMUX=/tmp/tmux-1/x,1,0", "TMUX_PANE=%1", "KEPT=yes"}
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, 8)
	assert.Equal(t, "harness", lines[0][len(lines[0])-len("harness"):], "argv[0] is the harness")
	assert.Equal(t, fmt.Sprint(cmd.ProcessState.Pid()), lines[1], "same pid: the launcher exec'd")
	assert.Equal(t, []string{"sk-test-SECRET-123", "unset", "unset", "yes", "--flag", "two words"}, lines[2:])
	assert.NoFileExists(t, path)
}

func TestExecFailsOnAMissingCommand(t *testing.T) {
	l := Launcher{Exe: "unused", Dir: t.TempDir()}
	_, path, err := l.Prepare("loop-a", map[string]string{"PATH": t.TempDir()}, 0)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "--", "no-such-harness", "x")
	cmd.Env = []string{helperEnv + "=" + path}
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "no-such-harness")
	assert.NoFileExists(t, path)
}

// TestExecRefusesWhatTheStampDoesNotHold: a spawn drawn under a lease
// epoch the fence stamp no longer holds for (it lapsed, or names a later
// epoch: the daemon was paused between its plan and its act) never starts
// its harness, and its env file is still removed.
func TestExecRefusesWhatTheStampDoesNotHold(t *testing.T) {
	for name, g := range map[string]fence.Grant{
		"lapsed":      {Until: fence.Now() - time.Millisecond, Epoch: 7},
		"later_epoch": {Until: fence.Now() + time.Hour, Epoch: 8},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stamp := fence.Stamp{Path: filepath.Join(dir, "fence-stamp")}
			require.NoError(t, stamp.Write(g))
			ran := filepath.Join(dir, "ran")
			l := Launcher{Exe: "unused", Dir: t.TempDir()}
			_, path, err := l.Prepare("loop-a", map[string]string{"PATH": "/usr/bin:/bin"}, 7)
			require.NoError(t, err)
			cmd := exec.Command(os.Args[0], "--", "sh", "-c", `touch "$0"`, ran)
			cmd.Env = []string{helperEnv + "=" + path, helperStamp + "=" + stamp.Path}
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			assert.Contains(t, string(out), fence.ErrLapsed.Error())
			assert.NoFileExists(t, ran, "the harness never ran")
			assert.NoFileExists(t, path)
		})
	}
}
