package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
)

// buildFake builds the fake CLI testdata/<name> for t and returns its
// path.
func buildFake(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "../../testdata/"+name).CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// tmuxServer is a private tmux server for one test, started with a minimal
// environment so that nothing of the caller's (CLAUDECODE, API keys)
// reaches the panes.
type tmuxServer struct {
	t      *testing.T
	socket string
	env    []string
}

func newTmuxServer(t *testing.T, home string) *tmuxServer {
	t.Helper()
	x := &tmuxServer{
		t:      t,
		socket: tmuxtest.Socket(t, "harness"),
		env:    []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"},
	}
	x.must("new-session", "-d", "-s", "_idle", "--", "sleep", "600", ";",
		"set", "-g", "remain-on-exit", "on")
	return x
}

func (x *tmuxServer) run(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", x.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = x.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (x *tmuxServer) must(args ...string) string {
	x.t.Helper()
	out, err := x.run(args...)
	require.NoError(x.t, err, out)
	return out
}

func (x *tmuxServer) spawn(name, dir string, env map[string]string, argv []string) {
	x.t.Helper()
	args := []string{"new-session", "-d", "-s", name, "-x", "100", "-y", "30", "-c", dir}
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	x.must(append(append(args, "--"), argv...)...)
}

func (x *tmuxServer) capture(name string, history bool) string {
	args := []string{"capture-pane", "-p", "-t", "=" + name + ":"}
	if history {
		args = append(args, "-S", "-")
	}
	out, _ := x.run(args...)
	return out
}

// deadStatus is the pane's exit status, or "" while it runs or tmux has
// not reaped it yet (run-shell makes it reap).
func (x *tmuxServer) deadStatus(name string) string {
	_, _ = x.run("run-shell", "true")
	out, _ := x.run("display-message", "-p", "-t", "="+name+":", "#{pane_dead}:#{pane_dead_status}")
	dead, status, _ := strings.Cut(strings.TrimSpace(out), ":")
	if dead != "1" {
		return ""
	}
	return status
}

// userPrompts returns the text of every user line of a transcript.
func userPrompts(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var prompts []string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		var l struct {
			Type    string `json:"type"`
			Message struct {
				Content any `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &l) == nil && l.Type == "user" {
			if s, ok := l.Message.Content.(string); ok {
				prompts = append(prompts, s)
			}
		}
		if err != nil {
			return prompts
		}
	}
}

// TestCLI runs the claude-code adapter's argv, transcript rule and screen
// classes against a Claude Code CLI in tmux, offline: every prompt is
// answered "Not logged in". It runs on the fake in testdata/fakeclaude,
// and on the real CLI when LOOPD_REAL_CLAUDE names its binary (2.1.197
// was measured), so that the fake stays honest.
func TestCLI(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		testCLI(t, buildFake(t, "fakeclaude"))
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		bin := os.Getenv("LOOPD_REAL_CLAUDE")
		if bin == "" {
			t.Skip("LOOPD_REAL_CLAUDE is not set")
		}
		testCLI(t, bin)
	})
}

func testCLI(t *testing.T, bin string) {
	home := t.TempDir()
	x := newTmuxServer(t, home)
	config := filepath.Join(home, "config")
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	untrusted := t.TempDir()
	settings, err := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"projects":               map[string]any{work: map[string]bool{"hasTrustDialogAccepted": true}},
	})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(config, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, ".claude.json"), settings, 0o600))
	a, err := New("claude-code", schema.Harness{Command: bin, Env: map[string]string{
		"CLAUDE_CONFIG_DIR": config,
		// Else the first start clones the official plugin marketplace
		// into the config dir, in the background.
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
		// The fake's stand-in for the real CLI offline.
		"FAKECLAUDE_NOT_LOGGED_IN": "1",
	}})
	require.NoError(t, err)
	// Six CLIs start at once; on two busy cores the real one can take
	// several seconds each.
	const wait, tick = 20 * time.Second, 100 * time.Millisecond

	// A hand-made one-line transcript is enough for claude --resume.
	old := uuid.NewString()
	before, err := a.Transcript(work, old)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(before.Path), 0o700))
	line := `{"type":"user","message":{"role":"user","content":"earlier"},"uuid":"` + uuid.NewString() + `","timestamp":"2026-01-01T00:00:00.000Z"}` + "\n"
	require.NoError(t, os.WriteFile(before.Path, []byte(line), 0o600))

	fresh := uuid.NewString()
	x.spawn("fresh", work, a.Env(), a.FreshArgv(fresh, "-x first turn; --resume"))
	x.spawn("resume", work, a.Env(), a.ResumeArgv(old, "second turn"))
	x.spawn("missing", work, a.Env(), a.ResumeArgv(uuid.NewString(), "x y"))
	x.spawn("duplicate", work, a.Env(), a.FreshArgv(old, "x y"))
	trustEnv := a.Env()
	trustEnv["FAKECLAUDE_TRUST_PROMPT"] = "1" // the fake's stand-in for an untrusted dir
	x.spawn("trust", untrusted, trustEnv, a.FreshArgv(uuid.NewString(), "x y"))
	x.spawn("picker", work, a.Env(), a.ResumeArgv("not-a-uuid", ""))

	var wg sync.WaitGroup
	check := func(name string, f func(t *testing.T)) {
		wg.Go(func() { t.Run(name, f) })
	}
	check("fresh_writes_transcript_and_gets_ready", func(t *testing.T) {
		var tr Transcript
		if !assert.Eventually(t, func() bool {
			var err error
			tr, err = a.Transcript(work, fresh)
			screen, _ := a.Screen(x.capture("fresh", false))
			return err == nil && tr.Exists && screen == ScreenReady
		}, wait, tick) {
			t.Logf("screen:\n%s", x.capture("fresh", true))
		}
		// Offline, every answer asks for a login: the agent is blocked,
		// though its input box takes prompts.
		assert.Equal(t, BlockLoginRequired, a.Blocked(x.capture("fresh", false)))
		// The CLI may write other lines before the prompt's; under load
		// the file can be read between the two writes.
		want := []string{"-x first turn; --resume"}
		assert.Eventually(t, func() bool { return slices.Equal(want, userPrompts(tr.Path)) }, wait, tick)
		assert.Equal(t, want, userPrompts(tr.Path))
	})
	check("resume_appends_to_same_transcript", func(t *testing.T) {
		assert.Eventually(t, func() bool {
			return len(userPrompts(before.Path)) == 2
		}, wait, tick)
		assert.Equal(t, []string{"earlier", "second turn"}, userPrompts(before.Path))
	})
	dies := func(name, message string) func(t *testing.T) {
		return func(t *testing.T) {
			assert.Eventually(t, func() bool { return x.deadStatus(name) == "1" }, wait, tick)
			assert.Contains(t, x.capture(name, true), message)
		}
	}
	check("unknown_resume_exits_1", dies("missing", "No conversation found with session ID"))
	check("reused_session_id_exits_1", dies("duplicate", "is already in use"))
	blocked := func(name, reason string) func(t *testing.T) {
		return func(t *testing.T) {
			assert.Eventually(t, func() bool {
				screen, why := a.Screen(x.capture(name, false))
				return screen == ScreenBlocked && why == reason
			}, wait, tick)
		}
	}
	check("untrusted_dir_blocks", blocked("trust", BlockWorkspaceTrust))
	check("non_uuid_resume_opens_picker", blocked("picker", BlockResumePicker))
	wg.Wait()
}
