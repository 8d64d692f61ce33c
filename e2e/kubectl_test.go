package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// TestReadVerbsOnALiveItem drives the read verbs of the real binary
// against a daemon that runs an agent, naming the item in another case
// than GitHub's: describe shows where it runs and how to attach, events
// --follow streams the next delivery as it happens, logs prints the
// agent's pane, attach execs tmux on the exact session, and an unknown
// item is an error.
func TestReadVerbsOnALiveItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	r := startWithComment(t, e, "the first comment "+uuid.NewString())
	key := strings.ToLower(keyIssue.String())
	session := desired.SessionName(keyIssue)
	id := r.Status.HarnessSessionID

	out := e.mustRun(t, "describe", key)
	for _, want := range []string{
		"Name:", keyIssue.String(),
		"Session:", session,
		"tmux -L " + e.socket + " attach -t =" + session,
		e.transcriptPath(t, keyIssue, id) + " (",
		id,
		string(journal.SessionSpawned),
	} {
		assert.Contains(t, out, want)
	}
	// The payload's title and the item's page on GitHub.
	assert.Regexp(t, `(?m)^Title: +"Spelling error in the README file"$`, out)
	assert.Regexp(t, `(?m)^URL: +https://github.com/Codertocat/Hello-World/issues/1$`, out)
	assert.Contains(t, e.mustRun(t, "get", "-o", "wide", key), `"Spelling error in the README file"`, "-o wide has the title")
	assert.NotContains(t, out, "(not there)", "the transcript is there")

	// events --follow streams the next delivery's events as they happen.
	follow := startFollow(t, e, "events", key, "--follow", "-o", "json", "--type", "dispatch.delivered")
	body := "the second comment " + uuid.NewString()
	delivery := sendComment(t, e, body)
	waitDelivered(t, e, delivery, waitLong)
	e.waitFor(t, func() bool { return strings.Contains(follow.out.String(), delivery) }, waitShort, "events --follow printed the delivery")
	require.NoError(t, follow.interrupt(), "ctrl-C ends events --follow with exit 0")
	var row struct {
		Name     string
		WorkItem string `json:"work_item"`
		Attrs    map[string]any
	}
	lines := strings.Split(strings.TrimSpace(follow.out.String()), "\n")
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &row))
	assert.Equal(t, "dispatch.delivered", row.Name)
	assert.Equal(t, keyIssue.String(), row.WorkItem)
	assert.Equal(t, delivery, row.Attrs["delivery"])

	// logs: the pane as tmux captures it, history included, each line's
	// padding and the empty rows below the last trimmed.
	e.settle(t)
	logs := e.mustRun(t, "logs", key)
	screen, err := e.tmux(t, "capture-pane", "-p", "-J", "-S", "-", "-t", paneTarget(keyIssue))
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(logs))
	trimmed := regexp.MustCompile(`(?m)[ \t]+$`).ReplaceAllString(screen, "")
	assert.Equal(t, strings.TrimRight(trimmed, "\n")+"\n", logs)

	// attach: a tmux that only shows the argv it was given; the session is
	// marked with who attaches ($SUDO_USER first) in the same invocation.
	bin := t.TempDir()
	realTmux, err := exec.LookPath("tmux")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(bin, "tmux"), []byte("#!/bin/sh\n"+
		"if [ \"$3\" = set-option ]; then echo \"argv: $*\"; exit 0; fi\nexec "+realTmux+" \"$@\"\n"), 0o755))
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	_, stderr, code := e.runEnv(t, []string{path, "SUDO_USER=octo"}, "attach", key)
	assert.Equal(t, 1, code, "no terminal, no attach")
	assert.Contains(t, stderr, "attach needs a terminal: stdin is not a tty")
	stdout, stderr, code := e.runIn(t, openPTY(t), []string{path, "SUDO_USER=octo"}, "attach", key)
	require.Zero(t, code, stderr)
	assert.Equal(t, "argv: -L "+e.socket+" set-option -t ="+session+": @loopd-attender octo ; set-hook -t ="+session+
		": client-detached set-option -u @loopd-attender ; attach -t ="+session+"\n", stdout)

	// Held, the item has no session: attach says so, get still lists it.
	e.mustRun(t, "hold", key)
	e.waitFor(t, func() bool { return !e.hasSession(t, keyIssue) }, waitLong, "the hold stopped the session")
	_, stderr, code = e.runEnv(t, []string{path}, "attach", key)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "work item "+keyIssue.String()+" has no tmux session "+session)
	assert.Contains(t, e.mustRun(t, "get", "-o", "name"), keyIssue.String())

	for _, verb := range []string{"describe", "events", "logs", "attach", "get", "release"} {
		_, stderr, code := e.run(t, verb, "codertocat/hello-world#99")
		assert.Equal(t, 1, code, verb)
		assert.Equal(t, "loopd: work item codertocat/hello-world#99 not found\n", stderr, verb)
	}
}

// follower is a loopd command left running, its stdout collected.
type follower struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
}

// startFollow starts `loopd args…` on e's config; it is killed at cleanup
// if still running.
func startFollow(t *testing.T, e *env, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{out: &lockedBuffer{}, done: make(chan error, 1)}
	f.cmd = exec.CommandContext(ctx, loopdBin, append(args, "--config", e.configPath)...)
	f.cmd.Env = e.procEnv()
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	require.NoError(t, f.cmd.Start())
	go func() { f.done <- f.cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

// interrupt sends SIGINT, as ctrl-C does, and returns how the command
// ended.
func (f *follower) interrupt() error {
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		return err
	}
	err := <-f.done
	f.done <- err // for the cleanup
	return err
}

// lockedBuffer is a bytes.Buffer safe for a writing process and a
// reading test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
