package webhook

import (
	"strconv"
	"strings"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// PromptInput is what Render needs to build the prompt of one delivery. The
// first five fields form the header line; the rest is third-party text from
// the payload. Empty optional fields are left out of the prompt.
type PromptInput struct {
	Event      string // X-GitHub-Event, e.g. "issue_comment"
	Action     string // payload action, e.g. "created"
	WorkItem   string // owner/repo#number
	Sender     string // sender login
	DeliveryID string // X-GitHub-Delivery

	Title    string // issue or pull request title
	URL      string // html_url of the issue, pull request, comment or review
	Head     string // pull request head branch
	HeadRepo string // a fork's pull request's head repository, owner/repo
	Base     string // pull request base branch
	Commit   string // head commit after a push (pull_request.synchronize), or of failed checks
	State    string // review state, e.g. "changes_requested"
	Path     string // file of a review comment
	DiffHunk string // diff hunk a review comment refers to
	Body     string // issue, pull request, comment or review body
	// Checks, when not empty, are the failed checks of one commit
	// (CIFlusher), each with its conclusion, details URL and output; they
	// take the place of the body. ChecksLeftOut counts those past
	// MaxCIChecks.
	Checks        []desired.CIFailure
	ChecksLeftOut int
}

// Render returns the prompt for p. It is pure and stable: the same input
// always gives the same bytes.
//
// The prompt starts with a fixed header line naming the event, action, work
// item, sender and delivery id, so third-party text never starts it (a body
// of "/exit" stays text). A second line tells the agent that the framed block
// which follows is untrusted data from GitHub, not instructions (both are
// desired.EventHeader, with every prompt text loopd writes). The block's
// begin and end lines (desired.FrameBegin, desired.FrameEnd) carry the
// delivery id, which the payload's author cannot know in advance, so a body
// cannot forge the end of the block; the end line also carries the digest
// of the block, so a transcript shows whether the whole of it arrived.
//
// Every field is sanitized (docs/design.md, "Prompts"): ESC and the other C0
// controls except '\n' and '\t', DEL, C1 controls (U+0080–U+009F) and
// invalid UTF-8 are removed; ESC[201~ would otherwise end a bracketed paste
// early. Header fields and single-line fields also lose '\n' and '\t'.
// Text a reader of GitHub does not see is shown as a visible escape:
// invisible code points (Tag characters, zero-width characters, bidi
// controls …) become ⟦hidden U+200B⟧ or ⟦hidden tags "…"⟧ outside emoji
// and joining-script sequences (reveal), and each HTML comment and link
// reference definition of the body is wrapped as ⟦hidden HTML comment:
// <!-- … -->⟧ or ⟦hidden link reference definition: …⟧ (revealMarkdown). Every
// visible character is kept byte for byte and nothing is truncated.
func Render(p PromptInput) string {
	id := sanitizeLine(p.DeliveryID)
	var b strings.Builder
	b.WriteString(desired.EventHeader(sanitizeLine(p.Event), sanitizeLine(p.Action), sanitizeLine(p.WorkItem), sanitizeLine(p.Sender), id))
	b.WriteString(desired.FrameBegin(id))
	start := b.Len()
	for _, f := range []struct{ name, text string }{
		{"title", p.Title},
		{"url", p.URL},
		{"head", p.Head},
		{"head_repo", p.HeadRepo},
		{"base", p.Base},
		{"commit", p.Commit},
		{"state", p.State},
		{"path", p.Path},
	} {
		if f.text != "" {
			b.WriteString(f.name + ": " + sanitizeLine(f.text) + "\n")
		}
	}
	if p.DiffHunk != "" {
		b.WriteString("diff_hunk:\n" + endLine(sanitize(p.DiffHunk)))
	}
	if len(p.Checks) > 0 {
		writeChecks(&b, p.Checks, p.ChecksLeftOut)
	} else {
		b.WriteString("body:\n" + endLine(sanitizeMarkdown(p.Body)))
	}
	b.WriteString(desired.FrameEnd(id, b.String()[start:]))
	return b.String()
}

// writeChecks writes the failed checks of one commit, each as a check
// line, its conclusion and details URL, and its output as a markdown body
// (sanitized as any body), then how many more failed and were left out.
func writeChecks(b *strings.Builder, checks []desired.CIFailure, leftOut int) {
	b.WriteString("failed_checks: " + strconv.Itoa(len(checks)+leftOut) + "\n")
	for _, f := range checks {
		b.WriteString("check: " + sanitizeLine(f.Check) + "\n")
		b.WriteString("conclusion: " + sanitizeLine(f.Conclusion) + "\n")
		if f.URL != "" {
			b.WriteString("url: " + sanitizeLine(f.URL) + "\n")
		}
		if f.OutputCut > 0 {
			b.WriteString("output_cut: " + strconv.Itoa(f.OutputCut) + " bytes left out\n")
		}
		if f.Output != "" {
			b.WriteString("output:\n" + endLine(sanitizeMarkdown(f.Output)))
		}
	}
	if leftOut > 0 {
		b.WriteString("checks_left_out: " + strconv.Itoa(leftOut) + " more failed checks are not shown\n")
	}
}

// endLine returns s ending in exactly one added '\n' unless it already ends
// in one or is empty, so the end marker always starts its own line.
func endLine(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}

// sanitize removes C0 controls other than '\n' and '\t', DEL, C1 controls
// (U+0080–U+009F) and invalid UTF-8 from s ("\r\n" therefore becomes
// "\n"), and shows its invisible code points (reveal).
func sanitize(s string) string {
	return reveal(journal.StripControls(s, journal.NewlineOrTab))
}

// sanitizeMarkdown is sanitize for a markdown body: it also shows the HTML
// comments and link reference definitions GitHub hides (revealMarkdown).
// They are found in the
// body as GitHub parses it, before any control is removed, since removing
// one can change what a line is (a line holding only a control is a
// paragraph line to GitHub, a blank line once stripped, which turns the
// indented line after it into code); a lone CR ends a line there, as in
// CommonMark, so it becomes '\n' rather than nothing.
func sanitizeMarkdown(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	return revealMarkdown(s, func(part string) string {
		return journal.StripControls(part, journal.NewlineOrTab)
	})
}

// sanitizeLine is sanitize that also removes '\n' and '\t', for text that
// must stay on one line.
func sanitizeLine(s string) string {
	return reveal(journal.StripControls(s, func(rune) bool { return false }))
}
