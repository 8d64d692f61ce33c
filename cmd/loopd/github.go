package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/credential"
	"github.com/loopd/loopd/internal/doubling"
	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/schema"
)

// outboxLockFile is the flock a drain of the outbox holds in the state dir,
// so that serve and a reconcile --once never send the same call twice.
const outboxLockFile = "outbox.lock"

// maxKeyFile caps the bytes read from a GitHub App's private key file.
const maxKeyFile = 64 << 10

// gitHubCredentials reads the credentials cfg.GitHub names: the token in
// the file tokenFile names, or in the variable tokenEnv names, which it
// then removes from this process's environment (nothing loopd starts
// inherits it), or the App's private key file. Neither is ever logged. An
// empty variable, or a missing, unreadable, oversized or empty file, or
// one that other users can read or change (perm.Secret), is an error
// naming the variable or the path.
func gitHubCredentials(cfg *schema.Config) (ghapi.Credentials, error) {
	g := cfg.GitHub
	if g.App != nil {
		if err := perm.Secret(g.App.PrivateKeyFile); err != nil {
			return ghapi.Credentials{}, fmt.Errorf("github app: privateKeyFile %w", err)
		}
		f, err := os.Open(g.App.PrivateKeyFile)
		if err != nil {
			return ghapi.Credentials{}, fmt.Errorf("github app: privateKeyFile: %w", err)
		}
		defer f.Close()
		key, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
		switch {
		case err != nil:
			return ghapi.Credentials{}, fmt.Errorf("github app: privateKeyFile: %w", err)
		case len(key) > maxKeyFile:
			return ghapi.Credentials{}, fmt.Errorf("github app: privateKeyFile %s: larger than %d bytes", g.App.PrivateKeyFile, maxKeyFile)
		case len(key) == 0:
			return ghapi.Credentials{}, fmt.Errorf("github app: privateKeyFile %s is empty; write the App's PEM private key into it", g.App.PrivateKeyFile)
		}
		return ghapi.Credentials{AppID: g.App.AppID, InstallationID: g.App.InstallationID, PrivateKey: key}, nil
	}
	path, err := cfg.TokenFilePath(os.LookupEnv)
	if err != nil {
		return ghapi.Credentials{}, fmt.Errorf("github: %w", err)
	}
	if path != "" {
		token, err := readCredentialFile("github", "tokenFile", "a token with Issues and Pull requests write access", path)
		if err != nil {
			return ghapi.Credentials{}, err
		}
		return ghapi.Credentials{Token: token}, nil
	}
	token := os.Getenv(g.TokenEnv)
	if token == "" {
		return ghapi.Credentials{}, fmt.Errorf("github: environment variable %s is empty; set it to a token with Issues and Pull requests write access", g.TokenEnv)
	}
	if err := os.Unsetenv(g.TokenEnv); err != nil {
		return ghapi.Credentials{}, fmt.Errorf("github: unset %s: %w", g.TokenEnv, err)
	}
	return ghapi.Credentials{Token: token}, nil
}

// gitHubClient builds the client of cfg's github block from its
// credentials, and returns them too; nil, and no error, when the config
// has none (loopd then only listens). A key ghinstallation cannot parse is
// an error at start.
func gitHubClient(cfg *schema.Config) (*ghapi.Client, ghapi.Credentials, error) {
	if cfg.GitHub == nil {
		return nil, ghapi.Credentials{}, nil
	}
	cred, err := gitHubCredentials(cfg)
	if err != nil {
		return nil, ghapi.Credentials{}, err
	}
	cred.BotLogin = cfg.GitHub.BotLogin
	c, err := ghapi.New(cfg.GitHub.APIURL, cred, http.DefaultTransport, schema.DefaultGitHubCallTimeout)
	return c, cred, err
}

// credentialBroker is what answers the agents' requests for credentials
// under the config current returns, with loopd's GitHub credentials cred:
// an App's installation tokens scoped to each item's repository, or the
// token itself where a route hands it out (agentCredentials: token).
func (a *app) credentialBroker(cfg *schema.Config, current func() *schema.Config, cred ghapi.Credentials) (*credential.Broker, error) {
	b := &credential.Broker{Get: a.store.Get, Config: current, Token: cred.Token, Journal: a.journal}
	if cred.AppID != 0 {
		m, err := ghapi.NewMinter(cfg.GitHub.APIURL, cred, http.DefaultTransport, schema.DefaultGitHubCallTimeout)
		if err != nil {
			return nil, err
		}
		b.Minter = m
	}
	return b, nil
}

// connectGitHub is serve's start check of the credentials
// (ghapi.Client.Check: an App's installation token, and the bot login,
// github.botLogin or the login the credentials belong to), which the
// client keeps for the webhook filter that never delivers the bot's own
// comments (ghapi.Client.Known), and journals github.connected. A
// configured login the credentials do not post as stops serve
// (ghapi.ErrLoginMismatch). Credentials GitHub refuses
// (a 4xx that is no rate limit: 401, 403, 404) stop serve at start with
// GitHub's message. GitHub out of reach is journaled (github.failed
// reason=login_unknown) and connectGitHub reports that the login is still
// unknown: serve's github_login part then tries again (retryGitHub).
// Meanwhile the filter has the configured login ("" without one), or the
// one an outbox call learned first.
func (a *app) connectGitHub(ctx context.Context, cfg *schema.Config) (unknown bool, err error) {
	err = a.checkGitHub(ctx, cfg)
	if err == nil {
		return false, nil
	}
	if errors.Is(err, ghapi.ErrLoginMismatch) {
		return false, fmt.Errorf("github %s: %w", cfg.GitHub.APIURL, err)
	}
	if refused(err) {
		return false, fmt.Errorf("github %s: the credentials were refused: %w", cfg.GitHub.APIURL, err)
	}
	return true, nil
}

// retryGitHub repeats connectGitHub's check with the outbox's backoff
// (schema.DefaultGitHubBackoffInitial, doubling, at most
// DefaultGitHubLoginRetryMax) until it succeeds, then waits for ctx to end.
func (a *app) retryGitHub(ctx context.Context, cfg *schema.Config) {
	b := doubling.New(schema.DefaultGitHubBackoffInitial, schema.DefaultGitHubLoginRetryMax)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.NextBackOff()):
		}
		if a.checkGitHub(ctx, cfg) == nil {
			<-ctx.Done()
			return
		}
	}
}

// checkGitHub makes one start check (connectGitHub): the login found is
// stored and journaled (github.connected); a failure is journaled
// (github.failed reason=credentials_refused, or login_unknown when GitHub
// is out of reach, with GitHub's status and message) and returned.
func (a *app) checkGitHub(ctx context.Context, cfg *schema.Config) error {
	cctx, cancel := context.WithTimeout(ctx, schema.DefaultGitHubCallTimeout)
	defer cancel()
	got, err := a.github.Check(cctx)
	if err != nil {
		if ctx.Err() == nil {
			v, reason := ghapi.Classify(err, time.Now()), "login_unknown"
			if refused(err) {
				reason = "credentials_refused"
			}
			a.journal.Record(ctx, slog.LevelWarn, journal.GitHubFailed, "", "reason", reason, "api_url", cfg.GitHub.APIURL,
				"http_status", v.HTTPStatus, "err", v.Message)
		}
		return err
	}
	a.journal.Record(ctx, slog.LevelInfo, journal.GitHubConnected, "", "api_url", cfg.GitHub.APIURL, "login", got)
	return nil
}

// refused reports whether err is GitHub refusing the credentials: an
// answer that is not worth another try (ghapi.Classify: 401, 403 or 404
// with no rate limit).
func refused(err error) bool {
	v := ghapi.Classify(err, time.Now())
	return v.HTTPStatus != 0 && !v.Retry
}

// outboxWorker returns the worker that drains a's outbox into GitHub.
func (a *app) outboxWorker(cfg *schema.Config) *ghapi.Worker {
	lock := filepath.Join(cfg.StateDir, outboxLockFile)
	if a.limits == nil {
		a.limits = newLimits()
	}
	w := &ghapi.Worker{
		Store: a.store, API: a.github, Journal: a.journal, Now: time.Now, Limits: a.limits,
		Tries: schema.DefaultGitHubTries, Initial: schema.DefaultGitHubBackoffInitial, Max: schema.DefaultGitHubBackoffMax,
		Lock: func(ctx context.Context) (func(), error) { return flock.Lock(ctx, lock) },
	}
	if a.hosting != nil {
		// Each call is sent by the host that holds its item.
		host := a.hosting.Host.Name
		w.Due = func(ctx context.Context, now time.Time, limit int) ([]desired.Call, error) {
			return a.fleet.DueCallsFor(ctx, host, now, limit)
		}
	}
	return w
}

// newLimits returns the rate limits of the outbox's installations, with
// GitHub's documented waits (schema's DefaultGitHubWriteGap,
// DefaultGitHubPauseMin, DefaultGitHubPauseMax).
func newLimits() *ghapi.Limits {
	return ghapi.NewLimits(schema.DefaultGitHubWriteGap, schema.DefaultGitHubPauseMin, schema.DefaultGitHubPauseMax)
}

// talk returns what an item may say on GitHub under the config current
// returns (read at each status write, so a reload applies): its route's
// announce and acknowledge (schema.Route.Talk) and its maxDeliveriesPerHour
// (for the loop breaker's notice), and notices whenever the config has a
// github block; host names this machine in an announcement.
func talk(current func() *schema.Config, host string) func(desired.Record) desired.Talk {
	return func(r desired.Record) desired.Talk {
		cfg := current()
		on := cfg.GitHub != nil
		t := desired.Talk{Notify: on, Host: host, Socket: cfg.Tmux.Socket}
		if route, ok := cfg.Webhooks.GHWebhook.Routing.Route(r.Key.Owner, r.Key.Repo); ok {
			t.Announce, t.Acknowledge = route.Talk(on)
			t.MaxDeliveries = route.MaxDeliveries()
		}
		return t
	}
}

// drainOnce sends what the outbox holds due, for reconcile --once, within
// schema.DefaultOnceDrain: a call GitHub asks to retry later waits for the
// next run or for serve. Without credentials in the environment, the calls
// stay queued and that is journaled.
func (a *app) drainOnce(ctx context.Context, cfg *schema.Config) {
	if cfg.GitHub == nil {
		return
	}
	client, _, err := gitHubClient(cfg)
	if err != nil {
		a.journal.Record(ctx, slog.LevelWarn, journal.GitHubFailed, "", "reason", "no_credentials", "err", err)
		return
	}
	a.github = client
	ctx, cancel := context.WithTimeout(ctx, schema.DefaultOnceDrain)
	defer cancel()
	if _, err := a.outboxWorker(cfg).Drain(ctx); err != nil && ctx.Err() == nil {
		a.journal.Record(ctx, slog.LevelError, journal.GitHubFailed, "", "reason", "store_failed", "err", err)
	}
}

// hostname is this machine's name for an announcement, "localhost" when
// the kernel does not say.
func hostname() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "localhost"
}

// printCalls writes the outbox's calls that were given up (state failed),
// with GitHub's status and message, under a heading; nothing when there
// are none.
func printCalls(w io.Writer, calls []desired.Call) error {
	if len(calls) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nGITHUB CALLS GIVEN UP")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORK ITEM\tCALL\tTRIES\tHTTP STATUS\tMESSAGE")
	for _, c := range calls {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", c.Key, c.Kind, c.Attempts, c.HTTPStatus, journal.Quote(c.Error))
	}
	return tw.Flush()
}

// printPauses writes the pauses of GitHub calls that hold at now (a rate
// limit GitHub answered: ghapi.Limits), with how many calls wait in the
// outbox, under a heading; nothing when none holds.
func printPauses(w io.Writer, pauses []desired.Pause, waiting int, now time.Time) error {
	var held []desired.Pause
	for _, p := range pauses {
		if p.Holds(now) {
			held = append(held, p)
		}
	}
	if len(held) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nGITHUB CALLS PAUSED (%d waiting)\n", waiting)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTALLATION\tLIMIT\tUNTIL\tLEFT\tSTREAK\tHTTP STATUS\tMESSAGE")
	for _, p := range held {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", p.Installation, p.Kind, p.Until.UTC().Format(time.RFC3339),
			p.Until.Sub(now).Round(time.Second), p.Streak, p.HTTPStatus, journal.Quote(p.Message))
	}
	return tw.Flush()
}
