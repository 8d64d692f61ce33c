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

// Limit is a usage limit a harness reported, on its screen or in its
// transcript.
type Limit struct {
	Kind LimitKind
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

// resetPattern is the reset time a usage-limit message names, after
// "resets" or "reset at": an optional date ("Jul 18", "Jul 18," or
// "Jul 18 at"), a clock time ("5:10pm", "4am", "17:10") and an optional
// IANA zone in parentheses ("(Europe/Paris)"). Claude Code's forms
// (public reports of 2.1.x): "You've hit your session limit · resets
// 5:10pm (Europe/Paris)", "resets Jul 18 at 4am (Europe/Vienna)", "Resets
// Jul 26, 5:59am (America/Los_Angeles)", and the older "Your limit will
// reset at 5pm (America/New_York)".
var resetPattern = regexp.MustCompile(`(?i)\breset(?:s)?\s+(?:at\s+|on\s+)?` +
	`(?:(?P<mon>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?:at\s+)?)?` +
	`(?P<hour>\d{1,2})(?::(?P<min>\d{2}))?\s*(?P<ampm>am|pm)?` +
	`(?:\s*\((?P<zone>[A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)*)\))?`)

// ParseReset reads the reset time a usage-limit message names, as seen at
// now: a clock time alone is the next one in its zone (today's, or
// tomorrow's when today's is more than 12 hours past; a reset a little in
// the past is a banner left on screen, returned as it is); a month and day
// without a year is the one nearest to now. The zone is the IANA name in
// parentheses (time.LoadLocation), or loc when none is given (the zone the
// CLI printed in). It reports false when text names no reset, or one that
// cannot be read (an unknown zone, 25 o'clock): the caller then waits a
// bounded default.
func ParseReset(text string, now time.Time, loc *time.Location) (time.Time, bool) {
	m := resetPattern.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	get := func(name string) string { return m[resetPattern.SubexpIndex(name)] }
	if zone := get("zone"); zone != "" {
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
	if mon := get("mon"); mon != "" {
		month := time.Month(strings.Index("janfebmaraprmayjunjulaugsepoctnovdec", strings.ToLower(mon[:3]))/3 + 1)
		day, _ := strconv.Atoi(get("day"))
		if day < 1 || day > 31 {
			return time.Time{}, false
		}
		var best time.Time
		for _, y := range []int{local.Year() - 1, local.Year(), local.Year() + 1} {
			t := time.Date(y, month, day, hour, minute, 0, 0, loc)
			if t.Day() != day {
				continue // Feb 30
			}
			if best.IsZero() || absDuration(t.Sub(now)) < absDuration(best.Sub(now)) {
				best = t
			}
		}
		return best, !best.IsZero()
	}
	t := time.Date(local.Year(), local.Month(), local.Day(), hour, minute, 0, 0, loc)
	if t.Before(now.Add(-schema.StaleResetClock)) {
		t = time.Date(local.Year(), local.Month(), local.Day()+1, hour, minute, 0, 0, loc)
	}
	return t, true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
