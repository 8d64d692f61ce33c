package schema

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"
)

// Interval returns IntervalSeconds as a duration.
func (r Reconcile) Interval() time.Duration { return seconds(r.IntervalSeconds) }

// MaxLive returns MaxLiveSessions, the default when absent; 0 means no
// limit.
func (c Capacity) MaxLive() int {
	if c.MaxLiveSessions == nil {
		return defaultMaxLiveSessions
	}
	return *c.MaxLiveSessions
}

// MaxStarts returns MaxStartsInFlight, the default when absent.
func (c Capacity) MaxStarts() int {
	if c.MaxStartsInFlight == 0 {
		return defaultMaxStartsInFlight
	}
	return c.MaxStartsInFlight
}

// IdlePark returns IdleParkSeconds as a duration; 0 never parks.
func (c Capacity) IdlePark() time.Duration { return seconds(c.IdleParkSeconds) }

// Resume reports whether a respawn resumes the recorded conversation
// (resumeOnRespawn); unset means the default, true.
func (p Policy) Resume() bool {
	if p.ResumeOnRespawn == nil {
		return *DefaultPolicy().ResumeOnRespawn
	}
	return *p.ResumeOnRespawn
}

// ProbeWindow returns how long a resumed pane must stay alive before it can
// count as running (resumeProbeSeconds); unset means the default, 5 s. Zero
// means the spawning pass reads the pane at once.
func (p Policy) ProbeWindow() time.Duration {
	if p.ResumeProbeSeconds == nil {
		return seconds(*DefaultPolicy().ResumeProbeSeconds)
	}
	return seconds(*p.ResumeProbeSeconds)
}

// UsageLimitMargin returns UsageLimitMarginSeconds as a duration, the
// default when absent.
func (p Policy) UsageLimitMargin() time.Duration {
	if p.UsageLimitMarginSeconds == nil {
		return seconds(*DefaultPolicy().UsageLimitMarginSeconds)
	}
	return seconds(*p.UsageLimitMarginSeconds)
}

// AttendedTimeout returns AttendedTimeoutSeconds as a duration.
func (p Policy) AttendedTimeout() time.Duration { return seconds(p.AttendedTimeoutSeconds) }

// ConfirmTimeout returns ConfirmTimeoutSeconds as a duration.
func (p Policy) ConfirmTimeout() time.Duration { return seconds(p.ConfirmTimeoutSeconds) }

// FastFailWindow returns FastFailSeconds as a duration: a pane that dies
// sooner than this after its spawn is a fast failure.
func (p Policy) FastFailWindow() time.Duration { return seconds(p.FastFailSeconds) }

// ChurnWindow returns ChurnSeconds as a duration: a failed run shorter than
// this counts toward the churn rule (MaxChurnFailures).
func (p Policy) ChurnWindow() time.Duration { return seconds(p.ChurnSeconds) }

// BackoffInitial returns BackoffInitialSeconds as a duration.
func (p Policy) BackoffInitial() time.Duration { return seconds(p.BackoffInitialSeconds) }

// BackoffMax returns BackoffMaxSeconds as a duration.
func (p Policy) BackoffMax() time.Duration { return seconds(p.BackoffMaxSeconds) }

// HealthyReset returns HealthyResetSeconds as a duration.
func (p Policy) HealthyReset() time.Duration { return seconds(p.HealthyResetSeconds) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// Route returns the route for the repository owner/repo: the entry keyed
// "owner/repo" if there is one, else the "owner/*" entry, else the "*"
// entry. Keys match case-insensitively, because GitHub owner and repository
// names are case-insensitive. It reports false when none exists.
func (r Routing) Route(owner, repo string) (Route, bool) {
	key, ok := r.RouteKey(owner, repo)
	return r.Repos[key], ok
}

// RouteKey returns the key of Repos that Route picks for owner/repo, and
// whether there is one: what /metrics labels a route with.
func (r Routing) RouteKey(owner, repo string) (string, bool) {
	for _, want := range []string{owner + "/" + repo, owner + "/*"} {
		for key := range r.Repos {
			if strings.EqualFold(key, want) {
				return key, true
			}
		}
	}
	_, ok := r.Repos["*"]
	return "*", ok
}

// GitHub name shapes (https://docs.github.com/en/repositories/creating-and-managing-repositories/about-repositories):
// owners are letters, digits and hyphens, at most 39 of them (a user's or
// an organization's login); repositories also allow '.' and '_', at most
// 100 characters, and are never "." or "..".
var (
	ownerName = regexp.MustCompile(`^[A-Za-z0-9-]{1,39}$`)
	repoName  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// ValidRepository reports whether owner/repo is a repository name GitHub
// could send: anything else in a signed payload is refused before it names
// a directory, a URL or a work item (webhook), and never climbs out of a
// directory ("..", "/").
func ValidRepository(owner, repo string) bool {
	return ownerName.MatchString(owner) && repoName.MatchString(repo) && repo != "." && repo != ".."
}

// workdirData is what a workdir template sees.
type workdirData struct {
	Owner  string
	Repo   string
	Number int
	Kind   string // "issue" or "pull_request"
}

// workdirPerItem reports whether route r, under routing key key, renders
// a different workdir for every work item it can route: for two numbers
// and both kinds, and, for a wildcard key, for two repositories (and two
// owners for "*"). A workdir that fails to render is reported elsewhere.
func workdirPerItem(key string, r Route) bool {
	type item struct {
		owner, repo string
		number      int
		kind        string
	}
	items := []item{{"owner", "repo", 1, "issue"}, {"owner", "repo", 2, "pull_request"}}
	if strings.HasSuffix(key, "/*") || key == "*" {
		items = append(items, item{"owner", "other-repo", 1, "issue"})
	}
	if key == "*" {
		items = append(items, item{"other-owner", "repo", 1, "issue"})
	}
	seen := map[string]bool{}
	for _, it := range items {
		dir, err := r.RenderWorkdir(it.owner, it.repo, it.number, it.kind)
		if err != nil {
			return true
		}
		if seen[dir] {
			return false
		}
		seen[dir] = true
	}
	return true
}

// RenderWorkdir renders Workdir (text/template) with .Owner, .Repo, .Number
// and .Kind ("issue" or "pull_request"), and returns the cleaned result. The
// result must be an absolute path: it is not resolved against any directory
// (Load rejects a template that renders a relative path), and "~" is not
// expanded. owner and repo must be GitHub names, so that they can never
// climb out of the directory ("..", "/").
func (r Route) RenderWorkdir(owner, repo string, number int, kind string) (string, error) {
	if !ValidRepository(owner, repo) {
		return "", fmt.Errorf("render workdir for %s/%s: not a GitHub owner/repo name", owner, repo)
	}
	dir, err := render("workdir", r.Workdir, workdirData{Owner: owner, Repo: repo, Number: number, Kind: kind})
	if err != nil {
		return "", fmt.Errorf("render workdir: %w", err)
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("render workdir: %q is not an absolute path", dir)
	}
	return filepath.Clean(dir), nil
}

// checkoutData is what the checkout templates see.
type checkoutData struct {
	Owner  string
	Repo   string
	Number int
}

// RenderURL renders the checkout's URL template for owner/repo. owner and
// repo must be GitHub names.
func (c Checkout) RenderURL(owner, repo string) (string, error) {
	if !ValidRepository(owner, repo) {
		return "", fmt.Errorf("render checkout url for %s/%s: not a GitHub owner/repo name", owner, repo)
	}
	u, err := render("url", c.URL, checkoutData{Owner: owner, Repo: repo})
	if err != nil {
		return "", fmt.Errorf("render checkout url: %w", err)
	}
	if u == "" {
		return "", errors.New("render checkout url: empty")
	}
	return u, nil
}

// RenderIssueBranch renders the branch an issue's worktree gets
// (IssueBranch, default DefaultIssueBranch).
func (c Checkout) RenderIssueBranch(owner, repo string, number int) (string, error) {
	tmpl := c.IssueBranch
	if tmpl == "" {
		tmpl = DefaultIssueBranch
	}
	b, err := render("issueBranch", tmpl, checkoutData{Owner: owner, Repo: repo, Number: number})
	if err != nil {
		return "", fmt.Errorf("render issue branch: %w", err)
	}
	if !branchName.MatchString(b) || strings.Contains(b, "..") || strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, "/") {
		return "", fmt.Errorf("render issue branch: %q is not a branch name loopd makes", b)
	}
	return b, nil
}

// branchName is the shape of a branch loopd makes or checks out: letters,
// digits and ._/- , not starting with '-' or '/' (a subset of
// git-check-ref-format(1), so that no name is taken for an option).
var branchName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]*$`)

// ValidBranch reports whether name is a branch loopd checks out: a pull
// request's head branch from a payload is untrusted text.
func ValidBranch(name string) bool {
	return branchName.MatchString(name) && !strings.Contains(name, "..") && !strings.HasSuffix(name, ".lock") && !strings.HasSuffix(name, "/")
}

// render renders the route template text, named name, with data: by
// concatenation when the template is only text and fields data has
// (compiled.parts), else by text/template, whose errors it returns.
func render(name, text string, data templateData) (string, error) {
	c, err := parsed(name, text)
	if err != nil {
		return "", err
	}
	if s, ok := c.concat(data); ok {
		return s, nil
	}
	var b strings.Builder
	if err := c.tmpl.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// templateData is what a route template sees (workdirData, checkoutData):
// field returns the text {{.name}} renders, false when it has no such
// field.
type templateData interface {
	field(name string) (string, bool)
}

func (d workdirData) field(name string) (string, bool) {
	if name == "Kind" {
		return d.Kind, true
	}
	return checkoutData{Owner: d.Owner, Repo: d.Repo, Number: d.Number}.field(name)
}

func (d checkoutData) field(name string) (string, bool) {
	switch name {
	case "Owner":
		return d.Owner, true
	case "Repo":
		return d.Repo, true
	case "Number":
		return strconv.Itoa(d.Number), true // as text/template prints an int
	}
	return "", false
}

// compiled is a parsed route template. parts, when not nil, is the same
// template as pieces of text and field names ({{.Owner}}), in order: a
// template of nothing else, which is every template loopd's examples
// show, renders by concatenating them, as text/template would render it,
// without the reflection it costs on every item of every pass.
type compiled struct {
	tmpl  *template.Template
	parts []templatePart
}

// templatePart is a piece of text, or the field {{.field}} when field is
// set.
type templatePart struct{ text, field string }

// concat renders c by its parts, false when it has none or data lacks
// one of its fields (text/template then renders it, or says why not).
func (c *compiled) concat(data templateData) (string, bool) {
	if c.parts == nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range c.parts {
		if p.field == "" {
			b.WriteString(p.text)
			continue
		}
		v, ok := data.field(p.field)
		if !ok {
			return "", false
		}
		b.WriteString(v)
	}
	return b.String(), true
}

// partsOf returns the template t as text and fields, nil when it holds
// anything else (a pipeline, a function, a condition, a variable).
func partsOf(t *template.Template) []templatePart {
	if t.Tree == nil || t.Root == nil {
		return nil
	}
	parts := []templatePart{}
	for _, n := range t.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			parts = append(parts, templatePart{text: string(n.Text)})
		case *parse.ActionNode:
			p := n.Pipe
			if len(p.Decl) != 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 {
				return nil
			}
			parts = append(parts, templatePart{field: f.Ident[0]})
		default:
			return nil
		}
	}
	return parts
}

// templates caches parsed route templates by name and text: the planner
// renders an item's workdir and checkout on every pass, and parsing costs
// far more than executing (a parsed template is safe for concurrent use).
var templates sync.Map // [2]string{name, text} → *compiled

// parsed returns the template text parsed under name, from the cache.
func parsed(name, text string) (*compiled, error) {
	key := [2]string{name, text}
	if c, ok := templates.Load(key); ok {
		return c.(*compiled), nil
	}
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	c := &compiled{tmpl: t, parts: partsOf(t)}
	templates.Store(key, c)
	return c, nil
}
