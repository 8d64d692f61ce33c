package ghapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	ghv88 "github.com/google/go-github/v88/github"
)

// agentPermissions are what an agent's installation token may do in its
// repository: push its branch (contents), open or update its pull request
// (pull_requests), and comment on the issue or pull request (issues), all
// write. Metadata, read, comes with any token. Nothing else: no workflows
// (a push that changes .github/workflows is refused), no administration.
// The names and levels are GitHub's (POST
// /app/installations/{installation_id}/access_tokens, "permissions").
func agentPermissions() *ghv88.InstallationPermissions {
	write := "write"
	return &ghv88.InstallationPermissions{Contents: &write, PullRequests: &write, Issues: &write}
}

// Minter mints a GitHub App installation's tokens for agents, each scoped
// to one repository (POST /app/installations/{id}/access_tokens with
// repositories and agentPermissions), and keeps each until
// schema.GitHubTokenRefreshMargin before it expires by GitHub's clock, when it mints
// another, as Client does its own. A token lasts an hour. It is safe for
// concurrent use.
type Minter struct {
	apiURL  string
	cred    Credentials
	base    http.RoundTripper
	timeout time.Duration
	now     func() time.Time

	// installs says which installation a repository's token comes from.
	installs *installations

	mu sync.Mutex
	// repos holds the transport of each repository asked for, by
	// installation and "owner/repo" in lower case (GitHub's names ignore
	// case).
	repos map[string]*appTransport
}

// NewMinter returns a Minter of the App cred names (AppID, PrivateKey,
// and the optional InstallationID: installations.of), at apiURL (https://api.github.com, or a
// GitHub Enterprise Server's https://HOST/api/v3), over base (nil:
// http.DefaultTransport), each request bounded by timeout. The error wraps
// ErrNoCredentials when cred names no App.
func NewMinter(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration) (*Minter, error) {
	return newMinter(apiURL, cred, base, timeout, time.Now)
}

// newMinter is NewMinter with now the local clock.
func newMinter(apiURL string, cred Credentials, base http.RoundTripper, timeout time.Duration, now func() time.Time) (*Minter, error) {
	if cred.AppID == 0 {
		return nil, fmt.Errorf("github token minter: %w: no App", ErrNoCredentials)
	}
	if base == nil {
		base = http.DefaultTransport
	}
	if apiURL == "" {
		apiURL = "https://api.github.com"
	}
	apiURL = strings.TrimRight(apiURL, "/")
	_, atr, err := newAppTransport(base, cred.AppID, 0, nil, cred.PrivateKey, apiURL, now)
	if err != nil {
		return nil, fmt.Errorf("github app %d: %w", cred.AppID, err)
	}
	app, err := restClient(apiURL, atr, timeout)
	if err != nil {
		return nil, fmt.Errorf("github app %d: %w", cred.AppID, err)
	}
	return &Minter{apiURL: apiURL, cred: cred, base: base, timeout: timeout, now: now,
		installs: &installations{fixed: cred.InstallationID, app: app, repos: map[string]int64{}},
		repos:    map[string]*appTransport{}}, nil
}

// Token returns a token of installation (the item's, 0 for none known:
// installations.of) that reaches owner/repo alone, with
// agentPermissions, and when it expires: the one minted before while it
// has more than schema.GitHubTokenRefreshMargin left, else a new one. The
// error is GitHub's refusal (a repository the installation does not
// cover, a permission the App lacks: 422; no installation on the
// repository: 404) or the request's, as ghinstallation wraps it.
func (m *Minter) Token(ctx context.Context, installation int64, owner, repo string) (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	id, err := m.installs.of(ctx, installation, owner, repo)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("github app %d: %w", m.cred.AppID, err)
	}
	tr, err := m.transport(id, owner, repo)
	if err != nil {
		return "", time.Time{}, err
	}
	tok, expires, err := tr.TokenExpiry(ctx)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("github app %d: token for %s/%s: %w", m.cred.AppID, owner, repo, err)
	}
	return tok, expires, nil
}

// transport returns installation id's transport of owner/repo, made on
// first use: its own, since each keeps one token and GitHub's clock as
// its answers show it.
func (m *Minter) transport(id int64, owner, repo string) (*appTransport, error) {
	key := strconv.FormatInt(id, 10) + " " + strings.ToLower(owner+"/"+repo)
	m.mu.Lock()
	defer m.mu.Unlock()
	if tr, ok := m.repos[key]; ok {
		return tr, nil
	}
	opts := &ghv88.InstallationTokenOptions{Repositories: []string{repo}, Permissions: agentPermissions()}
	tr, _, err := newAppTransport(m.base, m.cred.AppID, id, opts, m.cred.PrivateKey, m.apiURL, m.now)
	if err != nil {
		return nil, fmt.Errorf("github app %d: %w", m.cred.AppID, err)
	}
	m.repos[key] = tr
	return tr, nil
}
