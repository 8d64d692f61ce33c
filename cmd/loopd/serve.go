package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// serveLockFile is the flock a running serve holds in the state dir.
const serveLockFile = "serve.lock"

// noServeNote is what a verb that changes an item's spec (hold, release)
// adds when no serve runs on cfg's SQLite state dir (its serveLockFile is
// not held): nothing carries the change out until one starts, or a
// reconcile --once runs. "" when one runs, or when the store is
// PostgreSQL's, whose item another host's serve may own.
func noServeNote(cfg *schema.Config) string {
	if cfg.Store.URL != "" {
		return ""
	}
	if held, err := flock.Held(filepath.Join(cfg.StateDir, serveLockFile)); err != nil || held {
		return ""
	}
	return "no loopd serve is running on " + cfg.StateDir + ": start it, or run loopd reconcile --once, to carry this out"
}

func newServeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: webhook receiver, reconcile loop, health and metrics",
		Long: `serve listens for GitHub webhooks on webhooks.ghWebhook.listen and runs the
reconcile loop: every reconcile.intervalSeconds, at once after each accepted
delivery, and at once when a pane dies (tmux pane-died hook). It also serves
/healthz, /readyz, /metrics (Prometheus) and a read-only status page at /
(webhooks.ghWebhook.statusPage: false turns it off). SIGHUP reloads the config; so
does a change of the file. An invalid config keeps the last good one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), g, nil) },
	}
}

func serve(ctx context.Context, g *globals, reached func(stage string)) error {
	d, err := newDaemon(g)
	if err != nil {
		return err
	}
	defer d.release()
	// A refusal returns before any part started; a stop (ctx ended)
	// between two stages runs none of them.
	stopped, err := runStages(ctx, d.stages(), reached)
	if err != nil {
		return err
	}
	if !stopped {
		d.log.Info(string(journal.ServeListening), "addr", d.ln.Addr().String(), "webhook_path", d.cfg.Webhooks.GHWebhook.Path,
			"socket", d.cfg.Tmux.Socket, "state_dir", d.cfg.StateDir, journal.KeyHost, d.a.hosting.Host.Name, journal.KeyStore, d.storeShown())
		d.a.journalAdopted(ctx)
		err = runParts(ctx, schema.ShutdownGrace, d.parts()...)
	}
	// The counts and deferred rows still pending, while the store is open.
	d.flush()
	if err != nil {
		return err
	}
	d.log.Info(string(journal.ServeStopped))
	return nil
}

// flushJournal writes both every schema.JournalFlushEvery until ctx ends, on one
// ticker. A store that still fails keeps the deferred rows for the next
// tick; the failure itself was logged when the row was deferred.
func flushJournal(ctx context.Context, repeats *journal.Limiter, rec *journal.Recorder, log *slog.Logger) {
	t := time.NewTicker(schema.JournalFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, schema.JournalFlushEvery)
			repeats.Flush(fctx)
			if err := rec.Flush(fctx); err != nil {
				log.Debug(string(journal.JournalAppendFailed), "err", err, "deferred", true)
			}
			cancel()
		}
	}
}

// refuse journals that this loopd does not run on its tmux server
// (serve.refused, so that loopd events shows why: another loopd owns it, or
// its process holds variables agents must not see) and returns err.
func (a *app) refuse(ctx context.Context, err error) error {
	reason := "server_owned"
	switch {
	case errors.Is(err, tmux.ErrServerEnvironment):
		reason = "server_environment"
	case errors.Is(err, store.ErrHostTaken):
		reason = "host_taken"
	}
	a.journal.Record(ctx, slog.LevelError, journal.ServeRefused, "", "reason", reason, "err", err)
	return err
}

// loadWithSecret loads the config and the webhook secret: the content of
// secretFile when it is set, else the env var secretEnv names, which it
// then removes from this process's environment so that nothing loopd
// starts inherits it. Before that, a loopd whose environment holds a
// secret re-executes itself without it (scrubEnviron). An empty secret is an error, since it would
// authenticate nothing. The secret itself is never logged.
// errSecretEnvEmpty is serve's refusal of a webhook secret variable env
// that is empty or unset; config validate warns with it.
func errSecretEnvEmpty(env string) error {
	return fmt.Errorf("webhook secret: environment variable %s is empty; set it to the secret configured on GitHub", env)
}

func (g *globals) loadWithSecret() (*schema.Config, string, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, "", err
	}
	// Then no secret stays in this process's /proc/<pid>/environ.
	if err := scrubEnviron(secretEnvNames(cfg)); err != nil {
		return nil, "", err
	}
	path, err := cfg.SecretFilePath(os.LookupEnv)
	if err != nil {
		return nil, "", fmt.Errorf("webhook secret: %w", err)
	}
	if path != "" {
		secret, err := readCredentialFile("webhook secret", "secretFile", "the secret configured on GitHub", path)
		if err != nil {
			return nil, "", err
		}
		return cfg, secret, nil
	}
	env := cfg.Webhooks.GHWebhook.SecretEnv
	secret := os.Getenv(env)
	if secret == "" {
		return nil, "", errSecretEnvEmpty(env)
	}
	if err := os.Unsetenv(env); err != nil {
		return nil, "", fmt.Errorf("webhook secret: unset %s: %w", env, err)
	}
	return cfg, secret, nil
}

// checkSecretFiles checks the files cfg takes its secrets from (secretFile,
// github.tokenFile and the GitHub App's privateKeyFile) as their readers do
// (perm.Secret), without reading them: for config validate and reconcile
// --once, which read neither or only the key, so that they say what serve
// would refuse. A file whose path names an unset variable
// (${CREDENTIALS_DIRECTORY} outside its unit) cannot be checked; cannot,
// when not nil, is told why.
func checkSecretFiles(cfg *schema.Config, cannot func(error)) error {
	// Each file, named as its reader names it.
	files := map[string]string{}
	for _, f := range []struct {
		what, key string
		path      func(lookup func(string) (string, bool)) (string, error)
	}{{"webhook secret", "secretFile", cfg.SecretFilePath}, {"github", "tokenFile", cfg.TokenFilePath}} {
		switch path, err := f.path(os.LookupEnv); {
		case err != nil:
			if cannot != nil {
				cannot(fmt.Errorf("%s: %w; its file's mode is not checked", f.what, err))
			}
		case path != "":
			files[f.what+": "+f.key] = path
		}
	}
	if g := cfg.GitHub; g != nil && g.App != nil {
		files["github app: privateKeyFile"] = g.App.PrivateKeyFile
	}
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := perm.Secret(files[name]); err != nil {
			problems = append(problems, fmt.Errorf("%s %w", name, err))
		}
	}
	return errors.Join(problems...)
}

// maxSecretFile caps the bytes read from a credential file; GitHub's
// webhook secrets and tokens are short strings.
const maxSecretFile = 64 << 10

// readCredentialFile returns the content of path, the file the config key
// names (secretFile, tokenFile) for what (the webhook secret, github),
// which should hold fill, less one trailing newline (as echo and most
// editors leave one, "\n" or "\r\n"). A missing, unreadable, oversized or
// empty file is an error naming path, and so is one that other users can
// read or change (perm.Secret).
func readCredentialFile(what, key, fill, path string) (string, error) {
	if err := perm.Secret(path); err != nil {
		return "", fmt.Errorf("%s: %s %w", what, key, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", what, key, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", what, key, err) // read <path>: …
	}
	if len(data) > maxSecretFile {
		return "", fmt.Errorf("%s: %s %s: larger than %d bytes", what, key, path, maxSecretFile)
	}
	secret, ok := strings.CutSuffix(string(data), "\r\n")
	if !ok {
		secret = strings.TrimSuffix(secret, "\n")
	}
	if secret == "" {
		return "", fmt.Errorf("%s: %s %s is empty; write %s into it", what, key, path, fill)
	}
	return secret, nil
}

// journalAdopted records serve.adopted with how many live agents of this
// loopd run on its tmux server at start (a restart: they ran on while no
// daemon watched, and are watched again); nothing when there are none or
// tmux cannot be read (the first pass says why).
func (a *app) journalAdopted(ctx context.Context) {
	panes, err := a.tmux.ListPanes(ctx)
	if err != nil {
		return
	}
	var sessions []string
	for _, p := range panes {
		if !p.Dead && p.Owner == a.owner.ID {
			sessions = append(sessions, p.Session)
		}
	}
	if len(sessions) > 0 {
		a.journal.Record(ctx, slog.LevelInfo, journal.ServeAdopted, "", journal.KeyAdopted, len(sessions),
			journal.KeySession, strings.Join(sessions, ","))
	}
}
