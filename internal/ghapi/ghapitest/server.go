// Package ghapitest is test support: a stateful stand-in for the part of
// GitHub's REST API loopd calls, served over real HTTP (httptest) in the
// way go-github's own tests do, under a GitHub Enterprise Server path
// (/api/v3). It keeps the comments and reactions made and the installation
// tokens minted (with the repositories and permissions asked for), records
// every request (method, path, query, Authorization header, body), and
// takes injected failures and a hold on comment posts. GitServer serves
// git over HTTP behind the tokens it minted, as GitHub does.
package ghapitest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the server received.
type Request struct {
	Method, Path, Query, Auth, Body string
}

// Comment is an issue or pull request comment the server holds. Author
// is its user's login (GitHub's user.login).
type Comment struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	URL    string `json:"html_url"`
	Author string `json:"-"`
}

// MarshalJSON writes c as GitHub does, its author as user.login.
func (c Comment) MarshalJSON() ([]byte, error) {
	type plain Comment
	return json.Marshal(struct {
		plain
		User struct {
			Login string `json:"login"`
		} `json:"user"`
	}{plain: plain(c), User: struct {
		Login string `json:"login"`
	}{c.Author}})
}

// Minted is an installation token the server handed out for named
// repositories: what was asked (repositories, permissions) and when it
// expires.
type Minted struct {
	Token        string
	Repositories []string
	Permissions  map[string]string
	Expires      time.Time
}

// Reaction is a reaction the server holds: On is the API path it was made
// on, e.g. /repos/o/r/issues/comments/7/reactions.
type Reaction struct {
	On, Content string
}

// Failure is an answer given instead of the real one, to the next Times
// requests whose method is Method and whose path (below /api/v3) matches
// Path.
type Failure struct {
	Method string
	Path   *regexp.Regexp
	Status int
	Header http.Header
	Body   string
	Times  int
}

// Server is the stand-in. Its zero fields take defaults in New.
type Server struct {
	*httptest.Server
	// Login is GET /user's login; AppSlug GET /app's slug;
	// InstallationToken the token POST /app/installations/{id}/access_tokens
	// hands out when no repository is named (loopd's own).
	Login, AppSlug, InstallationToken string
	// TokenTTL is how long a token minted for named repositories lasts
	// (GitHub: an hour); ghinstallation mints again a minute before.
	TokenTTL time.Duration

	mu        sync.Mutex
	requests  []Request
	comments  map[string][]Comment // "owner/repo/number"
	reactions []Reaction
	failures  []*Failure
	nextID    int64
	minted    []Minted
	hold      chan struct{}
	held      chan struct{}
	// PageSize caps a comment listing's page, whatever per_page asks.
	pageSize int
}

// New starts a server, closed at the end of t.
func New(t testing.TB) *Server {
	s := &Server{Login: "loopd-bot", AppSlug: "loopd-app", InstallationToken: "ghs_installation", TokenTTL: time.Hour,
		comments: map[string][]Comment{}, nextID: 1000, pageSize: 100}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.Release()
		s.Close()
	})
	return s
}

// APIURL is the base URL to configure (github.apiURL).
func (s *Server) APIURL() string { return s.URL + "/api/v3" }

// Fail queues f.
func (s *Server) Fail(f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &f)
}

// ClearFailures drops the failures still queued.
func (s *Server) ClearFailures() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = nil
}

// SetPageSize makes comment listings return at most n per page.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// HoldPosts makes each comment post store its comment and then not answer
// until Release (or the client gives up): a client killed meanwhile has
// posted without knowing it. Held returns a channel that gets a value
// each time a post is held.
func (s *Server) HoldPosts() (held <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.held = make(chan struct{}), make(chan struct{}, 16)
	return s.held
}

// Release answers the held posts, and those to come.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// AddComment puts a comment on owner/repo#number as author.
func (s *Server) AddComment(owner, repo string, number int, author, body string) Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addComment(owner+"/"+repo+"/"+strconv.Itoa(number), author, body)
}

func (s *Server) addComment(item, author, body string) Comment {
	s.nextID++
	c := Comment{ID: s.nextID, Body: body, Author: author, URL: fmt.Sprintf("https://github.example/%s#issuecomment-%d", item, s.nextID)}
	s.comments[item] = append(s.comments[item], c)
	return c
}

// Comments returns the comments of owner/repo#number, oldest first.
func (s *Server) Comments(owner, repo string, number int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Comment(nil), s.comments[owner+"/"+repo+"/"+strconv.Itoa(number)]...)
}

// Reactions returns the reactions made, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// Requests returns every request received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count returns how many requests had method and a path matching re.
func (s *Server) Count(method string, re *regexp.Regexp) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && re.MatchString(r.Path) {
			n++
		}
	}
	return n
}

var (
	commentsPath     = regexp.MustCompile(`^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$`)
	reactionPath     = regexp.MustCompile(`^/repos/[^/]+/[^/]+/(issues/comments/\d+|pulls/comments/\d+|issues/\d+)/reactions$`)
	accessTokensPath = regexp.MustCompile(`^/app/installations/\d+/access_tokens$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v3")
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(body)})
	if !ok {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	for _, f := range s.failures {
		if f.Times > 0 && f.Method == r.Method && f.Path.MatchString(path) {
			f.Times--
			s.mu.Unlock()
			for k, v := range f.Header {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(f.Status)
			io.WriteString(w, f.Body)
			return
		}
	}
	switch m := commentsPath.FindStringSubmatch(path); {
	case r.Method == http.MethodGet && path == "/user":
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"login": s.Login, "type": "User"})
	case r.Method == http.MethodGet && path == "/app":
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"slug": s.AppSlug, "id": 1})
	case r.Method == http.MethodPost && accessTokensPath.MatchString(path):
		s.mintToken(w, body) // unlocks
	case m != nil && r.Method == http.MethodGet:
		s.listComments(w, r, m[1]+"/"+m[2]+"/"+m[3]) // unlocks
	case m != nil && r.Method == http.MethodPost:
		var in struct{ Body string }
		_ = json.Unmarshal(body, &in)
		author := s.Login
		if r.Header.Get("Authorization") == "token "+s.InstallationToken {
			author = s.AppSlug + "[bot]" // what an App's installation posts as
		}
		c := s.addComment(m[1]+"/"+m[2]+"/"+m[3], author, in.Body)
		hold, held := s.hold, s.held
		s.mu.Unlock()
		if hold != nil {
			held <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		writeJSON(w, http.StatusCreated, c)
	case r.Method == http.MethodPost && reactionPath.MatchString(path):
		var in struct{ Content string }
		_ = json.Unmarshal(body, &in)
		s.reactions = append(s.reactions, Reaction{On: path, Content: in.Content})
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": in.Content})
	default:
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	}
}

// Tokens returns the tokens minted for named repositories, in order.
func (s *Server) Tokens() []Minted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Minted(nil), s.minted...)
}

// Scoped returns the token minted for named repositories whose value is
// token, ok false for none.
func (s *Server) Scoped(token string) (Minted, bool) {
	for _, m := range s.Tokens() {
		if m.Token == token {
			return m, true
		}
	}
	return Minted{}, false
}

// mintToken answers POST /app/installations/{id}/access_tokens: with
// repositories named, a new token of its own, recorded (Tokens), lasting
// TokenTTL, with the repositories and permissions in the answer as GitHub
// gives them; else InstallationToken for an hour. s.mu is held on entry
// and released.
func (s *Server) mintToken(w http.ResponseWriter, body []byte) {
	var in struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	_ = json.Unmarshal(body, &in)
	if len(in.Repositories) == 0 {
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"token": s.InstallationToken, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		return
	}
	s.nextID++
	m := Minted{Token: fmt.Sprintf("ghs_scoped_%d", s.nextID), Repositories: in.Repositories, Permissions: in.Permissions,
		Expires: time.Now().Add(s.TokenTTL).UTC().Truncate(time.Second)}
	s.minted = append(s.minted, m)
	s.mu.Unlock()
	repos := make([]map[string]string, len(m.Repositories))
	for i, name := range m.Repositories {
		repos[i] = map[string]string{"name": name}
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": m.Token, "expires_at": m.Expires.Format(time.RFC3339),
		"permissions": m.Permissions, "repositories": repos})
}

// listComments answers one page of an item's comments, with GitHub's Link
// header for the next one. s.mu is held on entry and released.
func (s *Server) listComments(w http.ResponseWriter, r *http.Request, item string) {
	all := append([]Comment(nil), s.comments[item]...)
	size := s.pageSize
	s.mu.Unlock()
	if n, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && n > 0 && n < size {
		size = n
	}
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	from, to := min((page-1)*size, len(all)), min(page*size, len(all))
	if to < len(all) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		w.Header().Set("Link", fmt.Sprintf(`<%s%s?%s>; rel="next"`, s.URL, r.URL.Path, q.Encode()))
	}
	writeJSON(w, http.StatusOK, all[from:to])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// AppKey returns a GitHub App's private key (PEM, RSA 2048), made once
// per test binary: the API stand-in takes any App's JWT.
func AppKey(t testing.TB) []byte {
	t.Helper()
	appKeyOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err == nil {
			appKey = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		}
	})
	if appKey == nil {
		t.Fatal("generate an App key")
	}
	return appKey
}

var (
	appKeyOnce sync.Once
	appKey     []byte
)
