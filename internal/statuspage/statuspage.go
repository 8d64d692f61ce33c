// Package statuspage serves loopd's read-only status page: the work items
// by phase (session, conversation id, pending count, reason), the host's
// capacity and the hosts sharing the store, the last journal events, and
// one page per item with its pending events and its timeline.
//
// The pages are rendered on the server with html/template, which escapes
// every value by its context: whatever came from GitHub (a sender's login,
// an event or action name, a check's name in a journal row) or from an
// agent (a usage-limit line) is text, never markup. The templates, the
// style sheet and the small script that keeps the page live are embedded
// (embed); there is no JavaScript build. A Content-Security-Policy lets
// only those files run, as a second wall behind the escaping.
//
// Nothing secret is shown: the page is given the store and the policy,
// never the webhook secret, the GitHub credentials or the store URL; a
// pending event shows its id, event, action, sender, arrival and size,
// never its text, and a journal attribute that carries a prompt
// (journal.KeyPrompt) is left out.
package statuspage

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/actions"
	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/reconciler"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// LastEvents is how many journal rows the index page shows, newest first.
const LastEvents = 50

// TimelineEvents is how many journal rows of one item its page shows,
// newest first.
const TimelineEvents = 200

// maxAttrValue bounds, in bytes, the value of a journal attribute as the
// page shows it; a longer one is cut and ends in "…".
const maxAttrValue = 300

// hiddenAttrs are the journal attributes the page never shows: prompt
// text (the dry run's cut boot prompt) and a dead pane's last lines
// (session.exited, dispatch.failed), which may show the prompt the agent
// was given; `loopd events` shows both.
var hiddenAttrs = map[string]bool{journal.KeyPrompt: true, journal.KeyOutput: true}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the page reads of the store (store.Store has it).
type Store interface {
	Records(ctx context.Context) ([]desired.Record, error)
	Events(ctx context.Context, f store.EventFilter) ([]journal.Event, error)
	Pauses(ctx context.Context) ([]desired.Pause, error)
}

// Hosts lists the hosts that share the store (store.Fleet has it).
type Hosts interface {
	Hosts(ctx context.Context) ([]desired.Host, error)
}

// Options configures a Handler. Store, Policy and Now are required.
type Options struct {
	Store Store
	// Hosts, when not nil, gives the page its hosts table.
	Hosts Hosts
	// Host is this daemon's host name (host.name): its capacity is the
	// one the page shows against its live sessions.
	Host string
	// Socket is loopd's tmux socket name (tmux.socket), for the attach
	// command an item's page shows.
	Socket string
	// Policy returns the current policy (the reconciler's): the reason
	// rule and the capacity read it.
	Policy func() reconciler.Policy
	// Enabled reports whether the page is on (webhooks.ghWebhook.
	// statusPage, read on each request so that a reload applies); nil
	// means always.
	Enabled func() bool
	// Now is the clock.
	Now func() time.Time
	// Log gets status_page.failed when the store cannot be read.
	Log *slog.Logger
	// Outages, when not nil, returns the store's outages that hold now
	// (the store out of reach, its listener down): every page shows
	// them, and a page the store cannot serve names them.
	Outages func() []Outage
}

// Outage is one outage of the store that holds now, as the page shows
// it.
type Outage struct {
	// What is down: "store" (out of reach of the heartbeats) or
	// "store listener" (PostgreSQL LISTEN).
	What string
	// Since is when it started; zero when not known. The failure itself
	// is not shown (it may name a path of the state dir): /readyz and the
	// journal give it.
	Since time.Time
}

// Handler serves the status page. It only reads.
type Handler struct {
	opts  Options
	index *template.Template
	item  *template.Template
	none  *template.Template
}

// New returns a Handler serving o's store.
func New(o Options) *Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	parse := func(page string) *template.Template {
		return template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page))
	}
	return &Handler{opts: o, index: parse("index.html"), item: parse("item.html"), none: parse("notfound.html")}
}

// Register adds the page's routes to mux, each an exact path for GET (and
// HEAD): "/" (only "/": any other unknown path stays a 404),
// "/items/{owner}/{repo}/{number}" and the embedded files under
// "/static/". The webhook's path, /healthz, /readyz and /metrics are
// other patterns, which these never shadow (net/http ServeMux: the most
// specific pattern wins). A pattern already in mux that overlaps one of
// these without either being the more specific (a webhook path under
// /items/ or /static/) is an error wrapping ErrConflict, where ServeMux
// would panic.
func (h *Handler) Register(mux *http.ServeMux) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrConflict, p)
		}
	}()
	mux.Handle("GET /{$}", h.on(http.HandlerFunc(h.serveIndex)))
	mux.Handle("GET /items/{owner}/{repo}/{number}", h.on(http.HandlerFunc(h.serveItem)))
	static, _ := fs.Sub(staticFS, "static") // "static" is embedded
	mux.Handle("GET /static/", h.on(http.StripPrefix("/static/", http.FileServerFS(static))))
	return nil
}

// ErrConflict is returned by Register when a route of the page overlaps
// one already registered.
var ErrConflict = errors.New("status page route conflicts with another")

// securityHeaders are set on every answer of the page: only the page's
// own embedded script and style run, nothing frames it, no referrer
// leaves it, and nothing caches it.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
		"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-store",
}

// on answers 404 while the page is turned off, and sets the security
// headers.
func (h *Handler) on(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.Enabled != nil && !h.opts.Enabled() {
			http.NotFound(w, r)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		next.ServeHTTP(w, r)
	})
}

// indexData is what index.html renders.
type indexData struct {
	page
	Capacity capacityView
	Hosts    []hostView
	Groups   []group
	// Attention and Blocked count the items that need a person: in
	// NeedsAttention, and with an agent at a screen only a person can
	// answer (desired.Status.BlockedBy). The header shows them.
	Attention, Blocked int
	Closed             []itemRow
	Events             []eventRow
	// Paused are the pauses of GitHub calls that hold now (a rate
	// limit: ghapi.Limits).
	Paused []desired.Pause
}

// page is what every page's layout shows.
type page struct {
	Title   string
	Host    string
	Now     time.Time
	Outages []Outage
}

// capacityView is this host's load against capacity: Max* are 0 for no
// limit.
type capacityView struct {
	Live, MaxLive     int
	Starts, MaxStarts int
	Queued            int
}

// hostView is one host of the fleet.
type hostView struct {
	desired.Host
	LiveSessions int
	This         bool
}

// group is the open items (and the closed ones with an agent still up) of
// one phase, or, with Blocked, those whose agent waits at a screen for a
// person, whatever their phase. Resolve says what a person does about
// them ("" for a phase that needs no one).
type group struct {
	Phase   desired.Phase
	Blocked bool
	// Approval marks the group of the items awaiting an answer from
	// GitHub (desired.Status.AwaitingApproval), before the blocked ones.
	Approval bool
	Resolve  string
	Items    []itemRow
}

// resolveAttention, resolveBlocked and resolveBudget are what the page tells a person to
// do about the items that need one.
const (
	resolveAttention = "loopd describe ITEM says why; loopd release ITEM once it is fixed"
	resolveBlocked   = "loopd attach ITEM and answer its screen; loopd sees the screen change by itself"
	resolveApproval  = "answer the question loopd posted on the item: an authorized comment /loopd answer QUESTION N"
	resolveBudget    = "loopd release --budget +200k ITEM, or an authorized comment /loopd budget +200k, lets it go on in the same conversation"
)

// itemRow is one item as the tables show it.
type itemRow struct {
	Key            string
	URL            string
	Title          string // as GitHub sent it: text from outside, escaped by the template
	GitHubURL      string // the item's page on GitHub ("" when unknown)
	Phase          desired.Phase
	Held, Closed   bool
	Host           string
	LeaseLapsed    bool
	Session        string
	ConversationID string
	Pending        int
	Failures       int
	Reason         string
	QueuePosition  int    // 1 next; 0 when not Queued
	Blocked        string // what keeps its agent waiting for a person (desired.Status.BlockedBy)
	Question       string // the question posted on GitHub it waits on an answer to (desired.Status.AwaitingApproval)
	// AttendedSince is when a person's tmux client was seen attached to
	// the item's session (zero while no one attends it), AttendedBy who
	// (desired.AttendanceState); item.handed_back says for how long.
	AttendedSince time.Time
	AttendedBy    string
	// Unsandboxed is true when the item's agent runs with no sandbox
	// (reconciler.Unsandboxed): every view of it says so.
	Unsandboxed bool
}

// eventRow is one journal row.
type eventRow struct {
	Time     time.Time
	Level    string
	Name     string
	WorkItem string
	ItemURL  string
	Attrs    []attr
}

// attr is one journal attribute.
type attr struct{ Key, Value string }

func (h *Handler) serveIndex(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := h.opts.Now()
	records, err := h.opts.Store.Records(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	events, err := h.opts.Store.Events(ctx, store.EventFilter{Limit: LastEvents})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	pauses, err := h.opts.Store.Pauses(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.opts.Policy()
	rows := h.rows(records, p, now)
	d := indexData{page: h.page("loopd status", now), Events: eventRows(events)}
	for _, pause := range pauses {
		if pause.Holds(now) {
			d.Paused = append(d.Paused, pause)
		}
	}

	byPhase := map[desired.Phase][]itemRow{}
	var blocked, approval []itemRow
	queued := 0
	for i, rec := range records {
		if rows[i].QueuePosition > 0 && (h.opts.Host == "" || rec.Lease.Owner == h.opts.Host) {
			queued++ // this host's queue, as its capacity is
		}
		if !rec.NeedsHost() {
			// Closed with no agent left: out of the way, below.
			d.Closed = append(d.Closed, rows[i])
			continue
		}
		if rows[i].Question != "" && rows[i].Phase != desired.PhaseNeedsAttention {
			approval = append(approval, rows[i])
			continue
		}
		if rows[i].Blocked != "" && rows[i].Phase != desired.PhaseNeedsAttention {
			blocked = append(blocked, rows[i])
			continue
		}
		byPhase[rows[i].Phase] = append(byPhase[rows[i].Phase], rows[i])
	}
	// What needs a person comes first: NeedsAttention, then the blocked
	// agents, then every other phase in its order.
	d.Attention, d.Blocked = len(byPhase[desired.PhaseNeedsAttention]), len(blocked)
	if d.Attention > 0 {
		d.Groups = append(d.Groups, group{Phase: desired.PhaseNeedsAttention, Resolve: resolveAttention, Items: byPhase[desired.PhaseNeedsAttention]})
	}
	if len(approval) > 0 {
		d.Groups = append(d.Groups, group{Approval: true, Resolve: resolveApproval, Items: approval})
	}
	if d.Blocked > 0 {
		d.Groups = append(d.Groups, group{Blocked: true, Resolve: resolveBlocked, Items: blocked})
	}
	for _, ph := range desired.Phases() {
		if len(byPhase[ph]) > 0 && ph != desired.PhaseNeedsAttention {
			g := group{Phase: ph, Items: byPhase[ph]}
			if ph == desired.PhaseBudgetExhausted {
				g.Resolve = resolveBudget
			}
			d.Groups = append(d.Groups, g)
		}
	}
	load := reconciler.LoadOn(records, h.opts.Host)
	d.Capacity = capacityView{Live: load.Live, MaxLive: p.MaxLive, Starts: load.Starts, MaxStarts: p.MaxStarts,
		Queued: queued}
	if h.opts.Hosts != nil {
		hosts, err := h.opts.Hosts.Hosts(ctx)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		held := map[string][]desired.Record{} // by their lease's owner
		for _, rec := range records {
			held[rec.Lease.Owner] = append(held[rec.Lease.Owner], rec)
		}
		for _, host := range hosts {
			d.Hosts = append(d.Hosts, hostView{Host: host, LiveSessions: reconciler.LoadOf(held[host.Name]).Live, This: host.Name == h.opts.Host})
		}
	}
	h.render(w, h.index, http.StatusOK, d)
}

// itemData is what item.html renders.
type itemData struct {
	page
	Item        itemRow
	Kind        desired.Kind
	Harness     string
	Workdir     string
	HeadRef     string
	Attach      string
	Process     bool
	NextAttempt time.Time
	Generation  int64
	Pending     []desired.Delivery
	Events      []eventRow
}

func (h *Handler) serveItem(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := h.opts.Now()
	n, err := strconv.Atoi(r.PathValue("number"))
	asked := desired.Key{Owner: r.PathValue("owner"), Repo: r.PathValue("repo"), Number: n}
	if err != nil || n <= 0 {
		h.notFound(w, asked.Owner+"/"+asked.Repo+"#"+r.PathValue("number"), now)
		return
	}
	records, err := h.opts.Store.Records(ctx)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	i := slices.IndexFunc(records, func(rec desired.Record) bool { return rec.Key == asked })
	if i < 0 {
		// GitHub's owner and repository names are case-insensitive, as
		// routing is: another case finds the item at its own address.
		if j := slices.IndexFunc(records, func(rec desired.Record) bool { return rec.Key.SameItem(asked) }); j >= 0 {
			http.Redirect(w, r, itemURL(records[j].Key), http.StatusFound)
			return
		}
		h.notFound(w, asked.String(), now)
		return
	}
	rec := records[i]
	events, err := h.opts.Store.Events(ctx, store.EventFilter{WorkItem: rec.Key.String(), Limit: TimelineEvents})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p := h.opts.Policy()
	row := h.rows(records, p, now)[i]
	d := itemData{
		page:        h.page(rec.Key.String()+" · loopd", now),
		Item:        row,
		Kind:        rec.Spec.Kind,
		Harness:     rec.Spec.Harness,
		Workdir:     rec.Workdir(),
		HeadRef:     rec.Spec.HeadRef,
		NextAttempt: rec.Status.NextAttempt,
		Generation:  rec.Spec.Generation,
		Pending:     rec.Pending,
		Events:      eventRows(events),
	}
	if rec.Status.Session != "" {
		// An item that never had a session has none to attach to.
		d.Attach = actions.AttachCommand(h.opts.Socket, row.Session)
	}
	d.Process = reconciler.ProcessRunner(rec, p)
	h.render(w, h.item, http.StatusOK, d)
}

// rows returns the table row of each record, in order, with the reason
// and queue position loopd get shows (reconciler.Explain).
func (h *Handler) rows(records []desired.Record, p reconciler.Policy, now time.Time) []itemRow {
	explained := reconciler.Explain(records, p, now, schema.DefaultStalePending)
	out := make([]itemRow, len(records))
	for i, rec := range records {
		phase := cmp.Or(rec.Status.Phase, desired.PhaseIdle)
		id := desired.ConversationLabel(rec.Status.HarnessSessionID, rec.Status.IDUnconfirmed)
		out[i] = itemRow{
			Key:            rec.Key.String(),
			URL:            itemURL(rec.Key),
			Title:          rec.Spec.Title,
			GitHubURL:      rec.Spec.URL,
			Phase:          phase,
			Held:           rec.Spec.Held,
			Closed:         rec.Spec.Closed,
			Host:           rec.Lease.Owner,
			LeaseLapsed:    rec.Lease.Lapsed(now),
			Session:        desired.SessionName(rec.Key),
			ConversationID: id,
			Pending:        len(rec.Pending),
			Failures:       reconciler.NextFailures(rec, p, now, time.Time{}),
			Reason:         explained[rec.Key].Reason,
			QueuePosition:  explained[rec.Key].QueuePosition,
			Blocked:        rec.Status.BlockedBy(),
			Question:       rec.Status.AwaitingApproval(),
			AttendedSince:  rec.Status.AttendedSince,
			AttendedBy:     rec.Status.AttendedBy,
			Unsandboxed:    explained[rec.Key].Unsandboxed,
		}
	}
	return out
}

// itemURL is the address of k's page, each part path-escaped.
func itemURL(k desired.Key) string {
	return "/items/" + url.PathEscape(k.Owner) + "/" + url.PathEscape(k.Repo) + "/" + strconv.Itoa(k.Number)
}

// eventRows returns the rows of events, newest first.
func eventRows(events []journal.Event) []eventRow {
	out := make([]eventRow, 0, len(events))
	for _, e := range slices.Backward(events) {
		row := eventRow{Time: e.Time, Level: e.Level.String(), Name: string(e.Name), WorkItem: e.WorkItem}
		if k, err := desired.ParseKey(e.WorkItem); err == nil {
			row.ItemURL = itemURL(k)
		}
		for _, key := range slices.Sorted(maps.Keys(e.Attrs)) {
			if hiddenAttrs[key] {
				continue
			}
			row.Attrs = append(row.Attrs, attr{Key: key, Value: journal.Clip(e.Attrs[key], maxAttrValue)})
		}
		out = append(out, row)
	}
	return out
}

// notFound answers 404 with the page that says so in loopd's words.
func (h *Handler) notFound(w http.ResponseWriter, key string, now time.Time) {
	h.render(w, h.none, http.StatusNotFound, struct {
		page
		Key string
	}{page: h.page("not found · loopd", now), Key: key})
}

// fail answers 500 to a request the store could not serve, and logs why;
// the answer names no path or error, which a remote caller has no use for.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, r.Context().Err()) {
		return // the caller went away
	}
	h.opts.Log.Error(string(journal.StatusPageFailed), journal.KeyReason, "store_failed", journal.KeyDetail, r.URL.Path, journal.KeyErr, err)
	msg, code := "status page: the store could not be read; see the daemon's log (status_page.failed)", http.StatusInternalServerError
	for _, o := range h.outages() {
		code = http.StatusServiceUnavailable
		msg += "\n" + o.What + " down"
		if !o.Since.IsZero() {
			msg += " since " + o.Since.UTC().Format(time.RFC3339)
		}
	}
	http.Error(w, msg, code)
}

// page is the layout's data of a page titled title, at now.
func (h *Handler) page(title string, now time.Time) page {
	return page{Title: title, Host: h.opts.Host, Now: now, Outages: h.outages()}
}

// outages returns Options.Outages', none without it.
func (h *Handler) outages() []Outage {
	if h.opts.Outages == nil {
		return nil
	}
	return h.opts.Outages()
}

// render executes t into a buffer first, so that a failed render answers
// 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, t *template.Template, code int, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", data); err != nil {
		h.opts.Log.Error(string(journal.StatusPageFailed), journal.KeyReason, "render_failed", journal.KeyErr, err)
		http.Error(w, "status page: render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = buf.WriteTo(w)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04:05 MST") // every time with its zone
	},
	"rfc3339": func(t time.Time) string { return t.Format(time.RFC3339) },
	"listed":  reconciler.ListedReason,
	"ago": func(now, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		d := now.Sub(t).Round(time.Second)
		if d < 0 {
			return "in " + (-d).String()
		}
		return d.String() + " ago"
	},
	"limit": func(n int) string {
		if n == 0 {
			return "no limit"
		}
		return strconv.Itoa(n)
	},
	"lower": func(p desired.Phase) string { return strings.ToLower(string(p)) },
}
