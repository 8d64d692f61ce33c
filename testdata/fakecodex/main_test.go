package main

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/testdata/fakecli/fakeclitest"
)

const wait, tick = 5 * time.Second, 20 * time.Millisecond

// provider is the credential-free model provider override of the
// reference (harness-cli-facts.md, section 2): it skips the login screen.
var provider = []string{"-c", "model_provider=loc", "-c", `model_providers.loc={name="loc",base_url="http://127.0.0.1:9/v1",wire_api="responses"}`}

// fakeBin is the fake, built once by TestMain.
var fakeBin string

func TestMain(m *testing.M) { fakeclitest.Main(m, "fakecodex", ".", &fakeBin) }

// fixture is the built fake, a private tmux server, a CODEX_HOME and the
// codex adapter pointed at both.
type fixture struct {
	*fakeclitest.Tmux
	home    string
	adapter harness.Adapter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Tmux: fakeclitest.NewTmux(t, "fakecodex"), home: t.TempDir()}
	var err error
	f.adapter, err = harness.New("codex", schema.Harness{Adapter: harness.AdapterCodex, Command: fakeBin, Env: map[string]string{"CODEX_HOME": f.home}})
	require.NoError(t, err)
	return f
}

// spawn starts argv (the adapter's, so the grammar is loopd's) in session
// name, in dir, with the environment loopd gives it: the adapter's, and
// the item's own Codex home (harness.ItemState), where loopd's adapter
// looks for the item's rollouts.
func (f *fixture) spawn(t *testing.T, name, dir string, argv []string) {
	t.Helper()
	f.spawnWithHomeOf(t, name, dir, dir, argv)
}

// spawnWithHomeOf is spawn in dir with the Codex home of the item whose
// workdir is item.
func (f *fixture) spawnWithHomeOf(t *testing.T, name, dir, item string, argv []string) {
	t.Helper()
	st, err := harness.ItemState(f.adapter, item, "", false)
	require.NoError(t, err)
	env := maps.Clone(f.adapter.Env())
	maps.Copy(env, st.Env)
	f.Spawn(t, name, dir, env, argv)
}

func (f *fixture) waitScreen(t *testing.T, name string, want harness.Screen) {
	t.Helper()
	require.Eventually(t, func() bool { s, _ := f.adapter.Screen(f.Capture(name)); return s == want }, wait, tick, f.History(name))
}

func (f *fixture) waitDead(t *testing.T, name string) string {
	t.Helper()
	return f.WaitDead(t, name, wait, tick)
}

// learned waits for the one conversation started in dir since since and
// returns it, found by loopd's own adapter.
func (f *fixture) learned(t *testing.T, dir string, since time.Time) harness.Started {
	t.Helper()
	var got []harness.Started
	require.Eventually(t, func() bool {
		var err error
		got, err = f.adapter.(harness.SessionLearner).SessionsStarted(dir, since)
		return err == nil && len(got) == 1
	}, wait, tick)
	return got[0]
}

func userMessages(t *testing.T, a harness.Adapter, dir, id string, frames ...desired.Frame) map[string]harness.Found {
	t.Helper()
	tr, err := a.Transcript(dir, id)
	require.NoError(t, err)
	require.True(t, tr.Exists, "rollout of %s in %s", id, dir)
	found, err := a.TranscriptFrames(tr, frames)
	require.NoError(t, err)
	return found
}

func TestTUIFreshPasteResume(t *testing.T) {
	f := newFixture(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	ad := f.adapter
	argv := func(a []string) []string { return append(a[:1:1], append(provider, a[1:]...)...) }

	since := time.Now()
	f.spawn(t, "fresh", dir, argv(ad.FreshArgv("", "-first prompt")))
	f.waitScreen(t, "fresh", harness.ScreenReady)
	s := f.learned(t, dir, since)
	assert.Equal(t, "-first prompt", s.First, "the positional prompt is submitted at start, \"--\" keeps its dash")
	assert.True(t, ad.ValidSessionID(s.ID), s.ID)

	// A bracketed paste, then Enter, as loopd delivers.
	ev := desired.Delivery{ID: "d-1", Prompt: "[loopd] issue_comment.created on o/r#1 (delivery d-1)\n" + desired.FrameBegin("d-1") + "a\nb\n" + desired.FrameEnd("d-1", "a\nb\n")}
	f.Paste(t, "fresh", ev.Prompt)
	f.waitScreen(t, "fresh", harness.ScreenDraft)
	f.Must(t, "send-keys", "-t", "=fresh:", "Enter")
	require.Eventually(t, func() bool { return userMessages(t, ad, dir, s.ID, desired.FrameOf(ev))["d-1"].Whole }, wait, tick)

	// Ctrl-C twice within a second: exit 0 with the resume hint. Both in
	// one tmux invocation: two would be more than a second apart on a
	// loaded machine, and then count as two first ones.
	f.Must(t, "send-keys", "-t", "=fresh:", "C-c", ";", "send-keys", "-t", "=fresh:", "C-c")
	assert.Equal(t, "0", f.waitDead(t, "fresh"))
	assert.Contains(t, f.History("fresh"), "codex resume "+s.ID)

	// Resume in the same cwd appends to the same rollout.
	f.spawn(t, "resumed", dir, argv(ad.ResumeArgv(s.ID, "second")))
	f.waitScreen(t, "resumed", harness.ScreenReady)
	tr, err := ad.Transcript(dir, s.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(tr.Path)
		return strings.Contains(string(data), `"text":"second"`)
	}, wait, tick)
	assert.Contains(t, f.Capture("resumed"), "› -first prompt", "the history is shown")

	// From another cwd with the same home (the real CLI's case; loopd
	// gives each workdir its own home): the chooser, which waits.
	other := t.TempDir()
	f.spawnWithHomeOf(t, "chooser", other, dir, argv(ad.ResumeArgv(s.ID, "third")))
	f.waitScreen(t, "chooser", harness.ScreenBlocked)
	_, why := ad.Screen(f.Capture("chooser"))
	assert.Equal(t, harness.BlockResumeChooser, why)

	// SIGHUP (kill-session) ends the TUI.
	pid := strings.TrimSpace(f.Must(t, "display-message", "-p", "-t", "=resumed:", "#{pane_pid}"))
	f.Must(t, "kill-session", "-t", "=resumed")
	require.Eventually(t, func() bool { return exec.Command("kill", "-0", pid).Run() != nil }, wait, tick, "the TUI exits on SIGHUP")
}

func TestTUIFailures(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	ad := f.adapter

	// No model provider: the login screen, before anything else.
	f.spawn(t, "login", dir, ad.ResumeArgv("01a22e7f-0000-7000-8000-000000000009", "x"))
	f.waitScreen(t, "login", harness.ScreenBlocked)
	assert.Equal(t, harness.BlockLoginRequired, ad.Blocked(f.Capture("login")))

	// A missing id with a provider: exit 1 and the real message.
	argv := ad.ResumeArgv("01a22e7f-0000-7000-8000-000000000009", "x")
	f.spawn(t, "missing", dir, append(argv[:1:1], append(provider, argv[1:]...)...))
	assert.Equal(t, "1", f.waitDead(t, "missing"))
	assert.Contains(t, f.History("missing"), "ERROR: No saved session found with ID 01a22e7f-0000-7000-8000-000000000009.")

	// Not a terminal.
	cmd := exec.Command(fakeBin, "--no-daemon")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader("")
	out, err := cmd.CombinedOutput()
	require.Error(t, err)
	assert.Equal(t, "Error: stdin is not a terminal\n", string(out))

	// An option codex does not know, as clap refuses it.
	cmd = exec.Command(fakeBin, "--resume", "x")
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 2, exit.ExitCode())
	assert.Contains(t, string(out), "unexpected argument '--resume'")
}

func TestExec(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	ad, err := harness.New("codex", schema.Harness{Adapter: harness.AdapterCodex, Command: fakeBin, Env: map[string]string{"CODEX_HOME": home}})
	require.NoError(t, err)
	h := ad.(harness.Headless)
	run := func(argv []string, stdin []byte) (string, string, int) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "CODEX_HOME="+home)
		cmd.Stdin = strings.NewReader(string(stdin))
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		code := 0
		var exit *exec.ExitError
		if errors.As(cmd.Run(), &exit) {
			code = exit.ExitCode()
		}
		return out.String(), errOut.String(), code
	}

	argv, stdin := h.HeadlessArgv("", "fresh turn from stdin", false)
	out, _, code := run(argv, stdin)
	require.Equal(t, 0, code)
	id := h.HeadlessSessionID([]byte(out))
	require.NotEmpty(t, id, out)
	tr, err := ad.Transcript(dir, id)
	require.NoError(t, err)
	assert.True(t, tr.Exists)

	argv, stdin = h.HeadlessArgv(id, "second turn", true)
	out, _, code = run(argv, stdin)
	require.Equal(t, 0, code)
	assert.Equal(t, id, h.HeadlessSessionID([]byte(out)), "a resumed turn names the same thread")
	data, err := os.ReadFile(tr.Path)
	require.NoError(t, err)
	assert.Contains(t, string(data), "fresh turn from stdin")
	assert.Contains(t, string(data), "second turn")

	argv, stdin = h.HeadlessArgv("01a22e7f-0000-7000-8000-000000000009", "x", true)
	_, errOut, code := run(argv, stdin)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no rollout found for thread id 01a22e7f-0000-7000-8000-000000000009 (code -32600)")

	_, errOut, code = run([]string{fakeBin, "exec", "hello"}, nil)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "Not inside a trusted directory and --skip-git-repo-check was not specified.")
}

// TestExecTokenCountsReadOnceByTheAdapter: with FAKECODEX_USAGE each
// turn's rollout gets a token_count event whose running total goes on
// across a resume; the codex adapter reads each once, from its offset,
// and a re-read from the start counts nothing again.
func TestExecTokenCountsReadOnceByTheAdapter(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	ad, err := harness.New("codex", schema.Harness{Adapter: harness.AdapterCodex, Command: fakeBin, Env: map[string]string{"CODEX_HOME": home}})
	require.NoError(t, err)
	h := ad.(harness.Headless)
	run := func(argv []string, stdin []byte) string {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "CODEX_HOME="+home, "FAKECODEX_USAGE=1000,800,50")
		cmd.Stdin = strings.NewReader(string(stdin))
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	argv, stdin := h.HeadlessArgv("", "first", false)
	id := h.HeadlessSessionID([]byte(run(argv, stdin)))
	tr, err := ad.Transcript(dir, id)
	require.NoError(t, err)
	u, ok := harness.ReadUsage(ad)
	require.True(t, ok)
	w := desired.Weights{Input: 1, Output: 8, CacheRead: 0.1}
	read, err := u.ReadUsage(tr, 0)
	require.NoError(t, err)
	st, _ := desired.BudgetState{}.Count(read, w, 24*time.Hour, time.Now())
	assert.Equal(t, desired.Tokens{Input: 200, Output: 50, CacheRead: 800}, st.UsageTotal)

	argv, stdin = h.HeadlessArgv(id, "second", true)
	run(argv, stdin)
	read, err = u.ReadUsage(tr, st.UsageOffset)
	require.NoError(t, err)
	require.Len(t, read.Messages, 1, "only the resumed turn's count is past the offset")
	assert.Equal(t, "total:2100", read.Messages[0].ID, "the running total went on")
	st, _ = st.Count(read, w, 24*time.Hour, time.Now())
	again, err := u.ReadUsage(tr, 0)
	require.NoError(t, err)
	st, _ = st.Count(again, w, 24*time.Hour, time.Now())
	assert.Equal(t, desired.Tokens{Input: 400, Output: 100, CacheRead: 1600}, st.UsageTotal, "each turn once, a re-read from the start included")
}

// TestExecOffline: exec with FAKECODEX_OFFLINE=1 names its thread, writes
// the rollout with the prompt, and then waits, as the real CLI does
// offline, until a SIGTERM ends it.
func TestExecOffline(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	ad, err := harness.New("codex", schema.Harness{Adapter: harness.AdapterCodex, Command: fakeBin, Env: map[string]string{"CODEX_HOME": home}})
	require.NoError(t, err)
	h := ad.(harness.Headless)
	argv, stdin := h.HeadlessArgv("", "an offline turn\n", false)
	out := filepath.Join(t.TempDir(), "out")
	stdout, err := os.Create(out)
	require.NoError(t, err)
	defer stdout.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout = dir, append(os.Environ(), "CODEX_HOME="+home, "FAKECODEX_OFFLINE=1"), stdout
	cmd.Stdin = strings.NewReader(string(stdin))
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var id string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(out)
		id = h.HeadlessSessionID(b)
		return id != "" && strings.Contains(string(b), "Reconnecting... waiting for network")
	}, wait, tick)
	tr, err := ad.Transcript(dir, id)
	require.NoError(t, err)
	require.True(t, tr.Exists)
	data, err := os.ReadFile(tr.Path)
	require.NoError(t, err)
	assert.Contains(t, string(data), `"originator":"codex_exec"`)
	assert.Contains(t, string(data), `an offline turn\n`, "the prompt as read from stdin")
	assert.NotContains(t, string(data), "task_complete", "never answered")
	select {
	case err := <-exited:
		t.Fatalf("exec ended offline: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, syscall.SIGTERM, exit.Sys().(syscall.WaitStatus).Signal())
	case <-time.After(wait):
		t.Fatal("SIGTERM did not end it")
	}
}
