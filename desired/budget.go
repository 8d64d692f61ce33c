package desired

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tokens are the tokens of one model message, or a sum of them, by kind,
// as the harness's transcript records them (docs/design.md, "Budgets").
type Tokens struct {
	Input      int64 `json:",omitempty"` // input not read from a cache
	Output     int64 `json:",omitempty"` // output, reasoning included
	CacheWrite int64 `json:",omitempty"` // input written to the prompt cache
	CacheRead  int64 `json:",omitempty"` // input read from the prompt cache
}

// Add returns t plus u, kind by kind.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{t.Input + u.Input, t.Output + u.Output, t.CacheWrite + u.CacheWrite, t.CacheRead + u.CacheRead}
}

// over returns what of t is more than u, kind by kind (never negative).
func (t Tokens) over(u Tokens) Tokens {
	return Tokens{max(0, t.Input-u.Input), max(0, t.Output-u.Output), max(0, t.CacheWrite-u.CacheWrite), max(0, t.CacheRead-u.CacheRead)}
}

// Top returns the larger of t and u, kind by kind.
func (t Tokens) Top(u Tokens) Tokens {
	return Tokens{max(t.Input, u.Input), max(t.Output, u.Output), max(t.CacheWrite, u.CacheWrite), max(t.CacheRead, u.CacheRead)}
}

// Weights are what one token of each kind counts against a budget
// (schema.BudgetWeights gives the defaults and their source).
type Weights struct {
	Input, Output, CacheWrite, CacheRead float64
}

// Of returns t weighted by w, rounded to the nearest token.
func (w Weights) Of(t Tokens) int64 {
	return int64(math.Round(float64(t.Input)*w.Input + float64(t.Output)*w.Output +
		float64(t.CacheWrite)*w.CacheWrite + float64(t.CacheRead)*w.CacheRead))
}

// UsageMessage is one model message's usage as the harness's transcript
// records it: its own id, when it was written and its tokens. A message
// the CLI writes over several lines (Claude Code writes one per content
// block, each with the message's usage so far) is read as one per line,
// with the same id.
type UsageMessage struct {
	ID     string
	At     time.Time
	Tokens Tokens
}

// CountedMessage is a message whose usage was counted: its id and the
// tokens counted for it so far.
type CountedMessage struct {
	ID     string
	Tokens Tokens `json:",omitzero"`
}

// UsageHour is the weighted usage counted in one hour (by the messages'
// own times), for a rolling window.
type UsageHour struct {
	Hour   time.Time
	Tokens int64
}

// MaxCountedIDs bounds BudgetState.Counted: a message's lines follow each
// other in the transcript, and an older message is known by the mark.
const MaxCountedIDs = 16

// MaxUsageHours bounds BudgetState.Hours: the longest window, 7 days,
// plus the hour in progress.
const MaxUsageHours = 7*24 + 1

// BudgetState is what an item's usage counted so far (Status.BudgetState):
// where the reading of its transcript stopped, what was counted, and the
// figures of the budget that stopped it.
type BudgetState struct {
	// UsagePath is the transcript UsageOffset is in, and UsageOffset the
	// byte after the last whole line read: the next pass reads from there.
	// Another path (a new conversation, a moved one) or a shorter file
	// reads from 0, and the mark keeps what was counted from counting
	// again.
	UsagePath   string `json:",omitempty"`
	UsageOffset int64  `json:",omitempty"`
	// UsageMark is the time of the newest message counted: a message
	// older than it is one already counted (a transcript read again from
	// its start, a resume that copied its history). CountedIDs are the last
	// messages counted, at most MaxCountedIDs, so that the lines of one
	// message, and the messages of the mark's own time, count once.
	UsageMark  time.Time        `json:",omitzero"`
	CountedIDs []CountedMessage `json:",omitempty"`
	// UsageTotal is every token counted, by kind, and UsageWeighted their
	// weighted sum as each message's weights were when it was counted;
	// Hours the weighted usage by hour, for the rolling window.
	UsageTotal    Tokens      `json:",omitzero"`
	UsageWeighted int64       `json:",omitempty"`
	Hours         []UsageHour `json:",omitempty"`
	// BudgetUsed and BudgetLimit are the figures of the budget that
	// stopped the item (BudgetWhich: BudgetWindow or BudgetTotal), as the
	// hold recorded them; zero when none did.
	BudgetUsed  int64  `json:",omitempty"`
	BudgetLimit int64  `json:",omitempty"`
	BudgetWhich string `json:",omitempty"`
}

// Which budget stopped an item (BudgetState.BudgetWhich).
const (
	BudgetWindow = "window"
	BudgetTotal  = "total"
)

// UsageRead is what one read of a transcript found: its path, the byte
// offsets read from and to (the end of the last whole line), and the
// messages in between, in file order.
type UsageRead struct {
	Path     string
	From, To int64
	Messages []UsageMessage
}

// Count returns s with the messages of read counted at weights w, each
// once by its own id: a message older than the mark, or one already
// counted with as many tokens of each kind, adds nothing; one counted
// with fewer (a line of a message still being written) adds the rest.
// Hours older than window (and MaxUsageHours) before now are dropped. It
// reports whether s changed.
func (s BudgetState) Count(read UsageRead, w Weights, window time.Duration, now time.Time) (BudgetState, bool) {
	out := s
	out.CountedIDs = slices.Clone(s.CountedIDs)
	out.Hours = slices.Clone(s.Hours)
	out.UsagePath, out.UsageOffset = read.Path, read.To
	for _, m := range read.Messages {
		i := slices.IndexFunc(out.CountedIDs, func(c CountedMessage) bool { return c.ID == m.ID })
		var add Tokens
		switch {
		case i >= 0:
			add = m.Tokens.over(out.CountedIDs[i].Tokens)
			out.CountedIDs[i].Tokens = out.CountedIDs[i].Tokens.Top(m.Tokens)
		case m.At.Before(out.UsageMark):
			continue // counted before this read: its id left the ring
		default:
			add = m.Tokens
			out.CountedIDs = append(out.CountedIDs, CountedMessage{ID: m.ID, Tokens: m.Tokens})
			if len(out.CountedIDs) > MaxCountedIDs {
				out.CountedIDs = out.CountedIDs[len(out.CountedIDs)-MaxCountedIDs:]
			}
		}
		if m.At.After(out.UsageMark) {
			out.UsageMark = m.At
		}
		weighted := w.Of(add)
		out.UsageTotal = out.UsageTotal.Add(add)
		out.UsageWeighted += weighted
		at := m.At
		if at.IsZero() {
			at = now
		}
		out.Hours = addHour(out.Hours, at.UTC().Truncate(time.Hour), weighted)
	}
	out.Hours = trimHours(out.Hours, window, now)
	changed := out.UsagePath != s.UsagePath || out.UsageOffset != s.UsageOffset || out.UsageWeighted != s.UsageWeighted ||
		out.UsageTotal != s.UsageTotal || !out.UsageMark.Equal(s.UsageMark) || len(out.Hours) != len(s.Hours) ||
		!slices.Equal(out.CountedIDs, s.CountedIDs)
	return out, changed
}

// addHour adds n to hour's bucket of hours, kept in time order.
func addHour(hours []UsageHour, hour time.Time, n int64) []UsageHour {
	if n == 0 {
		return hours
	}
	i, found := slices.BinarySearchFunc(hours, hour, func(h UsageHour, t time.Time) int { return h.Hour.Compare(t) })
	if found {
		hours[i].Tokens += n
		return hours
	}
	return slices.Insert(hours, i, UsageHour{Hour: hour, Tokens: n})
}

// trimHours drops the hours that end window (at most MaxUsageHours hours)
// or more before now.
func trimHours(hours []UsageHour, window time.Duration, now time.Time) []UsageHour {
	keep := min(max(window, time.Hour), MaxUsageHours*time.Hour)
	i := 0
	for i < len(hours) && !hours[i].Hour.Add(time.Hour).After(now.Add(-keep)) {
		i++
	}
	return hours[i:]
}

// InWindow returns the weighted usage of the hours that end less than
// window before now: an hour counts whole once any of it is in the
// window, so the window is up to an hour longer than named.
func (s BudgetState) InWindow(window time.Duration, now time.Time) int64 {
	var n int64
	for _, h := range s.Hours {
		if h.Hour.Add(time.Hour).After(now.Add(-window)) && !h.Hour.After(now) {
			n += h.Tokens
		}
	}
	return n
}

// Budget is a route's token budget for each of its items (schema.Budget,
// made by the reconciler's policy): Tokens within a rolling Window,
// and/or Total over the item's life, weighted by Weights. Zero Tokens
// or Total is no such budget.
type Budget struct {
	Tokens  int64
	Window  time.Duration
	Total   int64
	Weights Weights
}

// Set reports whether b limits anything.
func (b Budget) Set() bool { return b.Tokens > 0 || b.Total > 0 }

// Spent is where an item stands against its budget: the usage and the
// limit (the budget plus what operators raised it by) of the window and
// of the total, and which one it is past, "" for none.
type Spent struct {
	WindowUsed, WindowLimit int64
	TotalUsed, TotalLimit   int64
	Past                    string
}

// Spent returns where s stands against b raised by raise tokens (each
// budget is raised by it) at now.
func (b Budget) Spent(s BudgetState, raise int64, now time.Time) Spent {
	var out Spent
	if b.Tokens > 0 {
		out.WindowUsed, out.WindowLimit = s.InWindow(b.Window, now), b.Tokens+raise
		if out.WindowUsed >= out.WindowLimit {
			out.Past = BudgetWindow
		}
	}
	if b.Total > 0 {
		out.TotalUsed, out.TotalLimit = s.UsageWeighted, b.Total+raise
		if out.TotalUsed >= out.TotalLimit && out.Past == "" {
			out.Past = BudgetTotal
		}
	}
	return out
}

// Figures returns the used and limit of the budget sp names (Past), or of
// the one nearest its limit when none is past: what get shows.
func (sp Spent) Figures() (used, limit int64, which string) {
	switch {
	case sp.Past == BudgetWindow || (sp.Past == "" && sp.WindowLimit > 0 &&
		(sp.TotalLimit == 0 || sp.WindowUsed*sp.TotalLimit >= sp.TotalUsed*sp.WindowLimit)):
		return sp.WindowUsed, sp.WindowLimit, BudgetWindow
	case sp.TotalLimit > 0:
		return sp.TotalUsed, sp.TotalLimit, BudgetTotal
	}
	return 0, 0, ""
}

// ErrBadTokens is returned by ParseTokens for text that is not a token
// count.
var ErrBadTokens = errors.New("not a token count")

// MaxBudgetRaise bounds one raise: a billion tokens.
const MaxBudgetRaise = 1_000_000_000

// ParseTokens reads a token count as an operator writes it: digits with
// an optional k (thousand) or m (million) suffix, in any case, and an
// optional leading +: "+200k", "1.5m", "50000". It returns
// ErrBadTokens for anything else, for zero, and for more than
// MaxBudgetRaise.
func ParseTokens(text string) (int64, error) {
	s := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(text)), "+")
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		s, mult = strings.TrimSuffix(s, "k"), 1e3
	case strings.HasSuffix(s, "m"):
		s, mult = strings.TrimSuffix(s, "m"), 1e6
	}
	if !tokenDigits.MatchString(s) {
		return 0, fmt.Errorf("%q: %w", text, ErrBadTokens)
	}
	f, err := strconv.ParseFloat(s, 64)
	n := int64(math.Round(f * mult))
	if err != nil || n <= 0 || n > MaxBudgetRaise {
		return 0, fmt.Errorf("%q: %w (1 to %d)", text, ErrBadTokens, MaxBudgetRaise)
	}
	return n, nil
}

var tokenDigits = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,3})?$`)

// budgetCommand is an authorized comment's budget raise: its first line
// is "/loopd budget +<tokens>".
var budgetCommand = regexp.MustCompile(`^\s*/loopd\s+budget\s+(\+\S+)\s*$`)

// BudgetCommand reports the raise an issue or review comment's body asks
// for ("/loopd budget +200k" on its first line, ParseTokens), and whether
// it is such a command at all: a command with a bad count is one, with
// the error. A comment that is a command raises the budget and is not
// delivered to the agent (webhook).
func BudgetCommand(body string) (int64, bool, error) {
	first, _, _ := strings.Cut(body, "\n")
	m := budgetCommand.FindStringSubmatch(strings.TrimSuffix(first, "\r"))
	if m == nil {
		return 0, false, nil
	}
	n, err := ParseTokens(m[1])
	return n, true, err
}

// FormatTokens writes n as get shows it: 1234 as 1.2k, 3400000 as 3.4M.
func FormatTokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 1_000:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// BudgetComment is the notice that an item's agent used its token budget:
// the figures (the budget, its usage, the tokens counted by kind), what
// loopd did and how to raise the budget, ending with marker.
func BudgetComment(r Record, next Status, marker string) string {
	which := "rolling-window"
	if next.BudgetWhich == BudgetTotal {
		which = "total"
	}
	t := next.UsageTotal
	var b strings.Builder
	fmt.Fprintf(&b, "loopd stopped the agent of this %s: it used %s of its %s token budget of %s (weighted).\n\n",
		kindText(r.Spec.Kind), FormatTokens(next.BudgetUsed), which, FormatTokens(next.BudgetLimit))
	fmt.Fprintf(&b, "Counted so far: %s input, %s output, %s cache writes, %s cache reads (%s weighted).\n\n",
		FormatTokens(t.Input), FormatTokens(t.Output), FormatTokens(t.CacheWrite), FormatTokens(t.CacheRead), FormatTokens(next.UsageWeighted))
	b.WriteString("Its turn was interrupted and it takes no new one; the conversation is kept")
	if n := len(r.Pending); n > 0 {
		fmt.Fprintf(&b, ", and %d event(s) wait for it", n)
	}
	b.WriteString(".\n\nTo let it go on in the same conversation, an authorized user comments `/loopd budget +200k` (any amount), or an operator runs `loopd release --budget +200k " +
		r.Key.String() + "`.\n\n" + marker)
	return b.String()
}
