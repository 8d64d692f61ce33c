package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/harness"
	"github.com/loopd/loopd/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/tmux"
	"github.com/loopd/loopd/webhook"
)

// Binaries built once by TestMain.
var (
	loopdBin      string
	fakeClaudeBin string
)

// Timeouts of the waits. They bound how long a broken build takes to fail;
// a passing run waits only as long as the condition takes.
const (
	waitShort = 10 * time.Second
	waitLong  = 30 * time.Second
	tick      = 50 * time.Millisecond
)

// secretEnv is the env var the test configs name for the webhook secret.
const secretEnv = "LOOPD_E2E_SECRET"

// The work items of the fixtures: every payload is for Codertocat/Hello-World,
// issue 1 and pull request 2, sent by Codertocat.
var (
	keyIssue = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 1}
	keyPR    = desired.Key{Owner: "Codertocat", Repo: "Hello-World", Number: 2}
)

// uuidPattern is a canonical UUID, as minted for --session-id.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if _, err := exec.LookPath("tmux"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: tmux not found; skipping the end-to-end tests")
		return 0
	}
	dir, err := os.MkdirTemp("", "loopd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	loopdBin = filepath.Join(dir, "loopd")
	fakeClaudeBin = filepath.Join(dir, "fakeclaude")
	for out, pkg := range map[string]string{loopdBin: "./cmd/loopd", fakeClaudeBin: "./testdata/fakeclaude"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = ".."
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", pkg, err, b)
			return 1
		}
	}
	return m.Run()
}

// fixturesDir holds the GitHub webhook example payloads
// (testdata/github-webhooks/README.md says where they come from).
var fixturesDir = filepath.Join("..", "testdata", "github-webhooks")

// envOpts configures newEnv. Zero fields take the defaults noted.
type envOpts struct {
	// Harness is the claude-code harness command; default the fake CLI.
	Harness string
	// HarnessEnv is added to the harness env (CLAUDE_CONFIG_DIR and, for
	// the fake CLI, FAKECLAUDE_ARGV_LOG are always set).
	HarnessEnv map[string]string
	// Policy overrides keys of webhooks.ghWebhook.routing.tmux, e.g.
	// {"restartPolicy": "Never"}.
	Policy map[string]any
	// IntervalSeconds is reconcile.intervalSeconds; default 1.
	IntervalSeconds int
	// ProcessName is the harness's processName (the pane's foreground
	// process while it runs); default none.
	ProcessName string
}

// env is one isolated loopd installation: config, state dir, workdir root,
// Claude config dir, tmux socket, port and secret, all unique to one test.
type env struct {
	dir        string // the test's temp dir
	configPath string
	stateDir   string
	workRoot   string // physical path; workdirs are <workRoot>/<owner>/<repo>/<number>
	claudeDir  string // CLAUDE_CONFIG_DIR of the harness
	socket     string
	listen     string // host:port of the webhook server
	secret     string
	argvPath   string // FAKECLAUDE_ARGV_LOG
	harnessCmd string
	harnessEnv map[string]string
	config     map[string]any // as last written

	// daemonEnv is added to the environment of `loopd serve` (NAME=value),
	// after procEnv's.
	daemonEnv []string

	daemon     *exec.Cmd
	daemonDone chan struct{}
	daemonLog  string
	daemonRuns int
}

var socketSeq atomic.Int64

// newEnv prepares an env and writes its config; it does not start the
// daemon. Cleanup stops the daemon, kills the tmux server and, when the
// test failed, logs the daemon's stderr and the journal.
func newEnv(t *testing.T, opts envOpts) *env {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	e := &env{
		dir:        dir,
		configPath: filepath.Join(dir, "loopd.yaml"),
		stateDir:   filepath.Join(dir, "state"),
		workRoot:   filepath.Join(dir, "agents"),
		claudeDir:  filepath.Join(dir, "claude"),
		socket:     fmt.Sprintf("loopd-e2e-%d-%d", os.Getpid(), socketSeq.Add(1)),
		listen:     freeAddr(t),
		secret:     "e2e-" + uuid.NewString(),
		argvPath:   filepath.Join(dir, "argv.log"),
		harnessCmd: opts.Harness,
	}
	if e.harnessCmd == "" {
		e.harnessCmd = fakeClaudeBin
	}
	require.NoError(t, os.MkdirAll(e.workRoot, 0o755))
	require.NoError(t, os.MkdirAll(e.claudeDir, 0o755))
	// An onboarded Claude config that trusts the workdir root (trust is
	// inherited by subdirectories), so the TUI starts without dialogs.
	claudeJSON, err := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"projects":               map[string]any{e.workRoot: map[string]any{"hasTrustDialogAccepted": true}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(e.claudeDir, ".claude.json"), claudeJSON, 0o600))

	e.harnessEnv = map[string]string{"CLAUDE_CONFIG_DIR": e.claudeDir, "FAKECLAUDE_ARGV_LOG": e.argvPath}
	maps.Copy(e.harnessEnv, opts.HarnessEnv)
	policy := map[string]any{
		"resumeOnRespawn":       true,
		"resumeProbeSeconds":    1,
		"restartPolicy":         "OnFailure",
		"backoffInitialSeconds": 1,
		"backoffMaxSeconds":     2,
	}
	maps.Copy(policy, opts.Policy)
	interval := opts.IntervalSeconds
	if interval == 0 {
		interval = 1
	}
	e.config = map[string]any{
		"stateDir":  e.stateDir,
		"tmux":      map[string]any{"socket": e.socket},
		"reconcile": map[string]any{"intervalSeconds": interval},
		"harnesses": map[string]any{
			"claude-code": map[string]any{"command": e.harnessCmd, "env": e.harnessEnv},
		},
		"webhooks": map[string]any{
			"ghWebhook": map[string]any{
				"listen":          e.listen,
				"path":            "/webhook",
				"secretEnv":       secretEnv,
				"authorizedUsers": []string{"Codertocat"},
				"routing": map[string]any{
					"repos": map[string]any{
						"*": map[string]any{
							"harness": "claude-code",
							"workdir": filepath.Join(e.workRoot, "{{.Owner}}", "{{.Repo}}", "{{.Number}}"),
						},
					},
					"tmux": policy,
				},
			},
		},
	}
	if opts.ProcessName != "" {
		e.config["harnesses"].(map[string]any)["claude-code"].(map[string]any)["processName"] = opts.ProcessName
	}
	e.writeConfig(t)
	t.Cleanup(func() { e.cleanup(t) })
	return e
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// writeConfig writes e.config to e.configPath as YAML.
func (e *env) writeConfig(t *testing.T) {
	t.Helper()
	b, err := yaml.Marshal(e.config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.configPath, b, 0o600))
}

// policy returns the routing.tmux map of e.config, for edits before
// writeConfig.
func (e *env) policy() map[string]any {
	return e.config["webhooks"].(map[string]any)["ghWebhook"].(map[string]any)["routing"].(map[string]any)["tmux"].(map[string]any)
}

func (e *env) cleanup(t *testing.T) {
	if e.daemon != nil {
		e.signalDaemon(t, syscall.SIGTERM)
	}
	e.killServer(t)
	if !t.Failed() {
		return
	}
	if b, err := os.ReadFile(e.daemonLog); err == nil {
		t.Logf("loopd serve stderr:\n%s", b)
	}
	if out, _, _ := e.run(t, "events"); out != "" {
		t.Logf("loopd events:\n%s", out)
	}
	if out, _, _ := e.run(t, "get"); out != "" {
		t.Logf("loopd get:\n%s", out)
	}
}

// killServer kills the env's tmux server and waits until the processes
// that ran in its panes are gone, so that none still writes into the
// test's temp dir when it is removed (the real CLI saves files as it
// exits on SIGHUP).
func (e *env) killServer(t *testing.T) {
	var pids []int
	if out, err := e.tmux(t, "list-panes", "-a", "-F", "#{pane_pid}"); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	_ = exec.Command("tmux", "-L", e.socket, "kill-server").Run()
	// kill-server leaves the socket file, and serve's lock file sits
	// beside it.
	if path, err := tmux.SocketPath(e.socket); err == nil {
		_ = os.Remove(path)
		_ = os.Remove(path + ".loopd-lock")
	}
	deadline := time.Now().Add(waitShort)
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(tick)
		}
	}
}

// running reports whether process pid exists and is not a zombie (a
// reparented child may wait a while for its reaper).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the parenthesized command name, which may itself
	// hold spaces or parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// procEnv is the environment of every loopd process: the test's own,
// without anything that would tie tmux or claude to an outer session, plus
// the webhook secret.
func (e *env) procEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "TMUX" || name == "TMUX_PANE" || name == "CLAUDECODE" || name == secretEnv {
			continue
		}
		out = append(out, kv)
	}
	return append(out, secretEnv+"="+e.secret)
}

// start runs `loopd serve` and waits until /healthz answers. Its stderr
// goes to a file that cleanup logs when the test fails.
func (e *env) start(t *testing.T) {
	t.Helper()
	require.Nil(t, e.daemon, "daemon already running")
	e.daemonRuns++
	e.daemonLog = filepath.Join(e.dir, fmt.Sprintf("serve.%d.log", e.daemonRuns))
	logFile, err := os.Create(e.daemonLog)
	require.NoError(t, err)
	cmd := exec.Command(loopdBin, "serve", "--config", e.configPath, "--log-level", "debug")
	cmd.Env = append(e.procEnv(), e.daemonEnv...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	e.daemon, e.daemonDone = cmd, done
	client := &http.Client{Timeout: time.Second}
	require.Eventually(t, func() bool {
		select {
		case <-done:
			return true // fail below with the log
		default:
		}
		resp, err := client.Get("http://" + e.listen + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, waitShort, tick, "loopd serve did not become healthy")
	select {
	case <-done:
		b, _ := os.ReadFile(e.daemonLog)
		t.Fatalf("loopd serve exited at start:\n%s", b)
	default:
	}
}

// stop ends the daemon with SIGTERM and waits for it.
func (e *env) stop(t *testing.T) {
	t.Helper()
	e.signalDaemon(t, syscall.SIGTERM)
}

// kill9 ends the daemon with SIGKILL and waits for it; the tmux server and
// its agents live on.
func (e *env) kill9(t *testing.T) {
	t.Helper()
	e.signalDaemon(t, syscall.SIGKILL)
}

func (e *env) signalDaemon(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if e.daemon == nil {
		return
	}
	_ = e.daemon.Process.Signal(sig)
	select {
	case <-e.daemonDone:
	case <-time.After(waitShort):
		_ = e.daemon.Process.Kill()
		<-e.daemonDone
		t.Errorf("loopd serve did not exit within %s of %s", waitShort, sig)
	}
	e.daemon, e.daemonDone = nil, nil
}

// webhookURL is where the daemon listens for deliveries.
func (e *env) webhookURL() string { return "http://" + e.listen + "/webhook" }

// payload reads the fixture (e.g. "issue_comment.created.1.json"), applies
// mutate to its parsed JSON (numbers kept exact) and returns the new body.
func (e *env) payload(t *testing.T, fixture string, mutate func(map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixturesDir, fixture))
	require.NoError(t, err)
	if mutate == nil {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	mutate(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// eventOf is the X-GitHub-Event of a fixture: its name up to the first dot.
func eventOf(fixture string) string {
	event, _, _ := strings.Cut(fixture, ".")
	return event
}

// replay delivers the fixture, edited by mutate (may be nil), signed with
// the env's secret, as delivery deliveryID ("" for a new GUID), and returns
// the HTTP status.
func (e *env) replay(t *testing.T, fixture, deliveryID string, mutate func(map[string]any)) int {
	t.Helper()
	body := e.payload(t, fixture, mutate)
	return e.post(t, eventOf(fixture), deliveryID, body, webhook.Sign([]byte(e.secret), body))
}

// post delivers body as event with the given signature header ("" for
// none) and returns the HTTP status.
func (e *env) post(t *testing.T, event, deliveryID string, body []byte, signature string) int {
	t.Helper()
	if deliveryID == "" {
		deliveryID = uuid.NewString()
	}
	req, err := http.NewRequest(http.MethodPost, e.webhookURL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", deliveryID)
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	resp, err := (&http.Client{Timeout: waitShort}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// withComment sets the payload's comment body.
func withComment(body string) func(map[string]any) {
	return func(m map[string]any) { m["comment"].(map[string]any)["body"] = body }
}

// withNumber sets the issue or pull request number of the payload.
func withNumber(n int) func(map[string]any) {
	return func(m map[string]any) {
		for _, k := range []string{"issue", "pull_request"} {
			if o, ok := m[k].(map[string]any); ok {
				o["number"] = n
			}
		}
		if _, ok := m["number"]; ok {
			m["number"] = n
		}
	}
}

// all applies every mutation in order.
func all(muts ...func(map[string]any)) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range muts {
			f(m)
		}
	}
}

// openStore opens the env's SQLite store; the caller closes it. It may be
// opened while the daemon runs (WAL).
func (e *env) openStore(t *testing.T) *desired.SQLite {
	t.Helper()
	s, err := desired.OpenSQLite(context.Background(), filepath.Join(e.stateDir, "loopd.db"))
	require.NoError(t, err)
	return s
}

// records returns every work item as the store holds it now.
func (e *env) records(t *testing.T) []desired.Record {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	rs, err := s.Records(context.Background())
	require.NoError(t, err)
	return rs
}

// record returns one work item; ok is false when there is none.
func (e *env) record(t *testing.T, k desired.Key) (desired.Record, bool) {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	r, err := s.Get(context.Background(), k)
	if errors.Is(err, desired.ErrNotFound) {
		return desired.Record{}, false
	}
	require.NoError(t, err)
	return r, true
}

// ingestComment queues a comment with body on issue k straight into the
// store, as the webhook would, with no daemon; it returns the delivery id.
func (e *env) ingestComment(t *testing.T, k desired.Key, body string) string {
	t.Helper()
	id := uuid.NewString()
	s := e.openStore(t)
	defer s.Close()
	prompt := webhook.Render(webhook.PromptInput{
		Event: "issue_comment", Action: "created", WorkItem: k.String(), Sender: "Codertocat", DeliveryID: id, Body: body,
	})
	res, err := s.Ingest(context.Background(), desired.Ingest{
		DeliveryID: id, Key: k, Kind: desired.KindIssue, Harness: "claude-code", Cwd: e.workdir(k),
		Delivery: &desired.Delivery{ID: id, Event: "issue_comment", Action: "created", Sender: "Codertocat",
			Prompt: prompt, ReceivedAt: time.Now().UTC()},
	})
	require.NoError(t, err)
	require.True(t, res.Queued)
	return id
}

// events returns the whole journal, oldest first.
func (e *env) events(t *testing.T) []journal.Event {
	t.Helper()
	s := e.openStore(t)
	defer s.Close()
	evs, err := s.Events(context.Background(), desired.EventFilter{})
	require.NoError(t, err)
	return evs
}

// eventsNamed returns the journal rows called name for k (every item when
// k is the zero Key), oldest first.
func (e *env) eventsNamed(t *testing.T, name journal.Name, k desired.Key) []journal.Event {
	t.Helper()
	var out []journal.Event
	for _, ev := range e.events(t) {
		if ev.Name == name && (k == desired.Key{} || ev.WorkItem == k.String()) {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits until cond holds, failing the test after timeout.
func (e *env) waitFor(t *testing.T, cond func() bool, timeout time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, timeout, tick, msgAndArgs...)
}

// waitPhase waits until k's record is in phase and returns it.
func (e *env) waitPhase(t *testing.T, k desired.Key, phase desired.Phase, timeout time.Duration) desired.Record {
	t.Helper()
	var r desired.Record
	e.waitFor(t, func() bool {
		var ok bool
		r, ok = e.record(t, k)
		return ok && r.Status.Phase == phase
	}, timeout, "%s never reached phase %s", k, phase)
	return r
}

// waitEvent waits until the journal holds at least n rows called name for
// k and returns them.
func (e *env) waitEvent(t *testing.T, name journal.Name, k desired.Key, n int, timeout time.Duration) []journal.Event {
	t.Helper()
	var evs []journal.Event
	e.waitFor(t, func() bool {
		evs = e.eventsNamed(t, name, k)
		return len(evs) >= n
	}, timeout, "journal never had %d × %s for %s", n, name, k)
	return evs
}

// argvLog returns the argv of every process start of the fake CLI, in
// order (FAKECLAUDE_ARGV_LOG, one JSON array a line).
func (e *env) argvLog(t *testing.T) [][]string {
	t.Helper()
	return readJSONLines[[]string](t, e.argvPath)
}

// readJSONLines decodes a file of one JSON value a line; a missing file is
// empty.
func readJSONLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var v T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "%s: line %q", path, sc.Text())
		out = append(out, v)
	}
	require.NoError(t, sc.Err())
	return out
}

// flagValue returns the value after flag in argv, and whether flag is there.
func flagValue(argv []string, flag string) (string, bool) {
	i := slices.Index(argv, flag)
	if i < 0 || i+1 >= len(argv) {
		return "", i >= 0
	}
	return argv[i+1], true
}

// workdir is where the route renders k's workdir.
func (e *env) workdir(k desired.Key) string {
	return filepath.Join(e.workRoot, k.Owner, k.Repo, strconv.Itoa(k.Number))
}

// transcriptPath returns where the harness keeps conversation id of k, by
// the adapter's own path rule.
func (e *env) transcriptPath(t *testing.T, k desired.Key, id string) string {
	t.Helper()
	ad, err := harness.New("claude-code", schema.Harness{Command: e.harnessCmd, Env: e.harnessEnv})
	require.NoError(t, err)
	tr, err := ad.Transcript(e.workdir(k), id)
	require.NoError(t, err)
	return tr.Path
}

// transcriptLines returns the parsed JSON lines of conversation id of k;
// none when the file does not exist yet.
func (e *env) transcriptLines(t *testing.T, k desired.Key, id string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(e.transcriptPath(t, k, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var out []map[string]any
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		// A line being written may be incomplete; the next read sees it whole.
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// userTurns returns the text of every user message of conversation id of
// k, in order. Content is a string, or text blocks that are joined.
func (e *env) userTurns(t *testing.T, k desired.Key, id string) []string {
	t.Helper()
	var out []string
	for _, l := range e.transcriptLines(t, k, id) {
		if l["type"] != "user" {
			continue
		}
		msg, _ := l["message"].(map[string]any)
		switch c := msg["content"].(type) {
		case string:
			out = append(out, c)
		case []any:
			var b strings.Builder
			for _, blk := range c {
				if m, ok := blk.(map[string]any); ok && m["type"] == "text" {
					s, _ := m["text"].(string)
					b.WriteString(s)
				}
			}
			out = append(out, b.String())
		}
	}
	return out
}

// countContaining returns how many of turns contain sub.
func countContaining(turns []string, sub string) int {
	n := 0
	for _, s := range turns {
		if strings.Contains(s, sub) {
			n++
		}
	}
	return n
}

// passes returns loopd_reconcile_passes_total from the daemon's /metrics.
func (e *env) passes(t *testing.T) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: waitShort}).Get("http://" + e.listen + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "loopd_reconcile_passes_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return int(n)
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// settle waits until the daemon has finished two more reconcile passes: at
// least one of them started after the call, so whatever the state at the
// call leads to has been planned and carried out.
func (e *env) settle(t *testing.T) {
	t.Helper()
	n := e.passes(t)
	e.waitFor(t, func() bool { return e.passes(t) >= n+2 }, waitShort, "the daemon ran no reconcile pass")
}

// tmux runs a tmux command on the env's server and returns its stdout.
func (e *env) tmux(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", e.socket}, args...)...).Output()
	return string(out), err
}

// sessions returns the names of the tmux sessions now on the env's server;
// none when no server runs.
func (e *env) sessions(t *testing.T) []string {
	t.Helper()
	out, err := e.tmux(t, "list-sessions", "-F", "#{session_name}")
	if err != nil {
		return nil
	}
	return strings.Fields(out)
}

// hasSession reports whether k's tmux session exists.
func (e *env) hasSession(t *testing.T, k desired.Key) bool {
	t.Helper()
	return slices.Contains(e.sessions(t), desired.SessionName(k))
}

// panePID returns the pid of the process in k's pane (the harness itself:
// tmux starts it without a shell); 0 when there is no such pane.
func (e *env) panePID(t *testing.T, k desired.Key) int {
	t.Helper()
	out, err := e.tmux(t, "list-panes", "-a", "-F", "#{session_name} #{pane_pid} #{pane_dead}")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == desired.SessionName(k) && f[2] == "0" {
			pid, err := strconv.Atoi(f[1])
			require.NoError(t, err)
			return pid
		}
	}
	return 0
}

// paneStartCommand returns #{pane_start_command} of k's pane; "" when there
// is no such pane.
func (e *env) paneStartCommand(t *testing.T, k desired.Key) string {
	t.Helper()
	out, err := e.tmux(t, "list-panes", "-t", "="+desired.SessionName(k)+":", "-F", "#{pane_start_command}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// killPane sends SIGKILL to the harness in k's pane, which must be running.
func (e *env) killPane(t *testing.T, k desired.Key) {
	t.Helper()
	pid := e.panePID(t, k)
	require.NotZero(t, pid, "no live pane for %s", k)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// run runs `loopd <args> --config <config>` to completion and returns its
// stdout, stderr and exit code.
func (e *env) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return e.runEnv(t, nil, args...)
}

// runEnv is run with extra environment entries ("NAME=value"), which
// override the inherited ones.
func (e *env) runEnv(t *testing.T, extra []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cmd := exec.CommandContext(ctx, loopdBin, append(args, "--config", e.configPath)...)
	cmd.Env = append(e.procEnv(), extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		require.NoError(t, err)
	}
	return out.String(), errb.String(), code
}

// mustRun is run for a command that must exit 0; it returns stdout.
func (e *env) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.run(t, args...)
	require.Zero(t, code, "loopd %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	return out
}
