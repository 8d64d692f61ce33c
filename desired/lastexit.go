package desired

import "strconv"

// LastExit returns how the last recorded run ended, in the journal's
// words: "signal=N" when a signal ended it, "exit_status=N" when it
// exited, "" when neither is known (no run ended yet, or its session was
// missing). It is shown while the status still stands for that exit
// (Reason is LastExitReason), "" after.
func (s Status) LastExit() string {
	if s.LastExitReason == "" || s.Reason != s.LastExitReason {
		return ""
	}
	switch {
	case s.LastExitSignal != 0:
		return "signal=" + strconv.Itoa(s.LastExitSignal)
	case s.LastExitStatus != nil:
		return "exit_status=" + strconv.Itoa(*s.LastExitStatus)
	}
	return ""
}
