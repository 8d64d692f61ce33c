package harness

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/loopd/loopd/schema"
)

// Block names a screen or a reply meaning the agent cannot work until a
// human acts (docs/design.md, "Running is not working"). The values are
// the reason of session.blocked, the dry run's blocked action and loopd
// get.
type Block = string

// The blocks an adapter can report.
const (
	BlockLoginRequired  Block = "login_required"     // not logged in: every prompt is answered "please log in"
	BlockOnboarding     Block = "onboarding"         // the first-run setup screens
	BlockConnectivity   Block = "connectivity"       // the CLI cannot reach its service
	BlockWorkspaceTrust Block = "workspace_trust"    // the workspace trust dialog
	BlockPermission     Block = "permission_prompt"  // a tool asks for permission
	BlockUsageLimitMenu Block = "usage_limit_menu"   // the usage-limit menu (loopd answers it "wait")
	BlockResumePicker   Block = "resume_picker"      // the interactive resume picker
	BlockResumeChooser  Block = "resume_cwd_chooser" // Codex's "Working directory · resume" chooser: the resume did not take
	BlockBypassConsent  Block = "bypass_consent"     // the bypass-permissions consent dialog
	BlockAPIKey         Block = "api_key_approval"   // "Do you want to use this API key?"
	// BlockResumeSummary is Claude Code's resume-return chooser ("Resume
	// from summary (recommended)"), avoided by provisioning
	// resumeReturnDismissed.
	BlockResumeSummary   Block = "resume_summary_chooser"
	BlockCostNotice      Block = "cost_notice"      // "You've spent $5 on the Anthropic API this session."
	BlockPolicyUpdate    Block = "policy_update"    // "Updates to Consumer Terms and Policies"
	BlockExternalImports Block = "external_imports" // "Allow external CLAUDE.md file imports?"
)

// LimitKind says what a usage limit is.
type LimitKind string

// The kinds of limit.
const (
	// LimitUsage is the plan's usage cap (session, 5-hour, weekly): it
	// names its reset, and lasts until then.
	LimitUsage LimitKind = "usage_limit"
	// LimitRate is an API rate-limit error (HTTP 429) that the CLI gave
	// up retrying; LimitOverload an overload error (HTTP 529). Neither
	// names a reset.
	LimitRate     LimitKind = "rate_limit"
	LimitOverload LimitKind = "overloaded"
)

// LimitWindow is which quota of the account a usage limit is, as the CLI
// names it: "" when it does not say.
type LimitWindow string

// The windows of a usage limit.
const (
	WindowSession LimitWindow = "session"    // Claude Code's 5-hour session, Codex's 5-hour primary window
	WindowWeekly  LimitWindow = "weekly"     // Claude Code's and Codex's weekly limit
	WindowDaily   LimitWindow = "daily"      // a per-day quota (Gemini's requests per day)
	WindowMinute  LimitWindow = "per_minute" // a per-minute quota (Gemini's requests or tokens per minute)
)

// Limit is a usage limit a harness reported, on its screen or in its
// transcript.
type Limit struct {
	Kind LimitKind
	// Window is the quota the limit is of; "" when the CLI did not say.
	Window LimitWindow
	// Reset is when the limit ends; zero when the harness named no reset
	// or one that cannot be read (the planner then waits a bounded
	// default, and says so).
	Reset time.Time
	// At is when the harness reported it: the transcript line's time, or
	// zero for a screen (seen now).
	At time.Time
	// Menu is true when the usage-limit menu waits for an answer.
	Menu bool
	// Text is the line that reported it, at most 200 bytes, for the
	// journal.
	Text string
}

// maxLimitText bounds Limit.Text, which comes from the agent's screen.
const maxLimitText = 200

// clip cuts s to maxLimitText bytes on a rune boundary.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxLimitText {
		return s
	}
	cut := maxLimitText
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// statusMarks are the marks a CLI puts before the lines of its screen:
// status before its own messages (an error, a notice), talk before the
// conversation's (the user's prompt, the model's answer, a tool's
// output); stop, when not empty, starts the conversation for the rest of
// the turn.
type statusMarks struct {
	status, talk []string
	stop         string
}

// statusBlocks returns the CLI's own status messages among lines, each
// with the lines it wraps onto joined by spaces: a message starts at a
// line whose first non-blank rune is one of m.status, and runs on over
// the lines after it up to a blank line or a line that starts with one of
// m.status or m.talk. Lines of the conversation are never returned: a
// limit's text quoted by the agent or in a comment is no limit
// (docs/design.md, "Usage limits"). The scan ends at the first line that
// starts with m.stop.
func statusBlocks(lines []string, m statusMarks) []string {
	var out []string
	in := false
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if m.stop != "" && strings.HasPrefix(t, m.stop) {
			break
		}
		switch {
		case t == "" || hasAnyPrefix(t, m.talk):
			in = false
		case hasAnyPrefix(t, m.status):
			for _, mark := range m.status {
				t = strings.TrimSpace(strings.TrimPrefix(t, mark))
			}
			out, in = append(out, t), true
		case in:
			out[len(out)-1] += " " + t
		}
	}
	return out
}

// statusLimit is the last usage limit read (by read) among the CLI's own
// status messages (statusBlocks) in turn, the text of a screen's latest
// turn.
func statusLimit(turn string, m statusMarks, read func(string) (Limit, bool)) (Limit, bool) {
	var l Limit
	found := false
	for _, block := range statusBlocks(strings.Split(turn, "\n"), m) {
		if got, ok := read(block); ok {
			l, found = got, true
		}
	}
	return l, found
}

// zone is the time zone the CLI prints its clock times in: the TZ its
// pane gets (the harness's env, else loopd's own when the pane inherits
// it), else loopd's local zone. A TZ that does not load is the local zone
// too, as the C library reads it.
func (b *base) zone() *time.Location {
	tz := strings.TrimPrefix(b.getenv("TZ"), ":")
	if tz == "" {
		return time.Local
	}
	l, err := time.LoadLocation(tz)
	if err != nil {
		return time.Local
	}
	return l
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// resetPattern is the reset time a usage-limit message names, after
// "resets" or "reset at": an optional date ("Jul 18", "Jul 18," or "Jul
// 18 at", "Dec 1st, 2026"), a clock time ("5:10pm", "4am", "17:10", "5:10
// PM") and an optional zone, in parentheses ("(Europe/Paris)", "(UTC)")
// or written after the time ("5:10 PM UTC", "4am Etc/GMT+5", "5pm PST").
// Claude Code's forms (public reports of 2.1.x): "You've hit your session
// limit · resets 5:10pm (Europe/Paris)", "resets Jul 18 at 4am
// (Europe/Vienna)", "Resets Jul 26, 5:59am (America/Los_Angeles)", and
// the older "Your limit will reset at 5pm (America/New_York)"; Gemini
// CLI's "Access resets at 5:10 PM UTC." (its Intl "en-US" time with the
// short zone name); Codex's "try again at Dec 1st, 2026 1:09 AM".
var resetPattern = regexp.MustCompile(`(?i)\b(?:reset(?:s)?|try again)\s+(?:at\s+|on\s+)?` +
	`(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:(?P<year>\d{4}),?\s+)?(?:at\s+)?)?` +
	`(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>am|pm)?` +
	`(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\)|\s+(?-i:(?P<wzone>[A-Z][a-z]+(?:_[A-Z][a-z]+)*/[A-Za-z0-9_+\-/]+|Etc/[A-Za-z0-9+\-]+|UTC|[A-Z]{1,4}T))\b)?`)

// ParseReset reads the reset time a usage-limit message names, as seen at
// now. The zone is the one written, in parentheses or after the time, as
// time.LoadLocation reads it ("UTC", an IANA name, "Etc/GMT+5", which is
// UTC−5 by the tz database's POSIX sign), else loc (nil: the host's), the
// zone the CLI printed in. A clock time alone is its next occurrence in
// that zone: today's, or tomorrow's once today's has passed by more than
// schema.ResetClockGrace (a banner rounds its reset down to the
// minute, and a resumed agent may meet it again at the reset plus the
// margin); a month and day without a year are their next occurrence the
// same way; a date with a year is taken as given. It reports false when
// text names no reset, or one that cannot be read (a zone LoadLocation
// does not know, such as "PST"; 25 o'clock; Feb 30): the caller then
// treats the limit as one whose reset is unknown.
func ParseReset(text string, now time.Time, loc *time.Location) (time.Time, bool) {
	m := resetPattern.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	get := func(name string) string { return m[resetPattern.SubexpIndex(name)] }
	if zone := get("zone") + get("wzone"); zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return time.Time{}, false
		}
		loc = l
	}
	if loc == nil {
		loc = time.Local
	}
	hour, _ := strconv.Atoi(get("hour"))
	minute := 0
	if s := get("min"); s != "" {
		minute, _ = strconv.Atoi(s)
	}
	switch ampm := strings.ToLower(get("ampm")); {
	case ampm == "" && get("min") == "":
		return time.Time{}, false // "resets 5": not a time
	case ampm != "" && (hour < 1 || hour > 12):
		return time.Time{}, false
	case ampm == "pm" && hour != 12:
		hour += 12
	case ampm == "am" && hour == 12:
		hour = 0
	}
	if hour > 23 || minute > 59 {
		return time.Time{}, false
	}
	local := now.In(loc)
	earliest := now.Add(-schema.ResetClockGrace)
	if mon := get("mon"); mon != "" {
		month := time.Month(strings.Index("janfebmaraprmayjunjulaugsepoctnovdec", strings.ToLower(mon[:3]))/3 + 1)
		day, _ := strconv.Atoi(get("day"))
		years := []int{local.Year(), local.Year() + 1}
		if y := get("year"); y != "" {
			n, _ := strconv.Atoi(y)
			years, earliest = []int{n}, time.Time{}
		}
		for _, y := range years {
			t := time.Date(y, month, day, hour, minute, 0, 0, loc)
			if t.Day() == day && !t.Before(earliest) {
				return t, true
			}
		}
		return time.Time{}, false // Feb 30
	}
	t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
	if t.Before(earliest) {
		t = time.Date(local.Year(), local.Month(), local.Day()+1, hour, minute, 0, 0, loc)
	}
	return t, true
}
