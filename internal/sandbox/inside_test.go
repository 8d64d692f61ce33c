package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
)

// TestMain lets the test binary be loopd inside a sandbox: run as
// "<binary> sandbox-exec --path P -- ARGV...", it is Exec.
func TestMain(m *testing.M) {
	if len(os.Args) > 4 && os.Args[1] == Command && os.Args[2] == PathFlag && os.Args[4] == "--" {
		err := Exec(os.Args[3], os.Args[5:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	os.Exit(tmuxtest.Main(m.Run))
}

// unprivilegedEnv marks a run of this test binary as nobody, started by
// TestInsideAsAnotherUser.
const unprivilegedEnv = "LOOPD_SANDBOX_TEST_UNPRIVILEGED"

// realHost returns the Host Check finds here, with this test binary as
// loopd, or skips the test (fails it under CI) without bwrap.
func realHost(t *testing.T) Host {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	h, err := Check(context.Background(), exe, os.Getenv("PATH"))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap: %v", err)
		}
		t.Skipf("bubblewrap: %v", err)
	}
	return h
}

// fixture is a host with what a sandbox must show and what it must hide.
type fixture struct {
	host  Host
	spec  Spec
	state string // a state dir of loopd's, hidden
	other string // another item's workdir, not bound
	home  string // the operator's home, private inside
	ro    string // a read-only bind
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.Chmod(root, 0o755))
	f := fixture{host: realHost(t), state: filepath.Join(root, "state"), other: filepath.Join(root, "agents/2"),
		home: filepath.Join(root, "home"), ro: filepath.Join(root, "readonly")}
	work := filepath.Join(root, "agents/1")
	for _, d := range []string{f.state, f.other, f.home, f.ro, work, filepath.Join(f.state, "workspaces/1")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, p := range []string{filepath.Join(f.state, "loopd.db"), filepath.Join(f.other, "secret.txt"),
		filepath.Join(f.home, ".ssh_key"), filepath.Join(f.ro, "notes.txt")} {
		require.NoError(t, os.WriteFile(p, []byte("host file\n"), 0o644))
	}
	sh, err := f.host.Resolve("sh", os.Getenv("PATH"))
	require.NoError(t, err)
	f.spec = Spec{Workdir: work, Program: sh.Path, ReadOnly: sh.ReadOnly, Private: []string{f.home},
		Hide: []string{f.state}, Binds: []Bind{{Source: f.ro}, {Source: filepath.Join(f.state, "workspaces/1"), Write: true}}}
	return f
}

// argv is the whole argv that runs harness in the sandbox of f.spec.
func (f fixture) argv(harness []string) ([]string, error) {
	wrap, err := f.host.Wrap(f.spec)
	return append(wrap, harness...), err
}

// run runs script with sh in the sandbox of f.spec and returns its
// stdout; it fails the test when sh exits non-zero.
func (f fixture) run(t *testing.T, script string) string {
	t.Helper()
	argv, err := f.argv([]string{"sh", "-c", script})
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	return stdout.String()
}

// TestInside checks from inside a real sandbox what the harness sees: its
// workdir writable, a read-only bind not writable, loopd's state dir, another
// item's workdir, the operator's home and the host's /tmp and processes
// not at all, no capabilities and no_new_privs. It runs as this user,
// and as nobody (TestInsideAsAnotherUser).
func TestInside(t *testing.T) {
	f := newFixture(t)
	if _, err := os.Stat("/tmp/.loopd-sandbox-host-file"); err != nil {
		require.NoError(t, os.WriteFile("/tmp/.loopd-sandbox-host-file", nil, 0o644))
		t.Cleanup(func() { _ = os.Remove("/tmp/.loopd-sandbox-host-file") })
	}
	out := f.run(t, strings.Join([]string{
		`cd "$PWD" && pwd`,
		`echo made > made.txt && cat made.txt`,
		`test -e ` + filepath.Join(f.state, "loopd.db") + ` && echo state-seen || echo state-hidden`,
		`echo w > ` + filepath.Join(f.state, "workspaces/1/w") + ` && echo inside-state-writable`,
		`test -e ` + f.other + ` && echo other-seen || echo other-hidden`,
		`ls -A ` + f.home + ` | wc -l`,
		`test -e /tmp/.loopd-sandbox-host-file && echo tmp-shared || echo tmp-private`,
		`cat ` + filepath.Join(f.ro, "notes.txt"),
		`(echo x > ` + filepath.Join(f.ro, "notes.txt") + `) 2>/dev/null && echo ro-written || echo ro-refused`,
		`(echo 1 > /proc/sys/kernel/domainname) 2>/dev/null && echo sysctl-written || echo sysctl-refused`,
		`test -e /proc/` + strconv.Itoa(os.Getpid()) + `/environ && echo host-pid-seen || echo host-pid-hidden`,
		`ls /proc | grep -c '^[0-9]'`,
		`grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -s '\t' ' '`,
	}, "; "))
	want := []string{
		f.spec.Workdir,
		"made",
		"state-hidden",
		"inside-state-writable",
		"other-hidden",
		"0",
		"tmp-private",
		"host file",
		"ro-refused",
		"sysctl-refused",
		"host-pid-hidden",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(want)+3, out)
	assert.Equal(t, want, lines[:len(want)])
	procs, err := strconv.Atoi(lines[len(want)])
	require.NoError(t, err)
	assert.LessOrEqual(t, procs, 6, "only the sandbox's own processes: bwrap's init, sh, its pipeline")
	assert.Equal(t, "CapEff: 0000000000000000", lines[len(want)+1])
	assert.Equal(t, "NoNewPrivs: 1", lines[len(want)+2])
	assert.FileExists(t, filepath.Join(f.spec.Workdir, "made.txt"), "the workdir is the host's")
}

// TestInsideAsAnotherUser runs TestInside as nobody, whose sandbox needs a
// user namespace; it needs root to switch users.
func TestInsideAsAnotherUser(t *testing.T) {
	if os.Getenv(unprivilegedEnv) != "" {
		t.Skip("already the unprivileged run")
	}
	if os.Geteuid() != 0 {
		t.Skip("switching to nobody needs root; TestInside runs as this user")
	}
	realHost(t)
	bin := nobodyCopy(t)
	cmd := exec.Command(bin, "-test.run=^(TestInside|TestForeground)$", "-test.v", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), unprivilegedEnv+"=1", "HOME=/nonexistent", "TMPDIR=/tmp")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestInside ")
	assert.NotContains(t, string(out), "--- SKIP: TestInside ", "bwrap works for nobody")
}

// nobodyCopy returns a copy of this test binary that any user can run, in
// a directory of its own (go test's own is 0700), removed at cleanup.
func nobodyCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "loopd-sandbox-test-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "sandbox.test")
	in, err := os.Open(exe)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return bin
}
