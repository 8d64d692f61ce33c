package actions

import (
	"time"

	"github.com/loopd/loopd/desired"
)

// Why an item waits on, or comes back from, a usage limit, and why its
// agent is blocked (docs/design.md, "Usage limits" and "Running is not
// working").
const (
	// ReasonRateLimited: the item's harness, or another on the same
	// account, hit a usage limit that has not reset yet.
	ReasonRateLimited Reason = "rate_limited"
	// ReasonLimitReset: the usage limit reset; the item resumes its
	// conversation with desired.LimitResetPrompt.
	ReasonLimitReset Reason = "limit_reset"
)

// RateLimit moves an item to RateLimited: its harness reported a usage
// limit. No failure is counted, and no nudge is sent; the item resumes its
// conversation at Until.
type RateLimit struct {
	Key     desired.Key
	Session string
	Harness string
	// Account is the account the limit holds (harness.Adapter.Account).
	Account string
	// Kind is the limit's kind (harness.LimitKind), Window the quota it is
	// of (harness.LimitWindow; "" when the harness did not say).
	Kind   string
	Window string
	// Reset is when the limit resets, as the harness said or, with
	// Default, the bounded default that stands for an unreadable one;
	// Until is Reset plus the margin.
	Reset   time.Time
	Until   time.Time
	Default bool
	// Capped is true when the reset the harness named lies further than
	// schema.MaxUsageLimitHold from its report, and Reset is that bound.
	Capped bool
	// Text is the line the harness reported the limit with.
	Text string
	// Seen is the limit as the harness reported it: the item's
	// desired.Status.LimitSeen, so that it is not taken again.
	Seen desired.SeenLimit
	// Delivered is the event in flight that reached the conversation
	// before the limit: it is delivered. One that did not stays pending.
	Delivered string
}

// Item implements Action.
func (a RateLimit) Item() desired.Key { return a.Key }

// Name implements Action.
func (RateLimit) Name() string { return "rate_limit" }

// Mutates implements Action.
func (RateLimit) Mutates() bool { return true }

// Fields implements Action.
func (a RateLimit) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"harness", a.Harness}, {"limit", a.Kind}}
	if a.Window != "" {
		f = append(f, Field{"window", a.Window})
	}
	f = append(f, Field{"reset", a.Reset.Truncate(time.Second)}, Field{"until", a.Until.Truncate(time.Second)})
	if a.Default {
		f = append(f, Field{"default_reset", true})
	}
	if a.Capped {
		f = append(f, Field{"reset_capped", true})
	}
	if a.Delivered != "" {
		f = append(f, Field{"delivered", a.Delivered})
	}
	return append(f, Field{"reason", string(ReasonRateLimited)})
}

func (a RateLimit) String() string { return Format(a) }

// AnswerLimitMenu answers the usage-limit menu with its choice that waits
// for the reset, and never one that spends money: the executor reads the
// screen again and sends the keys the adapter gives for it
// (harness.Adapter.LimitMenuKeys), through the pane's guard.
type AnswerLimitMenu struct {
	Key     desired.Key
	Session string
	PaneID  string
}

// Item implements Action.
func (a AnswerLimitMenu) Item() desired.Key { return a.Key }

// Name implements Action.
func (AnswerLimitMenu) Name() string { return "answer_limit_menu" }

// Mutates implements Action.
func (AnswerLimitMenu) Mutates() bool { return true }

// Fields implements Action.
func (a AnswerLimitMenu) Fields() []Field {
	return []Field{{"work_item", a.Key.String()}, {"session", a.Session}, {"pane_id", a.PaneID}, {"reason", string(ReasonRateLimited)}}
}

func (a AnswerLimitMenu) String() string { return Format(a) }

// MarkBlocked records what the harness's screen shows that keeps the
// agent from working until a human acts (Block, a harness.Block code), or,
// with Block "", that it no longer does. It changes no phase and counts
// nothing: loopd never answers such a screen for the human.
type MarkBlocked struct {
	Key     desired.Key
	Session string
	Block   string
}

// Item implements Action.
func (a MarkBlocked) Item() desired.Key { return a.Key }

// Name implements Action.
func (a MarkBlocked) Name() string {
	if a.Block == "" {
		return "unblocked"
	}
	return "blocked"
}

// Mutates implements Action.
func (MarkBlocked) Mutates() bool { return true }

// Fields implements Action.
func (a MarkBlocked) Fields() []Field {
	f := []Field{{"work_item", a.Key.String()}, {"session", a.Session}}
	if a.Block != "" {
		f = append(f, Field{"reason", a.Block})
	}
	return f
}

func (a MarkBlocked) String() string { return Format(a) }
