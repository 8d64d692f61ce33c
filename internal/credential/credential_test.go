package credential_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/credential"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/ghapi/ghapitest"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/workspace/workspacetest"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

const token = "7d5c0e1f9a2b4c3d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"

var (
	own   = desired.Key{Owner: "octo-org", Repo: "api", Number: 1}
	other = desired.Key{Owner: "octo-org", Repo: "web", Number: 2}
)

// rig is a broker over one GitHub stand-in (its token endpoint and a git
// server behind the tokens it mints) with two repositories, api and web,
// and a record of each's item whose current spawn holds token.
type rig struct {
	api     *ghapitest.Server
	git     *ghapitest.GitServer
	broker  *credential.Broker
	cfg     *schema.Config
	records map[desired.Key]desired.Record
	store   *sqlstore.SQLite
	remotes map[string]*workspacetest.Remote
}

func newRig(t *testing.T, app bool) *rig {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "loopd.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	r := &rig{api: ghapitest.New(t), records: map[desired.Key]desired.Record{}, store: st, remotes: map[string]*workspacetest.Remote{}}
	r.git = ghapitest.NewGitServer(t, r.api)
	for _, k := range []desired.Key{own, other} {
		rem := workspacetest.NewRemote(t, workspacetest.Options{})
		r.git.Add(t, k.Owner, k.Repo, rem.Dir)
		r.remotes[k.Repo] = rem
		r.records[k] = desired.Record{Key: k, Status: desired.Status{Phase: desired.PhaseRunning, SessionState: desired.SessionState{ChannelToken: channel.Digest(token)}}}
	}
	route := schema.Route{Harness: "claude-code", Workdir: "/w/{{.Number}}", Checkout: &schema.Checkout{URL: r.git.URL + "/{{.Owner}}/{{.Repo}}.git"}}
	r.cfg = &schema.Config{Webhooks: schema.Webhooks{GHWebhook: schema.GHWebhook{Routing: schema.Routing{Repos: map[string]schema.Route{"octo-org/*": route}}}}}
	r.broker = &credential.Broker{
		Get: func(_ context.Context, k desired.Key) (desired.Record, error) {
			rec, ok := r.records[k]
			if !ok {
				return desired.Record{}, store.ErrNotFound
			}
			return rec, nil
		},
		Config:  func() *schema.Config { return r.cfg },
		Journal: journal.NewRecorder(slog.New(slog.DiscardHandler), st, time.Now),
	}
	if app {
		cred := ghapi.Credentials{AppID: 12, InstallationID: 34, PrivateKey: ghapitest.AppKey(t)}
		r.cfg.GitHub = &schema.GitHub{APIURL: r.api.APIURL(), App: &schema.GitHubApp{AppID: 12, InstallationID: 34}}
		m, err := ghapi.NewMinter(r.api.APIURL(), cred, nil, 5*time.Second)
		require.NoError(t, err)
		r.broker.Minter = m
	} else {
		r.cfg.GitHub = &schema.GitHub{APIURL: r.api.APIURL(), TokenEnv: "LOOPD_GITHUB_TOKEN"}
		r.broker.Token = "ghp_loopd"
		r.git.Allow("ghp_loopd")
	}
	return r
}

// named returns the journal rows named name, oldest first.
func (r *rig) named(t *testing.T, name journal.Name) []journal.Event {
	t.Helper()
	events, err := r.store.Events(context.Background(), store.EventFilter{Names: []string{string(name)}})
	require.NoError(t, err)
	return events
}

// ask is item k's agent asking for a credential for repo's remote, with
// spawn token tok.
func (r *rig) ask(k desired.Key, tok, repo string) channel.Answer {
	return r.broker.Handler(k)(context.Background(), channel.Request{Token: tok, Op: channel.OpGit,
		Protocol: "http", Host: strings.TrimPrefix(r.git.URL, "http://"), Path: "octo-org/" + repo + ".git"})
}

// push pushes a new commit on branch from a clone of repo to remote URL
// with the credential a, as git would after its helper answered.
func (r *rig) push(t *testing.T, repo, url string, a channel.Answer) error {
	t.Helper()
	work := filepath.Join(t.TempDir(), "work")
	workspacetest.Git(t, t.TempDir(), "clone", "--quiet", r.remotes[repo].Dir, work)
	workspacetest.Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "agent's work")
	cmd := exec.Command("git", "-c", "credential.helper=", "-c", "credential.helper=!f() { echo username="+a.Username+"; echo password="+a.Password+"; }; f",
		"push", "--quiet", url, "HEAD:refs/heads/loopd/issue-1")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return &pushError{err: err, out: string(out)}
	}
	return nil
}

type pushError struct {
	err error
	out string
}

func (e *pushError) Error() string { return e.err.Error() + ": " + e.out }

// With an App, an item's agent is handed an installation token scoped to
// its own repository, with what it needs to push and open its pull
// request: the token endpoint was asked for that repository and those
// permissions alone. It pushes to its repository; the same token is
// refused for another, and loopd refuses to hand one out for it. The
// token is kept while it lasts.
func TestScopedTokenPushesToItsOwnRepositoryOnly(t *testing.T) {
	r := newRig(t, true)
	a := r.ask(own, token, "api")
	require.Empty(t, a.Refused)
	assert.Equal(t, credential.Username, a.Username)
	require.True(t, strings.HasPrefix(a.Password, "ghs_scoped_"), a.Password)
	assert.WithinDuration(t, time.Now().Add(time.Hour), a.Expires, time.Minute)
	minted := r.api.Tokens()
	require.Len(t, minted, 1)
	assert.Equal(t, []string{"api"}, minted[0].Repositories)
	assert.Equal(t, map[string]string{"contents": "write", "pull_requests": "write", "issues": "write"}, minted[0].Permissions)
	assert.NotContains(t, r.api.Requests()[0].Body, "PRIVATE KEY")

	require.NoError(t, r.push(t, "api", r.git.RepoURL("octo-org", "api"), a), "its own repository")
	err := r.push(t, "web", r.git.RepoURL("octo-org", "web"), a)
	require.Error(t, err, "another repository refuses the token")
	assert.Contains(t, r.git.Refused(), ghapitest.Refusal{Repo: "octo-org/web", Reason: "token not scoped to octo-org/web"})

	refused := r.ask(own, token, "web")
	assert.Empty(t, refused.Password)
	assert.Contains(t, refused.Refused, credential.ReasonOtherRepository)
	assert.Len(t, r.api.Tokens(), 1, "nothing minted for another repository")

	again := r.ask(own, token, "api")
	assert.Equal(t, a.Password, again.Password, "kept while it lasts")
	assert.Len(t, r.api.Tokens(), 1)

	web := r.ask(other, token, "web")
	require.Empty(t, web.Refused)
	assert.NotEqual(t, a.Password, web.Password, "each repository its own token")
	assert.Equal(t, []string{"web"}, r.api.Tokens()[1].Repositories)

	issued, refusedRows := r.named(t, journal.CredentialIssued), r.named(t, journal.CredentialRefused)
	require.Len(t, issued, 3)
	assert.Equal(t, "app", issued[0].Attrs["credentials"])
	assert.Equal(t, "octo-org/api", issued[0].Attrs["repository"])
	require.Len(t, refusedRows, 1)
	assert.Equal(t, credential.ReasonOtherRepository, refusedRows[0].Attrs["reason"])
	for _, e := range append(issued, refusedRows...) {
		for _, v := range e.Attrs {
			assert.NotContains(t, v, "ghs_", "no token in the journal")
		}
	}
}

// An installation token that expired (within schema.GitHubTokenRefreshMargin of
// its end) is minted again at the next request.
func TestExpiredTokenIsMintedAgain(t *testing.T) {
	r := newRig(t, true)
	r.api.TokenTTL = 30 * time.Second // past its refresh time at once
	first := r.ask(own, token, "api")
	second := r.ask(own, token, "api")
	require.Empty(t, first.Refused)
	require.Empty(t, second.Refused)
	assert.NotEqual(t, first.Password, second.Password)
	assert.Len(t, r.api.Tokens(), 2)
}

// Who gets nothing: another spawn's token, a closed item, a route that
// gives none, an unknown item, a host or an operation that is not the
// item's; a plain token only where the route says agentCredentials:
// token, and then it is loopd's own.
func TestWhoGetsNoCredential(t *testing.T) {
	r := newRig(t, true)
	closed := r.records[other]
	closed.Spec.Closed = true
	r.records[other] = closed
	tests := []struct {
		name, reason string
		answer       func() channel.Answer
	}{
		{"earlier_spawns_token", credential.ReasonNotThisSpawn, func() channel.Answer { return r.ask(own, "0"+token[1:], "api") }},
		{"no_token", credential.ReasonNotThisSpawn, func() channel.Answer { return r.ask(own, "", "api") }},
		{"closed_item", credential.ReasonClosed, func() channel.Answer { return r.ask(other, token, "web") }},
		{"unknown_item", credential.ReasonUnknownWorkItem, func() channel.Answer {
			return r.ask(desired.Key{Owner: "octo-org", Repo: "api", Number: 9}, token, "api")
		}},
		{"another_host", credential.ReasonOtherRepository, func() channel.Answer {
			return r.broker.Handler(own)(context.Background(), channel.Request{Token: token, Op: channel.OpGit, Protocol: "https", Host: "github.com", Path: "octo-org/api.git"})
		}},
		{"no_path", credential.ReasonOtherRepository, func() channel.Answer {
			return r.broker.Handler(own)(context.Background(), channel.Request{Token: token, Op: channel.OpGit, Protocol: "http", Host: strings.TrimPrefix(r.git.URL, "http://")})
		}},
		{"unknown_op", credential.ReasonUnknownOp, func() channel.Answer {
			return r.broker.Handler(own)(context.Background(), channel.Request{Token: token, Op: "ssh-key"})
		}},
		{"route_gives_none", credential.ReasonNoCredentials, func() channel.Answer {
			route := r.cfg.Webhooks.GHWebhook.Routing.Repos["octo-org/*"]
			route.AgentCredentials = schema.AgentCredentialsNone
			r.cfg.Webhooks.GHWebhook.Routing.Repos["octo-org/*"] = route
			defer func() { route.AgentCredentials = ""; r.cfg.Webhooks.GHWebhook.Routing.Repos["octo-org/*"] = route }()
			return r.ask(own, token, "api")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.answer()
			assert.Empty(t, a.Password)
			assert.True(t, strings.HasPrefix(a.Refused, tt.reason+":"), a.Refused)
		})
	}
	assert.Empty(t, r.api.Tokens(), "nothing minted")

	plain := newRig(t, false)
	assert.True(t, strings.HasPrefix(plain.ask(own, token, "api").Refused, credential.ReasonNoCredentials),
		"a plain token is not handed out by default")
	route := plain.cfg.Webhooks.GHWebhook.Routing.Repos["octo-org/*"]
	route.AgentCredentials = schema.AgentCredentialsToken
	plain.cfg.Webhooks.GHWebhook.Routing.Repos["octo-org/*"] = route
	a := plain.ask(own, token, "api")
	require.Empty(t, a.Refused)
	assert.Equal(t, "ghp_loopd", a.Password)
	assert.True(t, a.Expires.IsZero())
	require.NoError(t, plain.push(t, "api", plain.git.RepoURL("octo-org", "api"), a))
	require.NoError(t, plain.push(t, "web", plain.git.RepoURL("octo-org", "web"), a), "a plain token reaches every repository: the operator's choice")
}

// TestForkThatTakesPushesGetsItsHeadsCredential: the agent of a fork's
// pull request whose fork takes the maintainers' pushes is answered for
// the fork's repository, where its clone pushes, with the base
// repository's token (the fork lets the base's maintainers push to the
// pull request's head branch); a fork that takes none, and any other
// repository, is refused.
func TestForkThatTakesPushesGetsItsHeadsCredential(t *testing.T) {
	r := newRig(t, true)
	fork := r.records[own]
	fork.Spec.Kind, fork.Spec.HeadRepo, fork.Spec.HeadRef, fork.Spec.MaintainerCanModify = desired.KindPullRequest, "someone/api", "feature/login", true
	r.records[own] = fork
	ask := func(path string) channel.Answer {
		return r.broker.Handler(own)(context.Background(), channel.Request{Token: token, Op: channel.OpGit,
			Protocol: "http", Host: strings.TrimPrefix(r.git.URL, "http://"), Path: path})
	}
	a := ask("someone/api.git")
	require.Empty(t, a.Refused)
	require.Len(t, r.api.Tokens(), 1)
	assert.Equal(t, []string{"api"}, r.api.Tokens()[0].Repositories, "the base repository's token")
	assert.Contains(t, ask("someone/web.git").Refused, credential.ReasonOtherRepository)

	fork.Spec.MaintainerCanModify = false
	r.records[own] = fork
	assert.Contains(t, ask("someone/api.git").Refused, credential.ReasonOtherRepository, "a fork that takes no pushes")
	assert.Empty(t, ask("octo-org/api.git").Refused, "its own repository still")
}
