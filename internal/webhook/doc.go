// Package webhook receives GitHub webhook deliveries and turns each one into
// at most one queued delivery on one work item (owner/repo#number), written
// in one store transaction before the handler answers (docs/design.md,
// "Ingest").
//
// A request goes through these steps, in order:
//
//  1. Only POST is served (405 otherwise).
//  2. An empty configured secret refuses everything with 500 (fail closed).
//  3. Before the body is read: a missing X-Hub-Signature-256, or one that
//     is not sha256= and 64 hex digits, gets 401; a missing Content-Length
//     gets 411; a Content-Length over the cap gets 413. These answers close
//     the connection with the body unread.
//  4. The body is read while its HMAC is computed; the bytes of all the
//     bodies being read at once are capped by a shared budget (503 with
//     Retry-After past it). A signature that does not match gets 401.
//     An unauthenticated request stores nothing but its delivery.rejected
//     row, which is written after the answer, never before it
//     (Options.Rejections).
//  5. A missing X-GitHub-Event or a missing or malformed X-GitHub-Delivery
//     gets 400; a content type other than application/json gets 415.
//  6. ping gets 200; events other than the eight below get 202, ignored.
//  7. The payload is decoded (400 when malformed), into the few fields
//     the classifiers read (payload), and mapped by the table below;
//     unhandled actions get 202, ignored. A repository whose owner or name
//     GitHub could never send (schema.ValidRepository: "..", a slash, too
//     long) gets 400 with reason bad_repository, before it names anything.
//  8. The rules that keep loopd from talking to itself and the route's
//     triggers (filter) drop the prompt of: loopd's own login
//     (github.botLogin, even when authorized), a Bot account not in
//     authorizedUsers, any other sender not in it (compared
//     case-insensitively; an empty list authorizes nobody), a text that
//     carries an agent's hidden marker (desired.AgentMarker) or loopd's
//     own announcement or notice marker (desired.IsOwnMarker), and, with
//     trigger.mention, a comment that does not mention it. Such a delivery
//     gets 202, ignored with the rule's reason, except that a close or
//     reopen, or a state snapshot, that changes an item loopd holds still
//     sets the item's state (it is GitHub's fact, whoever made it) with no
//     prompt queued; it never creates an item. With trigger.mention, an
//     event with no text of its own (a push, a reopen, a close, ready for
//     review) only reaches an item loopd holds. With trigger.labels an
//     item starts once it carries one of them; the events of one that
//     does not, and CI failures, only reach an item loopd holds (ignored
//     otherwise, with the reason). A repository with no route gets 202,
//     ignored.
//  9. The route's workdir is rendered and the change is ingested, with its
//     journal row in the same transaction; concurrent deliveries share a
//     commit (desired's group commit), and each is answered only once the
//     commit that holds it is done. Accepted gets 202 and wakes the
//     reconciler; a redelivery (same
//     X-GitHub-Delivery) gets 200 and changes nothing; a store error,
//     a store locked past the answer timeout included, gets 503, logged at
//     once and journaled once the store takes writes again, so GitHub shows
//     the failure and the delivery can be redelivered; a workdir that does not render gets 500.
//
// The handler's work on a request ends within Options.AnswerTimeout (8 s)
// of its headers, under GitHub's 10 s; NewServer bounds the reading and
// writing of every request (DefaultServerLimits).
//
// Handled events and actions (GitHub webhook docs, "Webhook events and
// payloads"). An issue_comment on a pull request, and any issue payload with
// pull_request links, is a pull_request work item. StateAt is the or
// pull request's updated_at.
//
// Every handled payload also carries the item's state ("open" or "closed"
// as of updated_at). GitHub never retries a failed delivery, so that state
// is applied as a snapshot (store.Ingest.Snapshot) with the staleness rule
// of a close or reopen: a comment after a lost reopen opens the item again,
// one after a lost close closes it. The comment's prompt is queued either
// way; on a closed item it waits until the item is reopened.
//
//	event                        action            effect
//	issues                       opened            prompt: title, body
//	issues                       reopened          open, and prompt: title, body
//	issues                       closed            closed, no prompt
//	issue_comment                created           prompt: comment body
//	pull_request                 opened            prompt: title, branches, body
//	pull_request                 ready_for_review  prompt: title, branches, body
//	pull_request                 reopened          open, and prompt: title, branches, body
//	pull_request                 synchronize       prompt: title, head branch, new head commit
//	pull_request                 closed            closed (merged or not), no prompt
//	pull_request_review          submitted         prompt: review state and body, when the body
//	                                               is not empty or the state is approved or
//	                                               changes_requested
//	pull_request_review_comment  created           prompt: file path, diff hunk, comment body
//	issues, pull_request         labeled           with a trigger label (trigger.labels): prompt as
//	                                               opened, starting the item; else state only
//	check_run                    created           recorded with its commit's checks, no prompt
//	check_run                    completed         recorded; failure or timed_out: named in the
//	                                               commit's one prompt (CIFlusher)
//	check_suite                  requested         recorded with its commit's checks, no prompt
//	workflow_run                 requested,        recorded with its commit's checks, no prompt
//	                             in_progress
//	check_suite, workflow_run    completed         recorded; failure or timed_out: in the
//	                                               commit's prompt when no check run of the
//	                                               suite failed
//
// A check or workflow event (reactions.ciFailure, default on) goes to the
// first pull request of the payload's pull_requests whose base is the
// repository and whose head is the check's commit, or, when GitHub names
// none (a fork's pull request: pull_requests is empty, a check's
// head_branch null), to every open pull request item whose recorded head
// is the commit (store.Store.Heads), never by a branch name; a commit no
// item has is ignored (no_pull_request) and journaled with the commit. It
// never creates a work item, and authorizedUsers does not apply to it (no
// person wrote it; the item was started by an authorized sender). A commit
// that is not the pull request's head, as the payload or the newest pull
// request payload loopd stored shows it (desired.Spec.HeadSHA), is stale
// and ignored. The events are recorded per (item, commit) and queue no
// prompt themselves: the failed checks of one commit become one prompt
// (CIFlusher) once every check run and suite seen has completed, or after
// the route's reactions.ciQuietSeconds with no event of the commit; later
// events of that commit are check_already_sent, and a new head re-arms.
//
// Every event's own identity (a comment's id, action and updated_at; a
// review's id; a check run's id, status and conclusion; an item's action
// and updated_at) is stored with it: the same signed body under a new
// delivery id is a duplicate (200), as a redelivery. A payload older than
// the item's last open/closed change queues no text (older_than_state).
//
// Every other action of these events queues nothing; its state snapshot
// alone applies, and it is answered ignored when that changes nothing
// (issues.deleted and issues.transferred close the item: the issue left
// the repository, and no event of it comes again). In particular issues.edited and
// issue_comment.edited queue nothing: edits come in bursts, and re-sending
// a whole text to a working agent for each is noise; a new comment is how
// to tell the agent something. A "commented" review without a body queues
// nothing because its inline comments arrive as review comment events of
// their own. Other events are ignored before their payload is decoded.
//
// The prompt of a delivery is built by Render: a fixed header line, then the
// payload text framed as untrusted data, sanitized of terminal controls, with
// the text GitHub does not show made visible.
//
// A pull_request.synchronize keeps its new head commit with the delivery
// (desired.Delivery.Commit): the reconciler drops it, undelivered, when the
// item's workdir already holds that commit (the agent's own push).
//
// Log and journal events: delivery.accepted, delivery.duplicate,
// delivery.ignored and delivery.rejected, each with a reason where one
// applies, and counted in loopd_webhook_deliveries_total{outcome,reason}
// (Metrics). The rejection of an unauthenticated request is logged at once
// and journaled from a bounded queue (journal.Async) behind serve's
// journal.Limiter: its answer never waits on the store, a flood of them
// becomes one row and a count a minute, and a queue that is full drops the
// row and counts it.
package webhook
