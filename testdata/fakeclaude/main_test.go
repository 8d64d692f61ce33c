package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/testdata/fakecli"
	"github.com/loopd/loopd/testdata/fakecli/fakeclitest"
)

const wait, tick = 5 * time.Second, 20 * time.Millisecond

// fakeBin is the fake, built once by TestMain.
var fakeBin string

func TestMain(m *testing.M) { fakeclitest.Main(m, "fakeclaude", ".", &fakeBin) }

// fixture is the built fake, a private tmux server, a config dir and an
// adapter that points at both.
type fixture struct {
	*fakeclitest.Tmux
	bin     string
	config  string
	adapter harness.Adapter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{Tmux: fakeclitest.NewTmux(t, "fakeclaude"), bin: fakeBin, config: filepath.Join(t.TempDir(), "config")}
	var err error
	f.adapter, err = harness.New("claude-code", schema.Harness{Command: f.bin, Env: map[string]string{"CLAUDE_CONFIG_DIR": f.config}})
	require.NoError(t, err)
	return f
}

// spawn starts argv in a new session named after the running test, in a
// new work dir, and returns the session name and the dir.
func (f *fixture) spawn(t *testing.T, env map[string]string, argv []string) (string, string) {
	t.Helper()
	name := strings.NewReplacer("/", "_", ".", "_", ":", "_").Replace(t.Name())
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	f.spawnIn(t, name, dir, env, argv)
	return name, dir
}

// spawnIn starts argv in session name in dir, with the adapter's
// environment and env.
func (f *fixture) spawnIn(t *testing.T, name, dir string, env map[string]string, argv []string) {
	t.Helper()
	all := map[string]string{}
	maps.Copy(all, f.adapter.Env())
	maps.Copy(all, env)
	f.Spawn(t, name, dir, all, argv)
}

func (f *fixture) screen(name string) harness.Screen {
	s, _ := f.adapter.Screen(f.Capture(name))
	return s
}

// waitReady waits until the pane shows the input box.
func (f *fixture) waitReady(t *testing.T, name string) {
	t.Helper()
	require.Eventually(t, func() bool { return f.screen(name) == harness.ScreenReady }, wait, tick, f.History(name))
}

// waitDead waits until the pane has exited and returns its status.
func (f *fixture) waitDead(t *testing.T, name string) string {
	t.Helper()
	return f.WaitDead(t, name, wait, tick)
}

// turns returns the user prompts and the number of assistant lines in the
// transcript of id for dir, found by the adapter a.
func turns(t *testing.T, a harness.Adapter, dir, id string) ([]string, int) {
	t.Helper()
	tr, err := a.Transcript(dir, id)
	require.NoError(t, err)
	file, err := os.Open(tr.Path)
	if err != nil {
		return nil, 0
	}
	defer file.Close()
	var prompts []string
	answers := 0
	sc := bufio.NewScanner(file)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		switch l.Type {
		case "user":
			var s string
			require.NoError(t, json.Unmarshal(l.Message.Content, &s))
			prompts = append(prompts, s)
		case "assistant":
			answers++
		}
	}
	return prompts, answers
}

func (f *fixture) waitTurns(t *testing.T, dir, id string, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		prompts, answers := turns(t, f.adapter, dir, id)
		return len(prompts) == len(want) && answers == len(want)
	}, wait, tick)
	prompts, _ := turns(t, f.adapter, dir, id)
	assert.Equal(t, want, prompts)
}

func TestTUI(t *testing.T) {
	f := newFixture(t)

	t.Run("prompt_paste_then_resume", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, "-x hello; --resume"))
		f.waitTurns(t, dir, id, "-x hello; --resume")
		f.waitReady(t, name)

		paste := "line one\nline two\r\n\nline four " + strings.Repeat("z", 200)
		f.Paste(t, name, paste)
		f.Must(t, "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, "-x hello; --resume", strings.ReplaceAll(paste, "\r\n", "\n"))

		f.Must(t, "kill-session", "-t", "="+name)
		f.spawnIn(t, name, dir, nil, f.adapter.ResumeArgv(id, "again"))
		f.waitTurns(t, dir, id, "-x hello; --resume", strings.ReplaceAll(paste, "\r\n", "\n"), "again")
	})

	t.Run("argv_prompt_keeps_tabs_mangle_folds_spaces", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, map[string]string{"FAKECLAUDE_MANGLE": "1"}, f.adapter.FreshArgv(id, "a\tb  c"))
		f.waitTurns(t, dir, id, "a\tb c")
		f.waitReady(t, name)
		f.Paste(t, name, "x\ty  z\n")
		f.Must(t, "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, "a\tb c", "x y z\n")
	})

	t.Run("long_burst_enter_is_a_newline", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, ""))
		f.waitReady(t, name)
		long := strings.Repeat("y", 80)
		f.Must(t, "send-keys", "-t", "="+name+":", "-l", long, ";", "send-keys", "-t", "="+name+":", "Enter")
		// The second Enter must come in a later read, after the box shows
		// the first one as a newline.
		require.Eventually(t, func() bool {
			return strings.Contains(f.History(name), "❯\u00a0[Pasted text #1 +1 lines]")
		}, wait, tick)
		f.Must(t, "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, long+"\n")
	})

	t.Run("short_typed_text_and_enter_submit", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, ""))
		f.waitReady(t, name)
		f.Must(t, "send-keys", "-t", "="+name+":", "-l", "short one", ";", "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, "short one")
	})

	t.Run("no_prompt_no_transcript", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, ""))
		f.waitReady(t, name)
		f.Must(t, "send-keys", "-t", "="+name+":", "C-c", ";", "send-keys", "-t", "="+name+":", "C-c")
		assert.Equal(t, "0", f.waitDead(t, name))
		assert.NotContains(t, f.History(name), "Resume this session with:")
		tr, err := f.adapter.Transcript(dir, id)
		require.NoError(t, err)
		assert.NoFileExists(t, tr.Path)
	})

	t.Run("ctrl_c_twice_prints_resume_hint", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, "hi there"))
		f.waitTurns(t, dir, id, "hi there")
		f.waitReady(t, name)
		f.Must(t, "send-keys", "-t", "="+name+":", "C-c", ";", "send-keys", "-t", "="+name+":", "C-c")
		assert.Equal(t, "0", f.waitDead(t, name))
		assert.Contains(t, f.History(name), "Resume this session with:\nclaude --resume "+id)
	})

	t.Run("exit_prompt_leaves", func(t *testing.T) {
		t.Parallel()
		name, _ := f.spawn(t, nil, f.adapter.FreshArgv(uuid.NewString(), "/exit"))
		assert.Equal(t, "0", f.waitDead(t, name))
	})

	t.Run("unknown_resume_exits_1", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, _ := f.spawn(t, map[string]string{"FAKECLAUDE_RESUME_FAIL_DELAY": "50ms"}, f.adapter.ResumeArgv(id, "x y"))
		assert.Equal(t, "1", f.waitDead(t, name))
		assert.Contains(t, f.History(name), "No conversation found with session ID: "+id)
	})

	t.Run("flag_after_resume_opens_picker", func(t *testing.T) {
		t.Parallel()
		name, _ := f.spawn(t, nil, []string{f.bin, "--resume", "--verbose"})
		require.Eventually(t, func() bool { return f.screen(name) == harness.ScreenBlocked }, wait, tick)
		assert.Contains(t, f.History(name), "Search…")
	})

	t.Run("trust_dialog_until_enter", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, map[string]string{"FAKECLAUDE_TRUST_PROMPT": "1"}, f.adapter.FreshArgv(id, "after trust"))
		require.Eventually(t, func() bool { return f.screen(name) == harness.ScreenBlocked }, wait, tick)
		_, answers := turns(t, f.adapter, dir, id)
		assert.Zero(t, answers, "nothing is submitted behind the dialog")
		f.Must(t, "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, "after trust")
		f.waitReady(t, name)
	})

	t.Run("busy_while_replying", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, map[string]string{"FAKECLAUDE_REPLY_DELAY": "1h"}, f.adapter.FreshArgv(id, "slow one"))
		require.Eventually(t, func() bool {
			return strings.Contains(f.History(name), "❯ slow one") && f.screen(name) == harness.ScreenBusy
		}, wait, tick)
		prompts, answers := turns(t, f.adapter, dir, id)
		assert.Equal(t, []string{"slow one"}, prompts)
		assert.Zero(t, answers)
	})

	t.Run("resume_fail_knob_fails_an_existing_conversation", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, "first"))
		f.waitTurns(t, dir, id, "first")
		f.Must(t, "kill-session", "-t", "="+name)
		f.spawnIn(t, name, dir, map[string]string{"FAKECLAUDE_RESUME_FAIL": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "50ms"}, f.adapter.ResumeArgv(id, "second"))
		assert.Equal(t, "1", f.waitDead(t, name))
		assert.Contains(t, f.History(name), "No conversation found with session ID: "+id)
		prompts, _ := turns(t, f.adapter, dir, id)
		assert.Equal(t, []string{"first"}, prompts, "a failed resume writes nothing")
	})

	t.Run("start_log", func(t *testing.T) {
		t.Parallel()
		log := filepath.Join(t.TempDir(), "starts.jsonl")
		argv := f.adapter.FreshArgv(uuid.NewString(), "one two")
		before := time.Now()
		name, _ := f.spawn(t, map[string]string{"FAKECLAUDE_START_LOG": log}, argv)
		f.waitReady(t, name)
		pid, err := strconv.Atoi(strings.TrimSpace(f.Must(t, "display-message", "-p", "-t", "="+name+":", "#{pane_pid}")))
		require.NoError(t, err)
		got, err := os.ReadFile(log)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(got), "\n"), "one line per start")
		var start struct {
			Time time.Time `json:"time"`
			PID  int       `json:"pid"`
			Argv []string  `json:"argv"`
		}
		require.NoError(t, json.Unmarshal(got, &start))
		assert.Equal(t, argv, start.Argv)
		assert.Equal(t, pid, start.PID, "the pane runs the fake itself")
		assert.False(t, start.Time.Before(before.Truncate(time.Second)), "start time %s is before the spawn at %s", start.Time, before)
	})

	// The model's answer is drawn after "⏺", the CLI's own replies under
	// "⎿", as the real CLI draws them: a banner the agent quotes is no
	// limit, the one the CLI prints is, and "Not logged in" is a block.
	banner := "You've hit your session limit · resets " + strings.ToLower(time.Now().Add(3*time.Hour).UTC().Format("3:04PM")) + " (UTC)"
	t.Run("quoted_banner_is_the_models_answer", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, map[string]string{"FAKECLAUDE_ECHO": "1"}, f.adapter.FreshArgv(id, "what is this?\nECHO: "+banner))
		f.waitTurns(t, dir, id, "what is this?\nECHO: "+banner)
		require.Eventually(t, func() bool { return strings.Contains(f.Capture(name), "⏺ "+banner) }, wait, tick, f.History(name))
		_, limited := f.adapter.Limit(f.Capture(name), time.Now())
		assert.False(t, limited)
	})

	t.Run("limit_banner_is_the_clis_until_its_file_goes", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		while := filepath.Join(t.TempDir(), "limited")
		require.NoError(t, os.WriteFile(while, nil, 0o600))
		until := strconv.FormatInt(time.Now().Add(3*time.Hour).Unix(), 10)
		env := map[string]string{"FAKECLAUDE_LIMIT_UNTIL": until, "FAKECLAUDE_LIMIT_FORM": "banner", "FAKECLAUDE_LIMIT_WHILE": while}
		name, dir := f.spawn(t, env, f.adapter.FreshArgv(id, "first"))
		f.waitTurns(t, dir, id, "first")
		require.Eventually(t, func() bool { return strings.Contains(f.Capture(name), "  ⎿  "+banner) }, wait, tick, f.History(name))
		_, limited := f.adapter.Limit(f.Capture(name), time.Now())
		assert.True(t, limited)

		require.NoError(t, os.Remove(while))
		f.Must(t, "send-keys", "-t", "="+name+":", "-l", "second", ";", "send-keys", "-t", "="+name+":", "Enter")
		f.waitTurns(t, dir, id, "first", "second")
		require.Eventually(t, func() bool { return strings.Contains(f.Capture(name), "⏺ OK.") }, wait, tick, f.History(name))
		_, limited = f.adapter.Limit(f.Capture(name), time.Now())
		assert.False(t, limited, "the banner is the previous turn's")
	})

	t.Run("offline_reply_is_the_clis", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		name, dir := f.spawn(t, map[string]string{"FAKECLAUDE_NOT_LOGGED_IN": "1"}, f.adapter.FreshArgv(id, "hello"))
		f.waitTurns(t, dir, id, "hello")
		require.Eventually(t, func() bool { return strings.Contains(f.Capture(name), "  ⎿  "+notLoggedIn) }, wait, tick, f.History(name))
		assert.Equal(t, harness.BlockLoginRequired, f.adapter.Blocked(f.Capture(name)))
	})

	exits := []struct {
		name    string
		env     map[string]string
		signals []syscall.Signal
		want    string
		message string
	}{
		{name: "sighup_exits_129", signals: []syscall.Signal{syscall.SIGHUP}, want: "129"},
		{name: "sigterm_exits_143", signals: []syscall.Signal{syscall.SIGTERM}, want: "143"},
		{name: "ignored_sighup", env: map[string]string{"FAKECLAUDE_IGNORE_SIGHUP": "1"}, signals: []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM}, want: "143"},
		{name: "crash_after", env: map[string]string{"FAKECLAUDE_CRASH_AFTER": "100ms"}, want: "1", message: "simulated crash"},
	}
	for _, tt := range exits {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name, _ := f.spawn(t, tt.env, f.adapter.FreshArgv(uuid.NewString(), ""))
			if len(tt.signals) > 0 {
				f.waitReady(t, name)
				pid, err := strconv.Atoi(strings.TrimSpace(f.Must(t, "display-message", "-p", "-t", "="+name+":", "#{pane_pid}")))
				require.NoError(t, err)
				for _, sig := range tt.signals {
					require.NoError(t, syscall.Kill(pid, sig))
				}
			}
			assert.Equal(t, tt.want, f.waitDead(t, name))
			assert.Contains(t, f.History(name), tt.message)
		})
	}
}

// runFake runs the fake without a terminal in dir and returns its exit
// code, stdout and stderr.
func runFake(t *testing.T, dir, config, stdin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(fakeBin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"CLAUDE_CONFIG_DIR=" + config, "PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, stdout.String(), stderr.String()
}

func TestPrintMode(t *testing.T) {
	config := t.TempDir()
	real, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(real, link))
	a, err := harness.New("claude-code", schema.Harness{Command: fakeBin, Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, err)
	id := uuid.NewString()
	transcript := func() harness.Transcript {
		tr, err := a.Transcript(real, id)
		require.NoError(t, err)
		return tr
	}
	fast := []string{"FAKECLAUDE_RESUME_FAIL_DELAY=1ms"}

	offline := []string{"FAKECLAUDE_NOT_LOGGED_IN=1"}
	code, stdout, _ := runFake(t, link, config, "", offline, a.FreshArgv(id, "hello")[1:]...)
	assert.Equal(t, 1, code)
	assert.Equal(t, notLoggedIn+"\n", stdout)
	require.True(t, transcript().Exists, "written under the physical cwd")

	code, stdout, _ = runFake(t, real, config, "from stdin\n", nil, "--resume", id)
	assert.Equal(t, 0, code, "logged in")
	assert.Equal(t, loggedIn+"\n", stdout)
	prompts, answers := turns(t, a, real, id)
	assert.Equal(t, []string{"hello", "from stdin\n"}, prompts)
	assert.Equal(t, 2, answers)

	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{name: "session_id_in_use", args: a.FreshArgv(id, "x")[1:], wantStderr: "Error: Session ID " + id + " is already in use.\n"},
		{name: "session_id_not_uuid", args: []string{"--session-id", "not-a-uuid", "x"}, wantStderr: "Error: Invalid session ID. Must be a valid UUID.\n"},
		{name: "resume_and_session_id", args: []string{"--resume", id, "--session-id", uuid.NewString()}, wantStderr: "Error: --session-id can only be used with --continue or --resume if --fork-session is also specified.\n"},
		{name: "resume_unknown", args: []string{"--resume", "00000000-0000-4000-8000-000000000000", "x"}, wantStderr: "No conversation found with session ID: 00000000-0000-4000-8000-000000000000\n"},
		{name: "resume_other_cwd", args: []string{"--resume", id, "x"}, wantStderr: "No conversation found with session ID: " + id + "\n"},
		{name: "resume_without_value", args: []string{"--resume", "--verbose"}, wantStderr: "Error: --resume requires a valid session ID or session title when used with --print. Usage: claude -p --resume <session-id|title>\n"},
		{name: "no_prompt", args: []string{"--session-id", uuid.NewString()}, wantStderr: "Error: Input must be provided either through stdin or as a prompt argument when using --print\n"},
		{name: "missing_value", args: []string{"--model"}, wantStderr: "error: option '--model' argument missing\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := real
			if tt.name == "resume_other_cwd" {
				dir = t.TempDir()
			}
			code, stdout, stderr := runFake(t, dir, config, "", fast, tt.args...)
			assert.Equal(t, 1, code)
			assert.Empty(t, stdout)
			assert.Equal(t, tt.wantStderr, stderr)
		})
	}
	prompts, _ = turns(t, a, real, id)
	assert.Len(t, prompts, 2, "failed starts write nothing")
}

func TestForkSession(t *testing.T) {
	config, dir := t.TempDir(), t.TempDir()
	a, err := harness.New("claude-code", schema.Harness{Command: fakeBin, Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, err)
	old, fork := uuid.NewString(), uuid.NewString()
	code, _, _ := runFake(t, dir, config, "", nil, "--session-id", old, "first")
	require.Equal(t, 0, code)

	code, _, _ = runFake(t, dir, config, "", nil, "--resume", old, "--fork-session", "--session-id", fork, "second")
	require.Equal(t, 0, code)

	prompts, _ := turns(t, a, dir, old)
	assert.Equal(t, []string{"first"}, prompts)
	prompts, _ = turns(t, a, dir, fork)
	assert.Equal(t, []string{"first", "second"}, prompts)
}

func TestContinue(t *testing.T) {
	config, dir := t.TempDir(), t.TempDir()
	a, err := harness.New("claude-code", schema.Harness{Command: fakeBin, Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, err)
	id := uuid.NewString()
	code, _, _ := runFake(t, dir, config, "", nil, "--session-id", id, "first")
	require.Equal(t, 0, code)

	code, _, _ = runFake(t, dir, config, "", nil, "-c", "--", "next")
	require.Equal(t, 0, code)

	prompts, _ := turns(t, a, dir, id)
	assert.Equal(t, []string{"first", "next"}, prompts)
}

// TestHeadlessForm runs the adapter's headless argv (harness.Headless):
// the result object names the conversation, both turns go into one
// transcript, and the user line is written before the reply delay.
func TestHeadlessForm(t *testing.T) {
	config := t.TempDir()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	a, err := harness.New("claude-code", schema.Harness{Command: fakeBin, Env: map[string]string{"CLAUDE_CONFIG_DIR": config}})
	require.NoError(t, err)
	h := a.(harness.Headless)
	id := uuid.NewString()

	argv, stdin := h.HeadlessArgv(id, "first", false)
	code, stdout, _ := runFake(t, dir, config, string(stdin), []string{"FAKECLAUDE_NOT_LOGGED_IN=1"}, argv[1:]...)
	assert.Equal(t, 1, code, "offline, as the real CLI")
	assert.Equal(t, id, h.HeadlessSessionID([]byte(stdout)), stdout)
	assert.Contains(t, stdout, `"is_error":true`)

	big := strings.Repeat("y", schema.DefaultMaxBootPrompt+1)
	argv, stdin = h.HeadlessArgv(id, big, true)
	require.NotNil(t, stdin)
	started := time.Now()
	cmd := exec.Command(fakeBin, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"CLAUDE_CONFIG_DIR=" + config, "PATH=" + os.Getenv("PATH"), "FAKECLAUDE_REPLY_DELAY=2s"}
	cmd.Stdin = strings.NewReader(string(stdin))
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	// The user line is there while the turn runs.
	require.Eventually(t, func() bool {
		prompts, _ := turns(t, a, dir, id)
		return len(prompts) == 2
	}, wait, tick)
	prompts, answers := turns(t, a, dir, id)
	assert.Equal(t, 1, answers, "the answer waits for the delay")
	assert.Equal(t, big, prompts[1])
	require.NoError(t, cmd.Wait(), "logged in")
	assert.GreaterOrEqual(t, time.Since(started), 2*time.Second)
	assert.Equal(t, id, h.HeadlessSessionID([]byte(out.String())))
	_, answers = turns(t, a, dir, id)
	assert.Equal(t, 2, answers, "both turns in the one transcript")
}

// TestProbe: with FAKECLAUDE_PROBE=1 each "PROBE: " line of a prompt runs
// in the cwd, its output and status in probes.jsonl there; without it,
// nothing runs.
func TestProbe(t *testing.T) {
	config, dir := t.TempDir(), t.TempDir()
	prompt := "hello\nPROBE: echo out; echo err >&2; exit 3\nnot a PROBE: line\nPROBE: pwd"
	code, _, _ := runFake(t, dir, config, "", nil, "--session-id", uuid.NewString(), "--", prompt)
	require.Equal(t, 0, code)
	assert.NoFileExists(t, filepath.Join(dir, fakecli.ProbeLog), "off by default")

	code, _, _ = runFake(t, dir, config, "", []string{"FAKECLAUDE_PROBE=1"}, "--session-id", uuid.NewString(), "--", prompt)
	require.Equal(t, 0, code)
	b, err := os.ReadFile(filepath.Join(dir, fakecli.ProbeLog))
	require.NoError(t, err)
	var got []fakecli.Probe
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var p fakecli.Probe
		require.NoError(t, json.Unmarshal([]byte(line), &p))
		got = append(got, p)
	}
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	assert.Equal(t, []fakecli.Probe{{Cmd: "echo out; echo err >&2; exit 3", Output: "out\nerr\n", Status: 3}, {Cmd: "pwd", Output: real + "\n"}}, got)
}

// TestScreensThatWaitForAPerson: each dialog FAKECLAUDE_SCREEN shows is
// read by the claude-code adapter as the Block docs/design.md lists for it
// ("Screens that wait for a human"), holds the positional prompt until
// Enter, and then submits it.
func TestScreensThatWaitForAPerson(t *testing.T) {
	f := newFixture(t)
	for name, want := range map[string]harness.Block{
		"cost_threshold":   harness.BlockCostNotice,
		"policy_update":    harness.BlockPolicyUpdate,
		"mcp_server":       harness.BlockWorkspaceTrust,
		"mcp_servers":      harness.BlockWorkspaceTrust,
		"external_imports": harness.BlockExternalImports,
		"api_key":          harness.BlockAPIKey,
		"onboarding":       harness.BlockOnboarding,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id := uuid.NewString()
			sess, dir := f.spawn(t, map[string]string{"FAKECLAUDE_SCREEN": name}, f.adapter.FreshArgv(id, "behind the dialog"))
			require.Eventually(t, func() bool { return f.adapter.Blocked(f.Capture(sess)) == want }, wait, tick, f.History(sess))
			prompts, _ := turns(t, f.adapter, dir, id)
			assert.Empty(t, prompts, "nothing is submitted behind the dialog")
			f.Must(t, "send-keys", "-t", "="+sess+":", "Enter")
			f.waitTurns(t, dir, id, "behind the dialog")
			assert.Empty(t, f.adapter.Blocked(f.Capture(sess)))
		})
	}
}

// TestScreensThatEndTheCLI: the bypass-permissions consent waits for a
// person, and its default, "No, exit", ends the CLI; the connectivity
// preflight ends it at once. loopd's adapter names each from what the
// pane shows, and nothing reaches a conversation.
func TestScreensThatEndTheCLI(t *testing.T) {
	f := newFixture(t)
	t.Run("bypass_consent", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		sess, dir := f.spawn(t, map[string]string{"FAKECLAUDE_SCREEN": "bypass_consent"}, f.adapter.FreshArgv(id, "behind the dialog"))
		require.Eventually(t, func() bool { return f.adapter.Blocked(f.Capture(sess)) == harness.BlockBypassConsent }, wait, tick, f.History(sess))
		f.Must(t, "send-keys", "-t", "="+sess+":", "Enter")
		assert.Equal(t, "1", f.waitDead(t, sess), "No, exit")
		prompts, _ := turns(t, f.adapter, dir, id)
		assert.Empty(t, prompts)
	})
	t.Run("connectivity", func(t *testing.T) {
		t.Parallel()
		id := uuid.NewString()
		sess, dir := f.spawn(t, map[string]string{"FAKECLAUDE_SCREEN": "connectivity"}, f.adapter.FreshArgv(id, "offline"))
		assert.Equal(t, "1", f.waitDead(t, sess))
		assert.Equal(t, harness.BlockConnectivity, f.adapter.Blocked(f.History(sess)))
		prompts, _ := turns(t, f.adapter, dir, id)
		assert.Empty(t, prompts)
	})
}

// TestResumeSummaryChooser: the resume-return chooser shows on a resume of
// a conversation older than CLAUDE_CODE_RESUME_THRESHOLD_MINUTES (70 by
// default), as Claude Code 2.1.x shows it behind its server flag, and
// never when the global config says resumeReturnDismissed (what loopd
// provisions) or the threshold is not reached.
func TestResumeSummaryChooser(t *testing.T) {
	f := newFixture(t)
	old := func(t *testing.T) (string, string, string) {
		id := uuid.NewString()
		sess, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, "long ago"))
		f.waitTurns(t, dir, id, "long ago")
		f.Must(t, "kill-session", "-t", "="+sess)
		tr, err := f.adapter.Transcript(dir, id)
		require.NoError(t, err)
		then := time.Now().Add(-3 * time.Hour)
		require.NoError(t, os.Chtimes(tr.Path, then, then))
		return id, sess, dir
	}
	t.Run("shown_on_an_old_conversation", func(t *testing.T) {
		id, sess, dir := old(t)
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_SCREEN": "resume_summary"}, f.adapter.ResumeArgv(id, "again"))
		require.Eventually(t, func() bool { return f.adapter.Blocked(f.Capture(sess)) == harness.BlockResumeSummary }, wait, tick, f.History(sess))
		prompts, _ := turns(t, f.adapter, dir, id)
		assert.Equal(t, []string{"long ago"}, prompts, "the resume's prompt waits behind the chooser")
	})
	t.Run("not_past_the_threshold", func(t *testing.T) {
		id, sess, dir := old(t)
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_SCREEN": "resume_summary", "CLAUDE_CODE_RESUME_THRESHOLD_MINUTES": "600"},
			f.adapter.ResumeArgv(id, "again"))
		f.waitTurns(t, dir, id, "long ago", "again")
	})
	t.Run("dismissed_in_the_global_config", func(t *testing.T) {
		id, sess, dir := old(t)
		require.NoError(t, harness.Provision(f.adapter, dir), "what loopd writes before every spawn")
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_SCREEN": "resume_summary"}, f.adapter.ResumeArgv(id, "again"))
		f.waitTurns(t, dir, id, "long ago", "again")
	})
}

// TestResumeKnobs: the knobs that make a resume late, killed, refused by
// a CLI that stays up, or held by a background agent, as issue 21
// measured the real CLI doing.
func TestResumeKnobs(t *testing.T) {
	f := newFixture(t)
	started := func(t *testing.T) (string, string, string) {
		id := uuid.NewString()
		sess, dir := f.spawn(t, nil, f.adapter.FreshArgv(id, "first"))
		f.waitTurns(t, dir, id, "first")
		f.Must(t, "kill-session", "-t", "="+sess)
		return id, sess, dir
	}
	t.Run("boot_prompt_written_late", func(t *testing.T) {
		t.Parallel()
		id, sess, dir := started(t)
		begin := time.Now()
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_BOOT_DELAY": "1s"}, f.adapter.ResumeArgv(id, "late"))
		require.Eventually(t, func() bool { return f.screen(sess) == harness.ScreenBusy }, wait, tick)
		f.waitTurns(t, dir, id, "first", "late")
		assert.GreaterOrEqual(t, time.Since(begin), time.Second)
	})
	t.Run("killed_by_a_signal_once", func(t *testing.T) {
		t.Parallel()
		id, sess, dir := started(t)
		env := map[string]string{"FAKECLAUDE_RESUME_KILL_AFTER": "200ms", "FAKECLAUDE_BOOT_DELAY": "2s", "FAKECLAUDE_ONCE_DIR": t.TempDir()}
		f.spawnIn(t, sess, dir, env, f.adapter.ResumeArgv(id, "second"))
		require.Eventually(t, func() bool {
			_, _ = f.Run("run-shell", "true")
			return strings.TrimSpace(f.Must(t, "display-message", "-p", "-t", "="+sess+":", "#{pane_dead}:#{pane_dead_signal}")) == "1:9"
		}, wait, tick, "killed by SIGKILL")
		f.Must(t, "kill-session", "-t", "="+sess)
		f.spawnIn(t, sess, dir, env, f.adapter.ResumeArgv(id, "third"))
		f.waitTurns(t, dir, id, "first", "third")
	})
	t.Run("refusal_printed_by_a_live_cli", func(t *testing.T) {
		t.Parallel()
		id, sess, dir := started(t)
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_REFUSE_ALIVE": "1"}, f.adapter.ResumeArgv(id, "second"))
		require.Eventually(t, func() bool {
			return harness.ResumeRefusal(f.adapter, f.Capture(sess), -1, id) == harness.RefusalNotResumable
		}, wait, tick, f.History(sess))
		assert.Equal(t, "0", strings.TrimSpace(f.Must(t, "display-message", "-p", "-t", "="+sess+":", "#{pane_dead}")), "it stays up")
	})
	t.Run("background_agent_refusal", func(t *testing.T) {
		t.Parallel()
		id, sess, dir := started(t)
		f.spawnIn(t, sess, dir, map[string]string{"FAKECLAUDE_BACKGROUND_AGENT": "1", "FAKECLAUDE_RESUME_FAIL_DELAY": "50ms"}, f.adapter.ResumeArgv(id, "second"))
		assert.Equal(t, "1", f.waitDead(t, sess))
		assert.Equal(t, harness.RefusalInUse, harness.ResumeRefusal(f.adapter, f.History(sess), 1, id))
		code, _, stderr := runFake(t, dir, f.config, "", []string{"FAKECLAUDE_BACKGROUND_AGENT=1"}, "-p", "--resume", id, "--", "x")
		assert.Equal(t, 1, code)
		assert.Equal(t, harness.RefusalInUse, harness.ResumeRefusal(f.adapter, stderr, 1, id))
	})
	t.Run("headless_turn_under_a_new_id", func(t *testing.T) {
		t.Parallel()
		id, _, dir := started(t)
		code, stdout, _ := runFake(t, dir, f.config, "", []string{"FAKECLAUDE_HEADLESS_NEW_ID=1"}, "-p", "--resume", id, "--output-format", "json", "--", "second")
		assert.Equal(t, 0, code)
		moved := f.adapter.(harness.Headless).HeadlessSessionID([]byte(stdout))
		require.NotEqual(t, id, moved)
		prompts, _ := turns(t, f.adapter, dir, moved)
		assert.Equal(t, []string{"first", "second"}, prompts, "the new id holds the conversation and the turn")
		prompts, _ = turns(t, f.adapter, dir, id)
		assert.Equal(t, []string{"first"}, prompts)
	})
}

// TestPermissionPrompt: with FAKECLAUDE_PERMISSION_PROMPT, each prompt
// opens a permission dialog of its own command that loopd's adapter reads
// as a question with its three choices; a choice's number picks it at
// once and is logged with the command; a yes ends the turn, and the no
// that asks what to do instead ends it interrupted, the next prompt being
// the person's words.
func TestPermissionPrompt(t *testing.T) {
	f := newFixture(t)
	log := filepath.Join(t.TempDir(), "menu.jsonl")
	id := uuid.NewString()
	sess, dir := f.spawn(t, map[string]string{"FAKECLAUDE_PERMISSION_PROMPT": "1", "FAKECLAUDE_MENU_LOG": log}, f.adapter.FreshArgv(id, "run the tests"))
	asker := f.adapter.(harness.Asker)
	question := func() (harness.Question, bool) { return asker.Question(f.Capture(sess)) }
	require.Eventually(t, func() bool { _, ok := question(); return ok }, wait, tick, f.History(sess))
	q, _ := question()
	assert.Equal(t, harness.Question{Context: []string{" Bash command", "   make test-1"}, Title: "Do you want to proceed?",
		Choices: []string{"Yes", "Yes, and don't ask again for make commands", "No"}, Differently: 3}, q)
	assert.Equal(t, harness.BlockPermission, f.adapter.Blocked(f.Capture(sess)))

	f.Must(t, "send-keys", "-t", "="+sess+":", "1")
	f.waitTurns(t, dir, id, "run the tests")
	f.Must(t, "send-keys", "-t", "="+sess+":", "-l", "again")
	f.Must(t, "send-keys", "-t", "="+sess+":", "Enter")
	require.Eventually(t, func() bool { q, ok := question(); return ok && q.Context[1] == "   make test-2" }, wait, tick, f.History(sess))
	f.Must(t, "send-keys", "-t", "="+sess+":", "3")
	require.Eventually(t, func() bool { _, ok := question(); return !ok }, wait, tick, f.History(sess))
	prompts, _ := turns(t, f.adapter, dir, id)
	assert.Equal(t, []string{"run the tests", "again", "[Request interrupted by user for tool use]"}, prompts)

	b, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.Equal(t, `{"choice":"Yes","command":"make test-1"}`+"\n"+
		`{"choice":"No","command":"make test-2"}`+"\n", string(b))
}
