package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/credential"
	"github.com/loopd/loopd/internal/flock"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/webhook"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// daemon is what serve builds, stage by stage (its stages), and then runs
// (its parts).
type daemon struct {
	g      *globals
	log    *slog.Logger
	cfg    *schema.Config
	secret string
	// repeats folds a failure that repeats (a full disk fails every pass):
	// written once, then once a window with its count, in the log and the
	// journal.
	repeats  *journal.Limiter
	ghClient *ghapi.Client
	ghCred   ghapi.Credentials
	a        *app
	// rows is the store's journal, folded by repeats.
	rows journal.Appender
	// releases undo what the stages hold, run in reverse order (release).
	releases []func()

	watcher    *schema.Watcher
	rc         *reconciler.Reconciler
	rejections *journal.Async
	ci         *webhook.CIFlusher
	channels   *channelServer
	// stopChannels ends the channel server's ctx.
	stopChannels context.CancelFunc
	// loginUnknown: GitHub was out of reach at start (connectGitHub).
	loginUnknown bool
	// hup gets SIGHUP from wiring on, so that one sent once serve
	// listens reloads rather than kills it.
	hup     chan os.Signal
	srv     *http.Server
	limits  webhook.ServerLimits
	refused func(reason, remoteAddr string)
	ln      net.Listener
}

// newDaemon builds the logger and loads the config, the webhook secret and
// the GitHub credentials (the token's variable unset before anything is
// started that could inherit it). It holds nothing yet.
func newDaemon(g *globals) (*daemon, error) {
	log, err := g.logger(os.Stderr)
	if err != nil {
		return nil, err
	}
	repeats := journal.NewLimiter(journal.DefaultRepeatWindow, journal.DefaultMaxFailures, time.Now)
	// The reconcile id goes on before the limiter keeps a line, so that a
	// line it writes later for folded repeats carries it too.
	log = slog.New(journal.WithPassID(repeats.Handler(log.Handler())))
	cfg, secret, err := g.loadWithSecret()
	if err != nil {
		return nil, err
	}
	ghClient, ghCred, err := gitHubClient(cfg)
	if err != nil {
		return nil, err
	}
	return &daemon{g: g, log: log, cfg: cfg, secret: secret, repeats: repeats, ghClient: ghClient, ghCred: ghCred}, nil
}

// stages are serve's start-up, in order; the refusals among them are
// journaled (serve.refused) or logged as they refuse.
func (d *daemon) stages() []stage {
	return []stage{
		{"tmux_owner", d.refuseOwnedFirst},
		{"state_dir", d.lockStateDir},
		{"store", d.openStore},
		{"tmux_socket", d.lockSocket},
		{"host_name", d.claimHostName},
		{"tmux_server", d.claimServer},
		{"wiring", d.wire},
		{"port", d.listen},
	}
}

// release runs the releases of the stages that passed, last first.
func (d *daemon) release() {
	for _, f := range slices.Backward(d.releases) {
		f()
	}
}

// refuseOwnedFirst refuses a tmux server that carries another loopd's
// owner mark before anything is made (refuseOwnedServer).
func (d *daemon) refuseOwnedFirst(ctx context.Context) error {
	return refuseOwnedServer(ctx, d.cfg, d.log)
}

// refuseOwnedServer refuses a tmux server that carries another loopd's
// owner mark before anything is made, when this loopd has no state dir
// yet: a refused serve or reconcile --once leaves nothing behind, and
// there is no journal to tell (the refusal is logged, serve.refused
// reason=server_owned). With a state dir, claimServer (serve) or
// claimForOnce (reconcile --once) refuses it, journaled. No server, or one
// that cannot be read, is left to the later stages.
func refuseOwnedServer(ctx context.Context, cfg *schema.Config, log *slog.Logger) error {
	if _, err := os.Stat(cfg.StateDir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	owner, err := tmux.OwnerOf(cfg.StateDir)
	if err != nil {
		return err
	}
	other, err := tmux.NewExec(cfg.Tmux.Socket, log).ServerOwner(ctx)
	if err != nil || other.ID == "" || other.ID == owner.ID {
		return nil
	}
	err = serverTaken(cfg, other.StateDir)
	log.Error(string(journal.ServeRefused), "reason", "server_owned", "err", err)
	return err
}

// lockStateDir refuses a second daemon on one state dir: it would double
// every wake-up and race the first for the same panes. The dir is its
// owner's alone.
func (d *daemon) lockStateDir(ctx context.Context) error {
	changed, err := privateStateDir(d.cfg.StateDir)
	if err != nil {
		return err
	}
	for _, c := range changed {
		logTightened(d.log)(c)
	}
	lockCtx, cancel := context.WithTimeout(ctx, schema.StartLockWait)
	unlock, err := flock.Lock(lockCtx, filepath.Join(d.cfg.StateDir, serveLockFile))
	cancel()
	if err != nil {
		if errors.Is(err, flock.ErrLocked) {
			// The wait's deadline says nothing to a person.
			return fmt.Errorf("state dir %s: another loopd serve is running on it (%s is locked): stop it, or give this one another stateDir", d.cfg.StateDir, serveLockFile)
		}
		return fmt.Errorf("state dir %s: %w", d.cfg.StateDir, err)
	}
	d.releases = append(d.releases, unlock)
	return nil
}

// openStore opens the store and builds the app; it checks the routes and
// the sandbox against the harnesses built, and joins this host to the
// hosts sharing the store (its leases decide which items it runs).
func (d *daemon) openStore(ctx context.Context) error {
	a, err := newApp(ctx, d.cfg, d.g.config, d.log)
	if err != nil {
		return err
	}
	d.releases = append(d.releases, func() { a.store.Close() })
	d.a = a
	if err := checkRoutes(d.cfg, a.harnesses); err != nil {
		return err
	}
	if err := checkSandbox(d.cfg, a.sandbox); err != nil {
		return err
	}
	a.github = d.ghClient
	// Journal rows of a repeated failure are folded like its log lines;
	// the recorder newApp made served only the harness checks at start.
	d.rows = d.repeats.Appender(a.store)
	a.journal = journal.NewRecorder(d.log, d.rows, time.Now)
	return a.joinFleet(d.cfg, false)
}

// lockSocket refuses a second loopd on one tmux server: two would adopt,
// paste into and kill each other's agents. The socket lock keeps a second
// serve out while this one runs; the server's owner mark (claimServer)
// keeps out any loopd of another state dir for as long as the server
// lives.
func (d *daemon) lockSocket(ctx context.Context) error {
	unlock, _, err := lockSocket(ctx, d.cfg, d.a.owner, schema.StartLockWait)
	if err != nil {
		return d.a.refuse(ctx, err)
	}
	d.releases = append(d.releases, unlock)
	return nil
}

// claimHostName refuses a host name a live daemon has: the second would
// adopt the first's leases and start fresh conversations beside its
// agents. A store out of reach is not a refusal: the first pass
// heartbeats, and the loop retries.
func (d *daemon) claimHostName(ctx context.Context) error {
	if err := d.a.hosting.Heartbeat(ctx); errors.Is(err, store.ErrHostTaken) {
		return d.a.refuse(ctx, fmt.Errorf("%w; give this daemon another host.name, or stop the other one", err))
	}
	return nil
}

// claimServer starts the tmux server, or checks the one running: it
// refuses one of another loopd's mark, or whose environment holds
// variables agents must not see. No tmux yet is no refusal: the loop says
// tmux.unavailable and retries. A serve that stops, before its parts run
// (a port taken) or after, leaves no server behind that holds no agent:
// one empty and of its mark ends (before the socket's lock file goes, a
// release of an earlier stage). One with agents runs on, for the next
// serve to adopt.
func (d *daemon) claimServer(ctx context.Context) error {
	a := d.a
	d.releases = append(d.releases, func() { a.stopEmptyServer(ctx) })
	// No server before this one: the agents' server went while no loopd
	// ran (observed.Observer.Restarted).
	a.restarted = !tmux.ServerListening(d.cfg.Tmux.Socket)
	err := a.tmux.EnsureServer(ctx, a.serverOptions(d.cfg))
	switch {
	case errors.Is(err, tmux.ErrServerOwned):
		owner, rerr := a.tmux.ServerOwner(ctx)
		if rerr != nil {
			return a.refuse(ctx, fmt.Errorf("%w: %w", errServerTaken, err))
		}
		return a.refuse(ctx, serverTaken(d.cfg, owner.StateDir))
	case errors.Is(err, tmux.ErrServerEnvironment):
		return a.refuse(ctx, err)
	case err != nil:
		d.log.Warn(string(journal.TmuxUnavailable), "err", err)
	}
	return nil
}

// wire builds what the parts run: the config watcher, the reconciler, the
// channel server with the channels of the agents it adopts, the GitHub
// login, and the HTTP server.
func (d *daemon) wire(ctx context.Context) error {
	a, cfg := d.a, d.cfg
	// The watcher reports reloads through its logger; this one also puts
	// them in the journal, so loopd events shows them.
	watchLog := slog.New(journal.NewHandler(d.log.Handler(), d.rows, journal.ConfigReloaded, journal.ConfigInvalid))
	watcher, err := schema.NewWatcher(d.g.config, watchLog, nil)
	if err != nil {
		return err
	}
	// The harnesses are the ones built at start (a reload cannot change
	// them): a reloaded route must suit them.
	watcher.Check = func(c *schema.Config) error {
		return errors.Join(checkRoutes(c, a.harnesses), checkSandbox(c, a.sandbox))
	}
	d.watcher = watcher
	d.hup = make(chan os.Signal, 1)
	signal.Notify(d.hup, syscall.SIGHUP)
	d.releases = append(d.releases, func() { signal.Stop(d.hup) })
	// The rejections of unauthenticated requests are journaled from a
	// queue, folded by the limiter: their answer never waits on the store.
	d.rejections = journal.NewAsync(a.store, journal.DefaultAsyncQueue, d.log)
	reg := prometheus.NewRegistry()
	listener, _ := a.store.(store.Listener)
	reconcileMetrics, webhookMetrics := registerMetrics(reg, d.rejections, listener, d.a.hosting.StoreDown)
	if a.github != nil {
		// The outbox's rate limits, on /metrics as they are held.
		a.limits = newLimits()
		reg.MustRegister(a.limits.Collector(time.Now))
	}
	d.rc = a.reconciler(cfg, watcher.Current)
	d.rc.Metrics, d.rc.Executor.Meter = reconcileMetrics, reconcileMetrics
	// Each item's agent asks for its credential over its channel's
	// socket, which serve listens on from the agent's spawn (and, for the
	// agents it adopts, from now) until it stops.
	broker, err := a.credentialBroker(cfg, watcher.Current, d.ghCred)
	if err != nil {
		return err
	}
	d.openChannels(ctx, broker)
	// The failed checks of a commit go to its agent as one prompt, once
	// its suites complete or it has been quiet for a while.
	d.ci = webhook.NewCIFlusher(a.store, func() schema.GHWebhook { return watcher.Current().Webhooks.GHWebhook }, a.journal, d.rc.Trigger)
	mux, err := d.routes(ctx, reg, webhookMetrics)
	if err != nil {
		return err
	}
	d.limits = webhook.DefaultServerLimits
	d.limits.MaxConnsPerAddress = cfg.Webhooks.GHWebhook.ConnsPerAddress()
	d.srv = webhook.NewServer(mux, d.limits)
	return nil
}

// openChannels starts the channel server, which stops with serve whichever
// way it returns (a port taken at start included), and opens the
// channels of the agents a restarted daemon adopts.
func (d *daemon) openChannels(ctx context.Context, broker *credential.Broker) {
	channelsCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.channels, d.stopChannels = newChannelServer(channelsCtx, broker, d.a.journal, d.log), stop
	d.releases = append(d.releases, func() { stop(); d.channels.Wait() })
	d.rc.Executor.OpenChannel = d.channels.Open
	if records, err := d.a.store.Records(ctx); err == nil {
		d.channels.OpenAll(records, channel.Root(d.cfg.StateDir))
	} else {
		d.log.Warn(string(journal.ChannelFailed), "err", err)
	}
}

// routes is the HTTP listener's handler: the webhook, /healthz, /readyz,
// /metrics and the status page, each but the webhook's path answering
// only its own Host names (a page whose DNS name rebinds to the listener
// reads nothing).
func (d *daemon) routes(ctx context.Context, reg *prometheus.Registry, metrics *webhook.Metrics) (http.Handler, error) {
	a, hook, current := d.a, d.cfg.Webhooks.GHWebhook, d.watcher.Current
	// The login whose comments are never delivered to an agent: the
	// configured one, or the one the credentials belong to, asked at start
	// and, while GitHub is out of reach, in the background until known;
	// the client keeps it once any call learned it (ghapi.Client.Known).
	// The github block needs a restart to change.
	configured := d.cfg.BotLogin()
	botLogin := func() string { return configured }
	if a.github != nil {
		unknown, err := a.connectGitHub(ctx, d.cfg)
		if err != nil {
			return nil, err
		}
		d.loginUnknown = unknown
		botLogin = func() string {
			if l := a.github.Known(); l != "" {
				return l
			}
			return configured
		}
	}
	// Unauthenticated requests' rejections, and the listener's refusals.
	rejected := journal.NewRecorder(d.log, d.repeats.Appender(d.rejections), time.Now)
	refused := webhook.Refusals(rejected, metrics)
	mux := http.NewServeMux()
	mux.Handle(hook.Path, webhook.New(webhook.Options{
		Secret:     []byte(d.secret),
		Config:     func() schema.GHWebhook { return current().Webhooks.GHWebhook },
		Store:      a.store,
		Recorder:   a.journal,
		Rejections: rejected,
		Metrics:    metrics,
		Trigger:    d.rc.Trigger,
		CIReady:    d.ci.Kick,
		Log:        d.log,
		BotLogin:   botLogin,
	}))
	// The listener's own pages answer GET (and HEAD) only.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", a.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err := a.registerStatusPage(mux, d.cfg, current, d.rc); err != nil {
		return nil, err
	}
	own := webhook.OwnHosts{Listen: hook.Listen, Hostname: hostname(),
		Allowed: func() []string { return current().Webhooks.GHWebhook.AllowedHosts }}
	d.refused = refused
	return own.Guard(mux, func(r *http.Request) bool { _, pattern := mux.Handler(r); return pattern == hook.Path },
		func(r *http.Request) { refused(webhook.ReasonHostNotAllowed, r.RemoteAddr) }), nil
}

// ready is /readyz: the store and tmux answer, and the store's listener,
// when it has one, is up (else another host's changes reach this one only
// on its timer). A 503 names every one that is not, a line each: with the
// database refusing connections, the store and its listener are both down.
func (a *app) ready(w http.ResponseWriter, r *http.Request) {
	var down []string
	if _, err := a.store.Records(r.Context()); err != nil {
		down = append(down, "store: "+err.Error())
	}
	if _, err := a.tmux.ListPanes(r.Context()); err != nil {
		down = append(down, "tmux: "+err.Error())
	}
	if l, ok := a.store.(store.Listener); ok {
		if err := l.ListenDown(); err != nil {
			down = append(down, "store: "+err.Error())
		}
	}
	if len(down) > 0 {
		http.Error(w, strings.Join(down, "\n"), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// listen takes the webhook's port; one taken refuses the start. The
// listener part closes it; a serve that stops before that closes it here.
func (d *daemon) listen(context.Context) error {
	hook := d.cfg.Webhooks.GHWebhook
	ln, err := net.Listen("tcp", hook.Listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listen %s: %w: another process (another loopd serve?) listens there; stop it, or set webhooks.ghWebhook.listen", hook.Listen, err)
		}
		return fmt.Errorf("listen %s: %w", hook.Listen, err)
	}
	d.ln = d.limits.Listener(ln, d.refused)
	d.releases = append(d.releases, func() { _ = ln.Close() })
	return nil
}

// parts are what serve runs, in the order they stop: the listener first,
// so that no delivery is accepted that the loop would not see; then the
// loop, while the lease heart still renews its leases; then the workers
// it feeds; the channel server, whose answers are journaled; and the
// journal flusher last (serve writes what is left after the group, while
// the store is open).
func (d *daemon) parts() []part {
	a := d.a
	ps := []part{
		{"listener", d.serveHTTP},
		{"loop", d.rc.Run},
		// The heartbeat renews this host's leases (a restart within
		// leaseSeconds keeps them all: the first pass heartbeats before
		// it plans, and adopts the agents still running) and hands out
		// the items no live host holds.
		{"lease_heart", func(ctx context.Context) error { a.hosting.Run(ctx, d.rc.Trigger); return nil }},
	}
	if l, ok := a.store.(store.Listener); ok {
		// Another host's ingest or lease change wakes a pass within
		// milliseconds; the resync interval stays the safety net.
		ps = append(ps, part{"store_listener", func(ctx context.Context) error {
			_ = l.Listen(ctx, d.rc.Trigger, store.ListenJournal{Recorder: a.journal, Host: a.hosting.Host.Name}) // ctx's cause, at the end
			return nil
		}})
	}
	if a.github != nil {
		ps = append(ps, part{"outbox", func(ctx context.Context) error {
			a.outboxWorker(d.cfg).Run(ctx, schema.DefaultGitHubPoll)
			return nil
		}})
	}
	if d.loginUnknown {
		ps = append(ps, part{"github_login", func(ctx context.Context) error { a.retryGitHub(ctx, d.cfg); return nil }})
	}
	return append(ps,
		// The transcripts of this host's items reach the store every few
		// seconds, besides after each verified delivery and before a
		// drain's release, so that another host can resume them.
		part{"transcript_shipper", func(ctx context.Context) error {
			_ = a.mover.Run(ctx, a.store.Records, schema.TranscriptShipInterval) // ctx's cause, at the end
			return nil
		}},
		part{"ci_flusher", func(ctx context.Context) error { d.ci.Run(ctx); return nil }},
		// The journal keeps retention.journalDays of rows: pruned at
		// start and hourly, in small batches, its space given back.
		part{"retention", func(ctx context.Context) error {
			retain(ctx, a.store, a.journal, d.watcher.Current, time.Now)
			return nil
		}},
		part{"config_watcher", d.watchConfig},
		part{"rejections", func(ctx context.Context) error { d.rejections.Run(ctx); return nil }},
		part{"channels", func(ctx context.Context) error { <-ctx.Done(); d.stopChannels(); d.channels.Wait(); return nil }},
		part{"journal_flusher", func(ctx context.Context) error { flushJournal(ctx, d.repeats, a.journal, d.log); return nil }},
	)
}

// serveHTTP serves the listener until ctx ends, then lets the requests in
// flight finish within schema.ShutdownGrace.
func (d *daemon) serveHTTP(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- d.srv.Serve(d.ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), schema.ShutdownGrace)
	defer cancel()
	_ = d.srv.Shutdown(shutdownCtx)
	<-served // http.ErrServerClosed
	return nil
}

// watchConfig reloads the config on SIGHUP and on a change of its file
// until ctx ends; without the file watch, SIGHUP still reloads.
func (d *daemon) watchConfig(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := d.watcher.Run(ctx); err != nil {
			d.log.Error(string(journal.ConfigWatchFailed), "path", d.g.config, "err", err)
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.hup:
			// Reload logs config.reloaded or config.invalid itself.
			_ = d.watcher.Reload()
			d.rc.Trigger()
		}
	}
}

// flush writes, within schema.ShutdownGrace and while the store is open,
// what the journal layer still holds: the counts of folded repeats, the
// queued rejections, and the rows a failing store made wait.
func (d *daemon) flush() {
	if d.a == nil {
		return // stopped before the store opened
	}
	ctx, cancel := context.WithTimeout(context.Background(), schema.ShutdownGrace)
	defer cancel()
	d.repeats.FlushAll(ctx)
	if d.rejections != nil {
		d.rejections.Drain(ctx)
	}
	if err := d.a.journal.Flush(ctx); err != nil {
		d.log.Error(string(journal.JournalAppendFailed), "err", err)
	}
}

// storeShown is the store serve.listening names: sqlite, or the
// PostgreSQL URL without its password.
func (d *daemon) storeShown() string {
	if d.cfg.Store.URL != "" {
		return sqlstore.RedactURL(d.cfg.Store.URL)
	}
	return "sqlite"
}
