package desired

import (
	"regexp"
	"strconv"
	"time"
)

// CallKind is what one outbound GitHub call does.
type CallKind string

// The kinds of call in the outbox.
const (
	// CallAnnounce posts the comment that says an agent picked the item up.
	CallAnnounce CallKind = "announce"
	// CallReact adds the eyes reaction to what a delivery came from.
	CallReact CallKind = "react"
	// CallNotify posts the comment that says the item needs attention.
	CallNotify CallKind = "notify"
)

// CallState is where a call stands in the outbox.
type CallState string

// The states of a call.
const (
	CallPending CallState = "pending" // to send, at NextAttempt or later
	CallPosted  CallState = "posted"  // GitHub took it (or already had it: its marker was found)
	CallFailed  CallState = "failed"  // given up: not retried (a 4xx), or out of tries
)

// ReactionEyes is the reaction that acknowledges a delivery: GitHub's
// "eyes" content (https://docs.github.com/en/rest/reactions).
const ReactionEyes = "eyes"

// Call is one outbound GitHub call in the durable outbox. It is written in
// the same transaction as the status change that caused it
// (store.Store.WriteStatus), and a worker sends it later, so that GitHub's
// latency and outages never hold a reconcile pass.
type Call struct {
	ID   int64
	Key  Key
	Kind CallKind
	// Body is the comment's markdown (announce, notify), ending with
	// Marker, the hidden HTML comment that names the call: before posting,
	// the worker looks for it among the item's comments, so a daemon killed
	// between the post and its record does not post twice.
	Body   string
	Marker string
	// Target is what a reaction goes on (react).
	Target Source
	State  CallState
	// Attempts counts the tries so far; NextAttempt is when the next is
	// due (zero: at once).
	Attempts    int
	NextAttempt time.Time
	CreatedAt   time.Time
	DoneAt      time.Time
	// HTTPStatus and Error are the last try's answer: GitHub's status code
	// (0 when none came) and its message.
	HTTPStatus int
	Error      string
	// URL is the posted comment's html_url, when GitHub gave one.
	URL string
	// Generation is the item's lease generation the call was queued
	// under (store.Fleet.FencedWrite; 0 for WriteStatus): the store keeps it,
	// whoever holds the item when the call is made.
	Generation int64
	// Installation is the item's GitHub App installation as the store
	// reads it with the call (Spec.Installation), 0 when none is known.
	Installation int64
}

// Talk is what an item's route lets loopd say on GitHub (TalkRule), and the
// facts its comments name.
type Talk struct {
	// Announce and Acknowledge are the route's (schema.Route.Talk); Notify
	// is true whenever loopd has a GitHub client.
	Announce, Acknowledge, Notify bool
	// Host is this machine's name and Socket loopd's tmux socket: an
	// announcement says where the agent runs and how to attach to it.
	Host, Socket string
	// MaxDeliveries is the route's maxDeliveriesPerHour, which a notice of
	// the loop breaker names; 0 when the item has no route.
	MaxDeliveries int
}

// TalkRule is the one home of what a status change says on GitHub. r is
// the record before the change, next the status written, and delivered the
// deliveries the write marks delivered that were verified in the
// conversation. It returns next with the flags that make each call happen
// once, and the calls to queue in the same write:
//   - the first time an item enters Running with its spawn confirmed
//     (next.ConfirmedSessionID: the harness's transcript or report showed
//     the spawn took), next.Announced is set and, when t.Announce, one
//     announcement is queued. A respawn, a resume fallback, a re-minted
//     conversation, a release or a restarted daemon finds Announced set
//     and queues none. A pane adopted unconfirmed (an operator answered a
//     dialog by hand) is not yet announced: the next confirmed spawn is;
//   - at that same first confirmed run, a fork's pull request
//     (Spec.Fork) whose owner does not let maintainers push to its head
//     (Spec.MaintainerCanModify false) queues, when t.Notify, one notice
//     that the agent's changes cannot be pushed to it (ForkComment): the
//     agent's worktree has no branch a push would reach. A fork that
//     took the permission back later gets no notice;
//   - each delivered delivery with a Source gets an eyes reaction when
//     t.Acknowledge;
//   - each entry into NeedsAttention from another phase is a new episode
//     (next.Episodes grows by one) and, when t.Notify, queues one notice
//     that names the reason, what loopd tried and the release command.
//     Staying in NeedsAttention is not a new episode, whatever the reason
//     becomes, and the notice is generic over reasons: one added later
//     (the loop breaker's) is covered as it is. An agent that becomes
//     blocked (Status.Blocked: a screen that waits for a person) is an
//     episode too, once per blocked reason until a release
//     (next.NoticedBlock), so a screen that comes and goes with each
//     prompt posts one notice, not one per prompt;
//   - each entry into BudgetExhausted from another phase is an episode
//     too, and queues one notice with the budget's figures
//     (BudgetComment); staying in it, or a restarted daemon writing it
//     again, queues none;
//   - a new conversation that replaces the one the item was in
//     (next.Replaced, recorded by its fresh spawn) is an episode too, and
//     queues one notice that says why and what the new conversation was
//     given (ReplacedComment); the same replacement written again (a
//     spawn the daemon redid) queues none;
//   - each usage-limit episode the item takes (next.LimitEpisodes grows)
//     queues, when t.Notify, one notice that names the limit's window, its
//     reset and the end of the wait (LimitComment), under a marker of its
//     own per episode (limitMarker): the same limit seen again, or the
//     wait it holds, is no episode and queues none.
func TalkRule(r Record, next Status, delivered []Delivery, t Talk) (Status, []Call) {
	prev := r.Status
	var calls []Call
	if next.Phase == PhaseRunning && prev.Phase != PhaseRunning && !prev.Announced && next.ConfirmedSessionID != "" {
		next.Announced = true
		if t.Announce {
			marker := announceMarker(r.Key)
			calls = append(calls, Call{Key: r.Key, Kind: CallAnnounce, Marker: marker,
				Body: AnnounceComment(r, next, t, marker)})
		}
		if t.Notify && r.Spec.Fork(r.Key) && !r.Spec.MaintainerCanModify {
			marker := forkMarker(r.Key)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: ForkComment(r, marker)})
		}
	}
	if t.Acknowledge {
		for _, d := range delivered {
			if d.Source.Kind != "" {
				calls = append(calls, Call{Key: r.Key, Kind: CallReact, Target: d.Source})
			}
		}
	}
	if prev.Phase == PhaseNeedsAttention && next.Phase != PhaseNeedsAttention {
		next.Screen = "" // the episode is over; the next one reads the pane again
	}
	entered := next.Phase == PhaseNeedsAttention && prev.Phase != PhaseNeedsAttention
	// A question posted for an answer (approvals) is the one comment of
	// its screen: no blocked notice besides it.
	blocked := next.Phase != PhaseNeedsAttention && next.Blocked != "" && prev.Blocked == "" &&
		next.Blocked != prev.NoticedBlock && next.Question == nil
	if blocked {
		next.NoticedBlock = next.Blocked
	}
	if entered || blocked {
		next.Episodes = prev.Episodes + 1
		if t.Notify {
			marker := noticeMarker(r.Key, next.Episodes)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker,
				Body: NoticeComment(r, next, t, marker)})
		}
	}
	if next.LimitEpisodes > prev.LimitEpisodes && next.Phase == PhaseRateLimited && t.Notify {
		marker := limitMarker(r.Key, next.LimitEpisodes)
		calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: LimitComment(r, next, t, marker)})
	}
	if next.Phase == PhaseBudgetExhausted && prev.Phase != PhaseBudgetExhausted {
		next.Episodes++
		if t.Notify {
			marker := noticeMarker(r.Key, next.Episodes)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: BudgetComment(r, next, marker)})
		}
	}
	if next.Replaced != nil && (prev.Replaced == nil || *prev.Replaced != *next.Replaced) {
		next.Episodes++
		if t.Notify {
			marker := noticeMarker(r.Key, next.Episodes)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker,
				Body: ReplacedComment(r, *next.Replaced, marker)})
		}
	}
	return next, append(calls, approvalCalls(r, next, t)...)
}

// approvalCalls are the comments of an item's approvals (docs/design.md,
// "Approvals") that the change from r's status to next queues: a question
// newly open (QuestionComment), its one reminder (Reminded newly set), and
// a reply to each answer newly refused (AnswerRecord.Reply); nothing
// without a GitHub client (t.Notify). The planner opens questions only on
// a route with approvals: github.
func approvalCalls(r Record, next Status, t Talk) []Call {
	prev := r.Status
	if !t.Notify {
		return nil
	}
	var calls []Call
	if q := next.Question; q != nil {
		switch {
		case prev.Question == nil || prev.Question.ID != q.ID:
			marker := questionMarker(r.Key, "question", q.ID)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: QuestionComment(r, *q, false, marker)})
		case q.Reminded && !prev.Question.Reminded:
			marker := questionMarker(r.Key, "reminder", q.ID)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: QuestionComment(r, *q, true, marker)})
		}
	}
	for _, a := range next.Answers {
		if a.Reply > prev.Replies {
			marker := replyMarker(r.Key, a.Reply)
			calls = append(calls, Call{Key: r.Key, Kind: CallNotify, Marker: marker, Body: RefusedAnswerComment(a, marker)})
		}
	}
	return calls
}

// questionMarker is the hidden marker of the comment of kind ("question"
// or "reminder") that posts the item's question id.
func questionMarker(k Key, kind, id string) string {
	return "<!-- loopd:" + markerNotice + " " + k.String() + " " + kind + "=" + id + " -->"
}

// replyMarker is the hidden marker of the item's reply number n to an
// answer loopd did not take.
func replyMarker(k Key, n int) string {
	return "<!-- loopd:" + markerNotice + " " + k.String() + " reply=" + strconv.Itoa(n) + " -->"
}

// The kinds of loopd's own markers, the hidden HTML comments that end
// what it posts: "<!-- loopd:<kind> owner/repo#n … -->".
const (
	markerAnnounce = "announce"
	markerNotice   = "notice"
)

// announceMarker is the hidden marker of an item's announcement: one per
// item, ever.
func announceMarker(k Key) string {
	return "<!-- loopd:" + markerAnnounce + " " + k.String() + " -->"
}

// forkMarker is the hidden marker of the notice that a fork's pull
// request cannot be pushed to: one per item, ever.
func forkMarker(k Key) string {
	return "<!-- loopd:" + markerNotice + " " + k.String() + " fork -->"
}

// noticeMarker is the hidden marker of an item's notice of episode.
func noticeMarker(k Key, episode int) string {
	return "<!-- loopd:" + markerNotice + " " + k.String() + " episode=" + strconv.Itoa(episode) + " -->"
}

// limitMarker is the hidden marker of the notice of an item's usage-limit
// episode (Status.LimitEpisodes).
func limitMarker(k Key, episode int) string {
	return "<!-- loopd:" + markerNotice + " " + k.String() + " limit=" + strconv.Itoa(episode) + " -->"
}

// ownMarker matches the text inside an HTML comment that is one of loopd's
// own markers (announceMarker, noticeMarker, forkMarker, limitMarker,
// questionMarker, replyMarker), in any case,
// with any whitespace around and between its parts.
var ownMarker = regexp.MustCompile(`(?i)^\s*loopd\s*:\s*(?:` + markerAnnounce + `|` + markerNotice +
	`)\s+[A-Za-z0-9-]+/[A-Za-z0-9._-]+#[0-9]+(?:\s+(?:episode|limit|reply)\s*=\s*[0-9]+|\s+(?:question|reminder)\s*=\s*q[0-9]+|\s+fork)?\s*$`)

// IsOwnMarker reports whether comment, the whole of an HTML comment
// ("<!--" … "-->"), is one of loopd's own markers (an announcement's or a
// notice's), whichever item it names: text that carries one is loopd's own
// comment, never delivered to an agent. Whether the comment is hidden on
// GitHub is the caller's rule (webhook's).
func IsOwnMarker(comment string) bool {
	inner, ok := hiddenText(comment)
	return ok && ownMarker.MatchString(inner)
}
