package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/perm"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// serveLockFile is the flock a running serve holds in the state dir.
const serveLockFile = "serve.lock"

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
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), g) },
	}
}

func serve(ctx context.Context, g *globals) error {
	log, err := g.logger(os.Stderr)
	if err != nil {
		return err
	}
	// A failure that repeats (a full disk fails every pass) is written
	// once, then once a window with its count, in the log and the journal.
	repeats := journal.NewLimiter(journal.DefaultRepeatWindow, journal.DefaultMaxFailures, time.Now)
	// The reconcile id goes on before the limiter keeps a line, so that a
	// line it writes later for folded repeats carries it too.
	log = slog.New(journal.WithPassID(repeats.Handler(log.Handler())))
	cfg, secret, err := g.loadWithSecret()
	if err != nil {
		return err
	}
	// The GitHub credentials are read, and the token's variable unset,
	// before anything is started that could inherit them.
	ghClient, ghCred, err := gitHubClient(cfg)
	if err != nil {
		return err
	}
	hook := cfg.Webhooks.GHWebhook
	// One daemon per state dir: a second would double every wake-up and
	// race the first for the same panes. The dir is its owner's alone.
	changed, err := privateStateDir(cfg.StateDir)
	if err != nil {
		return err
	}
	for _, c := range changed {
		logTightened(log)(c)
	}
	lockCtx, cancel := context.WithTimeout(ctx, schema.StartLockWait)
	unlock, err := flock.Lock(lockCtx, filepath.Join(cfg.StateDir, serveLockFile))
	cancel()
	if err != nil {
		return fmt.Errorf("state dir %s: another loopd serve is running on it: %w", cfg.StateDir, err)
	}
	defer unlock()
	a, err := newApp(ctx, cfg, g.config, log)
	if err != nil {
		return err
	}
	defer a.store.Close()
	if err := checkRoutes(cfg, a.harnesses); err != nil {
		return err
	}
	if err := checkSandbox(cfg, a.sandbox); err != nil {
		return err
	}
	a.github = ghClient
	// Journal rows of a repeated failure are folded like its log lines; the
	// recorder newApp made served only the harness checks at start.
	rows := repeats.Appender(a.store)
	a.journal = journal.NewRecorder(log, rows, time.Now)
	// This host among the hosts sharing the store: its leases decide
	// which items it runs.
	if err := a.joinFleet(cfg, false); err != nil {
		return err
	}
	// One loopd per tmux server: two on one server would adopt, paste into
	// and kill each other's agents. The socket lock keeps a second serve
	// out while this one runs; the server's owner mark keeps out any loopd
	// of another state dir for as long as the server lives.
	unlockSocket, _, err := lockSocket(ctx, cfg, a.owner, schema.StartLockWait)
	if err != nil {
		return a.refuse(ctx, err)
	}
	defer unlockSocket()
	// Two live daemons never share a host name: the second would adopt
	// the first's leases and start fresh conversations beside its agents.
	// A store out of reach is not a refusal: the first pass heartbeats,
	// and the loop retries.
	if err := a.hosting.Heartbeat(ctx); errors.Is(err, store.ErrHostTaken) {
		return a.refuse(ctx, fmt.Errorf("%w; give this daemon another host.name, or stop the other one", err))
	}
	if err := a.tmux.EnsureServer(ctx, a.serverOptions(cfg)); errors.Is(err, tmux.ErrServerOwned) {
		owner, rerr := a.tmux.ServerOwner(ctx)
		if rerr != nil {
			return a.refuse(ctx, fmt.Errorf("%w: %w", errServerTaken, err))
		}
		return a.refuse(ctx, serverTaken(cfg, owner.StateDir))
	} else if errors.Is(err, tmux.ErrServerEnvironment) {
		return a.refuse(ctx, err)
	} else if err != nil {
		// No tmux yet: the loop says tmux.unavailable and retries.
		log.Warn(string(journal.TmuxUnavailable), "err", err)
	}
	// A serve that fails from here on, before it listens (a port taken),
	// leaves no server behind that it started: one still empty and of its
	// mark ends, and then its socket's lock file (unlockSocket, deferred
	// before this, so run after).
	listening := false
	defer func() {
		if !listening {
			a.stopEmptyServer(ctx)
		}
	}()
	// The watcher reports reloads through its logger; this one also puts
	// them in the journal, so loopd events shows them.
	watchLog := slog.New(journal.NewHandler(log.Handler(), rows, journal.ConfigReloaded, journal.ConfigInvalid))
	watcher, err := schema.NewWatcher(g.config, watchLog, nil)
	if err != nil {
		return err
	}
	// The harnesses are the ones built at start (a reload cannot change
	// them): a reloaded route must suit them.
	watcher.Check = func(c *schema.Config) error {
		return errors.Join(checkRoutes(c, a.harnesses), checkSandbox(c, a.sandbox))
	}

	// The rejections of unauthenticated requests are journaled from a
	// queue, folded by the limiter: their answer never waits on the store.
	rejections := journal.NewAsync(a.store, journal.DefaultAsyncQueue, log)
	reg := prometheus.NewRegistry()
	listener, _ := a.store.(store.Listener)
	reconcileMetrics, webhookMetrics := registerMetrics(reg, rejections, listener, a.hosting.StoreDown)
	if a.github != nil {
		// The outbox's rate limits, on /metrics as they are held.
		a.limits = newLimits()
		reg.MustRegister(a.limits.Collector(time.Now))
	}
	rc := a.reconciler(cfg, watcher.Current)
	rc.Metrics, rc.Executor.Meter = reconcileMetrics, reconcileMetrics
	// Each item's agent asks for its credential over its channel's
	// socket, which serve listens on from the agent's spawn (and, for the
	// agents it adopts, from now) until it stops.
	broker, err := a.credentialBroker(cfg, watcher.Current, ghCred)
	if err != nil {
		return err
	}
	// They stop with serve, whichever way it returns (a port taken at
	// start included), before it waits for their requests in flight.
	channelsCtx, stopChannels := context.WithCancel(ctx)
	channels := newChannelServer(channelsCtx, broker, a.journal, log)
	defer channels.Wait()
	defer stopChannels()
	rc.Executor.OpenChannel = channels.Open
	if records, err := a.store.Records(ctx); err == nil {
		channels.OpenAll(records, channel.Root(cfg.StateDir))
	} else {
		log.Warn(string(journal.ChannelFailed), "err", err)
	}

	// The login whose comments are never delivered to an agent: the
	// configured one, or the one the credentials belong to, asked at start
	// and, while GitHub is out of reach, in the background until known;
	// the client keeps it once any call learned it (ghapi.Client.Known).
	// The github block needs a restart to change.
	configured := cfg.BotLogin()
	botLogin := func() string { return configured }
	if a.github != nil {
		if err := a.connectGitHub(ctx, cfg); err != nil {
			return err
		}
		botLogin = func() string {
			if l := a.github.Known(); l != "" {
				return l
			}
			return configured
		}
	}
	// Unauthenticated requests' rejections, and the listener's refusals.
	rejected := journal.NewRecorder(log, repeats.Appender(rejections), time.Now)
	refused := webhook.Refusals(rejected, webhookMetrics)
	mux := http.NewServeMux()
	// The failed checks of a commit go to its agent as one prompt, once
	// its suites complete or it has been quiet for a while.
	ci := webhook.NewCIFlusher(a.store, func() schema.GHWebhook { return watcher.Current().Webhooks.GHWebhook }, a.journal, rc.Trigger)
	mux.Handle(hook.Path, webhook.New(webhook.Options{
		Secret:     []byte(secret),
		Config:     func() schema.GHWebhook { return watcher.Current().Webhooks.GHWebhook },
		Store:      a.store,
		Recorder:   a.journal,
		Rejections: rejected,
		Metrics:    webhookMetrics,
		Trigger:    rc.Trigger,
		CIReady:    ci.Kick,
		Log:        log,
		BotLogin:   botLogin,
	}))
	// The listener's own pages answer GET (and HEAD) only.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.store.Records(r.Context()); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if _, err := a.tmux.ListPanes(r.Context()); err != nil {
			http.Error(w, "tmux: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if l, ok := a.store.(store.Listener); ok {
			if err := l.ListenDown(); err != nil {
				// Another host's changes reach this one only on its timer.
				http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err := a.registerStatusPage(mux, cfg, watcher.Current, rc); err != nil {
		return err
	}
	// Everything but the webhook's path answers only its own Host names
	// (a page whose DNS name rebinds to the listener reads nothing).
	own := webhook.OwnHosts{Listen: hook.Listen, Hostname: hostname(),
		Allowed: func() []string { return watcher.Current().Webhooks.GHWebhook.AllowedHosts }}
	handler := own.Guard(mux, func(r *http.Request) bool { _, pattern := mux.Handler(r); return pattern == hook.Path },
		func(r *http.Request) { refused(webhook.ReasonHostNotAllowed, r.RemoteAddr) })

	ln, err := net.Listen("tcp", hook.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", hook.Listen, err)
	}
	listening = true
	limits := webhook.DefaultServerLimits
	limits.MaxConnsPerAddress = hook.ConnsPerAddress()
	srv := webhook.NewServer(handler, limits)
	storeShown := "sqlite"
	if cfg.Store.URL != "" {
		storeShown = sqlstore.RedactURL(cfg.Store.URL)
	}
	log.Info(string(journal.ServeListening), "addr", ln.Addr().String(), "webhook_path", hook.Path,
		"socket", cfg.Tmux.Socket, "state_dir", cfg.StateDir, journal.KeyHost, a.hosting.Host.Name, journal.KeyStore, storeShown)
	a.journalAdopted(ctx)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				// Reload logs config.reloaded or config.invalid itself.
				_ = watcher.Reload()
				rc.Trigger()
			}
		}
	}()
	go func() {
		// Without the file watch, SIGHUP still reloads.
		if err := watcher.Run(ctx); err != nil {
			log.Error(string(journal.ConfigWatchFailed), "path", g.config, "err", err)
		}
	}()
	go flushJournal(ctx, repeats, a.journal, log)
	rejectionsDone := make(chan struct{})
	go func() {
		defer close(rejectionsDone)
		rejections.Run(ctx)
	}()
	outboxDone := make(chan struct{})
	if a.github != nil {
		go func() {
			defer close(outboxDone)
			a.outboxWorker(cfg).Run(ctx, schema.DefaultGitHubPoll)
		}()
	} else {
		close(outboxDone)
	}
	// The heartbeat renews this host's leases (a restart within
	// leaseSeconds keeps them all: the first pass heartbeats before it
	// plans, and adopts the agents still running) and hands out the items
	// no live host holds.
	hostsDone := make(chan struct{})
	go func() {
		defer close(hostsDone)
		a.hosting.Run(ctx, rc.Trigger)
	}()
	// The transcripts of this host's items reach the store every few
	// seconds, besides after each verified delivery and before a drain's
	// release, so that another host can resume them.
	shipDone := make(chan struct{})
	go func() {
		defer close(shipDone)
		_ = a.mover.Run(ctx, a.store.Records, schema.TranscriptShipInterval) // ctx's cause, at the end
	}()
	listenDone := make(chan struct{})
	if l, ok := a.store.(store.Listener); ok {
		// Another host's ingest or lease change wakes a pass within
		// milliseconds; the resync interval stays the safety net.
		go func() {
			defer close(listenDone)
			_ = l.Listen(ctx, rc.Trigger) // ctx's cause, at the end
		}()
	} else {
		close(listenDone)
	}
	// The journal keeps retention.journalDays of rows: pruned at start
	// and hourly, in small batches, its space given back.
	retainDone := make(chan struct{})
	go func() {
		defer close(retainDone)
		retain(ctx, a.store, a.journal, watcher.Current, time.Now)
	}()
	ciDone := make(chan struct{})
	go func() {
		defer close(ciDone)
		ci.Run(ctx)
	}()
	loopDone := make(chan error, 1)
	go func() { loopDone <- rc.Run(ctx) }()

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(limits.Listener(ln, refused)) }()
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http: %w", err)
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), schema.ShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	<-loopDone
	<-outboxDone
	<-hostsDone
	<-listenDone
	<-shipDone
	<-rejectionsDone
	<-retainDone
	<-ciDone
	// The counts and deferred rows still pending, while the store is open.
	repeats.FlushAll(shutdownCtx)
	rejections.Drain(shutdownCtx)
	if err := a.journal.Flush(shutdownCtx); err != nil {
		log.Error(string(journal.JournalAppendFailed), "err", err)
	}
	log.Info(string(journal.ServeStopped))
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
		return nil, "", fmt.Errorf("webhook secret: environment variable %s is empty; set it to the secret configured on GitHub", env)
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
