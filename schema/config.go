package schema

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Config is loopd.yaml. The JSON Schema in loopd.schema.json is the contract;
// these types mirror it. Load fills defaults, so every field below is set
// after a successful Load.
type Config struct {
	// StateDir holds the SQLite file, the reconcile lock and anything else
	// loopd keeps. A relative path is resolved against the config file's
	// directory.
	StateDir  string    `yaml:"stateDir" json:"stateDir"`
	Tmux      Tmux      `yaml:"tmux" json:"tmux"`
	Reconcile Reconcile `yaml:"reconcile" json:"reconcile"`
	Capacity  Capacity  `yaml:"capacity" json:"capacity"`
	// Harnesses are the agent CLIs, keyed by the harness name that routes
	// and work items refer to.
	Harnesses map[string]Harness `yaml:"harnesses" json:"harnesses"`
	Webhooks  Webhooks           `yaml:"webhooks" json:"webhooks"`
	// GitHub, when set, lets loopd talk back through GitHub's REST API
	// (announce, acknowledge, notify); nil: loopd only listens.
	GitHub *GitHub `yaml:"github" json:"github,omitempty"`
	Store  Store   `yaml:"store" json:"store"`
	Host   Host    `yaml:"host" json:"host"`
	// Retention says what loopd forgets, and when.
	Retention Retention `yaml:"retention" json:"retention"`
	// Sandbox is every route's sandbox unless the route has its own
	// (Route.SandboxOf).
	Sandbox Sandbox `yaml:"sandbox" json:"sandbox"`

	// dir is the config file's absolute directory, against which relative
	// paths are resolved.
	dir string
}

// Store selects where desired state, the journal and the leases live.
type Store struct {
	// URL is "" for the embedded SQLite file in StateDir, or a
	// postgres:// URL (pgx's connection string) for a PostgreSQL database
	// shared by every host of one fleet.
	URL string `yaml:"url" json:"url"`
}

// Host names this loopd among the hosts that share one store.
type Host struct {
	// Name must be unique among the hosts sharing a store; default the
	// machine's hostname (os.Hostname).
	Name string `yaml:"name" json:"name"`
	// LeaseSeconds is how long a host's leases outlive its last heartbeat:
	// past it, another host takes its items over. Default 15.
	LeaseSeconds int `yaml:"leaseSeconds" json:"leaseSeconds"`
}

// HostName returns Name, or the machine's hostname (os.Hostname) when Name
// is empty.
func (h Host) HostName() (string, error) {
	if h.Name != "" {
		return h.Name, nil
	}
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("host name: %w", err)
	}
	return name, nil
}

// LeaseTTL returns LeaseSeconds as a duration.
func (h Host) LeaseTTL() time.Duration { return seconds(h.LeaseSeconds) }

// Retention says how long loopd keeps what it no longer needs. It takes
// effect at the next prune after a reload.
type Retention struct {
	// JournalDays is how many days the event journal keeps a row: serve
	// deletes older rows at start and every RetentionEvery. 0 keeps
	// every row forever. Default 30.
	JournalDays *int `yaml:"journalDays" json:"journalDays"`
}

// JournalAge returns how long the journal keeps a row, JournalDays
// days of 24 hours; 0 for forever. Unset (a config not filled in by
// Load) is the default, 30 days.
func (r Retention) JournalAge() time.Duration {
	days := defaultJournalDays
	if r.JournalDays != nil {
		days = *r.JournalDays
	}
	return time.Duration(days) * 24 * time.Hour
}

// Tmux configures loopd's private tmux server.
type Tmux struct {
	Socket       string `yaml:"socket" json:"socket"`             // tmux -L <socket>; default "loopd"
	HistoryLimit int    `yaml:"historyLimit" json:"historyLimit"` // lines per pane; default 2000
}

// Reconcile configures the reconcile loop.
type Reconcile struct {
	// IntervalSeconds is the resync period, the safety net behind the
	// pane-died hook and webhook triggers; default 10.
	IntervalSeconds int `yaml:"intervalSeconds" json:"intervalSeconds"`
}

// Capacity bounds the fleet of live agents on this host (admission and
// idle parking). Every field takes effect on the next reconcile pass after
// a reload.
type Capacity struct {
	// MaxLiveSessions is how many items may hold a live agent's slot at
	// once (Spawning, Running, or BackingOff after a crash); an item that
	// needs a session beyond it is Queued. 0 means no limit. Default 10.
	// Lowering it stops no running agent: the queue waits until enough end.
	MaxLiveSessions *int `yaml:"maxLiveSessions" json:"maxLiveSessions"`
	// MaxStartsInFlight is how many harnesses may be starting at once
	// (Spawning, and not yet reported started: reconciler startInFlight):
	// fresh spawns, resumes and self-heals alike. Default 2.
	MaxStartsInFlight int `yaml:"maxStartsInFlight" json:"maxStartsInFlight"`
	// IdleParkSeconds, when not 0, parks an agent idle this long (no
	// event pending or in flight, its transcript unchanged, its input box
	// empty): it is stopped and resumed on its next event. Default 0:
	// never.
	IdleParkSeconds int `yaml:"idleParkSeconds" json:"idleParkSeconds"`
}

// Harness configures one agent CLI. The map key is the harness name used in
// routes.
type Harness struct {
	// Adapter selects the argv grammar: "claude-code", "codex", "gemini", "cursor"
	// or "custom". Default: the harness name.
	Adapter   string   `yaml:"adapter" json:"adapter"`
	Command   string   `yaml:"command" json:"command"` // a path, or a name on PATH
	ExtraArgs []string `yaml:"extraArgs" json:"extraArgs"`
	// Env is given to the harness on top of the tmux server's environment,
	// through a private file that loopd's launcher reads (never argv).
	Env map[string]string `yaml:"env" json:"env"`
	// PassEnv names variables of loopd's own environment that the harness
	// gets too (an API key kept out of this file). loopd's own LOOPD_
	// variables and GitHub credentials are never passed (paneenv.Denied).
	PassEnv []string `yaml:"passEnv" json:"passEnv"`
	// FreshArgs and ResumeArgs are text/template argv for the custom adapter,
	// with {{.SessionID}} and {{.Prompt}}. An empty ResumeArgs means the
	// harness has no interactive resume.
	FreshArgs  []string `yaml:"freshArgs" json:"freshArgs"`
	ResumeArgs []string `yaml:"resumeArgs" json:"resumeArgs"`
	// ReadyPattern is a regular expression that, found in capture-pane
	// output, means the harness accepts input. Adapters have a default.
	ReadyPattern string `yaml:"readyPattern" json:"readyPattern"`
	// ProcessName is the name tmux shows as the pane's foreground process
	// (pane_current_command) while the CLI runs: needed when the command
	// is started through an interpreter ("node" for a "#!/usr/bin/env node"
	// script). Default: the command's base name (claude-code also accepts
	// "claude").
	ProcessName string `yaml:"processName" json:"processName"`
	// StopProcessGroup makes loopd end the pane's process group (SIGHUP,
	// then SIGKILL) and confirm it is gone whenever it stops the harness,
	// for a CLI that outlives tmux kill-session. The gemini adapter always
	// does.
	StopProcessGroup bool `yaml:"stopProcessGroup" json:"stopProcessGroup"`
	// Provision, when false, stops loopd from writing the settings the
	// adapter needs in the CLI's config dir before each spawn
	// (harness.Provisioner: Claude Code's onboarding, workdir trust and
	// auto-updater; Gemini's session retention). Load fills in true when
	// absent (ProvisionOn).
	Provision *bool `yaml:"provision" json:"provision,omitempty"`
}

// ProvisionOn reports whether loopd provisions the CLI's config dir:
// provision, which Load fills in; unset (a config not filled in by Load)
// is the default, true.
func (h Harness) ProvisionOn() bool { return boolValue(h.Provision, defaultProvision) }

// boolValue returns *v, or d when v is nil.
func boolValue(v *bool, d bool) bool {
	if v == nil {
		return d
	}
	return *v
}

// BotLogin returns github.botLogin, "" when the github section is absent.
func (c *Config) BotLogin() string {
	if c.GitHub == nil {
		return ""
	}
	return c.GitHub.BotLogin
}

// Webhooks holds the webhook receivers; GitHub is the only one.
type Webhooks struct {
	GHWebhook GHWebhook `yaml:"ghWebhook" json:"ghWebhook"`
}

// GHWebhook configures the GitHub webhook receiver.
type GHWebhook struct {
	Listen string `yaml:"listen" json:"listen"` // default 127.0.0.1:8787
	Path   string `yaml:"path" json:"path"`     // default /webhook
	// SecretEnv names the env var holding the secret; default
	// LOOPD_WEBHOOK_SECRET when SecretFile is not set.
	SecretEnv string `yaml:"secretEnv" json:"secretEnv"`
	// SecretFile is a file holding the secret (a systemd credential, a
	// Kubernetes secret), instead of SecretEnv; see SecretFilePath.
	SecretFile string `yaml:"secretFile" json:"secretFile"`
	// AuthorizedUsers are the GitHub logins whose events are acted on. It
	// fails closed: empty authorizes nobody.
	AuthorizedUsers Logins  `yaml:"authorizedUsers" json:"authorizedUsers"`
	Routing         Routing `yaml:"routing" json:"routing"`
	// StatusPage, when false, turns off the read-only status page that
	// serve shows at / on this listener (StatusPageOn); Load fills in
	// true when absent. It takes effect at once on a reload.
	StatusPage *bool `yaml:"statusPage" json:"statusPage"`
	// AllowedHosts are host names, besides the listener's own, that a
	// request to its pages (the status page, /metrics, /healthz, /readyz)
	// may name in its Host (webhook.OwnHosts): a reverse proxy's public
	// name, a name Prometheus scrapes by. Read on each request.
	AllowedHosts []string `yaml:"allowedHosts" json:"allowedHosts"`
	// MaxConnsPerAddress caps the connections open at once from one
	// address (webhook.ServerLimits.MaxConnsPerAddress; ConnsPerAddress);
	// 0 is no bound. Load fills in DefaultMaxConnsPerAddress when absent.
	MaxConnsPerAddress *int `yaml:"maxConnsPerAddress" json:"maxConnsPerAddress"`
}

// Logins are GitHub logins (authorizedUsers).
type Logins []string

// Has reports whether login is one of l, compared case-insensitively, as
// GitHub compares logins; "" is never one.
func (l Logins) Has(login string) bool {
	return login != "" && slices.ContainsFunc(l, func(u string) bool { return strings.EqualFold(u, login) })
}

// StatusPageOn reports whether serve shows its status page: statusPage,
// which Load fills in; unset (a config not filled in by Load) is the
// default, true.
func (w GHWebhook) StatusPageOn() bool { return boolValue(w.StatusPage, defaultStatusPage) }

// ConnsPerAddress returns how many connections one address may hold open
// at once (0: no bound): maxConnsPerAddress, which Load fills in; unset (a
// config not filled in by Load) is the default, DefaultMaxConnsPerAddress.
func (w GHWebhook) ConnsPerAddress() int {
	if w.MaxConnsPerAddress == nil {
		return DefaultMaxConnsPerAddress
	}
	return *w.MaxConnsPerAddress
}

// Routing maps repositories to harnesses and holds the soft policy.
type Routing struct {
	// Repos is keyed by "owner/repo", "owner/*" (any repository of the
	// owner) or "*" (any repository); an exact key wins over "owner/*",
	// which wins over "*", and keys match case-insensitively (Route).
	Repos map[string]Route `yaml:"repos" json:"repos"`
	Tmux  Policy           `yaml:"tmux" json:"tmux"`
}

// Route says which harness serves a repository and where its items work.
type Route struct {
	Harness string `yaml:"harness" json:"harness"`
	// Workdir is a text/template with .Owner, .Repo, .Number and .Kind
	// (RenderWorkdir). It must render an absolute path. An item's workdir
	// is rendered from the current config until its first spawn, then
	// pinned: it is the key Claude Code finds the conversation by.
	Workdir string `yaml:"workdir" json:"workdir"`
	// Checkout, when set, makes each item's workdir a git worktree of the
	// repository; nil keeps a plain directory.
	Checkout *Checkout `yaml:"checkout" json:"checkout"`
	// Trigger, when set, narrows which events start an agent or reach one
	// (by a mention, by a label); nil lets every authorized event through.
	Trigger *Trigger `yaml:"trigger" json:"trigger,omitempty"`
	// Reactions says which events that no person wrote become prompts.
	Reactions Reactions `yaml:"reactions" json:"reactions"`
	// MaxDeliveriesPerHour is the loop breaker: one more delivery to an
	// item within a sliding hour puts it in NeedsAttention
	// (reason=delivery_storm) until loopd release. Default
	// DefaultMaxDeliveriesPerHour.
	MaxDeliveriesPerHour int `yaml:"maxDeliveriesPerHour" json:"maxDeliveriesPerHour"`
	// Announce posts one comment on an item when its first spawn is
	// confirmed running; Acknowledge adds an eyes reaction to a comment
	// once it reached the agent. Both default to true when github is set
	// and are off without it (Route.Talk).
	Announce    *bool `yaml:"announce" json:"announce,omitempty"`
	Acknowledge *bool `yaml:"acknowledge" json:"acknowledge,omitempty"`
	// Runner is how the route's agents run: RunnerTmux (default), a live
	// TUI in a tmux pane that each event is pasted into, or RunnerProcess,
	// one headless run of the harness per event (docs/design.md, "The
	// process runner").
	Runner string `yaml:"runner" json:"runner"`
	// Sandbox, when set, overrides the top-level sandbox's mode and adds
	// binds for this route's agents (SandboxOf).
	Sandbox *Sandbox `yaml:"sandbox" json:"sandbox,omitempty"`
	// Instructions are the route's standing instructions: the operator's
	// text telling the agent what to do with the events (work on the
	// issue, open a pull request, reply on the issue). A new conversation
	// gets them in its boot prompt (desired.WithInstructions). After Load
	// they hold InstructionsFile's text when that is set. At most
	// MaxInstructions bytes, with no control character but '\n' and '\t'.
	Instructions string `yaml:"instructions" json:"instructions,omitempty"`
	// InstructionsFile names a file holding Instructions, read at each
	// load and reload (relative to the config file's directory); it is
	// exclusive with Instructions.
	InstructionsFile string `yaml:"instructionsFile" json:"instructionsFile,omitempty"`
	// DispatchTimeoutSeconds bounds one run of the process runner: past
	// it, the run's process group is terminated, then killed. Default
	// DefaultDispatchTimeoutSeconds.
	DispatchTimeoutSeconds int `yaml:"dispatchTimeoutSeconds" json:"dispatchTimeoutSeconds"`
	// AgentCredentials is what credential the route's agents may ask loopd
	// for, at the moment of use, to push to their repository and open or
	// update its pull request: AgentCredentialsApp, AgentCredentialsToken
	// or AgentCredentialsNone; "" is the default (Credentials).
	AgentCredentials string `yaml:"agentCredentials" json:"agentCredentials,omitempty"`
	// AgentGH gives the agents' gh a token too (GH_TOKEN, asked of loopd
	// at each run of gh), besides git's credential.
	AgentGH bool `yaml:"agentGH" json:"agentGH,omitempty"`
	// ProjectSettings says whether the harness may read the settings its
	// workdir holds itself (Claude Code's .claude/settings.json, its
	// .claude/settings.local.json and .mcp.json, Codex's .codex/config.toml,
	// Gemini's .gemini/): ProjectSettingsUntrusted (default), never, or
	// ProjectSettingsTrusted, for the items whose workdir is the
	// repository's own content (reconciler.ProjectSettingsOf says which;
	// docs/design.md, "Repository content never configures the harness").
	ProjectSettings string `yaml:"projectSettings" json:"projectSettings"`
	// Budget, when set, bounds the tokens each of the route's items may
	// use (docs/design.md, "Budgets"); nil is no budget.
	Budget *Budget `yaml:"budget" json:"budget,omitempty"`
	// Approvals says who answers the questions the route's agents'
	// screens ask (a tool's permission prompt, with its choices):
	// ApprovalsGitHub posts each on the item's thread and takes an
	// authorized user's "/loopd answer"; "" (the default) leaves them to a
	// person at the terminal (docs/design.md, "Approvals").
	Approvals string `yaml:"approvals" json:"approvals,omitempty"`
	// ApprovalReminder is how long a question posted waits for an answer
	// before its one reminder: a duration from MinApprovalReminder to
	// MaxApprovalReminder; "" is DefaultApprovalReminder (ReminderAfter).
	ApprovalReminder string `yaml:"approvalReminder" json:"approvalReminder,omitempty"`
}

// ApprovalsGitHub is Route.Approvals that posts questions on GitHub.
const ApprovalsGitHub = "github"

// ApprovalsFromGitHub reports whether r's questions are posted on GitHub
// for an answer (Approvals).
func (r Route) ApprovalsFromGitHub() bool { return r.Approvals == ApprovalsGitHub }

// ReminderAfter returns ApprovalReminder as a duration,
// DefaultApprovalReminder when unset or unreadable (Load refuses those).
func (r Route) ReminderAfter() time.Duration {
	d, err := time.ParseDuration(r.ApprovalReminder)
	if err != nil || d <= 0 {
		return DefaultApprovalReminder
	}
	return d
}

// Budget is a route's token budget for each of its items: Tokens within a
// rolling Window, and/or Total over the item's life, each token weighted
// by its kind. An item past either is held BudgetExhausted until an
// operator raises it or the window frees some.
type Budget struct {
	// Tokens is the weighted tokens an item may use within Window; 0 is
	// no window budget.
	Tokens int64 `yaml:"tokens" json:"tokens,omitempty"`
	// Window is the rolling window of Tokens, a Go duration of whole
	// hours from 1h to MaxBudgetWindow; "" is DefaultBudgetWindow.
	Window string `yaml:"window" json:"window,omitempty"`
	// Total is the weighted tokens an item may use in all; 0 is no total
	// budget.
	Total int64 `yaml:"total" json:"total,omitempty"`
	// Weights are what one token of each kind counts; a kind left out
	// takes its harness's default (defaultBudgetWeights).
	Weights BudgetWeights `yaml:"weights" json:"weights,omitzero"`
}

// BudgetWeights are the weights of a budget's token kinds; nil is the
// harness's default.
type BudgetWeights struct {
	Input      *float64 `yaml:"input" json:"input,omitempty"`
	Output     *float64 `yaml:"output" json:"output,omitempty"`
	CacheWrite *float64 `yaml:"cacheWrite" json:"cacheWrite,omitempty"`
	CacheRead  *float64 `yaml:"cacheRead" json:"cacheRead,omitempty"`
}

// TokenWeights are the weights a budget applies, every kind filled in.
type TokenWeights struct {
	Input, Output, CacheWrite, CacheRead float64
}

// WindowDuration returns b's window (DefaultBudgetWindow when unset or
// unreadable: Load refuses that).
func (b Budget) WindowDuration() time.Duration {
	d, err := time.ParseDuration(b.Window)
	if err != nil || d <= 0 {
		return DefaultBudgetWindow
	}
	return d
}

// WeightsFor returns b's weights for a harness of adapter, each kind left
// out taken from defaultBudgetWeights.
func (b Budget) WeightsFor(adapter string) TokenWeights {
	w, ok := defaultBudgetWeights[adapter]
	if !ok {
		w = defaultBudgetWeights[""]
	}
	for _, kv := range []struct {
		set *float64
		to  *float64
	}{{b.Weights.Input, &w.Input}, {b.Weights.Output, &w.Output}, {b.Weights.CacheWrite, &w.CacheWrite}, {b.Weights.CacheRead, &w.CacheRead}} {
		if kv.set != nil {
			*kv.to = *kv.set
		}
	}
	return w
}

// The values of a route's agentCredentials.
const (
	// AgentCredentialsApp: an installation token of github.app scoped to
	// the item's repository (contents, pull requests and issues), minted
	// when asked and again once it expires.
	AgentCredentialsApp = "app"
	// AgentCredentialsToken: loopd's own token (github.tokenEnv), which
	// cannot be scoped: it reaches whatever the token reaches.
	AgentCredentialsToken = "token"
	// AgentCredentialsNone: no credential.
	AgentCredentialsNone = "none"
)

// Credentials returns what credential r's agents get under the github
// block g: agentCredentials when set; else AgentCredentialsApp with a
// GitHub App and AgentCredentialsNone otherwise (a plain token reaches an
// agent only when the route says agentCredentials: token). A route
// without a checkout gets none: there is no repository to push to.
func (r Route) Credentials(g *GitHub) string {
	switch {
	case r.Checkout == nil:
		return AgentCredentialsNone
	case r.AgentCredentials != "":
		return r.AgentCredentials
	case g != nil && g.App != nil:
		return AgentCredentialsApp
	}
	return AgentCredentialsNone
}

// The values of a route's projectSettings (routing.repos.<key>.projectSettings).
const (
	ProjectSettingsUntrusted = "untrusted"
	ProjectSettingsTrusted   = "trusted"
)

// TrustsProjectSettings reports whether r opts in to project settings
// (projectSettings: trusted); whether an item of r gets them is
// reconciler.ProjectSettingsOf's to say.
func (r Route) TrustsProjectSettings() bool { return r.ProjectSettings == ProjectSettingsTrusted }

// The runners of a route (routing.repos.<key>.runner).
const (
	RunnerTmux    = "tmux"
	RunnerProcess = "process"
)

// DispatchTimeout returns DispatchTimeoutSeconds as a duration, the
// default when absent.
func (r Route) DispatchTimeout() time.Duration {
	if r.DispatchTimeoutSeconds <= 0 {
		return seconds(DefaultDispatchTimeoutSeconds)
	}
	return seconds(r.DispatchTimeoutSeconds)
}

// Talk returns whether r announces and acknowledges, given whether the
// config has a github block (github): an absent key is true with it, and
// both are false without it.
func (r Route) Talk(github bool) (announce, acknowledge bool) {
	on := func(v *bool) bool { return github && (v == nil || *v) }
	return on(r.Announce), on(r.Acknowledge)
}

// GitHub configures the REST API client loopd posts comments and
// reactions with. Its credentials are a token (the variable TokenEnv
// names) or a GitHub App installation (App), never both.
type GitHub struct {
	// APIURL is the REST API's base URL: https://api.github.com, or
	// https://HOST/api/v3 for GitHub Enterprise Server. Default
	// DefaultGitHubAPIURL.
	APIURL string `yaml:"apiURL" json:"apiURL"`
	// TokenEnv names the environment variable that holds the token; default
	// LOOPD_GITHUB_TOKEN when neither App nor TokenFile is set. loopd
	// unsets it once read, and re-executes itself without it.
	TokenEnv string `yaml:"tokenEnv" json:"tokenEnv,omitempty"`
	// TokenFile is a file holding the token (a systemd credential),
	// instead of TokenEnv; see TokenFilePath.
	TokenFile string `yaml:"tokenFile" json:"tokenFile,omitempty"`
	// App authenticates as a GitHub App installation instead of a token.
	App *GitHubApp `yaml:"app" json:"app,omitempty"`
	// BotLogin is the GitHub login loopd and its agents post as: a comment
	// by it is never delivered to an agent, even when the login is in
	// authorizedUsers. "" is the login the credentials belong to (asked of
	// the API at start).
	BotLogin string `yaml:"botLogin" json:"botLogin,omitempty"`
}

// GitHubApp names a GitHub App and its private key. InstallationID,
// optional (0: none), is the installation of an item whose deliveries
// named none; GitHub's lookup names it otherwise (internal/ghapi).
type GitHubApp struct {
	AppID          int64 `yaml:"appID" json:"appID"`
	InstallationID int64 `yaml:"installationID" json:"installationID,omitempty"`
	// PrivateKeyFile is the App's PEM private key; a relative path is
	// resolved against the config file's directory (Config.PrivateKeyPath).
	PrivateKeyFile string `yaml:"privateKeyFile" json:"privateKeyFile"`
}

// Trigger narrows which events start an agent or reach one. Each rule set
// applies; an empty one lets everything through.
type Trigger struct {
	// Mention, when not empty (e.g. "@loopd"), is the word a comment must
	// contain, outside code and hidden text, to start an agent or reach
	// one (webhook's mention rule).
	Mention string `yaml:"mention" json:"mention,omitempty"`
	// Labels, when not empty, start an issue's or pull request's agent
	// only once it carries one of them: at open, or labelled later by an
	// authorized sender. Until then its events are ignored.
	Labels []string `yaml:"labels" json:"labels,omitempty"`
}

// Reactions says which events that no person wrote become prompts.
type Reactions struct {
	// CIFailure: a check run, check suite or workflow run that completes
	// with failure or timed_out on the head of a pull request that has a
	// work item becomes one prompt to its agent. Load fills in true when
	// absent (CIFailureOn).
	CIFailure *bool `yaml:"ciFailure" json:"ciFailure"`
	// CIQuietSeconds is how long the failed checks of a commit wait for
	// more of its checks when not every suite and run seen has completed
	// (a webhook not sent check suites, a check that never ends): past it
	// with no event of the commit, its failures are sent as they are.
	// Default DefaultCIQuietSeconds.
	CIQuietSeconds int `yaml:"ciQuietSeconds" json:"ciQuietSeconds"`
}

// CIQuiet returns CIQuietSeconds as a duration, the default when absent.
func (r Reactions) CIQuiet() time.Duration {
	if r.CIQuietSeconds <= 0 {
		return seconds(DefaultCIQuietSeconds)
	}
	return seconds(r.CIQuietSeconds)
}

// MaxDeliveries returns MaxDeliveriesPerHour, or its default when unset.
func (r Route) MaxDeliveries() int {
	if r.MaxDeliveriesPerHour <= 0 {
		return DefaultMaxDeliveriesPerHour
	}
	return r.MaxDeliveriesPerHour
}

// CIFailureOn reports whether failed checks become prompts: ciFailure,
// which Load fills in; unset (a config not filled in by Load) is the
// default, true.
func (r Reactions) CIFailureOn() bool { return boolValue(r.CIFailure, defaultCIFailure) }

// Checkout names the repository a route's workdirs are worktrees of.
type Checkout struct {
	// URL is a text/template with .Owner and .Repo: any URL git accepts.
	// git's own credentials apply (ssh-agent, credential helpers).
	URL string `yaml:"url" json:"url"`
	// IssueBranch is a text/template with .Owner, .Repo and .Number, the
	// branch an issue's worktree gets; default DefaultIssueBranch.
	IssueBranch string `yaml:"issueBranch" json:"issueBranch"`
	// Base is the remote branch an issue branch starts from; "" is the
	// remote's default branch.
	Base string `yaml:"base" json:"base"`
	// RemoveOnClose removes a closed item's worktree when it is clean;
	// default false keeps every worktree.
	RemoveOnClose bool `yaml:"removeOnClose" json:"removeOnClose"`
}

// DefaultIssueBranch is the branch an issue's worktree gets by default.
const DefaultIssueBranch = "loopd/issue-{{.Number}}"

// Restart policies (routing.tmux.restartPolicy).
const (
	RestartAlways    = "Always"
	RestartOnFailure = "OnFailure"
	RestartNever     = "Never"
)

// Policy is the soft, hot-reloadable respawn policy (routing.tmux). Every
// field takes effect on the next reconcile pass after a reload.
type Policy struct {
	// ResumeOnRespawn resumes the recorded conversation on respawn; false
	// opts out (fresh each time). Default true.
	ResumeOnRespawn *bool `yaml:"resumeOnRespawn" json:"resumeOnRespawn"`
	// ResumeProbeSeconds is how long a resumed pane must stay alive before
	// it can count as running; 0 reads the pane in the spawning pass.
	// Default 5.
	ResumeProbeSeconds *int `yaml:"resumeProbeSeconds" json:"resumeProbeSeconds"`
	// ConfirmTimeoutSeconds is how long an alive resumed pane may stay
	// unconfirmed (no transcript growth, no SessionStart report) before the
	// item needs attention. Default 120.
	ConfirmTimeoutSeconds int `yaml:"confirmTimeoutSeconds" json:"confirmTimeoutSeconds"`
	// RestartPolicy is Always, OnFailure (default) or Never.
	RestartPolicy string `yaml:"restartPolicy" json:"restartPolicy"`
	// FastFailSeconds: a pane dying sooner than this after its spawn is a
	// fast failure. Default 15.
	FastFailSeconds int `yaml:"fastFailSeconds" json:"fastFailSeconds"`
	// MaxFastFailures in a row degrade the item to a fresh id. Default 3.
	MaxFastFailures int `yaml:"maxFastFailures" json:"maxFastFailures"`
	// MaxChurnFailures failed runs in a row, each shorter than
	// ChurnSeconds, retire the conversation id as fast failures do: a
	// conversation that dies a while after each resume is replaced.
	// Defaults 5 and 300.
	MaxChurnFailures int `yaml:"maxChurnFailures" json:"maxChurnFailures"`
	ChurnSeconds     int `yaml:"churnSeconds" json:"churnSeconds"`
	// BackoffInitialSeconds is the wait before the second consecutive
	// respawn; it doubles up to BackoffMaxSeconds. Defaults 2 and 300.
	BackoffInitialSeconds int `yaml:"backoffInitialSeconds" json:"backoffInitialSeconds"`
	BackoffMaxSeconds     int `yaml:"backoffMaxSeconds" json:"backoffMaxSeconds"`
	// HealthyResetSeconds of running resets the failure count. Default 600.
	HealthyResetSeconds int `yaml:"healthyResetSeconds" json:"healthyResetSeconds"`
	// RestartBudget is how many consecutive failed runs are retried before
	// the item goes to NeedsAttention. Default 10.
	RestartBudget int `yaml:"restartBudget" json:"restartBudget"`
	// UsageLimitMarginSeconds is waited past a usage limit's reset before
	// the items it held resume; 0 resumes them at the reset. Default 60.
	UsageLimitMarginSeconds *int `yaml:"usageLimitMarginSeconds" json:"usageLimitMarginSeconds"`
	// AttendedTimeoutSeconds is how long a person attached to an item's
	// session may give no input (tmux's session_activity) before loopd
	// hands the item back to its deliveries while the client stays
	// attached. Default 1800.
	AttendedTimeoutSeconds int `yaml:"attendedTimeoutSeconds" json:"attendedTimeoutSeconds"`
}
