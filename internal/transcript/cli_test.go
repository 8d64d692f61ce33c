package transcript

import (
	"encoding/json"
	"log/slog"
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

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux/tmuxtest"
	"github.com/loopd/loopd/schema"
)

// The tests below move a conversation made by a CLI in tmux from one
// "host" (a config dir, a workdir and a tmux server of its own) to
// another through the Mover and the fake store, resume it there, and
// check with the adapter's own delivery check (TranscriptFrames) that the
// next prompt lands in the one conversation. They run on the fake CLIs
// under testdata, and on the real ones when LOOPD_REAL_CLAUDE or
// LOOPD_REAL_CODEX names its binary (Claude Code 2.1.197 and Codex
// 0.171.0 were measured; both run offline, their prompts unanswered).

// Six CLIs may start at once; on two busy cores the real ones can take
// several seconds each.
const wait, tick = 30 * time.Second, 100 * time.Millisecond

// buildFake builds the fake CLI testdata/<name> and returns its path.
func buildFake(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "../../testdata/"+name).CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

// host is one machine of the test: a home, a workdir, a private tmux
// server (stopped, its panes' process groups killed, at cleanup) and a
// Mover over the shared store.
type host struct {
	t      *testing.T
	name   string
	home   string
	work   string
	socket string
	ad     harness.Adapter
	mover  *Mover
	events *events
}

func newHost(t *testing.T, name string, store Store) *host {
	t.Helper()
	socket := tmuxtest.Socket(t, "transcript")
	home, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	h := &host{t: t, name: name, home: home, work: filepath.Join(home, "work", "acme-api-7"), events: &events{},
		socket: socket}
	require.NoError(t, os.MkdirAll(h.work, 0o700))
	t.Cleanup(h.stop)
	h.tmux("new-session", "-d", "-s", "_idle", "--", "sleep", "600", ";", "set", "-g", "remain-on-exit", "on")
	return h
}

// use makes ad the host's harness (named "h") and its Mover's.
func (h *host) use(ad harness.Adapter, store Store) {
	h.ad = ad
	rec := journal.NewRecorder(slog.New(slog.DiscardHandler), h.events, time.Now)
	h.mover = NewMover(store, map[string]harness.Adapter{"h": ad}, h.name, rec)
}

func (h *host) run(args ...string) (string, error) {
	cmd := exec.Command("tmux", append([]string{"-L", h.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = []string{"HOME=" + h.home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h *host) tmux(args ...string) {
	h.t.Helper()
	out, err := h.run(args...)
	require.NoError(h.t, err, out)
}

func (h *host) spawn(name string, argv []string) {
	h.t.Helper()
	args := []string{"new-session", "-d", "-s", name, "-x", "120", "-y", "40", "-c", h.work, "-e", "HOME=" + h.home}
	// The item's own state, as the executor gives a spawn without a
	// sandbox (a per-item CODEX_HOME, GEMINI_CLI_HOME).
	state, err := harness.ItemState(h.ad, h.work, "", false)
	require.NoError(h.t, err)
	env := h.ad.Env()
	maps.Copy(env, state.Env)
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	h.tmux(append(append(args, "--"), argv...)...)
}

func (h *host) capture(name string) string {
	out, _ := h.run("capture-pane", "-p", "-S", "-", "-t", "="+name+":")
	return out
}

// stop ends the host as a lost machine ends: every pane's process group
// is killed (Gemini outlives kill-session), then the server; it waits
// for the processes to go, so that none writes its transcript after.
func (h *host) stop() {
	pids, _ := h.run("list-panes", "-a", "-F", "#{pane_pid}")
	var procs []int
	for _, f := range strings.Fields(pids) {
		if pid, err := strconv.Atoi(f); err == nil {
			procs = append(procs, pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	_, _ = h.run("kill-server")
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range procs {
		for syscall.Kill(-pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// framed returns a prompt carrying body in the frame of delivery did, as
// loopd renders an event, and the frame the adapter's check looks for.
func framed(did, body string) (string, desired.Frame) {
	prompt := "[loopd] issue_comment.created on acme/api#7 by u (delivery " + did + ")\n" + desired.FrameBegin(did) + body + desired.FrameEnd(did, body)
	return prompt, desired.FrameOf(desired.Delivery{ID: did, Prompt: prompt})
}

// landed waits until the transcript of id for h's workdir holds each of
// frames whole, by the adapter's own check, and returns it.
func (h *host) landed(id, session string, frames ...desired.Frame) harness.Transcript {
	h.t.Helper()
	var tr harness.Transcript
	ok := assert.Eventually(h.t, func() bool {
		var err error
		if tr, err = h.ad.Transcript(h.work, id); err != nil || !tr.Exists {
			return false
		}
		found, err := h.ad.TranscriptFrames(tr, frames)
		if err != nil {
			return false
		}
		for _, f := range frames {
			if !found[f.ID].Whole {
				return false
			}
		}
		return true
	}, wait, tick)
	if !ok {
		h.t.Fatalf("%s: the transcript of %s does not hold the prompts; screen:\n%s", h.name, id, h.capture(session))
	}
	return tr
}

// claudeConfig makes h's Claude Code config dir: onboarded, its workdir
// trusted.
func claudeConfig(t *testing.T, h *host, bin string) harness.Adapter {
	t.Helper()
	config := filepath.Join(h.home, "claude")
	settings, err := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"projects":               map[string]any{h.work: map[string]bool{"hasTrustDialogAccepted": true}},
	})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(config, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(config, ".claude.json"), settings, 0o600))
	ad, err := harness.New("h", schema.Harness{Adapter: harness.AdapterClaudeCode, Command: bin, Env: map[string]string{
		"CLAUDE_CONFIG_DIR": config,
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
		"FAKECLAUDE_NOT_LOGGED_IN":                             "1", // the fake's stand-in for the real CLI offline
	}})
	require.NoError(t, err)
	return ad
}

// codexProvider is a model provider that needs no login (and never
// answers): the real CLI then skips its login screen.
var codexProvider = []string{"-c", "model_provider=loc", "-c", `model_providers.loc={name="loc",base_url="http://127.0.0.1:9/v1",wire_api="responses"}`}

func codexConfig(t *testing.T, h *host, bin string) harness.Adapter {
	t.Helper()
	home := filepath.Join(h.home, "codex")
	require.NoError(t, os.MkdirAll(home, 0o700)) // the real CLI refuses a CODEX_HOME that is missing
	ad, err := harness.New("h", schema.Harness{Adapter: harness.AdapterCodex, Command: bin, ExtraArgs: codexProvider,
		Env: map[string]string{"CODEX_HOME": home}})
	require.NoError(t, err)
	return ad
}

func geminiConfig(t *testing.T, h *host, bin string) harness.Adapter {
	t.Helper()
	ad, err := harness.New("h", schema.Harness{Adapter: harness.AdapterGemini, Command: bin,
		Env: map[string]string{"GEMINI_CLI_HOME": h.home, "FAKEGEMINI_AUTH": "1"}})
	require.NoError(t, err)
	require.NoError(t, ad.(harness.Provisioner).Provision(""))
	return ad
}

// moveConversation starts a conversation on host a, copies it into the
// store, restores it on host b under the next lease generation, resumes
// it there with a next prompt, and checks that the prompt lands in the
// one conversation, which goes on being copied from b.
func moveConversation(t *testing.T, bin string, config func(*testing.T, *host, string) harness.Adapter) {
	store := newFakeStore(map[desired.Key]int64{keyA: 1})
	a, b := newHost(t, "a", store), newHost(t, "b", store)
	a.use(config(t, a, bin), store)
	b.use(config(t, b, bin), store)

	first, firstFrame := framed(uuid.NewString(), "first comment, on host a\n")
	id := uuid.NewString()
	since := time.Now()
	a.spawn("fresh", a.ad.FreshArgv(id, first))
	if learner, ok := a.ad.(harness.SessionLearner); ok {
		// Codex mints the id at the first prompt.
		require.Eventually(t, func() bool {
			started, err := learner.SessionsStarted(a.work, since)
			if err != nil || len(started) == 0 {
				return false
			}
			id = started[0].ID
			return true
		}, wait, tick, "no rollout; screen:\n%s", a.capture("fresh"))
	}
	a.landed(id, "fresh", firstFrame)
	// Host a is lost: its agents die with it, after their last write.
	a.stop()
	r := desired.Record{Key: keyA, Spec: desired.Spec{Harness: "h"},
		Status: desired.Status{SessionState: desired.SessionState{HarnessSessionID: id}, WorkspaceState: desired.WorkspaceState{Workdir: a.work}}, Lease: desired.Lease{Owner: "a", Generation: 1}}
	require.NoError(t, a.mover.Ship(t.Context(), r))
	src, err := a.ad.Transcript(a.work, id)
	require.NoError(t, err)
	shipped, err := os.ReadFile(src.Path)
	require.NoError(t, err)
	require.Equal(t, string(shipped), string(store.stored(keyA, id)), "the whole transcript is in the store")

	// Host b takes the item over, in its own workdir and config dir.
	store.gen[keyA] = 2
	r.Lease = desired.Lease{Owner: "b", Generation: 2}
	r.Status.Workdir = b.work
	require.NoError(t, b.mover.Restore(t.Context(), r, id, b.work))
	next, nextFrame := framed(uuid.NewString(), "next comment, on host b\n")
	b.spawn("resume", b.ad.ResumeArgv(id, next))
	tr := b.landed(id, "resume", firstFrame, nextFrame)
	screen, why := b.ad.Screen(b.capture("resume"))
	assert.NotEqual(t, harness.ScreenBlocked, screen, "no dialog stands in the way (%s)", why)
	assert.NotContains(t, b.capture("resume"), "Working directory · resume", "no chooser of cwd")
	// One conversation: no other transcript of it was started there.
	siblings, err := filepath.Glob(filepath.Join(filepath.Dir(tr.Path), "*"+id[:8]+"*.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, []string{tr.Path}, siblings)

	// The conversation goes on being copied, from b, under b's lease.
	require.NoError(t, b.mover.Ship(t.Context(), r))
	stored := store.stored(keyA, id)
	assert.True(t, strings.HasPrefix(string(stored), string(shipped)), "what a copied stays")
	found, err := b.ad.TranscriptFrames(harness.Transcript{Known: true, Exists: true, Path: writeTemp(t, stored)}, []desired.Frame{nextFrame})
	require.NoError(t, err)
	assert.True(t, found[nextFrame.ID].Whole, "b's prompt reached the stored copy")
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stored.jsonl")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func TestConversationMovesWithItsItem(t *testing.T) {
	fakes := map[string]func(*testing.T, *host, string) harness.Adapter{
		"fakeclaude": claudeConfig, "fakecodex": codexConfig, "fakegemini": geminiConfig,
	}
	for name, config := range fakes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			moveConversation(t, buildFake(t, name), config)
		})
	}
	reals := map[string]func(*testing.T, *host, string) harness.Adapter{
		"LOOPD_REAL_CLAUDE": claudeConfig, "LOOPD_REAL_CODEX": codexConfig,
	}
	for env, config := range reals {
		t.Run(strings.ToLower(strings.TrimPrefix(env, "LOOPD_")), func(t *testing.T) {
			t.Parallel()
			bin := os.Getenv(env)
			if bin == "" {
				t.Skip(env + " is not set")
			}
			moveConversation(t, bin, config)
		})
	}
}
