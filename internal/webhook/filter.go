package webhook

import (
	"regexp"
	"slices"
	"strings"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// verdict is what the rules of filter decide for one change, beyond
// whether it is routed at all.
type verdict struct {
	// drop, when set, is why the change's prompt is dropped: only its
	// state snapshot applies, to an item loopd holds (a close or reopen is
	// GitHub's fact, whoever made it), and it is journaled with this
	// reason.
	drop string
	// unhandled turns a labeled action that adds no trigger label into
	// its state snapshot alone (change.unhandled).
	unhandled bool
	// noCreate queues the prompt only on an item loopd holds
	// (store.Ingest.NoCreate); unknown is the reason an event for an
	// item loopd does not hold is ignored.
	noCreate bool
	unknown  string
	// newOnly queues the prompt only when it creates the item
	// (store.Ingest.NewOnly): a trigger label added to an item that
	// runs starts nothing new.
	newOnly bool
	// budget, when not zero, is the raise an authorized comment's
	// "/loopd budget +N" asks for (desired.BudgetCommand): it raises the
	// item's budget, reaches no agent and creates no item.
	budget int64
	// answer, when set, is the answer an authorized comment's "/loopd
	// answer" gives (desired.AnswerCommand), words the person's own
	// words ("" for a choice): it answers a question of the item's agent,
	// reaches the agent only as those words, and creates no item.
	answer *desired.Answer
	words  string
}

// filter applies the rules that keep loopd from talking to itself and
// the route's triggers to c (docs/design.md, "Ingest"), in this order:
//
//   - a CI failure (change.ci) is no person's text: authorizedUsers and
//     the sender rules do not apply; it is dropped when the route's
//     reactions.ciFailure is off, and never creates an item;
//   - a change sent by botLogin (loopd's own login, compared
//     case-insensitively) is dropped, even when the login is authorized;
//   - a sender of type Bot that is not authorized is dropped as a bot,
//     and any other sender that is not authorized as unauthorized;
//   - an authorized comment whose first line is "/loopd budget +N" is a
//     budget raise (verdict.budget), and one with a bad count is dropped;
//     one whose first line is "/loopd answer …" is an answer to a
//     question of the item's agent (verdict.answer), and one with nothing
//     to answer is dropped;
//   - text that carries an agent marker in a hidden HTML comment
//     (agentMarked) is an agent's own comment, dropped; one that carries
//     loopd's own announcement or notice marker (ownMarked) is loopd's,
//     dropped too, whatever login sent it (botLogin may not be known yet);
//   - with trigger.labels, a labeled action that adds one of them starts
//     the item (newOnly), one that adds another label is state only, and
//     every other event of an item whose payload shows none of them
//     only reaches an item that already runs (noCreate, not_labelled);
//   - with trigger.mention, a comment or an opened item whose text does
//     not mention it (mentions) is dropped, and an event with no text of
//     its own (a push, a reopen, a close, ready for review: opening) only
//     reaches an item that runs.
func filter(c change, route schema.Route, authorized func(login string) bool, botLogin string) verdict {
	if c.ci != nil {
		if !route.Reactions.CIFailureOn() {
			return verdict{drop: reasonCIReactionOff}
		}
		return verdict{noCreate: true, unknown: reasonNoWorkItem}
	}
	if c.gone {
		// A fact of GitHub's, as a close is (only a repository's admins
		// delete or transfer issues), for an item loopd holds only.
		return verdict{noCreate: true, unknown: reasonNoWorkItem}
	}
	switch {
	case botLogin != "" && strings.EqualFold(c.sender, botLogin):
		return verdict{drop: reasonOwnLogin}
	case !authorized(c.sender) && c.senderType == "Bot":
		return verdict{drop: reasonBotSender}
	case !authorized(c.sender):
		return verdict{drop: reasonUnauthorizedSender}
	case agentMarked(c.text):
		return verdict{drop: reasonAgentMarker}
	case ownMarked(c.text):
		return verdict{drop: reasonOwnMarker}
	}
	if c.source.Kind != "" {
		// A command is a word to loopd, not to the agent: no trigger
		// applies to it, and a bad one is refused, never delivered.
		switch n, ok, err := desired.BudgetCommand(c.text); {
		case err != nil:
			return verdict{drop: reasonBadCommand}
		case ok:
			return verdict{budget: n, noCreate: true, unknown: reasonNoWorkItem}
		}
		switch a, words, ok, err := desired.AnswerCommand(c.text); {
		case err != nil:
			return verdict{drop: reasonBadCommand}
		case ok:
			return verdict{answer: &a, words: words, noCreate: true, unknown: reasonNoWorkItem}
		}
	}
	var v verdict
	trigger := route.Trigger
	if trigger == nil {
		trigger = &schema.Trigger{}
	}
	isTrigger := func(label string) bool {
		return slices.ContainsFunc(trigger.Labels, func(l string) bool { return strings.EqualFold(l, label) })
	}
	switch {
	case c.labeled != "" && !isTrigger(c.labeled):
		return verdict{unhandled: true}
	case c.labeled != "":
		v.newOnly = true
	case len(trigger.Labels) > 0 && !slices.ContainsFunc(c.labels, isTrigger):
		v.noCreate, v.unknown = true, reasonNotLabelled
	}
	if trigger.Mention != "" && c.labeled == "" {
		switch {
		case c.text == "" && !c.opening:
			if !v.noCreate {
				v.noCreate, v.unknown = true, reasonNoMention
			}
		case !mentions(c.text, trigger.Mention):
			return verdict{drop: reasonNoMention}
		}
	}
	return v
}

// agentMarked reports whether the markdown body carries an agent marker
// (desired.IsAgentMarker) in an HTML comment GitHub does not show
// (htmlComments) outside a block quote: the agent's own comment. A marker
// shown as text (in a code span or block) is someone writing about the
// marker; one in a block quote is someone quoting the agent, and their
// comment is delivered with the quote as written (the marker shown as a
// hidden HTML comment, revealMarkdown).
func agentMarked(body string) bool { return hiddenMarker(body, desired.IsAgentMarker) }

// ownMarked reports whether the markdown body carries one of loopd's own
// markers (desired.IsOwnMarker: an announcement's or a notice's) where
// agentMarked looks for an agent's: a person quoting loopd's comment is
// still a person.
func ownMarked(body string) bool { return hiddenMarker(body, desired.IsOwnMarker) }

// hiddenMarker reports whether an HTML comment GitHub does not show
// (htmlComments), outside a block quote, in the markdown body is a marker
// by is.
func hiddenMarker(body string, is func(comment string) bool) bool {
	if !strings.Contains(body, "<!--") {
		return false
	}
	for _, c := range htmlComments(body) {
		if !c.unterminated && !c.quoted && is(body[c.start:c.end]) {
			return true
		}
	}
	return false
}

// mentions reports whether the markdown body mentions word as GitHub shows
// it: in text a reader sees (not in a code span, a code block, raw HTML or
// an image's alt text), case-insensitively, and as a whole word (no
// letter, digit or '_' before it; no letter, digit, '_' or '-' after, as a
// GitHub login may go on with one). Invisible characters inside the word
// break it: it is not what the reader sees either.
func mentions(body, word string) bool {
	if !strings.Contains(strings.ToLower(body), strings.ToLower(word)) {
		return false
	}
	pattern := regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{N}_])` + regexp.QuoteMeta(word) + `(?:$|[^\p{L}\p{N}_-])`)
	src := []byte(body)
	doc := gfm.Parse(text.NewReader(src), parser.WithContext(parser.NewContext()))
	var b strings.Builder
	last := -1
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.CodeSpan, *ast.CodeBlock, *ast.FencedCodeBlock, *ast.HTMLBlock, *ast.RawHTML, *ast.Image:
			return ast.WalkSkipChildren, nil
		case *ast.Text:
			// Adjacent pieces of one run of text are joined as they are;
			// anything between two pieces (markup, a line break) counts
			// as a space.
			if n.Segment.Start != last {
				b.WriteByte(' ')
			}
			b.Write(n.Segment.Value(src))
			last = n.Segment.Stop
		}
		return ast.WalkContinue, nil
	})
	return pattern.MatchString(b.String())
}
