package schema

import (
	"os"
	"time"

	"github.com/loopd/loopd/internal/sandbox"
)

// This file is the one home of loopd's tunables: the default of every
// config key, and the fixed values that behave like tunables but are not
// config keys. Limits that belong to one package's contract stay there,
// named (webhook.DefaultServerLimits, journal.DefaultRepeatWindow, …);
// docs/design.md's "Tunables" table lists every one with its unit and
// home.

// Defaults filled in for absent keys: each is the "default" of its key in
// loopd.schema.json (TestSchemaDefaultsAreTheCodes holds the two equal),
// and docs/design.md's "Tunables" lists them all.
const (
	defaultStateDir        = "./state"
	defaultTmuxSocket      = "loopd"
	defaultHistoryLimit    = 2000
	defaultIntervalSeconds = 10
	defaultListen          = "127.0.0.1:8787"
	defaultWebhookPath     = "/webhook"
	defaultSecretEnv       = "LOOPD_WEBHOOK_SECRET"
	defaultStatusPage      = true
	// defaultProvision is a harness's provision: loopd writes the
	// settings its adapter needs before each spawn.
	defaultProvision = true
	// defaultCIFailure is a route's reactions.ciFailure: a failed check
	// on a pull request's head reaches its agent.
	defaultCIFailure = true
	// DefaultGitHubAPIURL is github.apiURL's default, GitHub.com's REST API.
	DefaultGitHubAPIURL   = "https://api.github.com"
	defaultGitHubTokenEnv = "LOOPD_GITHUB_TOKEN"
	// defaultMaxLiveSessions and defaultMaxStartsInFlight are the
	// capacity's: a real Claude Code process holds hundreds of MB. A
	// start of Claude Code 2.1.197 takes 0.85–1.12 s of CPU in its first
	// 2 s and 290 MB (docs/performance.md, "A real CLI's start"): two
	// starts fill the standard box's 2 cores, and more only share them.
	defaultMaxLiveSessions   = 10
	defaultMaxStartsInFlight = 2
	defaultLeaseSeconds      = 15
	// defaultJournalDays is retention.journalDays': a month of events.
	defaultJournalDays = 30
	// defaultSandboxMode is sandbox.mode's: every agent in a sandbox.
	defaultSandboxMode = sandbox.ModeBubblewrap
)

// DefaultMaxConnsPerAddress is webhooks.ghWebhook.maxConnsPerAddress when
// absent, and webhook.DefaultServerLimits' MaxConnsPerAddress: a flood
// from one address holds at most an eighth of the 256 connections served
// at once, and a reverse proxy in front of the listener, which opens one
// connection per request in flight and sends each request whole, stays far
// below it.
const DefaultMaxConnsPerAddress = 32

// RetentionEvery is how often serve prunes the journal and gives the
// freed space back (besides once at start): journal rows are kept for
// days, so an hour's lag is nothing, and each prune deletes at most an
// hour's rows.
const RetentionEvery = time.Hour

// DefaultMaxDeliveriesPerHour is a route's maxDeliveriesPerHour when
// absent: the loop breaker's bound on the deliveries to one item within
// DeliveryStormWindow.
const DefaultMaxDeliveriesPerHour = 30

// DefaultDispatchTimeoutSeconds is a route's dispatchTimeoutSeconds when
// absent: how long one run of the process runner may take (the-loop's
// process runner's dispatch timeout).
const DefaultDispatchTimeoutSeconds = 1800

// DefaultCIQuietSeconds is a route's reactions.ciQuietSeconds when absent:
// the failed checks of a commit whose suites are not all seen completing
// go to the agent once no event of the commit came for five minutes.
const DefaultCIQuietSeconds = 300

// DeliveryStormWindow is the sliding window of the loop breaker
// (maxDeliveriesPerHour).
const DeliveryStormWindow = time.Hour

// TranscriptShipInterval is how often the owning host copies what is new
// in the transcripts of the items it holds into the store
// (internal/transcript's Mover.Run); a verified delivery copies its
// item's at once as well. A host that dies loses at most this much of a
// conversation that its agent wrote since.
const TranscriptShipInterval = 3 * time.Second

// DefaultPolicy returns the respawn policy used for every absent key of
// routing.tmux.
func DefaultPolicy() Policy {
	resume, probe, margin := true, 5, 60
	return Policy{
		ResumeOnRespawn:       &resume,
		ResumeProbeSeconds:    &probe,
		ConfirmTimeoutSeconds: 120,
		RestartPolicy:         RestartOnFailure,
		FastFailSeconds:       15,
		MaxFastFailures:       3,
		MaxChurnFailures:      5,
		ChurnSeconds:          300,
		BackoffInitialSeconds: 2,
		BackoffMaxSeconds:     300,
		HealthyResetSeconds:   600,
		RestartBudget:         10,

		UsageLimitMarginSeconds: &margin,
		AttendedTimeoutSeconds:  1800,
	}
}

// orDefault sets *v to d when *v is the zero value. The schema's minimums
// make zero mean "absent" for every integer defaulted this way.
func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// boolOr returns v, or a pointer to d when v is nil: false is a value, so
// only an absent key takes the default.
func boolOr(v *bool, d bool) *bool {
	if v == nil {
		return &d
	}
	return v
}

// applyDefaults fills absent keys; dir is the config file's absolute
// directory.
func (c *Config) applyDefaults(dir string) {
	c.dir = dir
	orDefault(&c.StateDir, defaultStateDir)
	c.StateDir = c.resolve(c.StateDir)
	orDefault(&c.Tmux.Socket, defaultTmuxSocket)
	orDefault(&c.Tmux.HistoryLimit, defaultHistoryLimit)
	orDefault(&c.Reconcile.IntervalSeconds, defaultIntervalSeconds)
	if c.Capacity.MaxLiveSessions == nil {
		// 0 is a value (no limit), so only an absent key takes the default.
		live := defaultMaxLiveSessions
		c.Capacity.MaxLiveSessions = &live
	}
	orDefault(&c.Capacity.MaxStartsInFlight, defaultMaxStartsInFlight)
	orDefault(&c.Host.LeaseSeconds, defaultLeaseSeconds)
	if c.Retention.JournalDays == nil {
		// 0 is a value (keep forever), so only an absent key takes the default.
		days := defaultJournalDays
		c.Retention.JournalDays = &days
	}
	for name, h := range c.Harnesses {
		orDefault(&h.Adapter, name)
		// false is a value, so only an absent key takes the default.
		h.Provision = boolOr(h.Provision, defaultProvision)
		c.Harnesses[name] = h
	}
	orDefault(&c.Sandbox.Mode, defaultSandboxMode)
	// Without $HOME a "~/" bind is a relative path like any other.
	home, _ := os.UserHomeDir()
	c.resolveBinds(&c.Sandbox, home)
	gh := &c.Webhooks.GHWebhook
	for key, r := range gh.Routing.Repos {
		c.resolveBinds(r.Sandbox, home)
		orDefault(&r.MaxDeliveriesPerHour, DefaultMaxDeliveriesPerHour)
		orDefault(&r.Runner, RunnerTmux)
		orDefault(&r.DispatchTimeoutSeconds, DefaultDispatchTimeoutSeconds)
		orDefault(&r.ProjectSettings, ProjectSettingsUntrusted)
		r.Reactions.CIFailure = boolOr(r.Reactions.CIFailure, defaultCIFailure)
		orDefault(&r.Reactions.CIQuietSeconds, DefaultCIQuietSeconds)
		gh.Routing.Repos[key] = r
	}
	orDefault(&gh.Listen, defaultListen)
	orDefault(&gh.Path, defaultWebhookPath)
	gh.StatusPage = boolOr(gh.StatusPage, defaultStatusPage)
	if gh.MaxConnsPerAddress == nil {
		// 0 is a value (no bound), so only an absent key takes the default.
		n := DefaultMaxConnsPerAddress
		gh.MaxConnsPerAddress = &n
	}
	if gh.SecretFile == "" {
		orDefault(&gh.SecretEnv, defaultSecretEnv)
	}
	if g := c.GitHub; g != nil {
		orDefault(&g.APIURL, DefaultGitHubAPIURL)
		switch {
		case g.App == nil && g.TokenFile == "":
			orDefault(&g.TokenEnv, defaultGitHubTokenEnv)
		case g.App != nil && g.App.PrivateKeyFile != "":
			g.App.PrivateKeyFile = c.resolve(g.App.PrivateKeyFile)
		}
	}
	p, d := &gh.Routing.Tmux, DefaultPolicy()
	orDefault(&p.ResumeOnRespawn, d.ResumeOnRespawn)
	orDefault(&p.ResumeProbeSeconds, d.ResumeProbeSeconds)
	orDefault(&p.ConfirmTimeoutSeconds, d.ConfirmTimeoutSeconds)
	orDefault(&p.RestartPolicy, d.RestartPolicy)
	orDefault(&p.FastFailSeconds, d.FastFailSeconds)
	orDefault(&p.MaxFastFailures, d.MaxFastFailures)
	orDefault(&p.MaxChurnFailures, d.MaxChurnFailures)
	orDefault(&p.ChurnSeconds, d.ChurnSeconds)
	orDefault(&p.BackoffInitialSeconds, d.BackoffInitialSeconds)
	orDefault(&p.BackoffMaxSeconds, d.BackoffMaxSeconds)
	orDefault(&p.HealthyResetSeconds, d.HealthyResetSeconds)
	orDefault(&p.RestartBudget, d.RestartBudget)
	orDefault(&p.UsageLimitMarginSeconds, d.UsageLimitMarginSeconds)
	orDefault(&p.AttendedTimeoutSeconds, d.AttendedTimeoutSeconds)
}

// Tunables that are not config keys. The daemon's wiring (cmd/loopd) and
// the planner's Policy read them here.
const (
	// DefaultPoll is how soon an item waiting on something tmux or the
	// harness will settle (an exit status, a confirmation, a paste's line
	// in the transcript) is looked at again.
	DefaultPoll = time.Second
	// DefaultStartPoll is how soon a spawn held by
	// capacity.maxStartsInFlight is looked at again while a start in
	// flight may be reported started: the report (Claude Code's
	// SessionStart hook) reaches the store, not the daemon, so the next
	// start waits at most this long behind it.
	DefaultStartPoll = 200 * time.Millisecond
	// DefaultMaxBootPrompt is the largest boot prompt put in argv, in
	// bytes; a longer event boots with its header line and is pasted once
	// the harness runs, because tmux refuses argv over about 16 KiB. It also
	// bounds a fresh spawn's prompt with its replay.
	DefaultMaxBootPrompt = 8 << 10
	// DefaultDeliveryConfirm is how long a pasted event may take to show
	// in the transcript before it is submitted or pasted again, and
	// DefaultMaxSendAttempts bounds those tries before the item needs
	// attention: an idle harness writes a submitted prompt to its
	// transcript at once.
	DefaultDeliveryConfirm = 10 * time.Second
	DefaultMaxSendAttempts = 3
	// DefaultPasteWait bounds the wait for a paste to show in the input box
	// before its Enter (actions.Executor.PasteWait): Claude Code takes an
	// Enter in the same burst as a long paste as a newline. A paste shows
	// within tens of milliseconds (docs/performance.md).
	DefaultPasteWait = time.Second
	// DefaultRunPoll is how soon a run of the process runner in flight is
	// looked at again (its pid file read): the daemon that started a run
	// is woken by its end, a daemon restarted since finds it ended within
	// this.
	DefaultRunPoll = 5 * time.Second
	// DefaultReapKick is how often serve kicks tmux (run-shell true), where
	// the kernel gives no pidfd to watch the agents with, so that a pane
	// death tmux 3.3a failed to reap still fires the pane-died hook
	// (observed.Watcher.KickEvery).
	DefaultReapKick = time.Second
	// DefaultStalePending is how long an item may sit Stopped with pending
	// events before loopd get flags it (--stale-pending).
	DefaultStalePending = 10 * time.Minute
	// DefaultOnceLockWait is how long reconcile --once waits for a running
	// pass to finish (--lock-wait).
	DefaultOnceLockWait = 30 * time.Second
	// DefaultGitHubTries bounds the attempts of one GitHub call that keeps
	// failing with a 5xx or a network error (a rate limit is no try); the waits
	// between them grow from DefaultGitHubBackoffInitial, doubling, to
	// DefaultGitHubBackoffMax, unless GitHub names a longer one
	// (Retry-After). With these, a call is given up about 8 minutes after
	// its first try.
	DefaultGitHubTries          = 8
	DefaultGitHubBackoffInitial = 2 * time.Second
	DefaultGitHubBackoffMax     = 5 * time.Minute
	// DefaultGitHubLoginRetryMax bounds the wait between serve's start
	// checks while GitHub is out of reach (from DefaultGitHubBackoffInitial,
	// doubling): until one answers, the webhook filter may not know the
	// bot login, so the wait stays short.
	DefaultGitHubLoginRetryMax = 30 * time.Second
	// DefaultGitHubCallTimeout bounds one HTTP request to GitHub (a
	// listing of comments is one request per page).
	DefaultGitHubCallTimeout = 30 * time.Second
	// DefaultGitHubPoll is how often serve's worker looks for due calls in
	// the outbox.
	DefaultGitHubPoll = time.Second
	// DefaultGitHubWriteGap is the least time between two content writes
	// (a comment, a reaction) of one installation: GitHub asks for a
	// second between content-creating requests, and at most 80 a minute,
	// which a second apart stays under (REST API docs, "Best practices for
	// using the REST API").
	DefaultGitHubWriteGap = time.Second
	// DefaultGitHubPauseMin is how long an installation's content writes
	// pause after a secondary rate limit that named no Retry-After ("wait
	// for at least one minute"), doubling while the limit persists, up to
	// DefaultGitHubPauseMax (REST API docs, "Rate limits for the REST
	// API"). A Retry-After named is waited as it is.
	DefaultGitHubPauseMin = time.Minute
	DefaultGitHubPauseMax = 30 * time.Minute
	// DefaultOnceDrain bounds the time reconcile --once spends sending the
	// calls its passes queued before it exits.
	DefaultOnceDrain = 30 * time.Second
	// DefaultUsageLimitWait stands for the reset of a usage limit whose
	// harness named none, or one that cannot be read: the longest session
	// window of Claude Code's plans (5 hours). The journal says when it
	// was used (session.rate_limited default_reset=true).
	DefaultUsageLimitWait = 5 * time.Hour
	// DefaultOverloadWait stands for the end of a rate-limit (429) or
	// overload (529) error the harness gave up retrying, which names no
	// reset.
	DefaultOverloadWait = 5 * time.Minute
	// MaxUsageLimitHold bounds how long one report of a usage limit holds
	// its account, from the report: Claude Code's longest window, the
	// weekly limit (7 days). A reset named further out, a forged banner's,
	// is cut to it (session.rate_limited reset_capped=true).
	MaxUsageLimitHold = 7 * 24 * time.Hour
)

// Timings of loopd's parts that are not config keys: each part reads its
// own here (the part named in each comment). A few stay with their
// package: journal.DefaultRepeatWindow, workspace.DefaultTimeout and
// internal/sandbox's probeTimeout (schema imports those packages), the
// leaf packages' polls (internal/flock's lockPoll, internal/tmux's
// stopPoll), the HTTP server's webhook.DefaultServerLimits and
// store/sqlstore's busyTimeout.
// TestDurationTunablesLiveHere holds the rest here.
const (
	// RunStopGrace is how long actions' StopRun waits for a run's process
	// group to be gone after SIGTERM, and then again after SIGKILL. Claude
	// Code exits 40–150 ms after a signal (measured on 2.1.197); a run that
	// ignores SIGTERM holds the pass this long. RunStopPoll is how often
	// StopRun looks at /proc meanwhile.
	RunStopGrace = 2 * time.Second
	RunStopPoll  = 10 * time.Millisecond
	// OutcomeWriteTimeout bounds the wait for the reconcile lock and the
	// store when a workspace preparation's worker (actions) records its
	// outcome, also on the way out of a stopping daemon, whose context is
	// cancelled by then.
	OutcomeWriteTimeout = 5 * time.Second
	// PredecessorGrace is how long a spawn (actions) waits for the previous
	// harness of its item to exit by itself (it was sent SIGHUP with its
	// terminal) before it kills it, and then again for the kill to take; a
	// process group's stop waits as long after SIGHUP and after SIGKILL.
	// Claude Code exits 40–150 ms after SIGHUP (measured), so this is a few
	// times that. PredecessorPoll is how often the wait for a predecessor
	// looks at /proc, GroupPoll how often a group's stop walks /proc for
	// the group's processes.
	PredecessorGrace = 500 * time.Millisecond
	PredecessorPoll  = 5 * time.Millisecond
	GroupPoll        = 20 * time.Millisecond
	// PastePoll is how often the executor (actions) captures a pane while
	// it waits for a paste to show (DefaultPasteWait): a capture costs 2–6
	// ms of tmux (docs/performance.md).
	PastePoll = 10 * time.Millisecond
	// LeaseExpirySlack is how long after another host's leases lapse, by
	// this host's clock, the reconciler's next Assign runs: room for a
	// store clock a little ahead.
	LeaseExpirySlack = 50 * time.Millisecond
	// FencePoll is how often an agent's watchdog (internal/fence) reads its
	// stamp: the part of the fence's latency that the lease margin
	// (reconciler.LeaseMargin, a fifth of the TTL, 3 s of the default
	// 15 s) must cover besides the kill itself.
	FencePoll = 50 * time.Millisecond
	// TakeoverMargin is how long after a lease's expiry, on the store's
	// clock, Assign gives its item to another host: beyond the expiry,
	// which the lapsed host's agents already ended a fifth of the TTL
	// before (reconciler.LeaseMargin, package fence), it covers that
	// host's watchdog poll (FencePoll) and its kill again, were the lapsed
	// host's clock to run a little slow against the store's.
	TakeoverMargin = 200 * time.Millisecond
	// PostgresIdleInWrite is how long PostgreSQL lets a session of the
	// store sit idle inside a write transaction before it ends the
	// session, which rolls the transaction back
	// (idle_in_transaction_session_timeout, set for each write). A write
	// holds the writers' advisory lock for its whole transaction, so a
	// host frozen (SIGSTOP) or partitioned in the middle of one would stop
	// every other host's writes, heartbeats included, for as long as it
	// lasts: measured (issue 23), a host frozen for 30 s kept the other
	// one from taking its item over at all. 1 s is far above a live
	// writer's pause between its statements (they are sent back to back),
	// and short enough that a heartbeat of a 3 s lease (every 1 s, valid
	// for 2.4 s) waits it out. Reads take no lock and keep no such bound.
	PostgresIdleInWrite = time.Second
	// PassRetryInitial is the wait before the reconciler retries a failed
	// pass; each further failure in a row doubles it, up to the resync
	// interval. tmux still exiting after kill-server fails a pass for a
	// moment (1 kill-server in 14 in issue 10's runs, where the retry then
	// waited the whole 10 s interval).
	PassRetryInitial = 100 * time.Millisecond
	// PaneDiedWaitRetry is how long observed's Watch waits before it waits
	// on the pane-died channel again after a failed wait (no server yet,
	// say); the loop's resync interval covers the gap.
	PaneDiedWaitRetry = time.Second
	// WebhookAnswerTimeout bounds the webhook handler's work on one
	// delivery, counted from the moment its headers are read: 8 s, well
	// under GitHub's 10 s ("Handling failed webhook deliveries"), so that a
	// delivery the store cannot take in time still gets its 5xx answer
	// before GitHub gives up (and the operator can redeliver it).
	WebhookAnswerTimeout = 8 * time.Second
	// ChannelRequestTimeout bounds one request on a channel's socket
	// (internal/channel), from accept to answer: it may wait for GitHub to
	// mint a token.
	ChannelRequestTimeout = time.Minute
	// RunStartWait bounds how long the process runner's Start waits for
	// the wrapper's pid file: the wrapper writes it within milliseconds of
	// its start.
	RunStartWait = 10 * time.Second
	// RunLeftoverGrace is how long the process runner's wrapper waits,
	// after the harness exited and the rest of its group got SIGTERM,
	// before it sends SIGKILL to what is left (proc.EndOwnGroup);
	// RunLeftoverPoll is how often it looks.
	RunLeftoverGrace = 2 * time.Second
	RunLeftoverPoll  = 20 * time.Millisecond
	// ResetClockGrace is how far in the past a usage limit's reset given
	// as a clock time may be and still be read as the one it names,
	// already passed (internal/harness, ParseReset): the banners round
	// their reset down to the minute, and an agent resumed at the reset
	// plus the margin (usageLimitMarginSeconds, 60 s by default) may meet
	// the same banner once more. A clock time further past is its next
	// occurrence ("resets 9am" read at 1pm is tomorrow's 9am), never a wait
	// in the past.
	ResetClockGrace = 10 * time.Minute
	// SettingsLockStale, SettingsLockWait and SettingsLockPoll are the
	// settings lock's (internal/harness): Claude Code 2.1.197 saves
	// .claude.json under the lock of the npm package proper-lockfile, a
	// directory named "<file>.lock" made with mkdir, whose holder touches
	// it every half stale period and which others may take over once it is
	// older than the stale period (its default, 10 s). loopd waits for it
	// at most SettingsLockWait, looking every SettingsLockPoll.
	SettingsLockStale = 10 * time.Second
	SettingsLockWait  = 2 * time.Second
	SettingsLockPoll  = 20 * time.Millisecond
	// GetWatchPoll is how often loopd get --watch reads the store again.
	GetWatchPoll = time.Second
	// LogsPoll is how often loopd logs --follow looks for new lines.
	LogsPoll = 500 * time.Millisecond
	// EventsFollowPoll is how often loopd events --follow reads the
	// journal again.
	EventsFollowPoll = 500 * time.Millisecond
	// DrainPoll is how often loopd hosts drain looks whether the drained
	// host's items moved (--poll).
	DrainPoll = 500 * time.Millisecond
	// ReplayAnswerTimeout is how long loopd replay waits for each answer.
	ReplayAnswerTimeout = 30 * time.Second
	// StartLockWait is how long serve waits, at start, for the state dir's
	// lock and the tmux socket's lock: a loopd that is stopping lets go of
	// them within it, a running one does not.
	StartLockWait = time.Second
	// ShutdownGrace bounds each of serve's two shutdown steps: the stop of
	// its parts one by one (the HTTP requests in flight first; a part
	// still running after it is left, and serve fails naming it), then
	// the journal rows and repeat counts still to write.
	ShutdownGrace = 5 * time.Second
	// GitHubTokenRefreshMargin is how long before its expires_at, by
	// GitHub's clock, an App's installation token is replaced by a new one
	// (internal/ghapi): a call never starts on a token about to expire.
	// ghinstallation's own margin is one minute by the local clock, which a
	// clock two minutes behind GitHub's turns into a token used a minute
	// after it expired.
	GitHubTokenRefreshMargin = 5 * time.Minute
	// GitHubJWTBackdate and GitHubJWTLifetime are the App's JWT's iat and
	// exp around GitHub's time (internal/ghapi; ghinstallation's values,
	// there on the local clock): GitHub refuses a JWT issued in its future
	// or expired, and one whose exp is more than ten minutes ahead
	// (GitHub's docs, "Generating a JSON Web Token (JWT) for a GitHub
	// App").
	GitHubJWTBackdate = 30 * time.Second
	GitHubJWTLifetime = 2 * time.Minute
	// CIFlushMaxWait is the longest the webhook's CI flusher (CIFlusher.Run)
	// waits between two flushes when no quiet period ends sooner: a commit
	// recorded by another loopd (several hosts share the store) is looked
	// at within it.
	CIFlushMaxWait = 30 * time.Second
	// JournalFlushEvery is how often serve writes what the journal layer
	// holds back: the counts of folded repeats (journal.Limiter) and the
	// rows that a failing store made wait (journal.Recorder.RecordLater).
	JournalFlushEvery = 5 * time.Second
)

// DefaultBudgetWindow is a route budget's window when it names none: a
// day. MaxBudgetWindow is the longest: a week.
const (
	DefaultBudgetWindow = 24 * time.Hour
	MaxBudgetWindow     = 7 * 24 * time.Hour
)

// DefaultApprovalReminder is how long a question posted on GitHub
// waits for an answer before its one reminder (Route.ApprovalReminder);
// MinApprovalReminder and MaxApprovalReminder bound a route's own.
const (
	DefaultApprovalReminder = time.Hour
	MinApprovalReminder     = time.Minute
	MaxApprovalReminder     = 7 * 24 * time.Hour
)

// defaultBudgetWeights are, per adapter, what one token of each kind
// counts against a budget when the route does not say: each kind's list
// price relative to the model's uncached input, as the vendors publish
// them (docs/design.md, "Budgets"). A default, not a bill: a route sets
// its own weights. Anthropic's prices for Claude (claude.com/pricing):
// output 5×, a 5-minute cache write 1.25×, a cache read 0.1×. OpenAI's for
// Codex's GPT-5 models (openai.com/api/pricing): output 8×, cached input
// 0.1×; Codex records no cache writes. Google's for Gemini 2.5 Pro
// (ai.google.dev/pricing): output 8×, cached input 0.25×. "" is any other
// adapter: every kind 1 but cache reads 0.1.
var defaultBudgetWeights = map[string]TokenWeights{
	"claude-code": {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.1},
	"codex":       {Input: 1, Output: 8, CacheWrite: 1, CacheRead: 0.1},
	"gemini":      {Input: 1, Output: 8, CacheWrite: 1, CacheRead: 0.25},
	"":            {Input: 1, Output: 1, CacheWrite: 1, CacheRead: 0.1},
}
