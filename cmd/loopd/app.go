package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/ghapi"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/internal/launch"
	"github.com/loopd/loopd/internal/paneenv"
	"github.com/loopd/loopd/internal/runner"
	"github.com/loopd/loopd/internal/tmux"
	"github.com/loopd/loopd/internal/transcript"
	"github.com/loopd/loopd/internal/workspace"
	"github.com/loopd/loopd/observed"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
	"github.com/loopd/loopd/store/sqlstore"
)

// paneDiedChannel is the tmux wait-for channel the pane-died hook signals.
const paneDiedChannel = "loopd-pane-died"

// storeFile is the SQLite file's name inside the state dir.
const storeFile = "loopd.db"

// launchDir is the directory inside the state dir that holds the env files
// of spawns whose launcher has not run yet.
const launchDir = "launch"

// runsDir is the directory inside the state dir that holds the files of
// the process runner's runs (pid, exit status, log), one directory per
// item.
const runsDir = "runs"

// mirrorsDir is the directory inside the state dir that holds the bare
// mirrors the worktrees are made from (routing checkout).
const mirrorsDir = "mirrors"

// app is the wired set of real dependencies one command uses.
type app struct {
	log       *slog.Logger
	store     store.Store
	tmux      tmux.Client
	harnesses map[string]harness.Adapter
	journal   *journal.Recorder
	// owner is this loopd's mark on its tmux server and sessions.
	owner    tmux.Owner
	launcher launch.Launcher
	// runs starts and reads the process runner's runs.
	runs *runner.Runner
	// github sends the outbox's calls; nil without a github block, and in
	// the commands that send nothing.
	github *ghapi.Client
	// limits holds the rate limits of the installations github calls
	// through (outboxWorker), which /metrics and the status page show.
	limits *ghapi.Limits
	// fleet is the store's lease side and hosting this host among the
	// hosts sharing it (joinFleet); nil in the commands that run no pass.
	fleet   store.Fleet
	hosting *reconciler.Hosting
	// mover copies transcripts to the store and back (nil: none).
	mover *transcript.Mover
	// sandbox makes the sandbox of each spawn of a sandboxed route.
	sandbox *actions.Sandbox
	// restarted is true when serve started its tmux server with none
	// running before (observed.Observer.Restarted).
	restarted bool
}

// storeLock is the reconcile lock's file name inside the state dir when
// the store is PostgreSQL (SQLite's is its file's name plus ".lock").
const storeLock = "loopd.lock"

// openStore opens cfg's store: the SQLite file in cfg's state dir when
// store.url is empty, the PostgreSQL database it names otherwise, with the
// reconcile lock in the state dir (each host reconciles its own items; a
// daemon and a cron pass of one host exclude each other). The state dir is
// made, or tightened, first (privateStateDir); warn is told each mode it
// tightened. An error shows the URL without its password
// (sqlstore.RedactURL).
func openStore(ctx context.Context, cfg *schema.Config, warn func(tightened)) (store.Store, error) {
	changed, err := privateStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	for _, c := range changed {
		warn(c)
	}
	if cfg.Store.URL == "" {
		return sqlstore.OpenSQLite(ctx, filepath.Join(cfg.StateDir, storeFile))
	}
	return sqlstore.OpenPostgres(ctx, cfg.Store.URL, filepath.Join(cfg.StateDir, storeLock))
}

// logTightened returns openStore's warn for a command that logs: each mode
// tightened is a state_dir.tightened line.
func logTightened(log *slog.Logger) func(tightened) {
	return func(t tightened) {
		log.Warn(string(journal.StateDirTightened), journal.KeyPath, t.path,
			journal.KeyModeWas, fmt.Sprintf("%04o", t.was), journal.KeyModeNow, fmt.Sprintf("%04o", t.now))
	}
}

// newApp opens the store and builds the tmux client and harness adapters
// for cfg. A harness whose command cannot be found is journaled
// and kept: its spawns fail and back off, visibly, until it is installed.
func newApp(ctx context.Context, cfg *schema.Config, configPath string, log *slog.Logger) (*app, error) {
	owner, err := tmux.OwnerOf(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	sb, err := sandboxOf(ctx, cfg, configPath)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, cfg, logTightened(log))
	if err != nil {
		return nil, err
	}
	rec := journal.NewRecorder(log, store, time.Now)
	harnesses, err := buildHarnesses(ctx, cfg, exe, rec)
	if err != nil {
		store.Close()
		return nil, err
	}
	return &app{
		log:       log,
		store:     store,
		tmux:      tmux.NewExec(cfg.Tmux.Socket, log),
		harnesses: harnesses,
		journal:   rec,
		owner:     owner,
		launcher:  launch.Launcher{Exe: exe, Dir: filepath.Join(cfg.StateDir, launchDir)},
		runs:      runsOf(cfg, exe),
		sandbox:   sb,
	}, nil
}

// buildHarnesses makes the adapters; those whose CLI can report its session
// id at start get loopd's session-start hook, exe's
// (harness.WithSessionStart). A command that
// cannot be found is journaled as harness.missing and kept (its items are
// blocked with harness_missing until it is there, Capabilities.Missing);
// when no harness a route uses can be found, nothing could ever run and
// it is an error naming each.
func buildHarnesses(ctx context.Context, cfg *schema.Config, exe string, rec *journal.Recorder) (map[string]harness.Adapter, error) {
	adapters, problems := harnessAdapters(cfg)
	if len(problems) > 0 {
		return nil, errors.Join(problems...) // harness <name>: …
	}
	out := make(map[string]harness.Adapter, len(adapters))
	for _, name := range slices.Sorted(maps.Keys(adapters)) {
		ad := adapters[name]
		if err := harness.LookCommand(ad); err != nil {
			rec.Record(ctx, slog.LevelError, journal.HarnessMissing, "", "harness", name, "err", err)
		}
		out[name] = harness.WithSessionStart(ad, exe)
	}
	if missing := missingRouteHarnesses(cfg, out); len(missing) > 0 && len(missing) == len(routeHarnesses(cfg)) {
		return nil, fmt.Errorf("no route can run an agent: %w", errors.Join(missing...))
	}
	return out, nil
}

// routeHarnesses returns the names of the harnesses cfg's routes use,
// sorted.
func routeHarnesses(cfg *schema.Config) []string {
	var names []string
	for _, route := range cfg.Webhooks.GHWebhook.Routing.Repos {
		if !slices.Contains(names, route.Harness) {
			names = append(names, route.Harness)
		}
	}
	slices.Sort(names)
	return names
}

// missingRouteHarnesses returns, for each harness a route of cfg uses
// whose command cannot be found or run (harness.LookCommand), its error.
func missingRouteHarnesses(cfg *schema.Config, adapters map[string]harness.Adapter) []error {
	var out []error
	for _, name := range routeHarnesses(cfg) {
		if ad, ok := adapters[name]; ok {
			if err := harness.LookCommand(ad); err != nil {
				out = append(out, err)
			}
		}
	}
	return out
}

// missing is Capabilities.Missing of ad: why its command cannot be found
// or run now (harness.LookCommand), "" when it can.
func missing(ad harness.Adapter) string {
	if err := harness.LookCommand(ad); err != nil {
		return err.Error()
	}
	return ""
}

// capabilities is what the planner needs of the adapters, its commands
// looked up anew on each call (a missing one may be installed since).
func capabilities(h map[string]harness.Adapter) map[string]reconciler.Capabilities {
	out := make(map[string]reconciler.Capabilities, len(h))
	for name, ad := range h {
		_, reports := ad.(harness.SessionStartReporter)
		_, headless := ad.(harness.Headless)
		_, learns := ad.(harness.SessionLearner)
		out[name] = reconciler.Capabilities{SupportsResume: ad.SupportsResume(), ValidSessionID: ad.ValidSessionID, ReportsSession: reports,
			LearnsSessionID: learns, ProcessNames: ad.ProcessNames(), Account: ad.Account(), Headless: headless, Missing: missing(ad),
			Command: harness.Command(ad)}
	}
	return out
}

// reconciler wires a Reconciler whose policy is read from current on every
// pass, so that a hot reload takes effect on the next pass.
func (a *app) reconciler(cfg *schema.Config, current func() *schema.Config) *reconciler.Reconciler {
	policy := func() reconciler.Policy { return policyOf(current(), capabilities(a.harnesses), a.owner.ID) }
	if a.hosting != nil {
		// The row each heartbeat writes says the capacity in force.
		a.hosting.Capacity = func() int { return current().Capacity.MaxLive() }
	}
	mirrors := filepath.Join(cfg.StateDir, mirrorsDir)
	workspaces := &workspace.Manager{Root: mirrors}
	channels := channel.Root(cfg.StateDir)
	// The planner's and the executor's deadlines are spans of monotonic
	// time: a step of the wall clock moves none of them.
	now := reconciler.SteadyClock(time.Now, reconciler.Elapsed)
	// The observer hands each snapshot to the watcher, which watches the
	// live panes' processes (pidfds); without pidfds it kicks tmux every
	// DefaultReapKick instead.
	watcher := &observed.Watcher{Tmux: a.tmux, Server: a.serverOptions(cfg), KickEvery: schema.DefaultReapKick, Log: a.log}
	observer := &observed.Observer{Tmux: a.tmux, Harnesses: a.harnesses, Mirrors: mirrors, Workspaces: workspaces, Runs: a.runs,
		Channels: channels, Owner: a.owner.ID, Watcher: watcher, Log: a.log, Restarted: a.restarted}
	rc := &reconciler.Reconciler{
		Store:    a.store,
		Observer: observer,
		Watcher:  watcher,
		Journal:  a.journal,
		Log:      a.log,
		Policy:   policy,
		Now:      now,
		Interval: cfg.Reconcile.Interval(),
		// The daemon waits at most one interval for a cron pass to finish;
		// a longer hold is logged as reconcile.failed and retried.
		LockWait: cfg.Reconcile.Interval(),
		Executor: &actions.Executor{
			Tmux:      a.tmux,
			Store:     a.store,
			Harnesses: a.harnesses,
			Journal:   a.journal,
			Log:       a.log,
			Now:       now,
			NewID:     uuid.NewString,
			Socket:    cfg.Tmux.Socket,
			Owner:     a.owner.ID,
			PasteWait: schema.DefaultPasteWait,
			Launcher:  a.launcher,
			Sandbox:   a.sandbox,
			Runs:      a.runs,
			// A run gets what a pane gets of loopd's environment.
			RunEnviron:  paneenv.Server(os.Environ()),
			Workspaces:  workspaces,
			StormWindow: schema.DeliveryStormWindow,
			Talk:        talk(current, hostname()),
			Channels:    channels,
			Credentials: agentCredentials(current),
		},
	}
	// A worktree is made outside the pass; its outcome asks for the next.
	rc.Executor.Wake = rc.Trigger
	if h := a.hosting; h != nil {
		// Only this host's items are planned, every status write is
		// fenced by its item's lease, and nothing is pasted or spawned
		// once the lease clock lapsed.
		rc.Hosting = h
		rc.Executor.Fleet, rc.Executor.Host, rc.Executor.LeaseValid = a.fleet, h.Host.Name, h.ValidAt
		if a.mover != nil {
			rc.Executor.Mover = a.mover
		}
	}
	return rc
}

// agentCredentials returns what credential an item's agent may ask for
// under the config current returns (read at each spawn, so that a reload
// applies to the next one): its route's (schema.Route.Credentials), for the
// repository of its checkout URL, with gh when agentGH says so.
func agentCredentials(current func() *schema.Config) func(desired.Record) actions.AgentCredentials {
	return func(r desired.Record) actions.AgentCredentials {
		cfg := current()
		route, ok := cfg.Webhooks.GHWebhook.Routing.Route(r.Key.Owner, r.Key.Repo)
		mode := route.Credentials(cfg.GitHub)
		if !ok || mode == schema.AgentCredentialsNone {
			return actions.AgentCredentials{Mode: schema.AgentCredentialsNone}
		}
		url, err := route.Checkout.RenderURL(r.Key.Owner, r.Key.Repo)
		if err != nil {
			return actions.AgentCredentials{Mode: schema.AgentCredentialsNone}
		}
		return actions.AgentCredentials{Mode: mode, URL: url, GH: route.AgentGH}
	}
}

// serverOptions are the options loopd's tmux server runs with; they claim
// it for this loopd.
func (a *app) serverOptions(cfg *schema.Config) tmux.ServerOptions {
	return tmux.ServerOptions{PaneDiedChannel: paneDiedChannel, HistoryLimit: cfg.Tmux.HistoryLimit, Owner: a.owner,
		EnvAllowed: func(name string) bool { return paneenv.Allowed(name, nil) }}
}

// setup loads the config, builds the logger and the app.
func (g *globals) setup(ctx context.Context) (*schema.Config, *app, error) {
	log, err := g.logger(os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	// A pass may read the GitHub token (the outbox's drain), and starts
	// agents: no secret stays in its /proc/<pid>/environ.
	if err := scrubEnviron(secretEnvNames(cfg)); err != nil {
		return nil, nil, err
	}
	if err := refuseOwnedServer(ctx, cfg, log); err != nil {
		return nil, nil, err
	}
	a, err := newApp(ctx, cfg, g.config, log)
	if err != nil {
		return nil, nil, err
	}
	return cfg, a, nil
}

// policyOf is the reconciler's policy under cfg: its tmux and routing
// rules and its capacity, for the harnesses' capabilities caps and the
// tmux owner mark owner ("" for a command that only reads).
func policyOf(cfg *schema.Config, caps map[string]reconciler.Capabilities, owner string) reconciler.Policy {
	routing := cfg.Webhooks.GHWebhook.Routing
	p := reconciler.PolicyFrom(routing.Tmux, caps, owner).WithCapacity(cfg.Capacity)
	p.Routing, p.Sandbox = routing, cfg.Sandbox
	p.AuthorizedUsers, p.BotLogin = cfg.Webhooks.GHWebhook.AuthorizedUsers, cfg.BotLogin()
	p.Adapters = make(map[string]string, len(cfg.Harnesses))
	for name, h := range cfg.Harnesses {
		p.Adapters[name] = h.Adapter
	}
	if exe, err := os.Executable(); err == nil {
		p.Launcher = tmux.CommandName(exe)
	}
	return p
}

// runsOf is the process runner of cfg's state dir (its runsDir), which
// starts runs with exe ("" for a command that only reads or removes their
// files).
func runsOf(cfg *schema.Config, exe string) *runner.Runner {
	return &runner.Runner{Exe: exe, Dir: filepath.Join(cfg.StateDir, runsDir)}
}
