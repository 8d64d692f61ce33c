package store

import (
	"context"
	"errors"
	"time"

	"github.com/loopd/loopd/desired"
	"github.com/loopd/loopd/internal/journal"
)

// Sentinel errors of a Store.
var (
	// ErrNotFound means no work item has the key.
	ErrNotFound = errors.New("work item not found")
	// ErrLocked means another process holds the reconcile lock.
	ErrLocked = errors.New("reconcile lock held by another process")
	// ErrClosed means the store was closed before a write could run.
	ErrClosed = errors.New("store closed")
	// ErrNoDelivery means the work item has no delivery of the id.
	ErrNoDelivery = errors.New("delivery not found")
)

// Ingest is one accepted webhook delivery, reduced to what changes desired
// state. Ingest never touches Status.
type Ingest struct {
	// DeliveryID is X-GitHub-Delivery. It is claimed in the same transaction
	// that applies the change, so a redelivery changes nothing.
	DeliveryID string
	Key        desired.Key
	Kind       desired.Kind
	// Harness and Cwd are used only when the item is new; an existing item
	// keeps its own.
	Harness string
	Cwd     string
	// HeadRef, when not empty, is a pull request's head branch in its
	// head repository (its own, or a fork's), as the payload named it; it
	// replaces the recorded one (desired.Spec.HeadRef) without counting as
	// a spec change.
	HeadRef string
	// Delivery, when not nil, is queued for the agent.
	Delivery *desired.Delivery
	// Closed, when not nil, sets the item's open/closed state; StateAt is the
	// payload's updated_at, and a change older than the recorded one is
	// ignored.
	Closed  *bool
	StateAt time.Time
	// Snapshot marks Closed as the state a payload of another action
	// carried (a comment, a review, a push), not a close or reopen. GitHub
	// never retries a lost delivery, so every payload's state is an
	// observation that can heal a lost close or reopen. A snapshot flips
	// the state only when StateAt is after the recorded time: timestamps
	// have one-second resolution, and a comment made in the second of a
	// close carries the state from before it. A snapshot with no Delivery
	// never creates an item.
	Snapshot bool
	// NoCreate queues Delivery only on an item the store holds: for an
	// unknown key nothing is written and the id is not claimed (Unknown).
	// CI failures and the events of an item a trigger has not started
	// never create one.
	NoCreate bool
	// NewOnly queues Delivery only when it creates the item: on an item
	// the store holds, the id is claimed and nothing is queued
	// (Exists). A trigger label added again starts nothing new.
	NewOnly bool
	// HeadSHA, when not empty, is a pull request's head commit as of
	// StateAt; it replaces the recorded one (desired.Spec.HeadSHA) unless
	// StateAt is before the time it was recorded at.
	HeadSHA string
	// HeadPusher, with HeadSHA, is the login that pushed that commit (the
	// sender of pull_request opened or synchronize); "" for a payload of
	// another action. It becomes desired.Spec.HeadPusher when HeadSHA is
	// the head recorded after this ingest; a head that moves without one
	// is recorded with no pusher.
	HeadPusher string
	// Title and URL are the or pull request's title and page on
	// GitHub, as this payload gives them (desired.Spec.Title, URL); ""
	// keeps the recorded one.
	Title, URL string
	// Installation is the GitHub App installation the delivery came
	// through (its installation.id, desired.Spec.Installation); 0 keeps
	// the recorded one.
	Installation int64
	// HeadRepo, when not empty, is a pull request's head repository
	// (owner/repo) as the payload named it; it replaces the recorded one
	// (desired.Spec.HeadRepo).
	HeadRepo string
	// Author, when not empty, is the login that opened the issue or pull
	// request (desired.Spec.Author).
	Author string
	// CanModify, when set, is a pull request payload's
	// maintainer_can_modify; it replaces the recorded one
	// (desired.Spec.MaintainerCanModify).
	CanModify *bool
	// BudgetRaise, when not zero, is the tokens an authorized comment
	// ("/loopd budget +N", desired.BudgetCommand) adds to the item's
	// budget (desired.Spec.BudgetRaise), once: with the delivery's id
	// claimed, a redelivery raises nothing. An unknown item is not
	// created for it.
	BudgetRaise int64
	// An answer to a question (Delivery.Answer) is queued once per
	// question instance: see IngestResult.Answered.
	//
	// CI, when set, is a check or workflow event of the item's commit:
	// it is recorded with the commit's other checks (desired.CI) and
	// queues nothing itself; Delivery must be nil.
	CI *desired.CI
	// Identity is the event's own identity, "" when it has none: a
	// comment's id with its action and updated_at, a review's id, a check
	// run's id with its status and conclusion, an issue's or pull
	// request's action with its updated_at. A signature covers the body,
	// not the delivery id, so the same body under another delivery id is
	// a replay: an identity the item already holds is a Duplicate and
	// claims nothing, as a redelivery.
	Identity string
	// Journal, when set, is called once inside Ingest's transaction with
	// what Ingest did, and the events it returns are appended to the
	// journal in that same transaction: the change and the journal rows
	// that record it are stored together or not at all, a redelivery
	// (Duplicate) included. It must not block or touch the store.
	Journal func(IngestResult) []journal.Event
}

// IngestResult says what Ingest did.
type IngestResult struct {
	Duplicate    bool // the delivery id was already claimed; nothing changed
	Created      bool // the work item is new
	Queued       bool // a delivery was queued
	StaleState   bool // the open/closed change was older than the record's and was ignored
	StateChanged bool // the open/closed state changed
	// Unknown means in was a snapshot with nothing to queue for an item the
	// store does not hold: nothing was written (but Ingest.Journal's rows)
	// and the id is not claimed.
	Unknown bool
	// Exists means in was NewOnly and the item exists: the id is claimed
	// and nothing was queued.
	Exists bool
	// StaleCommit means in.CI named a commit that is not the item's
	// head; Deduplicated that the commit's one prompt was already queued.
	// Either way the id is claimed and nothing was recorded.
	StaleCommit  bool
	Deduplicated bool
	// Collected means in.CI was recorded with its commit's checks, and
	// CIReady that every suite and run seen of the commit has completed,
	// with failures: its prompt can be sent now (Store.SendCI).
	Collected bool
	CIReady   bool
	// Answered means in.Delivery answers a question the item already
	// holds an answer to (desired.Answer.Question): the id and identity
	// are claimed and nothing was queued. One answer per question
	// instance: a second reply changes nothing.
	Answered bool
	// Outdated means in's payload (StateAt) is older than the item's last
	// open/closed change: it is an old event, and its delivery was not
	// queued; its id is claimed.
	Outdated bool
}

// EventFilter selects journal rows. Zero fields select everything.
type EventFilter struct {
	WorkItem string
	Since    time.Time
	Limit    int // newest Limit rows, still returned oldest first
	// Names, when not empty, selects the rows of these event names only
	// (journal.Name values, as an operator typed them: text that names no
	// event selects nothing).
	Names []string
	// AfterID, when positive, selects the rows appended after the row of
	// that id (journal.Event.ID): a reader that follows the journal asks
	// for what came since the last row it saw, whatever its time says.
	AfterID int64
}

// StatusWrite is one status change of an item (Store.WriteStatus): the new
// status, the deliveries it marks delivered, and the GitHub calls it
// queues, written in one transaction.
type StatusWrite struct {
	Status    desired.Status
	Delivered []string
	Calls     []desired.Call
}

// CallFilter selects calls (Store.Calls). Zero fields select everything.
type CallFilter struct {
	WorkItem string
	State    desired.CallState
}

// Store is the durable home of work items, their deliveries and the event
// journal. Every method is one transaction, so a process killed at any
// instant loses no accepted delivery. The SQLite store
// (sqlstore.OpenSQLite) is the embedded default.
type Store interface {
	journal.Appender
	Retention

	// Ingest claims in.DeliveryID and applies in, in one transaction.
	Ingest(ctx context.Context, in Ingest) (IngestResult, error)
	// Records returns every work item with its pending deliveries, ordered
	// by key. The deliveries are compact (desired.Delivery.Compact): a pass holds
	// no prompt bodies.
	Records(ctx context.Context) ([]desired.Record, error)
	// Get returns one work item, its pending deliveries compact; the error
	// wraps ErrNotFound when there is none.
	Get(ctx context.Context, k desired.Key) (desired.Record, error)
	// Prompt returns the prompt of the delivery id of k, whatever its
	// state: read only for the send about to be made. The error wraps
	// ErrNotFound for an unknown key and ErrNoDelivery when k has no
	// delivery id.
	Prompt(ctx context.Context, k desired.Key, id string) (string, error)
	// PutStatus writes the item's status and, in the same transaction, marks
	// the deliveries whose ids are listed in delivered as handed to the
	// harness (no longer pending). The error wraps ErrNotFound for an
	// unknown key.
	PutStatus(ctx context.Context, k desired.Key, st desired.Status, delivered ...string) error
	// WriteStatus is PutStatus that also queues w.Calls in the outbox, all
	// in one transaction: a status change and the GitHub calls it causes
	// are written together or not at all. Each call is stored pending,
	// due at its NextAttempt (zero: at once), with its CreatedAt set to
	// the write's time. The error wraps ErrNotFound for an unknown key.
	WriteStatus(ctx context.Context, k desired.Key, w StatusWrite) error
	// DueCalls returns the pending calls whose next attempt is at or
	// before now, in the order they were queued, at most limit of them.
	DueCalls(ctx context.Context, now time.Time, limit int) ([]desired.Call, error)
	// UpdateCall records the outcome of a try at c (its State, Attempts,
	// NextAttempt, DoneAt, HTTPStatus, Error and URL; the rest of the
	// stored call stays). The error wraps ErrNotFound when no call has
	// c.ID.
	UpdateCall(ctx context.Context, c desired.Call) error
	// Calls returns the calls f selects, in the order they were queued.
	Calls(ctx context.Context, f CallFilter) ([]desired.Call, error)
	// PutPause records p, the pause of p.Installation's calls of p.Kind,
	// replacing the one before; a p with no Until and no Streak removes it.
	PutPause(ctx context.Context, p desired.Pause) error
	// Pauses returns the pauses recorded, past ones included, by
	// installation and kind.
	Pauses(ctx context.Context) ([]desired.Pause, error)
	// ReportSession records the session id the item's harness reported
	// about itself (Claude Code's SessionStart hook); the error wraps
	// ErrNotFound for an unknown key.
	ReportSession(ctx context.Context, k desired.Key, r desired.SessionReport) error
	// SetHeld sets or clears the operator hold and bumps the generation,
	// and wakes the store's listeners (Listener); the error wraps
	// ErrNotFound for an unknown key.
	SetHeld(ctx context.Context, k desired.Key, held bool) error
	// Release clears the hold and records a release to carry out
	// (desired.Spec.ReleaseGeneration and ReleaseFresh), bumping the generation,
	// and wakes the store's listeners; the error wraps ErrNotFound for an
	// unknown key.
	Release(ctx context.Context, k desired.Key, fresh bool) error
	// RaiseBudget adds tokens to k's budget (desired.Spec.BudgetRaise),
	// bumping the generation; the error wraps ErrNotFound for an unknown
	// key.
	RaiseBudget(ctx context.Context, k desired.Key, tokens int64) error
	// Heads returns the open pull request items of owner/repo (compared
	// case-insensitively) whose recorded head (desired.Spec.HeadSHA) is commit,
	// in number order: where a check of a fork's pull request goes, which
	// GitHub names no pull request for.
	Heads(ctx context.Context, owner, repo, commit string) ([]desired.Key, error)
	// CICommits returns the commits whose CI (Ingest.CI) collects
	// failures and has not become a prompt yet, the longest quiet first.
	CICommits(ctx context.Context) ([]desired.CICommit, error)
	// SendCI queues d, pending, as the one prompt of the failed checks of
	// k's commit, in one transaction that ends the commit's collecting,
	// when it still collects and is still k's head (CIQueued); a commit no
	// longer the head queues nothing and collects no more (CINotHead); one
	// that does not collect queues nothing (CIGone).
	SendCI(ctx context.Context, k desired.Key, commit string, d desired.Delivery) (CISent, error)
	// Drop records that the pending delivery id of k will never be sent
	// (the agent's own push): it is no longer pending, and never part of
	// History. An id that is not a pending delivery of k is skipped. The
	// error wraps ErrNotFound for an unknown key.
	Drop(ctx context.Context, k desired.Key, id string) error
	// History returns the item's opening delivery and its latest delivered
	// ones (at most latest), delivered only, in arrival order, each once;
	// the error wraps ErrNotFound for an unknown key.
	History(ctx context.Context, k desired.Key, latest int) ([]desired.Delivery, error)
	// Events returns journal rows, oldest first.
	Events(ctx context.Context, f EventFilter) ([]journal.Event, error)
	// Lock takes the cross-process reconcile lock, waiting until ctx ends.
	// The error wraps ErrLocked when ctx ended first. unlock releases it.
	Lock(ctx context.Context) (unlock func(), err error)
	// Close releases the store.
	Close() error
}

// CISent is what Store.SendCI did.
type CISent int

// The outcomes of SendCI.
const (
	// CIQueued: the prompt is queued, the commit's one.
	CIQueued CISent = iota
	// CINotHead: the commit is no longer the item's head; it is marked
	// stale and nothing is queued.
	CINotHead
	// CIGone: nothing collects for the commit any more (sent, stale, the
	// item forgotten): nothing is queued.
	CIGone
)
