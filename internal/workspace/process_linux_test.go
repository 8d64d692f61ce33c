package workspace_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopd/loopd/internal/proc"
	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
)

// cmdlines returns the command lines of the processes running now, read
// from /proc (what `ps -eo args` shows every local user).
func cmdlines() []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			out = append(out, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// TestPrepareOverHTTPKeepsTheTokenOffEveryCommandLine fetches from a real
// git http-backend that asks for basic authentication, with the token in
// the route's URL, and reads every process's command line while git talks
// to the server: the token is on none, not in the mirror's config, and not
// in the user's own credential store.
func TestPrepareOverHTTPKeepsTheTokenOffEveryCommandLine(t *testing.T) {
	const secret = "tok3nSECRET"
	r := workspacetest.NewRemote(t, workspacetest.Options{})
	home := t.TempDir()
	store := filepath.Join(home, "credentials")
	config := filepath.Join(home, ".gitconfig")
	if err := os.WriteFile(config, []byte("[credential]\n\thelper = store --file="+store+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", config)
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.Dir), "GIT_HTTP_EXPORT_ALL=1"}}
	var (
		mu                 sync.Mutex
		leaks              []string
		helperSeen, authed int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		for _, c := range cmdlines() {
			if strings.Contains(c, secret) {
				leaks = append(leaks, c)
			}
			if strings.Contains(c, "git-remote-http") {
				helperSeen++
			}
		}
		mu.Unlock()
		if u, p, ok := req.BasicAuth(); !ok || u != "user" || p != secret {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		authed++
		mu.Unlock()
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	host := srv.Listener.Addr().String()

	m := newManager(t)
	dir := filepath.Join(t.TempDir(), "w")
	res, err := m.Prepare(context.Background(), workspace.Checkout{
		URL: "http://user:" + secret + "@" + host + "/remote.git", Dir: dir, Mode: workspace.ModeIssue, Branch: "loopd/issue-1"})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if res.Commit != r.DefaultHead {
		t.Errorf("commit = %s, want %s", res.Commit, r.DefaultHead)
	}
	mu.Lock()
	seen, ok, leaked := helperSeen, authed, leaks
	mu.Unlock()
	if seen == 0 || ok == 0 {
		t.Fatalf("git-remote-http seen %d times, %d authenticated requests: the scan saw nothing", seen, ok)
	}
	for _, l := range leaked {
		t.Errorf("a command line shows the token: %s", l)
	}
	if b, _ := os.ReadFile(filepath.Join(res.Mirror, "config")); bytes.Contains(b, []byte(secret)) {
		t.Errorf("the mirror's config holds the token:\n%s", b)
	}
	if b, _ := os.ReadFile(store); bytes.Contains(b, []byte(secret)) {
		t.Errorf("the user's credential store got the token: %s", b)
	}

	// A wrong token fails for good, and the error does not show it.
	_, err = newManager(t).Prepare(context.Background(), workspace.Checkout{
		URL: "http://user:WRONGtok@" + host + "/remote.git", Dir: filepath.Join(t.TempDir(), "w"), Mode: workspace.ModeIssue, Branch: "b"})
	if workspace.ClassOf(err) != workspace.Permanent || err == nil || strings.Contains(err.Error(), "WRONGtok") {
		t.Errorf("Prepare with a wrong token = %v (%s), want a permanent failure without the token", err, workspace.ClassOf(err))
	}
}

// TestMirrorLockOutlivesAKilledDaemon kills, with SIGKILL, a process whose
// Manager is checking a clone out (a smudge filter that waits), as a
// daemon killed mid-operation: the kernel kills that git with it, and the
// filter git started, still running, keeps the mirror's lock, so a second
// Manager's operation on the mirror waits until the filter is gone.
func TestMirrorLockOutlivesAKilledDaemon(t *testing.T) {
	prepareAsChild()
	r := workspacetest.NewRemote(t, workspacetest.Options{Filter: "slow"})
	m := newManager(t)
	ctx := context.Background()
	first := filepath.Join(t.TempDir(), "first")
	if _, err := m.Prepare(ctx, workspace.Checkout{URL: r.URL, Dir: first, Mode: workspace.ModeIssue, Branch: "b"}); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(t.TempDir(), "filter")
	child := slowChild(t, "TestMirrorLockOutlivesAKilledDaemon", m.Root, r.URL, filepath.Join(t.TempDir(), "slow"), mark)
	waitFor(t, mark+".started")
	child.Process.Kill()

	b, err := os.ReadFile(mark + ".git")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	filterRan := make(chan bool, 1) // whether the filter still ran when git died
	go func() {
		for proc.Alive(pid) {
			time.Sleep(10 * time.Millisecond)
		}
		filterRan <- !exists(mark + ".done")
	}()

	kept, err := (&workspace.Manager{Root: m.Root}).Remove(ctx, r.URL, first)
	filterDone := exists(mark + ".done")
	if err != nil || kept != "" {
		t.Fatalf("Remove = %q, %v", kept, err)
	}
	if !<-filterRan {
		t.Error("the killed daemon's git outlived it")
	}
	if !filterDone {
		t.Error("the second Manager took the mirror's lock while the killed daemon's filter still ran")
	}
}

func waitFor(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
