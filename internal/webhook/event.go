package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/schema"
)

// errIncomplete means a handled event lacks a field loopd needs to route it.
var errIncomplete = errors.New("incomplete payload")

// change is what one handled delivery does to its work item: set the
// open/closed state, queue a prompt, or both.
type change struct {
	key     desired.Key
	kind    desired.Kind
	sender  string
	closed  *bool     // nil: the payload carries no open/closed state
	stateAt time.Time // the issue's or pull request's updated_at
	// snapshot is true when closed is the state the payload carried, not
	// a close or reopen action (store.Ingest.Snapshot).
	snapshot bool
	// gone is true for an issue that left the repository (deleted,
	// transferred): it closes an item loopd holds, and creates none
	// (filter: store.Ingest.NoCreate).
	gone   bool
	prompt *PromptInput
	// headRef is a pull request's head branch when the head is in the
	// same repository (store.Ingest.HeadRef); "" for a fork or an issue.
	headRef string
	// source is what on GitHub the prompt came from, for the reaction that
	// acknowledges it (desired.Delivery.Source); zero for none.
	source desired.Source
	// unhandled, when set, is why nothing is queued for this payload's
	// action: only its state snapshot applies, and the delivery is
	// reported as ignored for that reason when the state changes nothing.
	unhandled string

	// senderType is the sender's account type ("User", "Bot", …).
	senderType string
	// text is what a person wrote in the payload as markdown (a comment,
	// a review, an opened item's title and body), read by the agent
	// marker and mention rules; "" for a payload with no such text.
	text string
	// opening is true for a payload that opens the conversation on its
	// own terms (an issue or pull request opened): a mention in its text
	// starts an agent as a comment's does. Other events without text
	// (a push, a reopen) only reach an agent that runs.
	opening bool
	// labels are the labels the issue or pull request carries, as the
	// payload shows them; labeled is the label a labeled action added.
	labels  []string
	labeled string
	// headSHA is a pull request's head commit as of stateAt, from a pull
	// request payload (store.Ingest.HeadSHA); headPusher is who pushed
	// it, the sender of an opened or synchronize action, "" for another
	// action (store.Ingest.HeadPusher); headRepo is the head's
	// repository, owner/repo (store.Ingest.HeadRepo).
	headSHA    string
	headPusher string
	headRepo   string
	// canModify is a pull request payload's maintainer_can_modify, nil
	// when it names none (store.Ingest.CanModify).
	canModify *bool
	// author is who opened the issue or pull request (store.Ingest.Author).
	author string
	// itemURL is the issue's or pull request's page on GitHub, made from
	// the repository's html_url (store.Ingest.URL); "" when that is no
	// http(s) address.
	itemURL string
	// installation is the payload's installation.id
	// (store.Ingest.Installation), 0 for none.
	installation int64
	// commit is the commit the event is about (desired.Delivery.Commit):
	// a push's new head, a check's commit.
	commit string
	// ci, when set, makes the change a check or workflow event of its
	// commit (desired.Ingest.CI), which queues no prompt itself (ciChange);
	// ciQuiet is the reason it is reported ignored when it names no
	// failure. byCommit says GitHub named no pull request: the change goes
	// to the items whose head is commit (store.Store.Heads), and key
	// has no number.
	ci       *desired.CI
	ciQuiet  string
	byCommit bool
	// identity is the event's own identity (desired.Ingest.Identity).
	identity string
	// commentAt is a comment's updated_at (its creation, for a created
	// one); zero for another event. An answer that names no question
	// answers none asked after it.
	commentAt time.Time
}

// stateOnly turns the change of a payload whose action loopd does not act
// on (an edit, a label, an empty review…) into its state snapshot alone:
// GitHub never retries a lost close or reopen, and every such payload still
// carries the item's state as of its updated_at. A payload with no usable
// item or state is ignored with reason, as before.
func stateOnly(c change, err error, reason string) (change, string, error) {
	if err != nil || !c.snapshot {
		return change{}, reason, nil
	}
	c.prompt, c.unhandled = nil, reason
	return c, "", nil
}

// classifier maps the payload of one handled event to a change. It
// returns a non-empty ignore reason when the action does not concern loopd
// (see the table in the package doc), and an error wrapping errIncomplete
// when the payload lacks the repository, the issue or pull request, or the
// sender.
type classifier func(p *payload) (change, string, error)

// classifiers holds the handled X-GitHub-Event values; every other event is
// ignored before its payload is decoded.
var classifiers = map[string]classifier{
	"issues":                      classifyIssues,
	"issue_comment":               classifyIssueComment,
	"pull_request":                classifyPullRequest,
	"pull_request_review":         classifyReview,
	"pull_request_review_comment": classifyReviewComment,
	"check_run":                   classifyCheckRun,
	"check_suite":                 classifyCheckSuite,
	"workflow_run":                classifyWorkflowRun,
}

func classifyIssueComment(e *payload) (change, string, error) {
	c, err := fromIssue(e.Repository, e.Issue, e.Sender)
	c.identity = commentIdentity("issue_comment", e.Action, e.Comment)
	if e.Action != "created" {
		return stateOnly(c, err, reasonActionNotHandled)
	}
	if err != nil {
		return change{}, "", err
	}
	c.prompt.Title = e.Issue.Title
	c.prompt.URL = e.Comment.HTMLURL
	c.prompt.Body = e.Comment.Body
	c.text = c.prompt.Body
	c.source = desired.Source{Kind: desired.SourceIssueComment, ID: e.Comment.ID}
	c.commentAt = e.Comment.UpdatedAt.Time
	return c, "", nil
}

// commentIdentity is the identity of a comment's event: its id, action
// and updated_at (an edit changes it).
func commentIdentity(event, action string, cm comment) string {
	return identity(event, action, id(cm.ID), stamp(cm.UpdatedAt))
}

// itemIdentity is the identity of an issue's or pull request's own
// action: its updated_at, with the label it added or removed and the head
// a push made; "" when the payload has no issue or pull request.
func itemIdentity(event string, e *payload) string {
	var at github.Timestamp
	switch {
	case e.Issue != nil:
		at = e.Issue.UpdatedAt
	case e.PullRequest != nil:
		at = e.PullRequest.UpdatedAt
	}
	return identity(event, e.Action, stamp(at), e.Label.Name, e.After)
}

func classifyReview(e *payload) (change, string, error) {
	c, err := fromPullRequest(e.Repository, e.PullRequest, e.Sender)
	c.identity = identity("pull_request_review", e.Action, id(e.Review.ID))
	if e.Action != "submitted" {
		return stateOnly(c, err, reasonActionNotHandled)
	}
	// A "commented" review without a body only wraps inline comments, and
	// each of those arrives as a review comment event of its own.
	r := e.Review
	state := r.State
	if r.Body == "" && state != "approved" && state != "changes_requested" {
		return stateOnly(c, err, reasonEmptyReview)
	}
	if err != nil {
		return change{}, "", err
	}
	c.prompt.URL = r.HTMLURL
	c.prompt.State = state
	c.prompt.Body = r.Body
	c.text = c.prompt.Body
	return c, "", nil
}

func classifyReviewComment(e *payload) (change, string, error) {
	c, err := fromPullRequest(e.Repository, e.PullRequest, e.Sender)
	c.identity = commentIdentity("pull_request_review_comment", e.Action, e.Comment)
	if e.Action != "created" {
		return stateOnly(c, err, reasonActionNotHandled)
	}
	if err != nil {
		return change{}, "", err
	}
	cm := e.Comment
	c.prompt.URL = cm.HTMLURL
	c.prompt.Path = cm.Path
	c.prompt.DiffHunk = cm.DiffHunk
	c.prompt.Body = cm.Body
	c.text = c.prompt.Body
	c.source = desired.Source{Kind: desired.SourceReviewComment, ID: cm.ID}
	c.commentAt = cm.UpdatedAt.Time
	return c, "", nil
}

func classifyIssues(e *payload) (change, string, error) {
	action := e.Action
	switch action {
	case "opened", "reopened", "closed", "labeled", "deleted", "transferred":
	default:
		c, err := fromIssue(e.Repository, e.Issue, e.Sender)
		c.identity = itemIdentity("issues", e)
		return stateOnly(c, err, reasonActionNotHandled)
	}
	c, err := fromIssue(e.Repository, e.Issue, e.Sender)
	if err != nil {
		return change{}, "", err
	}
	c.identity = itemIdentity("issues", e)
	if action == "deleted" || action == "transferred" {
		// The issue is gone from this repository, and no event of it will
		// come here again: its item is closed, as by a close (its last
		// state, open in the repository it moved to, says nothing of
		// this one).
		c.gone = true
		return openClose(c, "closed"), "", nil
	}
	c.prompt.Title = e.Issue.Title
	c.prompt.URL = e.Issue.HTMLURL
	c.prompt.Body = e.Issue.Body
	c.text, c.opening = opening(action, c.prompt.Title, c.prompt.Body)
	if action == "labeled" {
		return labeled(c, e.Label.Name)
	}
	return openClose(opened(c, action), action), "", nil
}

func classifyPullRequest(e *payload) (change, string, error) {
	action := e.Action
	c, err := fromPullRequest(e.Repository, e.PullRequest, e.Sender)
	c.identity = itemIdentity("pull_request", e)
	switch action {
	case "opened", "reopened", "ready_for_review", "synchronize", "closed", "labeled":
	default:
		return stateOnly(c, err, reasonActionNotHandled)
	}
	if err != nil {
		return change{}, "", err
	}
	if action == "opened" || action == "synchronize" {
		// The sender of these pushed the head they name: the opener its
		// first head, the pusher a new one. Recorded whoever sent it, so
		// that a push by a sender loopd does not act on still moves the
		// head off its trusted pusher (reconciler.ProjectSettingsOf).
		c.headPusher = e.Sender.Login
	}
	if action == "synchronize" {
		c.prompt.Commit = e.After
		c.commit = e.After
	} else {
		c.prompt.Base = e.PullRequest.Base.Ref
		c.prompt.Body = e.PullRequest.Body
		c.text, c.opening = opening(action, c.prompt.Title, c.prompt.Body)
	}
	if action == "labeled" {
		return labeled(c, e.Label.Name)
	}
	return openClose(opened(c, action), action), "", nil
}

// opened makes the issue or pull request itself the source of an opened
// event's prompt: its body is what the reaction acknowledges.
func opened(c change, action string) change {
	if action == "opened" {
		c.source = desired.Source{Kind: desired.SourceItem}
	}
	return c
}

// labeled returns the change of a labeled action that added label: a
// prompt like an opened item's, for the route's trigger.labels to start
// the item with (filter), or its state snapshot alone when the payload
// names no label.
func labeled(c change, label string) (change, string, error) {
	if label == "" {
		return stateOnly(c, nil, reasonActionNotHandled)
	}
	c.labeled, c.opening = label, true
	return c, "", nil
}

// openClose applies a closed or reopened action to c: closed only changes
// the state, reopened changes it and keeps the prompt. Any other action
// keeps the state snapshot start took from the payload.
func openClose(c change, action string) change {
	switch action {
	case "closed":
		c.closed, c.snapshot = github.Ptr(true), false
		c.prompt = nil
	case "reopened":
		c.closed, c.snapshot = github.Ptr(false), false
	}
	return c
}

// fromIssue starts a change for an issue payload. An issue that carries
// pull_request links is a pull request (GitHub sends issue_comment for both).
func fromIssue(repo repository, is *issue, sender user) (change, error) {
	if is == nil {
		return change{}, fmt.Errorf("%w: no issue", errIncomplete)
	}
	kind := desired.KindIssue
	if is.PullRequest != nil {
		kind = desired.KindPullRequest
	}
	return start(repo, is.thread, kind, sender)
}

// opening returns the text of an action on an item (change.text) and
// whether the action opens the conversation (change.opening). An opened
// item's text, which the mention and agent marker rules read, is its
// title, then its body; so is a labeled action's (labeled). A reopen,
// a close or ready for review has no text of its own: the title and body
// are what someone else wrote before, and the action only reaches an item
// that runs (filter).
func opening(action, title, body string) (string, bool) {
	switch action {
	case "opened":
		return title + "\n\n" + body, true
	case "labeled":
		return title + "\n\n" + body, false
	}
	return "", false
}

// fromPullRequest starts a change for a pull request payload, with the
// title, link and head branch already in the prompt.
func fromPullRequest(repo repository, pr *pullRequest, sender user) (change, error) {
	if pr == nil {
		return change{}, fmt.Errorf("%w: no pull_request", errIncomplete)
	}
	c, err := start(repo, pr.thread, desired.KindPullRequest, sender)
	if err != nil {
		return change{}, err
	}
	c.prompt.Title = pr.Title
	c.prompt.URL = pr.HTMLURL
	c.prompt.Head = pr.Head.Ref
	c.headSHA = pr.Head.SHA
	c.canModify = pr.MaintainerCanModify
	// A head repository GitHub could not name (schema.ValidRepository) is
	// none: it reaches no prompt, record or comment. A deleted fork's is
	// null.
	if owner, name, ok := strings.Cut(pr.Head.Repo.FullName, "/"); ok && schema.ValidRepository(owner, name) {
		c.headRepo = pr.Head.Repo.FullName
	}
	if desired.ForkHead(c.key, c.headRepo) {
		c.prompt.HeadRepo = c.headRepo
	}
	if c.headRepo != "" && schema.ValidBranch(pr.Head.Ref) {
		c.headRef = pr.Head.Ref // in the head repository: the item's own, or a fork's
	}
	return c, nil
}

// start begins the change of every handled payload, from the issue or
// pull request t it is about, with t's labels. Its state ("open" or
// "closed", as of its update) is kept as a snapshot; another value, or
// none, leaves the state alone.
func start(repo repository, t thread, kind desired.Kind, sender user) (change, error) {
	number, state, updated := t.Number, t.State, t.UpdatedAt.Time
	owner, name := repo.Owner.Login, repo.Name
	switch {
	case owner == "" || name == "":
		return change{}, fmt.Errorf("%w: no repository owner or name", errIncomplete)
	case number <= 0:
		return change{}, fmt.Errorf("%w: no issue or pull request number", errIncomplete)
	case sender.Login == "":
		return change{}, fmt.Errorf("%w: no sender", errIncomplete)
	}
	c := change{
		key:        desired.Key{Owner: owner, Repo: name, Number: number},
		kind:       kind,
		sender:     sender.Login,
		senderType: sender.Type,
		author:     t.User.Login,
		stateAt:    updated,
		prompt:     &PromptInput{},
	}
	if state == "open" || state == "closed" {
		c.closed, c.snapshot = github.Ptr(state == "closed"), true
	}
	c.itemURL = itemURL(repo.HTMLURL, kind, number)
	for _, l := range t.Labels {
		c.labels = append(c.labels, l.Name)
	}
	return c, nil
}

// itemURL is the page of item number of kind in the repository whose page
// is repoURL (the payload's repository.html_url): <repoURL>/issues/N, or
// /pull/N for a pull request; "" unless repoURL is an http or https
// address with a host and nothing but a path after it.
func itemURL(repoURL string, kind desired.Kind, number int) string {
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	part := "/issues/"
	if kind == desired.KindPullRequest {
		part = "/pull/"
	}
	return strings.TrimSuffix(u.String(), "/") + part + strconv.Itoa(number)
}
