package harness

import (
	"fmt"
	"io"
	"time"

	"github.com/loopd/loopd/internal/channel"
	"github.com/loopd/loopd/internal/launch"
)

// Claude Code's SessionStart hook protocol, as loopd speaks it: an adapter
// whose CLI runs a command at each session start with the hook's input
// (JSON with session_id and source) on stdin implements
// SessionStartReporter; WithSessionStart gives it loopd's command, and
// that command (ReportSessionStart) drops the input into the item's
// channel for the next pass. Claude Code's adapter is the one that does
// so today; another CLI with such a hook shares all of it.

// SessionStartArgs are the arguments of loopd's command that a session
// start runs: "loopd hook session-start".
var SessionStartArgs = []string{"hook", "session-start"}

// SessionStartCommand is the shell command line a harness runs at session
// start: exe (loopd's executable) with SessionStartArgs. It names no
// config: the hook finds its item's channel in its environment.
func SessionStartCommand(exe string) string {
	return launch.ShellQuote(exe) + " " + SessionStartArgs[0] + " " + SessionStartArgs[1]
}

// WithSessionStart returns ad with SessionStartCommand(exe) as its
// session-start hook when its CLI can report one (SessionStartReporter),
// ad itself otherwise.
func WithSessionStart(ad Adapter, exe string) Adapter {
	if r, ok := ad.(SessionStartReporter); ok {
		return r.WithSessionStartHook(SessionStartCommand(exe))
	}
	return ad
}

// ReportSessionStart is the hook's side: it drops the SessionStart input
// read from stdin into the channel getenv names (channel.EnvDir), for the
// work item it names, with its spawn's token, taking now as the report's
// time. It reads one byte past channel.MaxInput, so that the pass can tell
// an input was too long and refuse it. It prints nothing: Claude Code
// would add a hook's stdout to the conversation. Without a channel in
// getenv it returns an error wrapping channel.ErrNoChannel.
func ReportSessionStart(getenv func(string) string, stdin io.Reader, now time.Time) error {
	dir, token := getenv(channel.EnvDir), getenv(channel.EnvToken)
	if dir == "" || token == "" {
		return fmt.Errorf("hook session-start: %w", channel.ErrNoChannel)
	}
	input, err := io.ReadAll(io.LimitReader(stdin, channel.MaxInput+1))
	if err != nil {
		return fmt.Errorf("hook session-start: read input: %w", err)
	}
	if err := channel.WriteReport(dir, getenv(channel.EnvWorkItem), token, input, now); err != nil {
		return fmt.Errorf("hook session-start: %w", err)
	}
	return nil
}
