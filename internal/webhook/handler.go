package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
	"golang.org/x/sync/semaphore"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
	"github.com/loopd/loopd/schema"
	"github.com/loopd/loopd/store"
)

// DefaultMaxBody is the body cap in bytes when Options.MaxBody is 0: 25 MiB,
// at least GitHub's own 25 MB cap on webhook payloads (GitHub webhook docs,
// "Webhook payload object common properties").
const DefaultMaxBody int64 = 25 << 20

// The reasons logged with delivery.rejected and delivery.ignored.
const (
	// delivery.rejected, journaled without waiting on the store
	// (Options.Rejections): the request is not authenticated.
	reasonNoSecret         = "no_secret"
	reasonMissingSignature = "missing_signature"
	reasonBadSignature     = "bad_signature"
	reasonLengthRequired   = "length_required"
	reasonBodyTooLarge     = "body_too_large"
	reasonOverBudget       = "over_budget"
	reasonReadFailed       = "read_failed"

	// delivery.rejected, journaled: signed by GitHub but unusable.
	reasonMissingEvent       = "missing_event"
	reasonBadDeliveryID      = "bad_delivery_id"
	reasonUnsupportedContent = "unsupported_content_type"
	reasonMalformedPayload   = "malformed_payload"
	reasonBadRepository      = "bad_repository" // an owner or repository name GitHub never sends
	reasonWorkdirFailed      = "workdir_failed"
	reasonStoreFailed        = "store_failed"

	// delivery.ignored.
	reasonPing               = "ping"
	reasonEventNotHandled    = "event_not_handled"
	reasonActionNotHandled   = "action_not_handled"
	reasonEmptyReview        = "empty_review"
	reasonUnauthorizedSender = "unauthorized_sender"
	reasonNoRoute            = "no_route"
	reasonStaleState         = "stale_state"
	reasonOutdated           = "older_than_state" // a payload older than the item's last open/closed change

	// delivery.ignored: loopd does not talk to itself (filter).
	reasonOwnLogin    = "own_login"    // sent by github.botLogin
	reasonBotSender   = "bot_sender"   // a Bot account not in authorizedUsers
	reasonAgentMarker = "agent_marker" // the text carries an agent's hidden marker
	reasonOwnMarker   = "own_marker"   // the text carries loopd's own announcement or notice marker
	reasonBadCommand  = "bad_command"  // "/loopd budget" with a count that is none (desired.ParseTokens), "/loopd answer" with nothing to answer

	// delivery.ignored: approvals from GitHub (docs/design.md, "Approvals").
	reasonAlreadyAnswered = "already_answered" // the question has an answer already: the first counts
	reasonNoApprovals     = "approvals_off"    // "/loopd answer" on a route without approvals: github

	// delivery.ignored: the route's trigger (filter).
	reasonNoMention   = "no_mention"   // trigger.mention is not in the text
	reasonNotLabelled = "not_labelled" // trigger.labels: the item carries none and does not run
	reasonStarted     = "already_started"

	// delivery.ignored: CI reactions (ciChange, filter).
	reasonCINotFailed    = "check_not_failed"    // success, neutral, cancelled, skipped…
	reasonCINotCompleted = "check_not_completed" // created, requested, in progress: recorded, nothing to say yet
	reasonNoPullRequest  = "no_pull_request"     // no open pull request item of this repository has the commit as its head
	reasonStaleCommit    = "stale_commit"        // not the pull request's head commit any more
	reasonNoWorkItem     = "no_work_item"        // CI never starts an agent
	reasonCIReactionOff  = "ci_reaction_off"     // reactions.ciFailure is false
	reasonCIDuplicate    = "check_already_sent"  // the commit's failed checks were prompted
)

// deliveryIDPattern bounds X-GitHub-Delivery (a GUID from GitHub) before it
// is stored and shown in prompts.
var deliveryIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Ingester applies one delivery to the desired state in one transaction,
// with the journal rows in.Journal returns for its result, and returns once
// that transaction is committed; Heads names the open pull request items
// whose head is a commit (store.Store.Heads), and Get reads one item.
// store.Store satisfies it.
type Ingester interface {
	Ingest(ctx context.Context, in store.Ingest) (store.IngestResult, error)
	Heads(ctx context.Context, owner, repo, commit string) ([]desired.Key, error)
	// Get returns one work item (store.Store.Get): the question open on
	// it is the one an answer that names none answers.
	Get(ctx context.Context, k desired.Key) (desired.Record, error)
}

// Options configures a Handler.
type Options struct {
	// Secret is the webhook secret. When it is empty every request is
	// refused with 500: an empty HMAC key proves nothing.
	Secret []byte
	// Config returns the current receiver config; it is called once per
	// request, so a hot reload takes effect on the next delivery.
	// Config, Store, Recorder and Log are required.
	Config func() schema.GHWebhook
	Store  Ingester
	// Recorder logs and journals every authenticated outcome.
	Recorder *journal.Recorder
	// Trigger wakes the reconciler without blocking. It is called only
	// after an ingest that changed something. Nil means no wake-up.
	Trigger func()
	// Rejections records delivery.rejected for the requests that fail
	// before or at signature verification. Their answer must never wait
	// on it, and a flood of them must not fill the journal: serve gives it
	// a store behind a journal.Limiter and a journal.Async. Nil means they
	// are logged to Log only.
	Rejections *journal.Recorder
	// Metrics counts the requests answered by outcome and reason; nil
	// counts nothing.
	Metrics *Metrics
	// Log receives delivery.rejected for the requests that fail before or
	// at signature verification when Rejections is nil.
	Log *slog.Logger
	// Now stamps Delivery.ReceivedAt. Nil means time.Now.
	Now func() time.Time
	// MaxBody caps the request body in bytes; 0 means DefaultMaxBody.
	MaxBody int64
	// BodyBudget caps the bytes held at once by all the request bodies
	// being read and not yet verified; 0 means DefaultBodyBudget. A
	// request whose body does not fit gets 503 with Retry-After.
	BodyBudget int64
	// AnswerTimeout bounds the handler's work on one request, counted from
	// the end of its headers; 0 means schema.WebhookAnswerTimeout.
	AnswerTimeout time.Duration
	// CIReady is called, without blocking, after an ingest that completed
	// a commit's checks with failures (desired.IngestResult.CIReady): its
	// prompt can go out now (CIFlusher.Kick). Nil means none.
	CIReady func()
	// BotLogin returns the GitHub login loopd and its agents post as
	// (github.botLogin, or the login the credentials belong to, resolved
	// by serve at start); it is called once per request. A change sent by
	// it is never queued. Nil or "" singles out no login.
	BotLogin func() string
}

// Handler receives GitHub webhook deliveries. Each one becomes at most one
// queued delivery on one work item, written in one store transaction before
// the handler answers. See the package doc for the status codes and the
// table of handled events.
type Handler struct {
	opts   Options
	budget *semaphore.Weighted // Options.BodyBudget
}

// New returns a Handler with opts, filling MaxBody, BodyBudget,
// AnswerTimeout, Now and Trigger defaults.
func New(opts Options) *Handler {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.BodyBudget <= 0 {
		opts.BodyBudget = DefaultBodyBudget
	}
	if opts.AnswerTimeout <= 0 {
		opts.AnswerTimeout = schema.WebhookAnswerTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Trigger == nil {
		opts.Trigger = func() {}
	}
	if opts.CIReady == nil {
		opts.CIReady = func() {}
	}
	if opts.BotLogin == nil {
		opts.BotLogin = func() string { return "" }
	}
	return &Handler{opts: opts, budget: semaphore.NewWeighted(opts.BodyBudget)}
}

// delivery is the authenticated request as far as it has been read.
type delivery struct {
	id     string
	event  string
	action string
	sender string
}

// attrs returns the log attributes that name d.
func (d delivery) attrs(kv ...any) []any {
	out := []any{"delivery", d.id, "event", d.event}
	if d.action != "" {
		out = append(out, "payload_action", d.action)
	}
	if d.sender != "" {
		out = append(out, "sender", d.sender)
	}
	return append(out, kv...)
}

// ServeHTTP handles one delivery. It verifies the signature over the exact
// body bytes before anything else reads them. Its work ends within
// AnswerTimeout of the headers: a delivery the store cannot take in time
// is answered 503.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.AnswerTimeout)
	defer cancel()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	d := delivery{id: r.Header.Get(github.DeliveryIDHeader), event: r.Header.Get(github.EventTypeHeader)}
	classify, handled := classifiers[d.event]
	switch mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); {
	case d.event == "":
		h.reject(ctx, w, d, reasonMissingEvent, "missing X-GitHub-Event header")
		return
	case !deliveryIDPattern.MatchString(d.id):
		h.reject(ctx, w, d, reasonBadDeliveryID, "missing or malformed X-GitHub-Delivery header")
		return
	case mediaType != "application/json":
		h.reject(ctx, w, d, reasonUnsupportedContent, "content type must be application/json (set it in the webhook settings)")
		return
	case d.event == "ping":
		h.ignore(ctx, w, http.StatusOK, d, "", reasonPing)
		return
	case !handled:
		h.ignore(ctx, w, http.StatusAccepted, d, "", reasonEventNotHandled)
		return
	}
	p, err := decodePayload(body)
	if err != nil {
		h.reject(ctx, w, d, reasonMalformedPayload, err.Error())
		return
	}
	d.action = p.Action
	if r := p.Repository; r.Owner.Login != "" && r.Name != "" && !schema.ValidRepository(r.Owner.Login, r.Name) {
		// A 4xx, not a 5xx: redelivering it cannot help.
		h.reject(ctx, w, d, reasonBadRepository, "repository "+strconv.Quote(journal.Clip(r.Owner.Login+"/"+r.Name, 200))+" is not a GitHub owner/repo name")
		return
	}
	c, reason, err := classify(p)
	if err != nil {
		h.reject(ctx, w, d, reasonMalformedPayload, err.Error())
		return
	}
	if reason != "" {
		h.ignore(ctx, w, http.StatusAccepted, d, "", reason)
		return
	}
	d.sender, c.installation = c.sender, p.Installation.ID
	h.ingest(ctx, w, d, c)
}

// authenticate checks X-Hub-Signature-256 and reads the body under the
// caps, verifying the signature over the exact bytes (HMAC-SHA256 with the
// secret, compared in constant time; GitHub webhook docs, "Validating
// webhook deliveries"). Everything that can be decided from the headers is
// decided before the body is read: a missing or malformed signature gets
// 401, a missing Content-Length 411 (GitHub always sends one), a
// Content-Length over MaxBody or over the whole BodyBudget 413; those
// answers close the connection with the body unread. While it is read, the
// body holds its bytes on the shared budget; a body the budget cannot hold
// gets 503 with Retry-After.
// On failure it records delivery.rejected (refused), answers, and returns
// false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	refuse := func(code int, reason, msg string, err error) ([]byte, bool) {
		h.refused(r, reason, err)
		reply(w, code, msg)
		return nil, false
	}
	// unread answers before the body is read: the connection is closed
	// after the answer instead of being drained for the next request, and
	// a read deadline in the past ends at once the drain net/http still
	// attempts on a chunked body.
	unread := func(code int, reason, msg string, err error) ([]byte, bool) {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return refuse(code, reason, msg, err)
	}
	if len(h.opts.Secret) == 0 {
		return unread(http.StatusInternalServerError, reasonNoSecret,
			"webhook secret not configured", errors.New("empty webhook secret: every delivery is refused"))
	}
	sig := r.Header.Get(github.SHA256SignatureHeader)
	if sig == "" {
		return unread(http.StatusUnauthorized, reasonMissingSignature, "missing X-Hub-Signature-256",
			errors.New("no X-Hub-Signature-256 header"))
	}
	// Only sha256 belongs in this header (go-github's ValidateSignature
	// would also take sha1= and sha512=).
	hexSig, ok := strings.CutPrefix(sig, "sha256=")
	want, err := hex.DecodeString(hexSig)
	if !ok || err != nil || len(want) != sha256.Size {
		return unread(http.StatusUnauthorized, reasonBadSignature, "bad signature",
			errors.New("signature is not sha256= and 64 hex digits"))
	}
	switch {
	case r.ContentLength < 0:
		return unread(http.StatusLengthRequired, reasonLengthRequired, "Content-Length required",
			errors.New("no Content-Length (a chunked body)"))
	case r.ContentLength > min(h.opts.MaxBody, h.opts.BodyBudget):
		return unread(http.StatusRequestEntityTooLarge, reasonBodyTooLarge, "payload too large",
			fmt.Errorf("Content-Length over the cap of %d bytes", min(h.opts.MaxBody, h.opts.BodyBudget)))
	}
	b, release, err := readSigned(r.Body, r.ContentLength, h.opts.Secret, h.budget)
	defer release()
	switch {
	case errors.Is(err, errOverBudget):
		w.Header().Set("Retry-After", bodyBudgetRetryAfter)
		return unread(http.StatusServiceUnavailable, reasonOverBudget, "busy: retry later", err)
	case err != nil:
		return unread(http.StatusBadRequest, reasonReadFailed, "cannot read body", errors.New(readErrText(err)))
	case !b.verify(want):
		return refuse(http.StatusUnauthorized, reasonBadSignature, "bad signature",
			errors.New("signature does not match the body"))
	}
	return b.bytes(), true
}

// unverifiedEvent bounds the X-GitHub-Event of an unauthenticated request
// before it is logged and journaled: GitHub's event names are short
// snake_case words.
var unverifiedEvent = regexp.MustCompile(`^[a-z_]{1,64}$`)

// refused records delivery.rejected with reason and err for a request that
// failed authentication, through Options.Rejections, which never waits on
// the store, or to the log alone. The request's delivery id and event name
// are untrusted: each is kept only when it has the shape GitHub gives it.
// Its err is one of authenticate's fixed texts, so that a journal.Limiter
// folds a flood into one row and a count.
func (h *Handler) refused(r *http.Request, reason string, err error) {
	h.opts.Metrics.count(journal.DeliveryRejected, reason)
	level := slog.LevelWarn
	if reason == reasonNoSecret {
		level = slog.LevelError
	}
	var kv []any
	if id := r.Header.Get(github.DeliveryIDHeader); deliveryIDPattern.MatchString(id) {
		kv = append(kv, journal.KeyDelivery, id)
	}
	if ev := r.Header.Get(github.EventTypeHeader); unverifiedEvent.MatchString(ev) {
		kv = append(kv, journal.KeyEvent, ev)
	}
	kv = append(kv, journal.KeyReason, reason, journal.KeyErr, err, journal.KeyRemoteAddr, r.RemoteAddr)
	if h.opts.Rejections == nil {
		h.opts.Log.Log(r.Context(), level, string(journal.DeliveryRejected), kv...)
		return
	}
	h.opts.Rejections.Record(r.Context(), level, journal.DeliveryRejected, "", kv...)
}

// ingest applies an authorized, routed change in one store transaction and
// answers with its outcome. A check GitHub names no pull request for
// (change.byCommit) goes to every open pull request item whose head is its
// commit (Ingester.Heads), each in a transaction of its own: the first
// under the delivery's id, each further one under the id and its number
// (a form no X-GitHub-Delivery has), so that a redelivery is a duplicate
// on every item. The answer is the most severe of theirs. A commit no
// item has as its head is ignored (no_pull_request) and journaled with
// it.
func (h *Handler) ingest(ctx context.Context, w http.ResponseWriter, d delivery, c change) {
	if !c.byCommit {
		o := h.apply(ctx, d, c)
		reply(w, o.code, o.msg)
		return
	}
	keys, err := h.opts.Store.Heads(ctx, c.key.Owner, c.key.Repo, c.commit)
	if err != nil {
		o := h.storeFailed(ctx, d, "", err)
		reply(w, o.code, o.msg)
		return
	}
	if len(keys) == 0 {
		o := h.ignored(ctx, http.StatusAccepted, d, "", reasonNoPullRequest, "commit", c.commit)
		reply(w, o.code, o.msg)
		return
	}
	code, msgs := 0, make([]string, 0, len(keys))
	for i, k := range keys {
		one, dd := c, d
		one.key, one.byCommit = k, false
		if i > 0 {
			dd.id = d.id + "/" + strconv.Itoa(k.Number)
		}
		o := h.apply(ctx, dd, one)
		code = max(code, o.code)
		msgs = append(msgs, o.msg)
	}
	reply(w, code, strings.Join(msgs, "; "))
}

// apply ingests the change c of delivery d on its one item, records the
// outcome and returns it.
func (h *Handler) apply(ctx context.Context, d delivery, c change) outcome {
	cfg := h.opts.Config()
	key := c.key.String()
	title := ""
	if c.prompt != nil {
		title = c.prompt.Title // kept, whatever becomes of the prompt
	}
	route, routed := cfg.Routing.Route(c.key.Owner, c.key.Repo)
	v := filter(c, route, cfg.AuthorizedUsers.Has, h.opts.BotLogin())
	if v.unhandled {
		c.prompt, c.unhandled = nil, reasonActionNotHandled
	}
	if v.drop != "" {
		if c.closed == nil {
			return h.ignored(ctx, http.StatusAccepted, d, key, v.drop)
		}
		// Whoever closed or reopened the item, or commented on it, it is
		// closed or open on GitHub: the state applies to an item loopd
		// holds. Only instructions to the agent need an authorized sender
		// that is not loopd itself, so the prompt is dropped, and with it
		// any reason to create the item.
		c.prompt = nil
		v.noCreate, v.unknown = true, v.drop
	}
	if !routed {
		return h.ignored(ctx, http.StatusAccepted, d, key, reasonNoRoute)
	}
	cwd, err := route.RenderWorkdir(c.key.Owner, c.key.Repo, c.key.Number, string(c.kind))
	if err != nil {
		return h.fail(ctx, d, key, reasonWorkdirFailed, err)
	}
	in := store.Ingest{
		DeliveryID:   d.id,
		Key:          c.key,
		Kind:         c.kind,
		Harness:      route.Harness,
		Cwd:          cwd,
		Closed:       c.closed,
		StateAt:      c.stateAt,
		Snapshot:     c.snapshot,
		HeadRef:      c.headRef,
		HeadSHA:      c.headSHA,
		HeadPusher:   c.headPusher,
		HeadRepo:     c.headRepo,
		Author:       c.author,
		CanModify:    c.canModify,
		Title:        title,
		URL:          c.itemURL,
		Installation: c.installation,
		NoCreate:     v.noCreate,
		NewOnly:      v.newOnly,
		CI:           c.ci,
		Identity:     c.identity,
	}
	if v.budget > 0 {
		c.prompt, in.BudgetRaise = nil, v.budget
	}
	if v.answer != nil {
		if !route.ApprovalsFromGitHub() {
			return h.ignored(ctx, http.StatusAccepted, d, key, reasonNoApprovals)
		}
		h.resolve(ctx, c.key, v.answer, c.commentAt)
		if c.prompt != nil {
			if v.words == "" {
				// A choice: no text reaches the agent.
				c.prompt = nil
			} else {
				c.prompt.Body = v.words
			}
		}
	}
	if c.prompt != nil || v.answer != nil {
		var p PromptInput
		if c.prompt != nil {
			p = *c.prompt
		}
		p.Event, p.Action, p.WorkItem, p.Sender, p.DeliveryID = d.event, d.action, key, d.sender, d.id
		in.Delivery = &desired.Delivery{
			ID:         d.id,
			Event:      d.event,
			Action:     d.action,
			Sender:     d.sender,
			ReceivedAt: h.opts.Now(),
			Commit:     c.commit,
			Source:     c.source,
			Answer:     v.answer,
		}
		if c.prompt != nil {
			in.Delivery.Prompt = Render(p)
		}
	}
	// The journal row goes in the delivery's own transaction: the
	// delivery and its row are stored together or not at all.
	in.Journal = func(res store.IngestResult) []journal.Event {
		o := ingested(d, key, c, v, res)
		return []journal.Event{h.opts.Recorder.Row(ctx, o.level, o.name, key, o.kv...)}
	}
	res, err := h.opts.Store.Ingest(ctx, in)
	if err != nil {
		return h.storeFailed(ctx, d, key, err)
	}
	o := ingested(d, key, c, v, res)
	h.opts.Recorder.Log(ctx, o.level, o.name, key, o.kv...)
	h.opts.Metrics.count(o.name, o.reason)
	if o.name == journal.DeliveryAccepted {
		h.opts.Trigger()
	}
	if res.CIReady {
		h.opts.CIReady()
	}
	return o
}

// resolve names the question an answer, a comment written at at, answers:
// the one open on the item k now (desired.Status.Question) for an answer
// that names none, unless loopd saw that question only after the comment
// was written (then it was meant for an earlier one, and answers none),
// or none. One that names a question not asked yet (past
// Status.Questions) answers none, so that it keys no answer a later
// question of that id would need. A store that cannot say leaves it
// unnamed. The planner refuses an answer to none, with a reply.
func (h *Handler) resolve(ctx context.Context, k desired.Key, a *desired.Answer, at time.Time) {
	r, err := h.opts.Store.Get(ctx, k)
	switch {
	case err != nil:
		a.Question = ""
	case a.Question == "" && r.Status.Question != nil:
		// GitHub's times are whole seconds: a comment of the second
		// loopd saw the question in may be after it.
		if at.IsZero() || !at.Add(time.Second).Before(r.Status.Question.AskedAt) {
			a.Question = r.Status.Question.ID
		}
	case a.Question != "":
		if n, err := strconv.Atoi(strings.TrimPrefix(a.Question, "q")); err != nil || n < 1 || n > r.Status.Questions {
			a.Question = ""
		}
	}
}

// outcome is the answer to one delivery and the event that records it.
type outcome struct {
	code   int
	msg    string
	level  slog.Level
	name   journal.Name
	reason string // the reason it carries, "" for none
	kv     []any
}

// ignored is the outcome of a delivery ignored for reason.
func ignored(code int, d delivery, reason string) outcome {
	return outcome{code: code, msg: "ignored: " + reason, level: slog.LevelInfo, name: journal.DeliveryIgnored,
		reason: reason, kv: d.attrs("reason", reason)}
}

// ingested returns the outcome of the change c of delivery d on the item
// key, under the verdict v, from what the store did with it (res).
func ingested(d delivery, key string, c change, v verdict, res store.IngestResult) outcome {
	switch {
	case res.Duplicate:
		return outcome{code: http.StatusOK, msg: "duplicate delivery; nothing changed", level: slog.LevelInfo,
			name: journal.DeliveryDuplicate, kv: d.attrs()}
	case c.unhandled != "" && !res.StateChanged:
		// An action loopd does not act on, whose state showed nothing new.
		return ignored(http.StatusAccepted, d, c.unhandled)
	case v.drop != "" && c.snapshot && !res.StateChanged:
		// A stranger's, a bot's or an agent's own comment or review, or
		// one a trigger does not let through, that showed nothing new.
		return ignored(http.StatusAccepted, d, v.drop)
	case res.Answered:
		return ignored(http.StatusAccepted, d, reasonAlreadyAnswered)
	case res.Unknown && v.unknown != "":
		return ignored(http.StatusAccepted, d, v.unknown)
	case res.StaleCommit:
		return ignored(http.StatusAccepted, d, reasonStaleCommit)
	case res.Deduplicated:
		return ignored(http.StatusAccepted, d, reasonCIDuplicate)
	case res.Collected && c.ciQuiet != "":
		// Recorded with its commit's checks: it names no failure.
		return ignored(http.StatusAccepted, d, c.ciQuiet)
	case res.Outdated && !res.StateChanged:
		return ignored(http.StatusAccepted, d, reasonOutdated)
	case res.Exists && !res.StateChanged:
		return ignored(http.StatusAccepted, d, reasonStarted)
	case res.StaleState && !res.Queued && !res.Created:
		return ignored(http.StatusAccepted, d, reasonStaleState)
	}
	attrs := d.attrs("queued", res.Queued, "created", res.Created,
		"state_changed", res.StateChanged, "stale_state", res.StaleState)
	if res.Collected {
		// A failure, kept with its commit's other checks until they are
		// done (CIFlusher).
		attrs = append(attrs, "ci_collected", true, "commit", c.commit, "ci_ready", res.CIReady)
	}
	if res.StateChanged {
		attrs = append(attrs, "closed", *c.closed)
	}
	if v.budget > 0 {
		attrs = append(attrs, "budget_raise", v.budget)
	}
	if a := v.answer; a != nil {
		attrs = append(attrs, "question_id", a.Question, "choice", a.Choice)
	}
	if v.drop != "" {
		// The state applied; the prompt did not, and this says why.
		attrs = append(attrs, "reason", v.drop)
	}
	return outcome{code: http.StatusAccepted, msg: "accepted for " + key, level: slog.LevelInfo,
		name: journal.DeliveryAccepted, reason: v.drop, kv: attrs}
}

// reject answers 400 or 415 to a signed delivery loopd cannot use, and
// records delivery.rejected.
func (h *Handler) reject(ctx context.Context, w http.ResponseWriter, d delivery, reason, msg string) {
	h.opts.Recorder.Record(ctx, slog.LevelWarn, journal.DeliveryRejected, "", d.attrs("reason", reason, "err", msg)...)
	h.opts.Metrics.count(journal.DeliveryRejected, reason)
	code := http.StatusBadRequest
	if reason == reasonUnsupportedContent {
		code = http.StatusUnsupportedMediaType
	}
	reply(w, code, msg)
}

// fail records delivery.rejected for a delivery loopd could not route to
// a work item (its workdir did not render) and returns its answer, 500, so
// that GitHub shows the failure and the operator can redeliver it.
func (h *Handler) fail(ctx context.Context, d delivery, key, reason string, err error) outcome {
	h.opts.Recorder.Record(ctx, slog.LevelError, journal.DeliveryRejected, key, d.attrs("reason", reason, "err", err)...)
	h.opts.Metrics.count(journal.DeliveryRejected, reason)
	return outcome{code: http.StatusInternalServerError, msg: "delivery not stored: " + reason}
}

// storeFailed records a delivery the store did not take (locked by another
// process past AnswerTimeout or its busy timeout, full, broken) and returns
// its answer, 503, so that GitHub shows the failure and the operator can
// redeliver it. The rejection is logged at once and journaled later
// (Recorder.RecordLater): the journal is that same store, and a second
// wait on it would take the answer past GitHub's deadline.
func (h *Handler) storeFailed(ctx context.Context, d delivery, key string, err error) outcome {
	h.opts.Recorder.RecordLater(ctx, slog.LevelError, journal.DeliveryRejected, key,
		d.attrs("reason", reasonStoreFailed, "err", err)...)
	h.opts.Metrics.count(journal.DeliveryRejected, reasonStoreFailed)
	return outcome{code: http.StatusServiceUnavailable, msg: "delivery not stored: " + reasonStoreFailed}
}

// ignore answers code and records delivery.ignored with reason.
func (h *Handler) ignore(ctx context.Context, w http.ResponseWriter, code int, d delivery, key, reason string) {
	o := h.ignored(ctx, code, d, key, reason)
	reply(w, o.code, o.msg)
}

// ignored records delivery.ignored with reason and the attributes kv, and
// returns the answer, code.
func (h *Handler) ignored(ctx context.Context, code int, d delivery, key, reason string, kv ...any) outcome {
	o := ignored(code, d, reason)
	o.kv = append(o.kv, kv...)
	h.opts.Recorder.Record(ctx, o.level, o.name, key, o.kv...)
	h.opts.Metrics.count(o.name, o.reason)
	return o
}

// reply writes a one-line text/plain answer; GitHub shows it in the
// delivery log.
func reply(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}
