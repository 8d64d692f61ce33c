// Package ghapitest is test support: a stateful stand-in for the part of
// GitHub's REST API loopd calls, served over real HTTP (httptest) in the
// way go-github's own tests do, under a GitHub Enterprise Server path
// (/api/v3). It keeps the comments and reactions made and the installation
// tokens minted (with the repositories and permissions asked for), records
// every request (method, path, query, Authorization header, body, time),
// and misbehaves the way GitHub does on demand: injected failures, a hold on
// comment posts, a comment post that lands while its answer is lost, a
// secondary rate limit on content writes (403 or 429, with or without
// Retry-After) and a primary one on every call, all timed by its own
// clock (Server.Now), which a test can set apart from the client's and
// which every answer's Date header shows. As GitHub does, it refuses
// (401) an App's JWT issued in its future or expired by its clock, and an
// installation token past its expires_at or revoked (RevokeTokens). An
// App installed on several accounts (Install) has each installation's
// tokens reach that account's repositories alone, and GitHub's
// per-repository lookup (GET /repos/{owner}/{repo}/installation) names
// the installation. GitServer serves git over HTTP behind the tokens it minted, as GitHub
// does.
package ghapitest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
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

// Request is one request the server received, at At by the server's
// clock; Limited is true when a rate limit answered it.
type Request struct {
	Method, Path, Query, Auth, Body string
	At                              time.Time
	Limited                         bool
}

// Write reports whether r creates content (POST, PATCH, PUT, DELETE), what
// GitHub's secondary limits count.
func (r Request) Write() bool { return r.Method != http.MethodGet && r.Method != http.MethodHead }

// SecondaryLimit is GitHub's secondary rate limit on content writes: until
// Until (by the server's clock), every write is answered Status (403 or
// 429) with GitHub's message and documentation URL, and with Retry-After
// when RetryAfter is set (in whole seconds, as GitHub sends it), while
// x-ratelimit-remaining still shows budget left, as GitHub's answers do;
// reads still pass.
type SecondaryLimit struct {
	Until      time.Time
	Status     int
	RetryAfter time.Duration
}

// secondaryMessage and secondaryDocs are what GitHub answers a secondary
// rate limit with (GitHub's REST API docs, "Rate limits for the REST API").
const (
	secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
		"If you reach out to GitHub Support for help, please include the request ID."
	secondaryDocs = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// Comment is an issue or pull request comment the server holds. Author
// is its user's login (GitHub's user.login).
type Comment struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	URL    string `json:"html_url"`
	Author string `json:"-"`
	// Installation is the installation whose token posted it, 0 for a
	// token of no installation.
	Installation int64 `json:"-"`
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
	// InstallationToken the first token POST
	// /app/installations/{id}/access_tokens hands out when no repository
	// is named (loopd's own), each later one followed by _2, _3…;
	// TokenTTL how long every token is valid by the server's clock
	// (GitHub: an hour).
	Login, AppSlug, InstallationToken string
	TokenTTL                          time.Duration

	mu        sync.Mutex
	requests  []Request
	comments  map[string][]Comment // "owner/repo/number"
	reactions []Reaction
	failures  []*Failure
	nextID    int64
	minted    []Minted
	own       int // loopd's own tokens handed out
	hold      chan struct{}
	held      chan struct{}
	// PageSize caps a comment listing's page, whatever per_page asks.
	pageSize int
	// now is the server's clock (SetNow); secondary and primaryReset its
	// rate limits; lose how many comment posts to come land with their
	// answer lost.
	now          func() time.Time
	secondary    SecondaryLimit
	primaryReset time.Time
	lose         int
	// tokens are the installation tokens handed out, loopd's own and
	// those minted for named repositories, each with its expires_at, the
	// zero time once revoked.
	tokens map[string]time.Time
	// installs holds each account's installation (Install), by login;
	// tokenOf the installation each installation token was minted for.
	installs map[string]int64
	tokenOf  map[string]int64
}

// New starts a server, closed at the end of t.
func New(t testing.TB) *Server {
	s := &Server{Login: "loopd-bot", AppSlug: "loopd-app", InstallationToken: "ghs_installation",
		TokenTTL: time.Hour,
		comments: map[string][]Comment{}, nextID: 1000, pageSize: 100, now: time.Now, tokens: map[string]time.Time{},
		installs: map[string]int64{}, tokenOf: map[string]int64{}}
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

// SetNow sets the server's clock, which its rate limits and the times of
// its requests are read by: a fake clock for a benchmark, or one ahead of
// the client's.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Now returns the server's time.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now()
}

// RevokeTokens revokes every installation token handed out so far, as
// GitHub does when an installation's permissions change: a call with one
// is answered 401.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok := range s.tokens {
		s.tokens[tok] = time.Time{}
	}
}

// Install installs the App on account (an organization or a user) as
// installation id: GET /repos/{account}/{repo}/installation names it, and
// a token of another installation is answered 404 on the account's
// repositories, as GitHub answers a repository the installation does not
// cover. Without any, every installation reaches every repository.
func (s *Server) Install(account string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installs[strings.ToLower(account)] = id
}

// OwnTokens returns how many tokens were handed out with no repository
// named (loopd's own).
func (s *Server) OwnTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.own
}

// LimitWrites answers content writes with the secondary limit l until
// l.Until; a zero l lifts it.
func (s *Server) LimitWrites(l SecondaryLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondary = l
}

// LimitAll answers every call with the primary rate limit (403,
// x-ratelimit-remaining 0, x-ratelimit-reset) until reset.
func (s *Server) LimitAll(reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.primaryReset = reset
}

// LoseAnswers makes the next n comment posts land (the comment is made)
// while their answer is lost: the connection closes with no response, as
// when a network drops it, so the client cannot know the post landed.
func (s *Server) LoseAnswers(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lose = n
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

// Writes returns the content writes the server received (Request.Write):
// how many a rate limit answered, and the times of the others, in order.
func (s *Server) Writes() (limited int, landed []time.Time) {
	for _, r := range s.Requests() {
		switch {
		case !r.Write():
		case r.Limited:
			limited++
		default:
			landed = append(landed, r.At)
		}
	}
	return limited, landed
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
	repoPath         = regexp.MustCompile(`^/repos/([^/]+)/[^/]+/`)
	installationPath = regexp.MustCompile(`^/repos/([^/]+)/[^/]+/installation$`)
	reactionPath     = regexp.MustCompile(`^/repos/[^/]+/[^/]+/(issues/comments/\d+|pulls/comments/\d+|issues/\d+)/reactions$`)
	accessTokensPath = regexp.MustCompile(`^/app/installations/(\d+)/access_tokens$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v3")
	s.mu.Lock()
	req := Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(body), At: s.now()}
	s.requests = append(s.requests, req)
	w.Header().Set("Date", req.At.UTC().Format(http.TimeFormat))
	if !ok {
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	if msg := s.unauthorized(req); msg != "" {
		s.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest"})
		return
	}
	if s.limited(w, req) { // unlocks
		return
	}
	if m := repoPath.FindStringSubmatch(path); m != nil && !installationPath.MatchString(path) {
		id, installed := s.installs[strings.ToLower(m[1])]
		if of, ok := s.tokenOf[strings.TrimPrefix(req.Auth, "token ")]; installed && ok && of != id {
			s.mu.Unlock()
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
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
	case r.Method == http.MethodGet && installationPath.MatchString(path):
		id, ok := s.installs[strings.ToLower(installationPath.FindStringSubmatch(path)[1])]
		s.mu.Unlock()
		if !ok || !strings.HasPrefix(req.Auth, "Bearer ") {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": 1})
	case r.Method == http.MethodPost && accessTokensPath.MatchString(path):
		s.mintToken(w, req) // unlocks
	case m != nil && r.Method == http.MethodGet:
		s.listComments(w, r, m[1]+"/"+m[2]+"/"+m[3]) // unlocks
	case m != nil && r.Method == http.MethodPost:
		var in struct{ Body string }
		_ = json.Unmarshal(body, &in)
		author := s.Login
		tok := strings.TrimPrefix(req.Auth, "token ")
		if _, ok := s.tokens[tok]; ok {
			author = s.AppSlug + "[bot]" // what an App's installation posts as
		}
		c := s.addComment(m[1]+"/"+m[2]+"/"+m[3], author, in.Body)
		if id := s.tokenOf[tok]; id != 0 {
			list := s.comments[m[1]+"/"+m[2]+"/"+m[3]]
			list[len(list)-1].Installation = id
			c.Installation = id
		}
		hold, held := s.hold, s.held
		lose := s.lose > 0
		if lose {
			s.lose--
		}
		s.mu.Unlock()
		if lose {
			loseAnswer(w)
			return
		}
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

// unauthorized returns GitHub's message refusing req's credentials by
// the server's clock, "" when they pass: an App's JWT (Bearer, three
// parts) must be issued in the past and not be expired, an installation
// token (token) must be one handed out, unrevoked and not expired. Any
// other Bearer token passes. s.mu is held.
func (s *Server) unauthorized(req Request) string {
	now := s.now()
	if tok, ok := strings.CutPrefix(req.Auth, "token "); ok {
		if exp, ok := s.tokens[tok]; !ok || !now.Before(exp) {
			return "Bad credentials"
		}
		return ""
	}
	jwt, ok := strings.CutPrefix(req.Auth, "Bearer ")
	parts := strings.Split(jwt, ".")
	if !ok || len(parts) != 3 {
		return ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct{ Iat, Exp int64 }
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		return "A JSON web token could not be decoded"
	}
	switch {
	case time.Unix(claims.Iat, 0).After(now):
		return "'Issued at' claim ('iat') must be an Integer representing a time in the past."
	case !time.Unix(claims.Exp, 0).After(now):
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires."
	}
	return ""
}

// limited answers req with a rate limit when one holds it, and reports
// whether it did: the primary limit answers every call, the secondary one
// content writes. s.mu is held on entry; released when it answered.
func (s *Server) limited(w http.ResponseWriter, req Request) bool {
	now := s.now()
	var (
		status int
		header = http.Header{}
		answer map[string]any
	)
	switch l := s.secondary; {
	case now.Before(s.primaryReset):
		status = http.StatusForbidden
		header.Set("X-RateLimit-Limit", "5000")
		header.Set("X-RateLimit-Remaining", "0")
		header.Set("X-RateLimit-Reset", strconv.FormatInt(s.primaryReset.Unix(), 10))
		answer = map[string]any{"message": "API rate limit exceeded for installation ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"}
	case req.Write() && now.Before(l.Until):
		status = l.Status
		header.Set("X-RateLimit-Limit", "5000")
		header.Set("X-RateLimit-Remaining", "4771")
		header.Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour).Unix(), 10))
		if l.RetryAfter > 0 {
			header.Set("Retry-After", strconv.Itoa(int((l.RetryAfter+time.Second-1)/time.Second)))
		}
		answer = map[string]any{"message": secondaryMessage, "documentation_url": secondaryDocs}
	default:
		return false
	}
	s.requests[len(s.requests)-1].Limited = true
	s.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	writeJSON(w, status, answer)
	return true
}

// loseAnswer closes the connection of w with no response (a 502 where the
// connection cannot be taken over, which loses the answer too).
func loseAnswer(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"message": "Bad Gateway"})
		return
	}
	conn.Close()
}

// TokenInstallation returns the installation token was minted for, 0
// for none.
func (s *Server) TokenInstallation(token string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenOf[token]
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
// repositories named, a new token of its own, recorded (Tokens), with the
// repositories and permissions in the answer as GitHub gives them; else
// loopd's own (InstallationToken, then _2, _3…). Each lasts TokenTTL by
// the server's clock from req.At. s.mu is held on entry and released.
func (s *Server) mintToken(w http.ResponseWriter, req Request) {
	var in struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	_ = json.Unmarshal([]byte(req.Body), &in)
	exp := req.At.Add(s.TokenTTL).UTC().Truncate(time.Second)
	id, _ := strconv.ParseInt(accessTokensPath.FindStringSubmatch(req.Path)[1], 10, 64)
	if len(in.Repositories) == 0 {
		tok := s.InstallationToken
		if s.own > 0 {
			tok += "_" + strconv.Itoa(s.own+1)
		}
		s.own++
		s.tokens[tok], s.tokenOf[tok] = exp, id
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.Format(time.RFC3339)})
		return
	}
	s.nextID++
	m := Minted{Token: fmt.Sprintf("ghs_scoped_%d", s.nextID), Repositories: in.Repositories, Permissions: in.Permissions, Expires: exp}
	s.minted = append(s.minted, m)
	s.tokens[m.Token], s.tokenOf[m.Token] = exp, id
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
