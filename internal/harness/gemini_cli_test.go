package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/schema"
)

// TestGeminiCLI runs the gemini adapter's argv, chat-file rule, screens,
// exit codes and stop rule against a Gemini CLI in tmux, offline. It runs
// on the fake in testdata/fakegemini, and on the real CLI when
// LOOPD_REAL_GEMINI names its binary (0.61.0 was measured), so that the
// fake stays honest. Offline, the real CLI takes a dummy API key: its TUI
// then comes up, and a prompt waits for the unreachable API.
func TestGeminiCLI(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		testGeminiCLI(t, buildFake(t, "fakegemini"), false)
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		bin := os.Getenv("LOOPD_REAL_GEMINI")
		if bin == "" {
			t.Skip("LOOPD_REAL_GEMINI is not set")
		}
		testGeminiCLI(t, bin, true)
	})
}

// endGroupsAtCleanup ends the process group of every pane of x when the
// test ends, before x's server is killed: Gemini outlives kill-server.
func endGroupsAtCleanup(t *testing.T, x *tmuxServer) {
	t.Cleanup(func() {
		out, _ := x.run("list-panes", "-a", "-F", "#{pane_pid}")
		for _, f := range strings.Fields(out) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			p, err := proc.Lookup(pid)
			if err != nil {
				p = proc.Process{PID: pid}
			}
			_, _ = p.EndGroup(context.Background(), syscall.SIGHUP, time.Second, 20*time.Millisecond)
		}
	})
}

func testGeminiCLI(t *testing.T, bin string, real bool) {
	home := t.TempDir()
	x := newTmuxServer(t, home)
	endGroupsAtCleanup(t, x)
	work, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	// An auth type chosen and a key: the real CLI's TUI then takes prompts
	// (the fake's knob stands for both).
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"),
		[]byte(`{"security":{"auth":{"selectedType":"gemini-api-key"}}}`), 0o600))
	a, err := New("gemini", schema.Harness{Command: bin, Env: map[string]string{
		"GEMINI_CLI_HOME": home, "GEMINI_API_KEY": "offline-dummy", "FAKEGEMINI_AUTH": "1",
	}})
	require.NoError(t, err)
	require.NoError(t, a.(Provisioner).Provision(""))
	const wait, tick = 30 * time.Second, 100 * time.Millisecond

	fresh := uuid.NewString()
	x.spawn("fresh", work, a.Env(), a.FreshArgv(fresh, ""))
	x.spawn("missing", work, a.Env(), a.ResumeArgv(uuid.NewString(), "x y"))
	survivor := uuid.NewString()
	x.spawn("survivor", work, a.Env(), a.FreshArgv(survivor, ""))

	var wg sync.WaitGroup
	check := func(name string, f func(t *testing.T)) {
		wg.Go(func() { t.Run(name, f) })
	}
	check("fresh_writes_its_chat_file_and_gets_ready", func(t *testing.T) {
		if !assert.Eventually(t, func() bool {
			tr, err := a.Transcript(work, fresh)
			screen, _ := a.Screen(x.capture("fresh", false))
			return err == nil && tr.Path != "" && screen == ScreenReady
		}, wait, tick) {
			t.Logf("screen:\n%s", x.capture("fresh", true))
		}
		tr, err := a.Transcript(work, fresh)
		require.NoError(t, err)
		assert.False(t, tr.Exists, "no prompt yet: nothing to resume")
		assert.True(t, strings.HasPrefix(filepath.Base(tr.Path), "session-"), tr.Path)
	})
	check("unknown_resume_exits_42", func(t *testing.T) {
		assert.Eventually(t, func() bool { return x.deadStatus("missing") == "42" }, wait, tick)
		assert.Contains(t, x.capture("missing", true), "Error resuming session")
	})
	// Whether Gemini outlives kill-session depends on its state: at its
	// auth dialog both node processes ran on (harness-cli-facts.md, 6 of
	// 6; again here by hand), while ready with an API key it exited on the
	// SIGHUP. Either way the group stop leaves nothing of it.
	check("kill_session_then_the_group_stop_ends_all_of_it", func(t *testing.T) {
		var pid int
		require.Eventually(t, func() bool {
			out, _ := x.run("display-message", "-p", "-t", "=survivor:", "#{pane_pid}")
			pid, _ = strconv.Atoi(strings.TrimSpace(out))
			screen, _ := a.Screen(x.capture("survivor", false))
			return pid > 0 && screen == ScreenReady
		}, wait, tick)
		leader, err := proc.Lookup(pid)
		require.NoError(t, err)
		x.must("kill-session", "-t", "=survivor")
		time.Sleep(time.Second)
		t.Logf("a second after kill-session, the group runs: %v", proc.GroupRunning(pid))
		_, err = leader.EndGroup(t.Context(), syscall.SIGHUP, time.Second, 20*time.Millisecond)
		require.NoError(t, err)
		assert.False(t, proc.GroupRunning(pid))
	})
	check("headless_without_auth_exits_41", func(t *testing.T) {
		bare := t.TempDir()
		b, err := New("gemini", schema.Harness{Command: bin, Env: map[string]string{"HOME": bare}})
		require.NoError(t, err)
		id := uuid.NewString()
		argv, stdin := b.(Headless).HeadlessArgv(id, "hello", false)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdin = work, []string{"HOME=" + bare, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: %s", err, out)
		assert.Equal(t, 41, exit.ExitCode())
		assert.Equal(t, CauseAuthMissing, ExitCause(b, exit.ExitCode()))
		assert.Contains(t, string(out), "Please set an Auth method")
		tr, err := b.Transcript(work, id)
		require.NoError(t, err)
		assert.Empty(t, tr.Path, "a fresh turn that failed for want of auth leaves no chat file")
	})
	wg.Wait()
}

// TestGeminiRetention reproduces the data loss that Provision prevents,
// with the real CLI's own session retention: a conversation, and a file
// of a killed resume that shares its 8-character short id and holds
// nothing to resume. A start of the CLI in that project without the
// provisioned settings deletes both; with them, both stay. It needs the
// real CLI (LOOPD_REAL_GEMINI).
func TestGeminiRetention(t *testing.T) {
	bin := os.Getenv("LOOPD_REAL_GEMINI")
	if bin == "" {
		t.Skip("LOOPD_REAL_GEMINI is not set")
	}
	for _, provisioned := range []bool{false, true} {
		t.Run(map[bool]string{false: "unprovisioned_loses_it", true: "provisioned_keeps_it"}[provisioned], func(t *testing.T) {
			home := t.TempDir()
			x := newTmuxServer(t, home)
			endGroupsAtCleanup(t, x)
			work, err := filepath.EvalSymlinks(t.TempDir())
			require.NoError(t, err)
			a, err := New("gemini", schema.Harness{Command: bin, Env: map[string]string{"GEMINI_CLI_HOME": home}})
			require.NoError(t, err)
			config := filepath.Join(home, ".gemini")
			chats := filepath.Join(config, "tmp", "proj", "chats")
			require.NoError(t, os.MkdirAll(chats, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(config, "projects.json"), []byte(`{"projects":{"`+work+`":"proj"}}`), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(config, "tmp", "proj", ".project_root"), []byte(work), 0o600))
			id := uuid.NewString()
			conversation := filepath.Join(chats, "session-2026-11-01T10-00-"+id[:8]+".jsonl")
			leftover := filepath.Join(chats, "session-2026-11-02T10-00-"+id[:8]+".jsonl")
			chatFile(t, conversation, id, geminiContext, geminiUser("the conversation"))
			chatFile(t, leftover, id, geminiContext)
			if provisioned {
				require.NoError(t, a.(Provisioner).Provision(""))
			}
			tr, err := a.Transcript(work, id)
			require.NoError(t, err)
			require.True(t, tr.Exists)

			// Another conversation starts in the project; the retention
			// runs at its start, before the folder-trust dialog shows.
			x.spawn("other", work, nil, a.FreshArgv(uuid.NewString(), ""))
			require.Eventually(t, func() bool {
				screen, _ := a.Screen(x.capture("other", false))
				return screen == ScreenBlocked
			}, 30*time.Second, 100*time.Millisecond)
			time.Sleep(2 * time.Second) // the retention runs in the background of the start
			_, errConv := os.Stat(conversation)
			_, errLeft := os.Stat(leftover)
			if provisioned {
				assert.NoError(t, errConv, "the conversation survives")
				assert.NoError(t, errLeft)
				tr, err := a.Transcript(work, id)
				require.NoError(t, err)
				assert.True(t, tr.Exists)
				return
			}
			assert.ErrorIs(t, errConv, os.ErrNotExist, "the CLI's retention deleted the conversation with its short-id twin")
			assert.ErrorIs(t, errLeft, os.ErrNotExist)
		})
	}
}
