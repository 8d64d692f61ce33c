// Package credential decides which credential an agent is handed, at the
// moment it uses one, over its item's channel (internal/channel): git's
// credential helper and the gh wrapper ask loopd serve, and the Broker
// answers for the item whose channel the request came in on.
//
// An agent gets a credential only for its own item's repository (the
// route's checkout URL), only while it is the item's current spawn (the
// request carries the spawn's token), and only what its route says
// (schema.Route.Credentials): an installation token of the GitHub App
// scoped to that one repository (ghapi.Minter), or, when the operator
// chose it, loopd's own token, which cannot be scoped. It never sees the
// App's key, nor a token of another repository.
package credential

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// Why a request gets no credential (credential.refused reason=).
const (
	ReasonUnknownWorkItem = "unknown_work_item"
	ReasonNotThisSpawn    = "not_this_spawn"
	ReasonClosed          = "closed"
	ReasonNoCredentials   = "no_credentials"
	ReasonOtherRepository = "other_repository"
	ReasonUnknownOp       = "unknown_op"
	ReasonMintFailed      = "mint_failed"
)

// Username is the user name an agent's git gives with its token; GitHub
// takes any for a token, and this one for an installation token.
const Username = "x-access-token"

// Minter mints a GitHub App installation's token scoped to one repository
// (ghapi.Minter).
type Minter interface {
	Token(ctx context.Context, installation int64, owner, repo string) (token string, expires time.Time, err error)
}

// Broker answers agents' requests for credentials.
type Broker struct {
	// Get reads an item's record (store.Store.Get).
	Get func(ctx context.Context, k desired.Key) (desired.Record, error)
	// Config returns the current config, read at each request so that a
	// reload applies at once (a route set to none hands out nothing more).
	Config func() *schema.Config
	// Minter mints the App's scoped tokens; nil without an App.
	Minter Minter
	// Token is loopd's own token (github.tokenEnv); "" with an App.
	Token   string
	Journal *journal.Recorder
}

// Handler returns the handler of item k's channel (channel.Serve).
func (b *Broker) Handler(k desired.Key) channel.Handler {
	return func(ctx context.Context, req channel.Request) channel.Answer {
		a, reason, err := b.answer(ctx, k, req)
		if reason != "" {
			b.Journal.Record(ctx, slog.LevelWarn, journal.CredentialRefused, k.String(), "reason", reason, "op", req.Op, "err", err)
			return channel.Answer{Refused: reason + ": " + err.Error()}
		}
		return a
	}
}

// answer works out the answer to req from k's channel, or why there is
// none (one of the Reason constants) and what failed.
func (b *Broker) answer(ctx context.Context, k desired.Key, req channel.Request) (channel.Answer, string, error) {
	r, err := b.Get(ctx, k)
	if errors.Is(err, store.ErrNotFound) {
		return channel.Answer{}, ReasonUnknownWorkItem, err
	} else if err != nil {
		return channel.Answer{}, ReasonUnknownWorkItem, err // the store names itself and the item
	}
	switch {
	case !channel.Matches(channel.Digest(req.Token), r.Status.ChannelToken):
		return channel.Answer{}, ReasonNotThisSpawn, errors.New("the token is not the item's current spawn's")
	case r.Spec.Closed:
		return channel.Answer{}, ReasonClosed, errors.New("the item is closed")
	}
	cfg := b.Config()
	route, ok := cfg.Webhooks.GHWebhook.Routing.Route(k.Owner, k.Repo)
	mode := route.Credentials(cfg.GitHub)
	if !ok || mode == schema.AgentCredentialsNone {
		return channel.Answer{}, ReasonNoCredentials, errors.New("the route gives its agents no credential (agentCredentials)")
	}
	repo, err := route.Checkout.RenderURL(k.Owner, k.Repo)
	if err != nil {
		return channel.Answer{}, ReasonNoCredentials, err
	}
	switch req.Op {
	case channel.OpToken:
	case channel.OpGit:
		err := sameRepository(repo, req)
		if owner, name, ok := r.Spec.PushRepo(k); err != nil && ok {
			// A fork that takes the maintainers' pushes: its clone
			// pushes there (reconciler's workspace plan).
			if fork, ferr := route.Checkout.RenderURL(owner, name); ferr == nil && sameRepository(fork, req) == nil {
				err = nil
			}
		}
		if err != nil {
			return channel.Answer{}, ReasonOtherRepository, err
		}
	default:
		return channel.Answer{}, ReasonUnknownOp, errors.New("no such operation: " + journal.Clip(req.Op, 40))
	}
	var a channel.Answer
	switch {
	case mode == schema.AgentCredentialsApp && b.Minter != nil:
		tok, expires, err := b.Minter.Token(ctx, r.Spec.Installation, k.Owner, k.Repo)
		if err != nil {
			return channel.Answer{}, ReasonMintFailed, err
		}
		a = channel.Answer{Username: Username, Password: tok, Expires: expires}
	case mode == schema.AgentCredentialsToken && b.Token != "":
		a = channel.Answer{Username: Username, Password: b.Token}
	default:
		return channel.Answer{}, ReasonNoCredentials, errors.New("loopd holds no " + mode + " credential (github)")
	}
	kv := []any{"credentials", mode, "repository", k.Owner + "/" + k.Repo, "op", req.Op}
	if !a.Expires.IsZero() {
		kv = append(kv, "expires", a.Expires.UTC().Format(time.RFC3339))
	}
	b.Journal.Record(ctx, slog.LevelInfo, journal.CredentialIssued, k.String(), kv...)
	return a, "", nil
}

// sameRepository returns nil when req names the repository at repo (its
// checkout URL): the same scheme and host, and the same path, ".git" and
// case aside (GitHub's names ignore case); an error saying what differs
// otherwise. git sends the path because loopd sets credential.useHttpPath
// for the origin; without one the request is refused.
func sameRepository(repo string, req channel.Request) error {
	u, err := url.Parse(repo)
	if err != nil {
		return err
	}
	clean := func(p string) string { return strings.ToLower(strings.TrimSuffix(strings.Trim(p, "/"), ".git")) }
	switch {
	case req.Protocol != u.Scheme || !strings.EqualFold(req.Host, u.Host):
		return errors.New("another host: " + journal.Clip(req.Protocol+"://"+req.Host, 200))
	case req.Path == "":
		return errors.New("no path given (credential.useHttpPath)")
	case clean(req.Path) != clean(u.Path):
		return errors.New("another repository: " + journal.Clip(req.Path, 200))
	}
	return nil
}
