package harness

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// What Claude Code shows when it cannot work until a human acts, and how
// it reports a usage limit. The forms come from public reports of Claude
// Code 2.1.x (anthropics/claude-code issues titled with the banner, e.g.
// "You've hit your session limit · resets 5:10pm (Europe/Paris)"), the
// screens measured on 2.1.197 (testdata/claude-2.1.197) and
// docs/reference/harness-cli-facts.md.

// claudeLimitLine is a line that says a usage limit was hit: "You've hit
// your session limit", "You've hit your limit", "5-hour limit reached",
// "Weekly limit reached", "Claude usage limit reached", "Claude AI usage
// limit reached|<epoch>". "Approaching usage limit" is a warning, not a
// limit, and does not match.
var claudeLimitLine = regexp.MustCompile(`(?i)(you(?:'|’)ve (?:hit|reached) your (?:[a-z0-9-]+ )*limit|(?:usage|session|weekly|5-hour|opus|sonnet) limit reached|limit will reset at)`)

// claudeLimitEpoch is the transcript form of older versions: the reset as
// Unix seconds after a "|".
var claudeLimitEpoch = regexp.MustCompile(`Claude AI usage limit reached\|(\d{9,11})`)

// claudeAPIError is a rate-limit or overload error the CLI gave up on, as
// it writes it into the conversation ("API Error: 429 {…rate_limit_error…}").
var claudeAPIError = regexp.MustCompile(`API Error:?\s*(429|529)|"type"\s*:\s*"(rate_limit_error|overloaded_error)"`)

// claudeLimitMenu is the usage-limit menu (2.1.x):
//
//	What do you want to do?
//	❯ 1. Stop and wait for limit to reset
//	  2. Switch to extra usage
//	  3. Upgrade your plan
//	Enter to confirm · Esc to cancel
//
// Its one choice that spends nothing is the one whose label is
// claudeLimitWait; every other choice (extra usage, an upgrade) costs
// money and is never picked.
const (
	claudeLimitMenuTitle = "What do you want to do?"
	claudeLimitWait      = "Stop and wait for limit to reset"
)

// claudeMenuOption is one numbered choice of a menu, with the cursor "❯"
// before it or not.
var claudeMenuOption = regexp.MustCompile(`^\s*(❯)?\s*(\d)\.\s+(.*\S)\s*$`)

// claudeSoftBlocks are what a screen shows, with the input box still
// drawn, when every prompt will fail until a human acts; checked after the
// dialogs.
var claudeSoftBlocks = []struct {
	marker   string
	lastTurn bool // only in the latest turn, not anywhere in the history
	block    Block
}{
	// The reply to every prompt of a logged-out CLI, and its footer
	// (measured on 2.1.197: ready-after-turn.txt, ready-empty.txt).
	{"Not logged in · Please run /login", true, BlockLoginRequired},
	{"Not logged in · Run /login", false, BlockLoginRequired},
	{"Invalid API key · Please run /login", true, BlockLoginRequired},
	{"OAuth token has expired", true, BlockLoginRequired},
	// The preflight of a fresh config dir offline (harness-cli-facts.md).
	{"Unable to connect to Anthropic services", false, BlockConnectivity},
}

// Blocked returns the Block of a Claude Code screen: the dialog that
// replaces the input box (as Screen reports it), else a login or
// connectivity failure the latest reply or the footer shows. The
// usage-limit menu blocks only when loopd cannot answer it
// (LimitMenuKeys: its cursor or its "wait" choice is not seen).
func (c *claudeCode) Blocked(text string) Block {
	if s, why := c.Screen(text); s == ScreenBlocked {
		if why == BlockUsageLimitMenu && c.LimitMenuKeys(text) != nil {
			return ""
		}
		return why
	}
	turn := lastTurn(text)
	for _, b := range claudeSoftBlocks {
		where := text
		if b.lastTurn {
			where = turn
		}
		if strings.Contains(where, b.marker) {
			return b.block
		}
	}
	return ""
}

// claudeMarks are the marks of Claude Code's screen
// (2.1.197, testdata/claude-2.1.197): "⎿" starts the CLI's own reply to a
// prompt (an API error, a usage limit, "Not logged in"), "❯" a prompt and
// "─" the input box's rule; "⏺" starts the model's answer, after which
// every line (its text, its tools' output under "⎿") is the conversation.
var claudeMarks = statusMarks{status: []string{"⎿"}, talk: []string{"❯", "─"}, stop: "⏺"}

// Limit reports the usage limit a Claude Code screen shows: a banner the
// CLI itself printed in the latest turn, as its reply to the prompt
// (claudeMarks, before the model's answer: a banner the agent quotes, or
// one further up in a resumed conversation's history, is not a limit),
// and the menu, which the CLI draws in place of the input box. Menu is
// true only when loopd can answer it (LimitMenuKeys). The reset is read
// at now in the zone the banner names, or the pane's (its TZ, else
// loopd's local zone).
func (c *claudeCode) Limit(text string, now time.Time) (Limit, bool) {
	menu := strings.Contains(text, claudeLimitMenuTitle) && strings.Contains(text, claudeLimitWait)
	l, found := statusLimit(lastTurn(text), claudeMarks, func(block string) (Limit, bool) { return claudeTextLimit(block, now, c.zone()) })
	if menu {
		if !found {
			l = Limit{Kind: LimitUsage, Text: claudeLimitWait}
		}
		l.Menu, found = c.LimitMenuKeys(text) != nil, true
	}
	return l, found
}

// claudeTextLimit reads a usage limit from one message of the CLI: its
// window (claudeWindow) and its reset, as Unix seconds (epochReset) or as
// a clock time and date read at now (ParseReset).
func claudeTextLimit(text string, now time.Time, loc *time.Location) (Limit, bool) {
	if !claudeLimitLine.MatchString(text) {
		return Limit{}, false
	}
	l := Limit{Kind: LimitUsage, Window: claudeWindow(text), Text: clip(text)}
	if t, ok := epochReset(text); ok {
		l.Reset = t
	} else if t, ok := ParseReset(text, now, loc); ok {
		l.Reset = t
	}
	return l, true
}

// claudeWindowWords name the window of a Claude Code banner: "session
// limit", "5-hour limit", "weekly limit", and the weekly per-model limits
// ("Opus limit", "Sonnet limit"). A banner that names none but resets on
// a date ("resets Jul 18 at 4am") is the weekly one, the plans' only
// window longer than a day.
var (
	claudeSessionWords = regexp.MustCompile(`(?i)\b(?:session|5-hour) limit`)
	claudeWeeklyWords  = regexp.MustCompile(`(?i)\b(?:weekly|opus|sonnet) limit`)
	claudeDatedReset   = regexp.MustCompile(`(?i)\bresets?\s+(?:on\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d`)
)

// claudeWindow is the window a Claude Code limit message names.
func claudeWindow(text string) LimitWindow {
	switch {
	case claudeWeeklyWords.MatchString(text), claudeDatedReset.MatchString(text):
		return WindowWeekly
	case claudeSessionWords.MatchString(text):
		return WindowSession
	}
	return ""
}

// LimitMenuKeys returns the keys that pick "Stop and wait for limit to
// reset" in the usage-limit menu: Enter when the cursor is on it, else the
// choice's own number, which moves the cursor there (or picks it; the
// next look sees which). It reads the number from the screen, so a menu
// that orders its choices otherwise is still answered "wait". nil when
// the screen shows no such menu, or one whose cursor is on none of its
// choices (a frame drawn without it): a key sent blind could pick what
// the cursor is on, so nothing is sent, and Blocked shows the menu.
func (c *claudeCode) LimitMenuKeys(text string) []string {
	if !strings.Contains(text, claudeLimitMenuTitle) {
		return nil
	}
	wait, cursor := "", false
	for _, line := range strings.Split(text[strings.LastIndex(text, claudeLimitMenuTitle):], "\n") {
		m := claudeMenuOption.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cursor = cursor || m[1] != ""
		if m[3] != claudeLimitWait {
			continue
		}
		if m[1] != "" {
			return []string{"Enter"}
		}
		wait = m[2]
	}
	if wait == "" || !cursor {
		return nil
	}
	return []string{wait}
}

// lastTurn is the text after the latest prompt in the conversation shown:
// the last line that starts with "❯" and is not the input box (which sits
// right below a rule) nor a numbered choice of a menu. The whole text when
// there is none.
func lastTurn(text string) string {
	lines := strings.Split(text, "\n")
	start := 0
	for i, line := range lines {
		if !strings.HasPrefix(line, "❯") || claudeMenuOption.MatchString(line) {
			continue
		}
		if i > 0 && strings.HasPrefix(lines[i-1], "─") {
			continue // the input box
		}
		start = i + 1
	}
	return strings.Join(lines[start:], "\n")
}

// claudeTail is how much of a transcript's end TranscriptLimit reads: the
// latest turn, never the whole conversation.
const claudeTail = 64 << 10 // bytes

// TranscriptLimit reports the usage limit the latest turn of Claude Code's
// transcript tr ended on: an assistant line that is an API error
// (isApiErrorMessage, or an "error" field) naming a usage limit, or a
// rate-limit (429) or overload (529) error, with no user line after it. Its
// At is the line's timestamp, and a reset given as a clock time is read
// at that time in the pane's zone (TZ); "Claude AI usage limit
// reached|<epoch>" gives it in Unix seconds. It reads at most the last 64
// KiB.
func (c *claudeCode) TranscriptLimit(tr Transcript) (Limit, bool, error) {
	if !tr.Known || !tr.Exists {
		return Limit{}, false, nil
	}
	tail, err := readTail(tr.Path, claudeTail)
	if err != nil {
		return Limit{}, false, err
	}
	var last []byte
	for _, line := range bytes.Split(tail, []byte("\n")) {
		var l struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &l) == nil && (l.Type == "user" || l.Type == "assistant") {
			last = line
		}
	}
	return claudeLineLimit(last, c.zone())
}

// claudeLineLimit reads a usage limit from one assistant line of a
// transcript.
func claudeLineLimit(line []byte, loc *time.Location) (Limit, bool, error) {
	var l struct {
		Type       string          `json:"type"`
		Timestamp  string          `json:"timestamp"`
		IsAPIError bool            `json:"isApiErrorMessage"`
		Error      json.RawMessage `json:"error"`
		Message    struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "assistant" || (!l.IsAPIError && (len(l.Error) == 0 || string(l.Error) == "null")) {
		return Limit{}, false, nil
	}
	at, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		return Limit{}, false, nil // not a line the CLI wrote
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	text := ""
	if json.Unmarshal(l.Message.Content, &parts) == nil {
		for _, p := range parts {
			if p.Type == "text" {
				text += p.Text + "\n"
			}
		}
	} else {
		_ = json.Unmarshal(l.Message.Content, &text)
	}
	for _, ln := range strings.Split(text, "\n") {
		if lim, ok := claudeTextLimit(ln, at, loc); ok {
			lim.At = at
			return lim, true, nil
		}
	}
	if m := claudeAPIError.FindStringSubmatch(text + " " + string(l.Error)); m != nil {
		kind := LimitRate
		if m[1] == "529" || m[2] == "overloaded_error" {
			kind = LimitOverload
		}
		return Limit{Kind: kind, At: at, Text: clip(strings.SplitN(text, "\n", 2)[0])}, true, nil
	}
	return Limit{}, false, nil
}

// Account is the config dir the CLI keeps its login in (CLAUDE_CONFIG_DIR
// as the pane sees it, else $HOME/.claude): harnesses that share it share
// one account, and so its usage limits. A relative CLAUDE_CONFIG_DIR,
// taken against each pane's cwd, is named as it is.
func (c *claudeCode) Account() string {
	if dir := c.getenv("CLAUDE_CONFIG_DIR"); dir != "" {
		return AdapterClaudeCode + ":" + filepath.Clean(dir)
	}
	return AdapterClaudeCode + ":" + filepath.Join(c.getenv("HOME"), ".claude")
}

// epochReset reads the reset of the older form "Claude AI usage limit
// reached|<Unix seconds>", which some versions also showed on screen as it
// is.
func epochReset(text string) (time.Time, bool) {
	m := claudeLimitEpoch.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	secs, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(secs, 0).UTC(), true
}
