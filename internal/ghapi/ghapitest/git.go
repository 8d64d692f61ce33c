package ghapitest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitServer serves bare repositories over git's smart HTTP protocol, as
// GitHub serves https://HOST/OWNER/REPO.git: the real git http-backend,
// run as CGI (net/http/cgi). Fetches are public; a push needs Basic auth
// whose password is a token the API stand-in minted for that repository
// (Server.Scoped: named in its repositories, contents write, not expired),
// or one of the plain tokens Allow added, which reach every repository.
// Every push it refused is recorded (Refused).
type GitServer struct {
	*httptest.Server
	api     *Server
	root    string
	backend string

	mu      sync.Mutex
	plain   map[string]bool
	refused []Refusal
}

// Refusal is a push the git server refused: the repository's path
// (owner/repo) and why.
type Refusal struct {
	Repo, Reason string
}

// NewGitServer starts a git server that checks pushes against the tokens
// api minted, closed at the end of t. It skips t when git has no
// http-backend.
func NewGitServer(t testing.TB, api *Server) *GitServer {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git http-backend: %v", err)
	}
	g := &GitServer{api: api, root: t.TempDir(), backend: backend, plain: map[string]bool{}}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

// Add serves the bare repository dir as owner/repo and returns its URL.
func (g *GitServer) Add(t testing.TB, owner, repo, dir string) string {
	t.Helper()
	link := filepath.Join(g.root, owner, repo+".git")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	return g.RepoURL(owner, repo)
}

// RepoURL is the URL git fetches owner/repo from and pushes it to.
func (g *GitServer) RepoURL(owner, repo string) string {
	return g.URL + "/" + owner + "/" + repo + ".git"
}

// Allow makes token a plain token: it may push to every repository.
func (g *GitServer) Allow(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.plain[token] = true
}

// Refused returns the pushes refused so far, in order.
func (g *GitServer) Refused() []Refusal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.refused)
}

// gitPath is a request's repository (owner/repo) and what follows it.
var gitPath = regexp.MustCompile(`^/([^/]+/[^/]+)\.git(/.*)$`)

func (g *GitServer) serve(w http.ResponseWriter, r *http.Request) {
	m := gitPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		http.NotFound(w, r)
		return
	}
	repo := m[1]
	push := m[2] == "/git-receive-pack" || r.URL.Query().Get("service") == "git-receive-pack"
	user := "anonymous"
	if push {
		name, pass, ok := r.BasicAuth()
		if reason := g.check(repo, pass, ok); reason != "" {
			g.mu.Lock()
			g.refused = append(g.refused, Refusal{Repo: repo, Reason: reason})
			g.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, reason, http.StatusUnauthorized)
			return
		}
		user = name
	}
	h := &cgi.Handler{Path: g.backend, Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user}}
	h.ServeHTTP(w, r)
}

// check returns why a push to repo with password pass (ok false: no Basic
// auth) is refused, "" when it is not.
func (g *GitServer) check(repo, pass string, ok bool) string {
	if !ok || pass == "" {
		return "no credentials"
	}
	g.mu.Lock()
	plain := g.plain[pass]
	g.mu.Unlock()
	if plain {
		return ""
	}
	tok, found := g.api.Scoped(pass)
	_, name, _ := strings.Cut(repo, "/")
	switch {
	case !found:
		return "unknown token"
	case !slices.ContainsFunc(tok.Repositories, func(r string) bool { return strings.EqualFold(r, name) }):
		return "token not scoped to " + repo
	case tok.Permissions["contents"] != "write":
		return "token cannot write contents"
	case !time.Now().Before(tok.Expires):
		return "token expired"
	}
	return ""
}
