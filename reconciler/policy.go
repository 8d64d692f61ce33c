package reconciler

import (
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/harness"
	"github.com/loopd/loopd/schema"
)

// Capabilities is what the planner needs to know of one harness.
type Capabilities struct {
	// SupportsResume reports whether the harness resumes interactively.
	SupportsResume bool
	// ValidSessionID reports whether an id may reach the harness's argv.
	ValidSessionID func(id string) bool
	// ReportsSession is true when the harness reports its session id at
	// start; events are then pasted only after that report.
	ReportsSession bool
	// LearnsSessionID is true when the harness cannot start a conversation
	// under an id chosen in advance (harness.SessionLearner, Codex): a
	// fresh spawn records no id, and the planner learns it from the
	// conversations the harness started (observed.Observation.Started).
	LearnsSessionID bool
	// ProcessNames are the names the pane shows as its foreground process
	// while the harness runs (harness.Adapter.ProcessNames). A live pane
	// showing another name is a dead agent.
	ProcessNames []string
	// Account names the account the harness's usage counts against
	// (harness.Adapter.Account): a usage limit holds every item whose
	// harness has the same Account.
	Account string
	// Headless is true when the adapter has a headless form
	// (harness.Headless), which the process runner needs.
	Headless bool
	// Missing says why the harness's command cannot be found or run now
	// (harness.LookCommand's error, naming the command and where it was
	// looked for); "" when it can. The planner spawns nothing for such a
	// harness: its items are blocked with harness_missing, no conversation
	// retired, until a pass finds the command.
	Missing string
	// Command is the harness's command as configured (harness.Command),
	// which loopd get names for an item whose harness exited at once.
	Command string
}

// AcceptsSessionID reports whether id may be the harness's conversation id:
// it matches harness.SessionIDPattern and, when set, ValidSessionID (the
// adapter's harness.Adapter.ValidSessionID, e.g. Claude Code's canonical
// lowercase UUID). The planner resumes and follows only such ids, and the
// SessionStart hook records only such reports.
func (c Capabilities) AcceptsSessionID(id string) bool {
	return harness.SessionIDPattern.MatchString(id) && (c.ValidSessionID == nil || c.ValidSessionID(id))
}

// Policy is the planner's view of the soft, hot-reloadable policy
// (routing.tmux in the config) plus the harness capabilities, with every
// duration as a time.Duration.
type Policy struct {
	Resume         bool
	Probe          time.Duration
	ConfirmTimeout time.Duration
	// AttendedTimeout is how long a person attached to an item's session
	// may give no input before the item is handed back (attendance).
	AttendedTimeout time.Duration
	Restart         string // schema.RestartAlways, RestartOnFailure or RestartNever
	FastFail        time.Duration
	MaxFastFailures int
	// MaxChurnFailures failed runs in a row, each shorter than ChurnWindow,
	// retire the conversation id (the churn rule); 0 turns the rule off.
	MaxChurnFailures int
	ChurnWindow      time.Duration
	BackoffInitial   time.Duration
	BackoffMax       time.Duration
	HealthyReset     time.Duration
	RestartBudget    int
	// Poll is how soon an item waiting on something tmux will settle
	// (an exit status, a confirmation) is looked at again.
	Poll time.Duration
	// MaxBootPrompt is the largest boot prompt in bytes put in argv; a longer
	// event boots with its header line and is pasted once the harness runs,
	// because tmux refuses argv over about 16 KiB.
	MaxBootPrompt int
	// DeliveryConfirm is how long a pasted event may take to show in the
	// transcript before it is submitted or sent again; MaxSendAttempts
	// bounds those tries before the item needs attention.
	DeliveryConfirm time.Duration
	MaxSendAttempts int
	// LimitMargin is waited past a usage limit's reset before its items
	// resume; LimitDefault stands for a reset the harness did not name or
	// that cannot be read, OverloadWait for the end of a rate-limit or
	// overload error, which names none. LimitMaxHold bounds a named reset,
	// from the report.
	LimitMargin  time.Duration
	LimitDefault time.Duration
	OverloadWait time.Duration
	LimitMaxHold time.Duration
	Harnesses    map[string]Capabilities
	// Owner is this loopd's owner mark (tmux.Owner.ID). A session of an
	// item's name that does not carry it (another loopd's, or one made by
	// hand) is foreign: never adopted, pasted into or killed.
	Owner string
	// Host is this host's name among the hosts sharing the store
	// (host.name), "" for a loopd without leases, which runs every item.
	// With a Host, an item is planned only when it is this host's (owns):
	// its lease's owner is Host and LeaseValid, this host's lease clock
	// as the pass read it, holds. Draining is this host's drain flag: it
	// hands every item it holds over (Handover) instead.
	Host       string
	LeaseValid bool
	Draining   bool
	// RoomElsewhere is how many items the other live hosts that are not
	// draining may still take (Hosting.RoomElsewhere, as the last
	// heartbeat read them): an item with no slot here is handed over
	// rather than queued, that many at most (admit). 0 hands nothing over.
	RoomElsewhere int
	// Relinquished are the items whose local agent this host stopped
	// itself, writing nothing (its lease clock lapsed, or a write was
	// fenced), and whose status it has not written since
	// (actions.Executor.Relinquished): one still held and found without
	// its agent is resumed, counting no failure. It lives in the
	// daemon's memory only.
	Relinquished map[desired.Key]bool
	// Fenced is set for the first pass after a heartbeat renewed a lease
	// clock that had lapsed (Hosting.Lapsed): the agents' watchdogs
	// (package fence) ended every local agent meanwhile, so an item still
	// held whose agent is found dead or missing is resumed as a
	// Relinquished one, counting no failure.
	Fenced bool
	// MaxLive is how many items may hold a live agent's slot at once
	// (holdsSlot), MaxStarts how many starts may be in flight at once
	// (startInFlight), both 0 for no limit; IdlePark, when not 0, is how
	// long an agent may stay idle before it is parked (capacity in the
	// config, WithCapacity).
	MaxLive   int
	MaxStarts int
	IdlePark  time.Duration
	// StartPoll is how soon a spawn held by the starts in flight is looked
	// at again while a start in flight may be reported started (admit).
	StartPoll time.Duration
	// RunPoll is how soon a run of the process runner in flight is looked
	// at again: its end wakes the daemon that started it, not a later one.
	RunPoll time.Duration
	// Routing is the current routing config: an item's workdir and
	// checkout are rendered from it until its first spawn. Empty: every
	// item keeps the workdir it was ingested with, as a plain directory.
	Routing schema.Routing
	// Sandbox is the config's top-level sandbox, every route's unless
	// the route has its own (SandboxOf).
	Sandbox schema.Sandbox
	// Launcher is the name a pane shows while loopd's launcher runs in it
	// (tmux.CommandName of loopd's executable), before the sandbox and
	// the harness: a spawn is still starting while it shows it or the
	// sandbox's (starting), "" when unknown.
	Launcher string
	// AuthorizedUsers are the config's authorizedUsers, and BotLogin
	// loopd's own login ("" when not configured): who may have opened
	// and pushed a pull request whose project settings a spawn trusts
	// (ProjectSettingsOf).
	AuthorizedUsers schema.Logins
	BotLogin        string
	// Adapters are the adapter of each harness by its name
	// (schema.Harness.Adapter): a budget's default weights are its
	// adapter's (budgetOf).
	Adapters map[string]string

	// routes are the routes of the repositories of one pass's records,
	// matched once (withRoutes); nil matches each time (route).
	routes map[repository]matched
	// last is the repository route looked up last in routes, and its
	// route: an item's plan looks its route up several times in a row, and
	// the store's key order keeps a repository's items together. It
	// belongs to this copy of the Policy, which route writes only through
	// the pointer its caller holds.
	last       repository
	lastRoute  matched
	lastLooked bool
}

// repository is a work item's owner and repository, as its key names
// them.
type repository struct{ owner, repo string }

// matched is what schema.Routing.Route returned for one repository.
type matched struct {
	route schema.Route
	ok    bool
}

// withRoutes returns p with the route of every repository of records
// matched once (schema.Routing.Route), for a pass that looks each item's
// route up several times; p itself is not changed.
func (p Policy) withRoutes(records []desired.Record) Policy {
	routes := map[repository]matched{}
	for i := range records {
		k := repository{records[i].Key.Owner, records[i].Key.Repo}
		if _, done := routes[k]; !done {
			route, ok := p.Routing.Route(k.owner, k.repo)
			routes[k] = matched{route: route, ok: ok}
		}
	}
	p.routes, p.lastLooked = routes, false
	return p
}

// route is schema.Routing.Route of the repository of k: from the routes
// withRoutes matched, else matched now.
func (p *Policy) route(k desired.Key) (schema.Route, bool) {
	if p.lastLooked && p.last.owner == k.Owner && p.last.repo == k.Repo {
		return p.lastRoute.route, p.lastRoute.ok
	}
	repo := repository{k.Owner, k.Repo}
	if m, ok := p.routes[repo]; ok {
		p.last, p.lastRoute, p.lastLooked = repo, m, true
		return m.route, m.ok
	}
	return p.Routing.Route(k.Owner, k.Repo)
}

// PolicyFrom builds a Policy from the config's routing policy, for the loopd
// whose owner mark is owner.
func PolicyFrom(p schema.Policy, harnesses map[string]Capabilities, owner string) Policy {
	return Policy{
		Resume:           p.Resume(),
		Probe:            p.ProbeWindow(),
		ConfirmTimeout:   p.ConfirmTimeout(),
		AttendedTimeout:  p.AttendedTimeout(),
		Restart:          p.RestartPolicy,
		FastFail:         p.FastFailWindow(),
		MaxFastFailures:  p.MaxFastFailures,
		MaxChurnFailures: p.MaxChurnFailures,
		ChurnWindow:      p.ChurnWindow(),
		BackoffInitial:   p.BackoffInitial(),
		BackoffMax:       p.BackoffMax(),
		HealthyReset:     p.HealthyReset(),
		RestartBudget:    p.RestartBudget,
		Poll:             schema.DefaultPoll,
		StartPoll:        schema.DefaultStartPoll,
		RunPoll:          schema.DefaultRunPoll,
		MaxBootPrompt:    schema.DefaultMaxBootPrompt,
		DeliveryConfirm:  schema.DefaultDeliveryConfirm,
		MaxSendAttempts:  schema.DefaultMaxSendAttempts,
		LimitMargin:      p.UsageLimitMargin(),
		LimitDefault:     schema.DefaultUsageLimitWait,
		OverloadWait:     schema.DefaultOverloadWait,
		LimitMaxHold:     schema.MaxUsageLimitHold,
		Harnesses:        harnesses,
		Owner:            owner,
	}
}

// WithCapacity returns p with the config's capacity (schema.Capacity).
func (p Policy) WithCapacity(c schema.Capacity) Policy {
	p.MaxLive, p.MaxStarts, p.IdlePark = c.MaxLive(), c.MaxStarts(), c.IdlePark()
	return p
}
