package harness

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/harness/harnesstest"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
	"github.com/loopd/loopd/schema"
)

// The project-settings tests plant in a workdir every setting of its own
// that can make the CLI run code at its start (harnesstest.Plant), each
// writing a marker, and start the CLI with the adapter's argv, environment
// and provisioning twice, in two such workdirs at once: with the project
// settings off (every adapter's default) and trusted
// (WithProjectSettings). The trusted run shows that the planted files
// work, and when they have run; the other must have run none of them by
// then. They run on the fakes, and on the real CLIs when LOOPD_REAL_CLAUDE,
// LOOPD_REAL_CODEX and LOOPD_REAL_GEMINI name them, so that the fakes stay
// honest.

// realOrFake runs f on the fake name and on the real CLI env names.
func realOrFake(t *testing.T, fake, env string, f func(t *testing.T, bin string, real bool)) {
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		f(t, buildFake(t, fake), false)
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		bin := os.Getenv(env)
		if bin == "" {
			t.Skip(env + " is not set")
		}
		f(t, bin, true)
	})
}

// planted is a git workdir holding harnesstest.Plant's files, and the
// directory their markers go to.
type planted struct{ work, markers string }

func plantedWorkdir(t *testing.T) planted {
	t.Helper()
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	workspacetest.Git(t, work, "init", "--quiet")
	p := planted{work: work, markers: t.TempDir()}
	harnesstest.Plant(t, work, p.markers)
	return p
}

func (p planted) written(names []string) []string { return harnesstest.Written(p.markers, names...) }

// run is one start of a CLI in a planted workdir: the adapter copy that
// starts it (trusted or not), provisioned for the workdir, the
// environment it starts with (the adapter's and its item state's), and
// the id of its conversation where the CLI takes one.
type run struct {
	p       planted
	adapter Adapter
	env     map[string]string
	id      string
}

// newRun makes the item state of base's copy with the project settings
// trusted or not in a new planted workdir, then provisions it, as a spawn
// does.
func newRun(t *testing.T, base Adapter, trusted bool) run {
	t.Helper()
	r := run{p: plantedWorkdir(t), adapter: WithProjectSettings(base, trusted), id: uuid.NewString()}
	st, err := ItemState(r.adapter, r.p.work, "", false)
	require.NoError(t, err)
	require.NoError(t, Provision(r.adapter, r.p.work))
	r.env = maps.Clone(r.adapter.Env())
	if r.env == nil {
		r.env = map[string]string{}
	}
	maps.Copy(r.env, st.Env)
	return r
}

// headless starts r's headless turn with prompt and returns its end and
// output file (runHeadless).
func (r run) headless(t *testing.T, home, prompt string, resume bool) (<-chan struct{}, string) {
	t.Helper()
	argv, stdin := r.adapter.(Headless).HeadlessArgv(r.id, prompt, resume)
	return runHeadless(t, r.p.work, home, r.env, argv, stdin)
}

// projectSettingsWait bounds each wait: on two busy cores the real CLIs
// take several seconds to start.
const projectSettingsWait, projectSettingsTick = 60 * time.Second, 100 * time.Millisecond

// runHeadless starts argv with env on top of a minimal environment in dir,
// stdin on its stdin, its output to a file, and returns the running
// command's end; its process group is killed when the test ends.
func runHeadless(t *testing.T, dir, home string, env map[string]string, argv []string, stdin []byte) (<-chan struct{}, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, f, f
	cmd.Stdin = strings.NewReader(string(stdin))
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return done, out
}

// eventually waits up to projectSettingsWait for cond, and fails t with
// what() when it never holds: read then, not when the wait began.
func eventually(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	if !assert.Eventually(t, cond, projectSettingsWait, projectSettingsTick) {
		if what != nil {
			t.Fatal(what())
		}
		t.FailNow()
	}
}

// closed reports whether done is closed.
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// TestClaudeProjectSettingsCLI: Claude Code started as the adapter starts
// it runs none of a workdir's project hook, local hook and .mcp.json
// server, in the TUI (fresh and resumed) and headless, while loopd's own
// SessionStart hook still reports the spawn; trusted, it runs them all.
func TestClaudeProjectSettingsCLI(t *testing.T) {
	realOrFake(t, "fakeclaude", "LOOPD_REAL_CLAUDE", testClaudeProjectSettings)
}

func testClaudeProjectSettings(t *testing.T, bin string, _ bool) {
	home := t.TempDir()
	x := newTmuxServer(t, home)
	reports := t.TempDir()
	base, err := New("claude-code", schema.Harness{Command: bin, Env: map[string]string{
		"CLAUDE_CONFIG_DIR": filepath.Join(home, "config"),
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
		"FAKECLAUDE_NOT_LOGGED_IN":                             "1",
	}})
	require.NoError(t, err)
	// loopd's own hook, as the daemon installs it, writing each report
	// (the hook's input) to a file of its own.
	hooked := base.(SessionStartReporter).WithSessionStartHook(`cat > "` + reports + `/$$-$(date +%s%N).json"`)
	reportsOf := func(id string) []string {
		files, _ := filepath.Glob(filepath.Join(reports, "*.json"))
		var sources []string
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if strings.Contains(string(b), `"session_id":"`+id+`"`) {
				_, src, _ := strings.Cut(string(b), `"source":"`)
				src, _, _ = strings.Cut(src, `"`)
				sources = append(sources, src)
			}
		}
		return sources
	}

	turns := func(r run) int {
		tr, err := r.adapter.Transcript(r.p.work, r.id)
		if err != nil || !tr.Exists {
			return 0
		}
		return len(userPrompts(tr.Path))
	}
	off, on := newRun(t, hooked, false), newRun(t, hooked, true)
	x.spawn("off", off.p.work, off.env, off.adapter.FreshArgv(off.id, "first"))
	x.spawn("on", on.p.work, on.env, on.adapter.FreshArgv(on.id, "first"))
	offP, onP := newRun(t, hooked, false), newRun(t, hooked, true)
	offCmd, offOut := offP.headless(t, home, "first", false)
	onCmd, _ := onP.headless(t, home, "first", false)

	var wg sync.WaitGroup
	check := func(name string, f func(t *testing.T)) { wg.Go(func() { t.Run(name, f) }) }
	check("tui", func(t *testing.T) {
		eventually(t, func() bool { return len(on.p.written(harnesstest.Claude)) == len(harnesstest.Claude) }, func() string {
			return fmt.Sprintf("the trusted TUI never ran the planted settings: %v\n%s", on.p.written(harnesstest.Claude), x.capture("on", true))
		})
		eventually(t, func() bool { return turns(off) >= 1 && len(reportsOf(off.id)) >= 1 }, func() string {
			return fmt.Sprintf("the TUI never took its first prompt, or loopd's hook never reported it:\n%s", x.capture("off", true))
		})
		assert.Equal(t, []string{"startup"}, reportsOf(off.id), "loopd's own hook reports the spawn")
		assert.Empty(t, off.p.written(harnesstest.Claude), "the TUI ran the workdir's own settings")

		// The same conversation resumed runs them no more.
		x.must("kill-session", "-t", "=off")
		x.spawn("off-resumed", off.p.work, off.env, off.adapter.ResumeArgv(off.id, "second"))
		eventually(t, func() bool { return turns(off) >= 2 && len(reportsOf(off.id)) >= 2 }, func() string {
			return fmt.Sprintf("the resume never took its prompt, or loopd's hook never reported it:\n%s", x.capture("off-resumed", true))
		})
		assert.ElementsMatch(t, []string{"startup", "resume"}, reportsOf(off.id))
		assert.Empty(t, off.p.written(harnesstest.Claude), "the resumed TUI ran the workdir's own settings")
	})
	check("headless", func(t *testing.T) {
		eventually(t, func() bool { return closed(onCmd) && closed(offCmd) }, nil)
		assert.Equal(t, harnesstest.Claude, onP.p.written(harnesstest.Claude), "the trusted -p turn ran the planted settings")
		b, _ := os.ReadFile(offOut)
		assert.Contains(t, string(b), `"session_id":"`+offP.id+`"`, "the turn ran")
		assert.Empty(t, offP.p.written(harnesstest.Claude), "the -p turn ran the workdir's own settings")
	})
	wg.Wait()
}

// codexProjectProvider is the credential-free model provider of the
// reference (harness-cli-facts.md, section 2): no login screen, and every
// request fails offline.
var codexProjectProvider = []string{"-c", "model_provider=loc", "-c", `model_providers.loc={name="loc",base_url="http://127.0.0.1:9/v1",wire_api="responses"}`}

// TestCodexProjectSettingsCLI: Codex started as the adapter starts and
// provisions it loads none of a git workdir's .codex/config.toml (its MCP
// server), in the TUI (which asks about the folder first: blocked,
// workspace_trust) and with exec; trusted, both start the server, and the
// TUI asks to review the project's hooks first (blocked too), as a human
// must.
func TestCodexProjectSettingsCLI(t *testing.T) {
	realOrFake(t, "fakecodex", "LOOPD_REAL_CODEX", testCodexProjectSettings)
}

func testCodexProjectSettings(t *testing.T, bin string, _ bool) {
	home := t.TempDir()
	x := newTmuxServer(t, home)
	endGroupsAtCleanup(t, x)
	base, err := New("codex", schema.Harness{Command: bin, ExtraArgs: codexProjectProvider,
		Env: map[string]string{"CODEX_HOME": filepath.Join(home, "codex")}})
	require.NoError(t, err)
	off, on := newRun(t, base, false), newRun(t, base, true)
	offX, onX := newRun(t, base, false), newRun(t, base, true)
	x.spawn("off", off.p.work, off.env, off.adapter.FreshArgv("", "first"))
	x.spawn("on", on.p.work, on.env, on.adapter.FreshArgv("", "first"))
	_, offOut := offX.headless(t, home, "first", false)
	onX.headless(t, home, "first", false)
	blocked := func(name string) bool {
		s, why := base.Screen(x.capture(name, false))
		return s == ScreenBlocked && why == BlockWorkspaceTrust
	}
	server := []string{harnesstest.CodexMCPServer}

	var wg sync.WaitGroup
	check := func(name string, f func(t *testing.T)) { wg.Go(func() { t.Run(name, f) }) }
	check("tui", func(t *testing.T) {
		for attempt := 1; ; attempt++ {
			eventually(t, func() bool { return blocked("on") || codexStarved(x, "on") }, func() string {
				return fmt.Sprintf("the trusted TUI never asked to review the project's hooks:\n%s", x.capture("on", true))
			})
			if !codexStarved(x, "on") {
				x.must("send-keys", "-t", "=on:", "3") // continue without trusting them
				eventually(t, func() bool { return len(on.p.written(server)) == 1 || codexStarved(x, "on") }, func() string {
					return fmt.Sprintf("the trusted TUI never started the project's MCP server:\n%s", x.capture("on", true))
				})
			}
			if !codexStarved(x, "on") || attempt == codexStarvedAttempts {
				break
			}
			t.Logf("attempt %d: the real Codex gave up draining its input at a dialog (starved of CPU); starting it again", attempt)
			x.must("respawn-pane", "-k", "-t", "=on:")
		}
		require.Len(t, on.p.written(server), 1, "the trusted TUI never started the project's MCP server:\n%s", x.capture("on", true))
		eventually(t, func() bool { return blocked("off") }, func() string { return fmt.Sprintf("the TUI never asked about the folder:\n%s", x.capture("off", true)) })
		assert.Empty(t, off.p.written(harnesstest.Codex), "the TUI ran the workdir's own config")
	})
	check("exec", func(t *testing.T) {
		eventually(t, func() bool { return len(onX.p.written(server)) == 1 }, func() string { return fmt.Sprintf("the trusted exec never started the project's MCP server") })
		eventually(t, func() bool {
			b, _ := os.ReadFile(offOut)
			return strings.Contains(string(b), `"type":"thread.started"`)
		}, func() string { return fmt.Sprintf("the exec never started its turn") })
		assert.Empty(t, offX.p.written(harnesstest.Codex), "the exec ran the workdir's own config")
		assert.Empty(t, onX.p.written([]string{harnesstest.CodexHook}), "hooks need their review, even trusted")
	})
	wg.Wait()
}

// codexStarvedExit is what the real Codex prints when it exits (status 1)
// at a trust or hooks dialog because it could not drain its pending
// terminal input within its own deadline of one second
// (codex-rs tui discard_pending_terminal_input): on two cores shared with
// busy processes it is not run for that long. loopd sees such a death as
// an exit at once and starts it again (harness_exited_at_once); this test
// does the same, at most codexStarvedAttempts times.
const codexStarvedExit, codexStarvedAttempts = "timed out discarding buffered terminal input", 3

// codexStarved reports whether the pane name died with codexStarvedExit.
func codexStarved(x *tmuxServer, name string) bool {
	return x.deadStatus(name) != "" && strings.Contains(x.capture(name, true), codexStarvedExit)
}

// TestGeminiProjectSettingsCLI: Gemini started as the adapter starts it
// runs none of a workdir's .gemini/settings.json (its SessionStart hook,
// MCP server and tool discovery) and shows no folder-trust dialog, in the
// TUI; headless it refuses the untrusted folder (exit 55). Trusted, both
// run them all.
func TestGeminiProjectSettingsCLI(t *testing.T) {
	realOrFake(t, "fakegemini", "LOOPD_REAL_GEMINI", testGeminiProjectSettings)
}

func testGeminiProjectSettings(t *testing.T, bin string, _ bool) {
	home := t.TempDir()
	x := newTmuxServer(t, home)
	endGroupsAtCleanup(t, x)
	// An auth type chosen and a key: the real CLI's TUI then takes
	// prompts, and a headless run gets past its auth check (the fake's
	// knob stands for both).
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600))
	base, err := New("gemini", schema.Harness{Command: bin, Env: map[string]string{
		"GEMINI_CLI_HOME": home, "GEMINI_API_KEY": "offline-dummy", "FAKEGEMINI_AUTH": "1",
		"FAKEGEMINI_TRUST_PROMPT": "1", // the fake asks, as the real one does, when nothing decides the trust
	}})
	require.NoError(t, err)
	off, on := newRun(t, base, false), newRun(t, base, true)
	offH, onH := newRun(t, base, false), newRun(t, base, true)
	x.spawn("off", off.p.work, off.env, off.adapter.FreshArgv(off.id, ""))
	x.spawn("on", on.p.work, on.env, on.adapter.FreshArgv(on.id, ""))
	offDone, offOut := offH.headless(t, home, "first", false)
	onH.headless(t, home, "first", false)

	var wg sync.WaitGroup
	check := func(name string, f func(t *testing.T)) { wg.Go(func() { t.Run(name, f) }) }
	check("tui", func(t *testing.T) {
		eventually(t, func() bool { return len(on.p.written(harnesstest.Gemini)) == len(harnesstest.Gemini) }, func() string {
			return fmt.Sprintf("the trusted TUI never ran the planted settings: %v\n%s", on.p.written(harnesstest.Gemini), x.capture("on", true))
		})
		eventually(t, func() bool { s, _ := base.Screen(x.capture("off", false)); return s == ScreenReady }, func() string {
			return fmt.Sprintf("the untrusted TUI never came up at its input box:\n%s", x.capture("off", true))
		})
		assert.Empty(t, off.p.written(harnesstest.Gemini), "the TUI ran the workdir's own settings")
	})
	check("headless", func(t *testing.T) {
		eventually(t, func() bool { return len(onH.p.written(harnesstest.Gemini)) == len(harnesstest.Gemini) }, func() string {
			return fmt.Sprintf("the trusted headless run never ran the planted settings: %v", onH.p.written(harnesstest.Gemini))
		})
		eventually(t, func() bool { return closed(offDone) }, nil)
		b, _ := os.ReadFile(offOut)
		assert.Contains(t, string(b), "not running in a trusted directory")
		assert.Empty(t, offH.p.written(harnesstest.Gemini), "the headless run ran the workdir's own settings")
	})
	wg.Wait()
}
