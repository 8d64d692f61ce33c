package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/statuspage/statuspagetest"
)

// hostileLogin is a sender login that tries to put markup on the status
// page. GitHub allows no such login, but a signed payload can carry
// anything: its delivery is ignored (unauthorized_sender), and the
// journal row that says so names the sender.
const hostileLogin = `<script>document.title="pwned"</script><img src=x onerror=alert(1)>`

// The status page as a person sees it: a real headless Chromium loads it
// from a running daemon that runs an agent for a signed real payload, and
// the rendered DOM shows the item, its phase, session and conversation,
// with GitHub's text as text; the page's own script keeps it live. Both
// pages are also saved as screenshots for a person to look at.
func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	e := newEnv(t, envOpts{})
	r := e.boot(t, commentFixture, withComment("please look at this"))
	require.Equal(t, http.StatusAccepted, e.replay(t, commentFixture, "", all(withComment("hostile "+hostileLogin), withSender(hostileLogin))))
	e.waitEvent(t, journal.DeliveryIgnored, keyIssue, 1, waitShort)
	session := desired.SessionName(keyIssue)

	index := "http://" + e.listen + "/"
	dom := browser.dumpDOM(t, index)
	elements, text := statuspagetest.DOM(t, dom)
	for _, want := range []string{keyIssue.String(), string(desired.PhaseRunning), session, r.Status.HarnessSessionID,
		"delivery.accepted", "delivery.ignored", "unauthorized_sender", "session.spawned", "live sessions"} {
		assert.Contains(t, text, want)
	}
	assert.Contains(t, text, hostileLogin, "the payload's login is shown as text")
	assert.Equal(t, 1, elements["script"], "no element but the page's own script: %s", dom)
	assert.Zero(t, elements["img"])
	assert.Regexp(t, regexp.MustCompile(`class="livestate ok"`), dom, "live.js fetched the page again and put it in place")
	assert.NotContains(t, dom, e.secret)

	item := "http://" + e.listen + "/items/Codertocat/Hello-World/1"
	dom = browser.dumpDOM(t, item)
	elements, text = statuspagetest.DOM(t, dom)
	for _, want := range []string{keyIssue.String(), string(desired.PhaseRunning), r.Status.HarnessSessionID,
		"tmux -L " + e.socket + " attach -t =" + session, "session.spawned", "Timeline"} {
		assert.Contains(t, text, want)
	}
	assert.Contains(t, text, hostileLogin)
	assert.Equal(t, 1, elements["script"], dom)
	assert.Zero(t, elements["img"])
	assert.NotContains(t, text, "please look", "no prompt text")
	assert.NotContains(t, text, "hostile", "no comment text")

	// An unknown item is a page that says so, and a 404 to the browser.
	_, text = statuspagetest.DOM(t, browser.dumpDOM(t, "http://"+e.listen+"/items/Codertocat/Hello-World/99"))
	assert.Contains(t, text, "work item Codertocat/Hello-World#99 not found")

	dir := artifactsDir(t)
	for name, url := range map[string]string{"index.png": index, "item.png": item} {
		path := filepath.Join(dir, name)
		browser.screenshot(t, url, path)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")), "%s is a PNG", path)
		t.Logf("status page screenshot: %s", path)
	}
}

// withSender sets the login of the payload's sender.
func withSender(login string) func(map[string]any) {
	return func(m map[string]any) { m["sender"].(map[string]any)["login"] = login }
}

// browser is a headless Chromium run once per page, with a profile of
// its own.
type browser struct {
	bin     string
	profile string
}

// chromium returns the distribution's Chromium (Debian's package
// chromium). Without it the test is skipped, with the reason, and fails
// under CI=true, where .ci/run installs it.
func chromium(t *testing.T) *browser {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return &browser{bin: bin, profile: t.TempDir()}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found on PATH; .ci/run installs it (apt-get install chromium)")
	}
	t.Skip("chromium not found on PATH: apt-get install chromium to run the status page's browser test")
	return nil
}

// chromiumTimeout bounds one Chromium run; it takes about a second.
const chromiumTimeout = time.Minute

// run runs Chromium headless on url with args and returns its stdout.
// As root it needs --no-sandbox ("Running as root without --no-sandbox is
// not supported"). Its process group is killed when it ends, so that no
// helper it started outlives the test.
func (b *browser) run(t *testing.T, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	argv := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--user-data-dir=" + b.profile,
		"--window-size=1280,900"}, args...)
	cmd := exec.CommandContext(ctx, b.bin, append(argv, url)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	require.NoError(t, err, "chromium %s: %s", url, stderr.String())
	return stdout.String()
}

// dumpDOM returns the DOM of url once it loaded and its timers had 5 s
// of virtual time: live.js has fetched the page again by then.
func (b *browser) dumpDOM(t *testing.T, url string) string {
	t.Helper()
	return b.run(t, url, "--virtual-time-budget=5000", "--dump-dom")
}

// screenshot writes a PNG of url, 1280×900, to path.
func (b *browser) screenshot(t *testing.T, url, path string) {
	t.Helper()
	b.run(t, url, "--screenshot="+path)
}

// artifactsDir is where a test leaves files for a person to look at,
// which outlive it: $LOOPD_TEST_ARTIFACTS/<test>, else
// e2e/artifacts/<test> (ignored by git). A rerun replaces them.
func artifactsDir(t *testing.T) string {
	t.Helper()
	root := os.Getenv("LOOPD_TEST_ARTIFACTS")
	if root == "" {
		root = "artifacts"
	}
	dir, err := filepath.Abs(filepath.Join(root, t.Name()))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}
