package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrBadKey is returned by ParseKey for text that is not owner/repo#number.
var ErrBadKey = errors.New("bad work item key")

// Key identifies one work item: an issue or a pull request, owner/repo#number.
type Key struct {
	Owner  string
	Repo   string
	Number int
}

// String returns the key as owner/repo#number.
func (k Key) String() string { return k.Owner + "/" + k.Repo + "#" + strconv.Itoa(k.Number) }

// SameItem reports whether k and o name one work item on GitHub: the same
// number, and owner and repository equal under Unicode case folding
// (GitHub's names are case-insensitive, and routing matches them so).
func (k Key) SameItem(o Key) bool {
	return k.Number == o.Number && strings.EqualFold(k.Owner, o.Owner) && strings.EqualFold(k.Repo, o.Repo)
}

// ParseKey parses owner/repo#number. It returns an error wrapping ErrBadKey when
// the text has another shape or the number is not a positive integer.
func ParseKey(s string) (Key, error) {
	slash := strings.IndexByte(s, '/')
	hash := strings.LastIndexByte(s, '#')
	if slash <= 0 || hash <= slash+1 || hash == len(s)-1 {
		return Key{}, fmt.Errorf("%w: %q (want owner/repo#number)", ErrBadKey, s)
	}
	n, err := strconv.Atoi(s[hash+1:])
	if err != nil || n <= 0 {
		return Key{}, fmt.Errorf("%w: %q (number must be a positive integer)", ErrBadKey, s)
	}
	return Key{Owner: s[:slash], Repo: s[slash+1 : hash], Number: n}, nil
}

// SessionPrefix starts the name of every session that loopd owns
// (SessionName); observed leaves other sessions on the server alone.
const SessionPrefix = "loop-"

// SessionName returns the tmux session name for k: SessionPrefix and a slug of the
// key over [a-z0-9-]. The mapping is injective: whenever the slug had to change
// a character (case, '/', '#', '.', '_' or anything else outside [a-z0-9-]) or
// could be ambiguous, "--" and the first 8 hex digits of the SHA-256 of the
// key are appended, so two keys never share a session (short of a 32-bit hash
// collision between keys with the same slug). tmux never sees '.' or ':'.
//
// A name is worked out once per key and process (sessionNames): every pass
// asks for every item's name several times.
func SessionName(k Key) string {
	sessionNames.RLock()
	name, ok := sessionNames.m[k]
	sessionNames.RUnlock()
	if ok {
		return name
	}
	name = sessionName(k)
	sessionNames.Lock()
	sessionNames.m[k] = name
	sessionNames.Unlock()
	return name
}

// sessionNames holds the name of each key SessionName was asked for: about
// 100 bytes a work item, for as long as the process runs.
var sessionNames = struct {
	sync.RWMutex
	m map[Key]string
}{m: map[Key]string{}}

// sessionName works out SessionName(k).
func sessionName(k Key) string {
	// The plain form joins parts with single '-'; it is only unambiguous when
	// no part contains '-' itself or anything that needs replacing.
	plain := k.Owner + "-" + k.Repo + "-" + strconv.Itoa(k.Number)
	slug := slugify(plain)
	if slug == plain && !strings.Contains(k.Owner, "-") && !strings.Contains(k.Repo, "-") {
		return SessionPrefix + slug
	}
	// "--" never occurs in a plain name nor in a slug, so a hashed name can
	// not equal a plain one: with a single '-', acme/_#22 would end in the
	// all-digit hash 14435996 and take acme/22#14435996's plain name.
	sum := sha256.Sum256([]byte(k.String()))
	return SessionPrefix + slug + "--" + hex.EncodeToString(sum[:4])
}

// slugify lowercases s, turns every run of characters outside [a-z0-9]
// into one '-', and trims '-' at both ends. It runs once per item per pass,
// so it avoids regexp.
func slugify(s string) string {
	b := make([]byte, 0, len(s))
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			if dash && len(b) > 0 {
				b = append(b, '-')
			}
			b = append(b, c)
			dash = false
			continue
		}
		dash = true
	}
	return string(b)
}

// Kind says whether a work item is an issue or a pull request.
type Kind string

// The kinds of work item.
const (
	KindIssue       Kind = "issue"
	KindPullRequest Kind = "pull_request"
)

// Spec is the desired state of a work item. The store's Ingest writes it
// (store.Store); the reconciler only reads it.
type Spec struct {
	Kind    Kind
	Harness string // harness name from config, e.g. "claude-code"
	// Cwd is the workdir rendered from the route when the item was first
	// seen. Until the item's first spawn the planner renders the workdir
	// from the current config instead; from then on the workdir is pinned
	// (Record.Workdir), since a resume is cwd-scoped.
	Cwd string
	// HeadRef is a pull request's head branch in its head repository
	// (HeadRepo: the item's own, or a fork's), "" when unknown. A fork's
	// clone, and one whose head branch is unknown, checks out
	// refs/pull/<n>/head; a fork's head branch is where a plain `git
	// push` goes when the fork lets maintainers push (MaintainerCanModify).
	HeadRef string
	// HeadSHA is a pull request's head commit as the newest pull request
	// payload named it (synchronize moves it); "" when unknown. A CI
	// failure on another commit is stale.
	HeadSHA string
	// HeadRepo is a pull request's head repository, owner/repo as the
	// newest pull request payload named it; "" for an issue, or when no
	// such payload was seen (an item an issue_comment made). A head in
	// another repository than the item's is a fork's (Fork).
	HeadRepo string
	// Author is the login that opened the issue or pull request, as its
	// payloads name it; "" when none did.
	Author string
	// HeadPusher is the login that pushed HeadSHA: the sender of the
	// pull_request opened or synchronize payload that named that commit;
	// "" when no such payload named it (the head moved with a payload of
	// another action, or the push's delivery was lost).
	HeadPusher string
	// MaintainerCanModify is the newest pull request payload's
	// maintainer_can_modify: the owner of a fork's head lets the base
	// repository's maintainers, loopd's App among them, push to it
	// (GitHub's docs, "Allowing changes to a pull request branch created
	// from a fork"). Meaningful for a fork only (Fork).
	MaintainerCanModify bool
	// Installation is the id of the GitHub App installation the newest
	// delivery that named one came through (its installation.id): the
	// installation whose token and rate limits the item's calls use. 0
	// when none named it (a token, a replay), and the call then looks it
	// up (ghapi.Client).
	Installation int64
	// Title is the issue's or pull request's title as the newest payload
	// that names it gave it: text from outside, shown escaped. URL is its
	// page on GitHub (from the repository's html_url). Both "" until a
	// payload names them.
	Title, URL string
	Closed     bool
	// StateChangedAt is the payload's updated_at of the last open/closed
	// change; an older change is ignored.
	StateChangedAt time.Time
	Held           bool // operator stop (loopd hold); never self-healed
	// ReleaseGeneration is the Generation of the latest loopd release: the
	// reconciler carries a release out once, when it is greater than
	// Status.ReleasedGeneration. ReleaseFresh is true when that release
	// asked for a new conversation (loopd release --fresh).
	ReleaseGeneration int64
	ReleaseFresh      bool
	// BudgetRaise is the tokens operators added to the item's budget, in
	// all (loopd release --budget, an authorized "/loopd budget +N"
	// comment): each of the route's budgets is raised by it.
	BudgetRaise int64
	// Generation grows by one with every spec change or new delivery.
	Generation int64
}

// Fork reports whether s is a pull request whose head repository
// (HeadRepo, as a payload named it) is a fork's (ForkHead). An issue, and
// a pull request whose head repository no payload named, are not.
func (s Spec) Fork(k Key) bool {
	return s.Kind == KindPullRequest && ForkHead(k, s.HeadRepo)
}

// PushRepo returns the repository (owner and name) a plain `git push` of
// k's clone goes to when it is not k's own: a fork's head repository that
// takes the base's maintainers' pushes (Fork, MaintainerCanModify, and its
// head branch known, HeadRef); ok false otherwise (an issue, a pull request
// of k's repository, a fork that takes none).
func (s Spec) PushRepo(k Key) (owner, repo string, ok bool) {
	if !s.Fork(k) || !s.MaintainerCanModify || s.HeadRef == "" {
		return "", "", false
	}
	return strings.Cut(s.HeadRepo, "/")
}

// ForkHead reports whether headRepo, a pull request's head repository
// (owner/repo), is another repository than the one of k, the pull request,
// compared case-insensitively as GitHub does; "" (none named, or a
// deleted fork) is not.
func ForkHead(k Key, headRepo string) bool {
	return headRepo != "" && !strings.EqualFold(headRepo, k.Owner+"/"+k.Repo)
}

// Phase is where a work item stands in the state machine of docs/design.md.
type Phase string

// The phases.
const (
	PhaseIdle     Phase = "Idle"
	PhaseSpawning Phase = "Spawning"
	// PhasePreparing: the item's worktree is being made, outside the
	// reconcile pass (Status.PrepareStarted); its spawn follows.
	PhasePreparing      Phase = "Preparing"
	PhaseRunning        Phase = "Running"
	PhaseExited         Phase = "Exited"
	PhaseBackingOff     Phase = "BackingOff"
	PhaseNeedsAttention Phase = "NeedsAttention"
	PhaseStopped        Phase = "Stopped"
	// PhaseRateLimited: the harness hit a usage limit; the item waits
	// until Status.LimitUntil and then resumes its conversation. Not a
	// failure, and not a live agent's slot: it does nothing until then.
	PhaseRateLimited Phase = "RateLimited"
	// PhaseQueued: the item needs an agent and waits for a free slot of
	// the host's capacity (reconciler, admission); Status.QueuedAt is
	// when it entered the queue.
	PhaseQueued Phase = "Queued"
	// PhaseParked: the agent was stopped after it stayed idle
	// (capacity.idleParkSeconds); the next event resumes its conversation.
	PhaseParked Phase = "Parked"
	// PhaseBudgetExhausted: the item's agent used its route's token
	// budget; its turn was interrupted and it takes no new one until the
	// budget is raised (Spec.BudgetRaise) or its window frees some. A
	// hold, not a failure: nothing is counted and its events stay pending.
	PhaseBudgetExhausted Phase = "BudgetExhausted"
)

// phases lists every phase, once.
var phases = []Phase{PhaseIdle, PhasePreparing, PhaseQueued, PhaseSpawning, PhaseRunning, PhaseExited, PhaseBackingOff,
	PhaseNeedsAttention, PhaseParked, PhaseRateLimited, PhaseBudgetExhausted, PhaseStopped}

// Phases returns every phase, in a stable order.
func Phases() []Phase { return slices.Clone(phases) }

// Known reports whether p is one of the phases above.
func (p Phase) Known() bool { return slices.Contains(phases, p) }

// SpawnMode says how the current pane was started.
type SpawnMode string

// The spawn modes.
const (
	SpawnFresh  SpawnMode = "fresh"
	SpawnResume SpawnMode = "resume"
)

// NeedsHuman returns why the item waits for a human: the reason of
// NeedsAttention, or what blocks its agent (Blocked); "" when neither.
// A notice to the item's thread keys on it changing from "".
func (s Status) NeedsHuman() string {
	switch {
	case s.Phase == PhaseNeedsAttention:
		return s.Reason
	case s.Blocked != "":
		return "blocked: " + s.Blocked
	}
	return ""
}

// What a close did to an item's worktree (Status.Workspace).
const (
	WorkspaceRemoved = "removed"
	WorkspaceKept    = "kept"
)

// Workdir returns the workdir r's conversation lives in: the pinned
// Status.Workdir, or Spec.Cwd for an item spawned before workdirs were
// pinned. "" before the first spawn of an item with no Spec.Cwd.
func (r Record) Workdir() string {
	if r.Status.Workdir != "" {
		return r.Status.Workdir
	}
	return r.Spec.Cwd
}

// OldestPending returns when r's oldest pending delivery was received
// (Pending is in arrival order: Pending[0]), and false when r has none
// pending or that delivery's receipt time is unknown (zero).
func (r Record) OldestPending() (time.Time, bool) {
	if len(r.Pending) == 0 || r.Pending[0].ReceivedAt.IsZero() {
		return time.Time{}, false
	}
	return r.Pending[0].ReceivedAt, true
}

// Delivery is one webhook delivery queued for a work item. Its ID is GitHub's
// X-GitHub-Delivery GUID.
type Delivery struct {
	ID     string
	Event  string // X-GitHub-Event, e.g. "issue_comment"
	Action string // payload action, e.g. "created"
	Sender string
	// Prompt is the rendered prompt text, header line first. A pending
	// delivery comes compact from store.Store.Records and Get (Compact):
	// its Prompt is "", and store.Store.Prompt reads it for the send.
	Prompt string
	// Size is the length of the prompt in bytes, Header its first line
	// (without the newline) and Digest the digest its frame's end line
	// carries ("" for a prompt without one): what the planner reads of a
	// delivery instead of its body (Compact).
	Size       int
	Header     string
	Digest     string
	ReceivedAt time.Time
	// Commit is the commit the event is about: the new head of a push
	// (pull_request.synchronize), the head a CI failure ran on; "" for
	// others. A push whose commit the item's workdir already holds is the
	// agent's own.
	Commit string
	// Source is what on GitHub the delivery came from, for the reaction
	// that acknowledges it once it reached the agent; zero for none.
	Source Source
	// Answer, when set, makes the delivery an authorized person's answer
	// to a question of the item's agent ("/loopd answer", docs/design.md,
	// "Approvals"): it is answered or refused, never pasted as an event
	// (Status.AwaitsAnswer). Its Prompt holds the person's words, when it
	// gives words.
	Answer *Answer `json:",omitempty"`
}

// Compact returns d without its body and with what the planner reads
// instead, taken from d.Prompt: Size, Header and Digest (frameDigest). A d
// without a body is returned as it is. The store takes these at Ingest and
// returns pending deliveries compact, so that a reconcile pass holds no
// bodies: one is read (store.Store.Prompt) only for the send about to be made.
func (d Delivery) Compact() Delivery {
	if d.Prompt == "" {
		return d
	}
	d.Size = len(d.Prompt)
	d.Header, _, _ = strings.Cut(d.Prompt, "\n")
	d.Digest = frameDigest(d.ID, d.Prompt)
	d.Prompt = ""
	return d
}

// SourceKind says what on GitHub a delivery came from (Delivery.Source):
// where GitHub's reactions API can put a reaction that acknowledges it.
type SourceKind string

// The sources of a delivery. A review's body (pull_request_review) has no
// reaction API, so it has no source: nothing acknowledges it.
const (
	// SourceIssueComment: an issue or pull request comment, ID its id
	// (POST /repos/{owner}/{repo}/issues/comments/{id}/reactions).
	SourceIssueComment SourceKind = "issue_comment"
	// SourceReviewComment: a pull request review comment on a diff line,
	// ID its id (POST /repos/{owner}/{repo}/pulls/comments/{id}/reactions).
	SourceReviewComment SourceKind = "review_comment"
	// SourceItem: the issue or pull request itself (an opened event; the
	// item's number, POST /repos/{owner}/{repo}/issues/{number}/reactions).
	SourceItem SourceKind = "item"
)

// Source names the comment, or the item itself, a delivery came from.
type Source struct {
	Kind SourceKind
	ID   int64 // the comment's id; 0 for SourceItem
}

// SessionReport is what a harness said about itself at session start: the
// conversation id it writes to, and why it started ("startup", "resume",
// "clear", "compact", as Claude Code's SessionStart hook names them).
type SessionReport struct {
	SessionID string
	Source    string
	At        time.Time
}

// ReportSinceSpawn returns r's session report when the harness made it
// since its current spawn, nil otherwise: only such a report speaks for the
// process now in the pane.
func (r Record) ReportSinceSpawn() *SessionReport {
	if r.Report == nil || r.Report.At.Before(r.Status.SpawnedAt) {
		return nil
	}
	return r.Report
}

// ReportedConversation returns the id of the conversation r's harness
// reported it is in (Report), when that is another than the recorded
// Status.HarnessSessionID, the report was made since the current spawn and
// not after the death recorded for it, and accepts takes the id
// (reconciler.Capabilities.AcceptsSessionID); "" otherwise. Claude Code's
// /clear starts a new conversation and its SessionStart hook reports the
// new id, and an agent killed before a pass followed that report is in
// the new one. A spawn still being confirmed keeps its id (its own report
// confirms it or not). Whether the item follows the id is the planner's
// rule (reconciler's follow: only to a conversation whose transcript
// appeared in the item's own harness state since the spawn); until it
// does, the recorded id is the conversation the item is in.
func (r Record) ReportedConversation(accepts func(id string) bool) string {
	st, rep := r.Status, r.Report
	switch {
	case rep == nil, st.HarnessSessionID == "", rep.SessionID == st.HarnessSessionID, st.Phase == PhaseSpawning:
		return ""
	case r.ReportSinceSpawn() == nil:
		return "" // a report of an earlier spawn
	case st.LastExitAt.After(st.SpawnedAt) && rep.At.After(st.LastExitAt):
		return "" // made after this spawn's recorded death
	case accepts != nil && !accepts(rep.SessionID):
		return ""
	}
	return rep.SessionID
}

// ConversationLabel is a conversation id as an operator is shown it
// (loopd get and describe, the status page): "unconfirmed" while the
// harness chose an id loopd has not learned yet (Status.IDUnconfirmed),
// "-" for none, else the id.
func ConversationLabel(id string, unconfirmed bool) string {
	switch {
	case unconfirmed:
		return "unconfirmed"
	case id == "":
		return "-"
	}
	return id
}

// ReleasePending reports whether an operator's release (Spec.ReleaseGeneration)
// has not been carried out yet.
func (r Record) ReleasePending() bool {
	return r.Spec.ReleaseGeneration > r.Status.ReleasedGeneration
}

// ReleaseFresh returns whether a release asked now, with fresh as asked,
// starts a new conversation: when fresh, and when a release --fresh that
// no pass has carried out yet is pending (ReleasePending and
// Spec.ReleaseFresh), which stands: a plain release after it must not
// quietly turn it back into a resume. stands reports that case.
func (r Record) ReleaseFresh(fresh bool) (asFresh, stands bool) {
	if fresh {
		return true, false
	}
	pending := r.ReleasePending() && r.Spec.ReleaseFresh
	return pending, pending
}

// Record is one work item: its key, spec, status, pending deliveries in
// arrival order, and the harness's latest report about itself (nil if none).
type Record struct {
	Key     Key
	Spec    Spec
	Status  Status
	Pending []Delivery
	Report  *SessionReport
	// Lease is which host runs the item (store.Fleet), as of the read.
	Lease Lease
}

// SeenLimit is a usage limit as its harness reported it (harness.Limit,
// before any default or bound stands for its reset): Kind, Window, Text
// and Reset as given (Reset zero when none could be read), At the
// transcript line's time (zero for a screen), Pane the pane whose screen
// showed it ("" for a transcript). Released is true once an operator's
// release ended it (Status.Released).
type SeenLimit struct {
	Kind     string    `json:",omitempty"`
	Window   string    `json:",omitempty"`
	Text     string    `json:",omitempty"`
	Reset    time.Time `json:",omitzero"`
	At       time.Time `json:",omitzero"`
	Pane     string    `json:",omitempty"`
	Released bool      `json:",omitempty"`
}

// MaxReleasedLimits bounds Status.ReleasedLimits: the oldest released
// limit is forgotten first.
const MaxReleasedLimits = 8

// Same reports whether l and o are one limit: the same kind and text,
// and, when both come from dated transcript lines, the same line. Two
// read off a screen (no date) are one whatever reset each read: a banner
// is read anew at each look, and the same one ("resets 9am") names the
// next day's reset once its time has passed; whether it is still the
// same episode is the pane's (reconciler, newLimit). Otherwise the same
// reset too.
func (l SeenLimit) Same(o SeenLimit) bool {
	if !l.At.IsZero() && !o.At.IsZero() && !l.At.Equal(o.At) {
		return false
	}
	if l.Kind != o.Kind || l.Text != o.Text {
		return false
	}
	return (l.At.IsZero() && o.At.IsZero()) || l.Reset.Equal(o.Reset)
}

// WasReleased reports whether an operator released limit l on the item
// (ReleasedLimits).
func (s Status) WasReleased(l SeenLimit) bool {
	for _, r := range s.ReleasedLimits {
		if r.Same(l) {
			return true
		}
	}
	return false
}

// releaseLimit marks l released and keeps it in ReleasedLimits, within
// MaxReleasedLimits.
func (s Status) releaseLimit(l SeenLimit) Status {
	if l == (SeenLimit{}) || s.WasReleased(l) {
		return s
	}
	l.Released = true
	s.ReleasedLimits = append(slices.Clone(s.ReleasedLimits), l)
	if n := len(s.ReleasedLimits); n > MaxReleasedLimits {
		s.ReleasedLimits = s.ReleasedLimits[n-MaxReleasedLimits:]
	}
	return s
}

// ReleaseShown returns s with limit shown, which the item's screen or
// transcript showed at a release, as the one it last saw; the limit it
// took before is released too (releaseLimit).
func (s Status) ReleaseShown(shown SeenLimit) Status {
	if shown == (SeenLimit{}) {
		return s
	}
	s = s.releaseLimit(s.LimitSeen)
	s.LimitSeen = shown
	return s
}
