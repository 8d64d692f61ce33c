package desired

import (
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/loopd/loopd/internal/journal"
)

// This file holds every text loopd itself posts on GitHub: the
// announcement of an agent, the notice of an item that needs attention,
// the notice of a conversation replaced, and the one of a fork's pull
// request that cannot be pushed to.
// Each ends with its hidden marker (TalkRule), which GitHub does not render.

// maxNoticeDetail bounds, in bytes, a failure's text quoted in a notice
// (a git command's stderr tail).
const maxNoticeDetail = 1000

var announceTemplate = template.Must(template.New("announce").Parse(
	`An agent is working on this {{.Kind}}: loopd runs it {{if .Process}}as a process, one headless run per event,{{else}}in tmux session ` + "`{{.Session}}`" + `{{end}} on host ` + "`{{.Host}}`" + `.

Replies here reach the agent: each new comment from an authorized user is passed to it{{if .Acknowledge}}, and a 👀 reaction on a comment means the agent has it{{end}}.

{{if .Process}}To follow it on {{.Host}}: ` + "`loopd logs {{.Item}}`" + `{{else}}To watch it on {{.Host}}: ` + "`tmux -L {{.Socket}} attach -t ={{.Session}}`" + `{{end}}

{{.Marker}}`))

var noticeTemplate = template.Must(template.New("notice").Parse(
	`The agent on this {{.Kind}} needs attention: ` + "`{{.Reason}}`" + `.

{{range .Tried}}- {{.}}
{{end}}{{if .Detail}}
{{.Detail}}
{{end}}{{if .Blocked}}
The agent runs, but waits on its screen for a person (loopd never answers such a prompt for you). To act on it, on {{.Host}}:

    tmux -L {{.Socket}} attach -t ={{.Session}}

loopd sees the screen change by itself.
{{else}}
loopd will not try again by itself. To clear this, run on {{.Host}}:

    loopd release {{.Item}}

(` + "`loopd release --fresh {{.Item}}`" + ` starts a new conversation instead of resuming this one.)
{{end}}
{{.Marker}}`))

var forkTemplate = template.Must(template.New("fork").Parse(
	`This pull request comes from the fork ` + "`{{.Fork}}`" + `, whose owner does not allow edits by maintainers: the agent's changes cannot be pushed to this pull request. They can be proposed in a review or a comment instead; to let them be pushed, the fork's owner can check "Allow edits by maintainers" on this pull request.

{{.Marker}}`))

// ForkComment returns the notice that r, a fork's pull request whose
// owner does not let maintainers push to its head, cannot be pushed to:
// the fork it comes from (Spec.HeadRepo, a name the webhook checked), what
// to do instead, and marker.
func ForkComment(r Record, marker string) string {
	var b strings.Builder
	_ = forkTemplate.Execute(&b, map[string]any{"Fork": oneLine(r.Spec.HeadRepo), "Marker": marker})
	return b.String()
}

// AnnounceComment returns the announcement of r's agent as next records
// it: the session and host it runs on, that replies reach it, how to watch
// it, and marker. An agent of the process runner (next.RunID: a run, no
// tmux session) is followed with loopd logs, not tmux attach.
func AnnounceComment(r Record, next Status, t Talk, marker string) string {
	var b strings.Builder
	_ = announceTemplate.Execute(&b, map[string]any{
		"Kind": kindText(r.Spec.Kind), "Session": next.Session, "Host": t.Host, "Socket": t.Socket,
		"Acknowledge": t.Acknowledge, "Marker": marker, "Process": next.RunID != "", "Item": r.Key.String(),
	})
	return b.String()
}

// NoticeComment returns the notice that r needs a person as next records
// it (Status.NeedsHuman): the reason, what loopd tried (from the status
// fields that say it, whatever the reason), what clears it (loopd release
// for NeedsAttention; acting on the agent's screen for a blocked agent,
// which loopd sees by itself), and marker.
func NoticeComment(r Record, next Status, t Talk, marker string) string {
	prev := r.Status
	var tried []string
	switch {
	case next.Failures > 0 && next.WorkspaceError != "":
		tried = append(tried, "It tried to start the agent "+times(next.Failures)+" in a row; the last try failed making its workspace, so the agent did not start (below).")
	case next.Failures > 0:
		tried = append(tried, "It ran the agent "+times(next.Failures)+" in a row without a healthy run.")
	case next.WorkspaceError != "":
		tried = append(tried, "It could not make the agent's workspace, so the agent did not start (below).")
	}
	if rule, ok := reasonRules[next.Reason]; ok && next.Phase == PhaseNeedsAttention {
		tried = append(tried, rule(next, t))
	}
	switch {
	case next.LastExitReason != "" && next.LastExitSignal != 0:
		tried = append(tried, "The last run was ended by signal "+strconv.Itoa(next.LastExitSignal)+" ("+next.LastExitReason+").")
	case next.LastExitReason != "" && next.LastExitStatus != nil:
		tried = append(tried, "The last run ended with exit status "+strconv.Itoa(*next.LastExitStatus)+" ("+next.LastExitReason+").")
	}
	if next.Screen != "" {
		tried = append(tried, "The agent's screen shows: "+oneLine(next.Screen)+".")
	}
	if prev.SendingDeliveryID != "" && next.SendingDeliveryID == "" && prev.SendAttempts > 0 {
		tried = append(tried, "It sent event "+prev.SendingDeliveryID+" "+strconv.Itoa(prev.SendAttempts)+
			" times; it never showed in the agent's conversation.")
	}
	if next.MangledDeliveryID != "" && next.MangledDeliveryID != prev.MangledDeliveryID {
		tried = append(tried, "Event "+next.MangledDeliveryID+" reached the agent damaged ("+strconv.Itoa(next.MangledCopies)+" copies); it is not sent again by itself.")
	}
	if n := len(r.Pending); n > 0 {
		tried = append(tried, strconv.Itoa(n)+" event(s) wait for the agent and are kept.")
	}
	detail := ""
	if next.WorkspaceError != "" {
		detail = indent(journal.Clip(next.WorkspaceError, maxNoticeDetail))
	}
	var b strings.Builder
	_ = noticeTemplate.Execute(&b, map[string]any{
		"Kind": kindText(r.Spec.Kind), "Reason": oneLine(next.NeedsHuman()), "Tried": tried, "Detail": detail,
		"Blocked": next.Phase != PhaseNeedsAttention, "Session": next.Session, "Socket": t.Socket,
		"Host": t.Host, "Item": r.Key.String(), "Marker": marker,
	})
	return b.String()
}

var limitTemplate = template.Must(template.New("limit").Parse(
	`The agent on this {{.Kind}} hit its usage limit{{if .Window}} ({{.Window}}){{end}} on host ` + "`{{.Host}}`" + `: {{if .Default}}the harness named no reset loopd could read, so loopd looks again at {{.Reset}}, the bounded wait that stands for it{{else}}it resets at {{.Reset}}{{end}}.

loopd waits until {{.Until}}, then resumes the same conversation. Comments meanwhile are kept and passed to the agent after that; nothing is counted as a failure. To end the wait early (the limit is over), run on {{.Host}}:

    loopd release {{.Item}}

{{.Marker}}`))

// LimitComment returns the notice that r's agent hit a usage limit, as
// next records it (Status.LimitState): its window, the reset (or that it
// could not be read, and the bounded wait that stands for it), when loopd
// resumes the conversation, how to end the wait, and marker. Times are
// UTC, to the minute.
func LimitComment(r Record, next Status, t Talk, marker string) string {
	at := func(x time.Time) string { return x.UTC().Format("2006-01-02 15:04 UTC") }
	var b strings.Builder
	_ = limitTemplate.Execute(&b, map[string]any{
		"Kind": kindText(r.Spec.Kind), "Window": strings.ReplaceAll(oneLine(next.LimitWindow), "_", " "), "Host": t.Host,
		"Default": next.LimitDefault, "Reset": at(next.LimitReset), "Until": at(next.LimitUntil), "Item": r.Key.String(), "Marker": marker,
	})
	return b.String()
}

var replacedTemplate = template.Must(template.New("replaced").Parse(
	`The agent on this {{.Kind}} is in a new conversation: {{.Why}} (` + "`{{.Reason}}`" + `{{if .From}}, conversation ` + "`{{.From}}`" + `{{end}}).

The new conversation was given {{.Given}}. What the old one knew beyond that is lost to it: its work in the workspace stays, and the agent was told to read this {{.Kind}} and its comments again.

{{.Marker}}`))

// replacedWhy says, for a notice, why a conversation was replaced, by the
// reason its fresh spawn recorded (Replacement.Why).
var replacedWhy = map[string]string{
	"not_resumable":      "the harness said it cannot resume the last one",
	"transcript_missing": "the last one's transcript is gone",
	"crash_loop":         "the agent kept exiting the same way soon after each resume, so the crash-loop rules retired the last one",
	"released":           "an operator asked for it (loopd release --fresh)",
	"id_unknown":         "the agent died before loopd learned the last one's id",
	"resume_chooser":     "resuming the last one opened a chooser instead of the conversation",
}

// ReplacedComment returns the notice that r's agent is in a new
// conversation, as x records it: why the last one was replaced, and what
// the new one was given (its event or loopd's prompt, and the item's
// events replayed), and marker.
func ReplacedComment(r Record, x Replacement, marker string) string {
	why, ok := replacedWhy[x.Why]
	if !ok {
		why = "the last one could not be resumed"
	}
	given := "loopd's prompt that says why it is new"
	if x.Event != "" {
		given = "event " + x.Event
	}
	switch {
	case x.Replayed > 0 && x.Left > 0:
		given += ", and " + strconv.Itoa(x.Replayed) + " of the item's earlier events again (" + strconv.Itoa(x.Left) + " left out for length)"
	case x.Replayed > 0:
		given += ", and the item's " + strconv.Itoa(x.Replayed) + " earlier event(s) again"
	}
	var b strings.Builder
	_ = replacedTemplate.Execute(&b, map[string]any{
		"Kind": kindText(r.Spec.Kind), "Why": why, "Reason": oneLine(x.Why), "From": oneLine(x.From), "Given": given, "Marker": marker,
	})
	return b.String()
}

// ReasonDeliveryStorm is the reason of an item the loop breaker stopped:
// one more delivery would pass its route's maxDeliveriesPerHour
// (actions.ReasonDeliveryStorm, which the reconciler plans).
const ReasonDeliveryStorm = "delivery_storm"

// reasonRules names, in a notice, the rule behind the reasons whose rule
// the status fields do not show by themselves; every other reason is
// told by the facts NoticeComment reads.
var reasonRules = map[string]func(Status, Talk) string{
	ReasonDeliveryStorm: func(s Status, t Talk) string {
		limit := "the route's maxDeliveriesPerHour"
		if t.MaxDeliveries > 0 {
			limit += " (" + strconv.Itoa(t.MaxDeliveries) + ")"
		}
		return "The loop breaker stopped sending events to the agent: " + strconv.Itoa(len(s.DeliveredAt)) +
			" reached it within an hour, and one more would be more than " + limit + "."
	},
}

// times says n times in words: "1 time", "3 times".
func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return strconv.Itoa(n) + " times"
}

func kindText(k Kind) string {
	if k == KindPullRequest {
		return "pull request"
	}
	return "issue"
}

// oneLine keeps text from loopd's own state on one line and out of the
// markdown: backticks and newlines go.
func oneLine(s string) string {
	return strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s)
}

// indent makes s a markdown code block (four spaces per line), in which
// GitHub renders no markup and resolves no @mention.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// QuestionComment returns the comment that posts q, the question r's
// agent's screen asks, for an answer (docs/design.md, "Approvals"), or,
// with reminder, its one reminder; marker ends it. The question's texts
// are the screen's, the agent's choice, so they are quoted as a code
// block (indent), with controls removed and each line cut: GitHub renders
// no markup, link or @mention of them.
func QuestionComment(r Record, q Question, reminder bool, marker string) string {
	var b strings.Builder
	if reminder {
		b.WriteString("Reminder: the agent of this " + kindText(r.Spec.Kind) + " still waits for an answer to question `" + q.ID + "`, asked " +
			q.AskedAt.UTC().Format("2006-01-02 15:04 UTC") + ". loopd does not answer it for anyone; this is the one reminder.\n\n")
	} else {
		b.WriteString("The agent of this " + kindText(r.Spec.Kind) + " asks (question `" + q.ID + "`):\n\n")
	}
	quoted := slices.Clone(q.Context)
	quoted = append(quoted, "", q.Title)
	for i, c := range q.Choices {
		quoted = append(quoted, "  "+strconv.Itoa(i+1)+". "+c)
	}
	for i, l := range quoted {
		quoted[i] = journal.Clip(journal.StripControls(l, func(rune) bool { return false }), maxQuestionLine)
	}
	b.WriteString(indent(strings.Join(quoted, "\n")) + "\n\n")
	b.WriteString("An authorized user answers with a comment whose first line is `/loopd answer N` (N the choice's number), or `/loopd answer " +
		q.ID + " N` to name this question")
	if q.Differently > 0 {
		b.WriteString("; `/loopd answer " + q.ID + " <what to do instead>` picks choice " + strconv.Itoa(q.Differently) +
			" and passes the words to the agent")
	}
	b.WriteString(". The first answer counts; the keys reach the agent only while this question is still on its screen.\n\n" + marker)
	return b.String()
}

// maxQuestionLine bounds, in bytes, each line of a question quoted in a
// comment.
const maxQuestionLine = 300

// RefusedAnswerComment returns loopd's reply to an answer it did not
// take (a's Outcome: the question gone, or no such choice), and marker.
func RefusedAnswerComment(a AnswerRecord, marker string) string {
	what := "question `" + a.Question + "`"
	if a.Question == "" {
		what = "a question"
	}
	why := "is no longer on the agent's screen (answered at the terminal, or gone), so nothing was sent."
	switch {
	case a.Outcome == AnswerBad && a.Words:
		why = "takes no words of yours, so nothing was sent."
	case a.Outcome == AnswerBad:
		why = "has no choice " + strconv.Itoa(a.Choice) + ", so nothing was sent."
	case a.Question == "":
		why = "was not open when it came, so nothing was sent."
	}
	return "@" + oneLine(a.Sender) + " answered " + what + ", which " + why + "\n\n" + marker
}
