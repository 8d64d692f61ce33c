package tmux

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/list-panes.txt is real tmux 3.3a output for listPanesFormat on a
// server claimed by mine: live panes, exit statuses 3 and 0, a pane killed
// by SIGTERM, a session with two panes, a dead pane whose child tmux had not
// reaped (empty status and no pane_dead_time), a session that is not
// loopd's, sessions with and without an owner mark, one whose mark is not an
// owner id ("Not-An-Id", shown as "?"), and a foreground process whose
// argv[0] holds a tab (exec -a), which stays in the last field. No client
// is attached to any of its sessions: session_attached 0, session_activity
// the sessions' start, no attender mark.
func TestParseListPanesCaptured(t *testing.T) {
	out, err := os.ReadFile("testdata/list-panes.txt")
	require.NoError(t, err)
	panes, err := ParseListPanes(out)
	require.NoError(t, err)
	const mine, theirs = "5d41402abc4b2a76", "7d793037a0760186"
	died := time.Unix(1796076657, 0)
	active := died // the whole capture took less than a second
	assert.Equal(t, []Pane{
		{Session: "loop-acme-api-4", PaneID: "%1", Dead: true, DeadStatus: 3, StatusKnown: true, DeadTime: died, PID: 5881, Activity: active, Input: active,
			CurrentCommand: "sh", Owner: mine, ServerOwner: mine},
		{Session: "loop-acme-api-42", PaneID: "%0", PID: 5878, Activity: active, Input: active, CurrentCommand: "sleep", Owner: mine, ServerOwner: mine},
		{Session: "loop-acme-web-7", PaneID: "%2", Dead: true, DeadSignal: 15, StatusKnown: true, DeadTime: died, PID: 5885, Activity: active, Input: active,
			CurrentCommand: "sh", Owner: mine, ServerOwner: mine},
		{Session: "loop-acme-web-8", PaneID: "%3", Dead: true, DeadStatus: 0, StatusKnown: true, DeadTime: died, PID: 5889, Activity: active, Input: active,
			CurrentCommand: "sh", Owner: mine, ServerOwner: mine},
		{Session: "loop-odd", PaneID: "%7", PID: 5902, Activity: active, Input: active, CurrentCommand: "sleep", Owner: "?", ServerOwner: mine},
		{Session: "loop-quoted", PaneID: "%4", PID: 5893, Activity: active, Input: active, CurrentCommand: "sh", Owner: theirs, ServerOwner: mine},
		{Session: "loop-quoted", PaneID: "%5", PID: 5896, Activity: active, Input: active, CurrentCommand: "sleep", Owner: theirs, ServerOwner: mine},
		{Session: "loop-tab", PaneID: "%8", PID: 5905, Activity: active, Input: active, CurrentCommand: "a\tb", Owner: mine, ServerOwner: mine},
		{Session: "loop-unreaped", PaneID: "%9", Dead: true, StatusKnown: false, PID: 5910, Activity: active, Input: active, CurrentCommand: "sh", ServerOwner: mine},
		{Session: "other", PaneID: "%6", PID: 5899, Activity: active, Input: active, CurrentCommand: "sleep", ServerOwner: mine},
	}, panes)
}

func TestParseListPanes(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want []Pane
	}{
		{"empty_output", "", []Pane{}},
		{"no_trailing_newline", "loop-a\t%0\t0\t\t\t7\t5d41402abc4b2a76\t\t1796055230\t\t0\t\t\tcat",
			[]Pane{{Session: "loop-a", PaneID: "%0", PID: 7, Activity: time.Unix(1796055230, 0), CurrentCommand: "cat", Owner: "5d41402abc4b2a76"}}},
		{"attended", "loop-a\t%0\t0\t\t\t7\t5d41402abc4b2a76\t\t1796055230\t\t2\t1796055240\tocto\tcat\n",
			[]Pane{{Session: "loop-a", PaneID: "%0", PID: 7, Activity: time.Unix(1796055230, 0), CurrentCommand: "cat", Owner: "5d41402abc4b2a76",
				Clients: 2, Input: time.Unix(1796055240, 0), AttachedBy: "octo"}}},
		{"tab_in_current_command", "loop-a\t%0\t1\t2\t\t7\t\t1796055234\t\t?\t0\t\t\tsh\tx\n",
			[]Pane{{Session: "loop-a", PaneID: "%0", Dead: true, DeadStatus: 2, StatusKnown: true, DeadTime: time.Unix(1796055234, 0), PID: 7,
				CurrentCommand: "sh\tx", ServerOwner: "?"}}},
		{"empty_current_command", "loop-a\t%0\t0\t\t\t7\t?\t\t\t5d41402abc4b2a76\t0\t\t\t\n",
			[]Pane{{Session: "loop-a", PaneID: "%0", PID: 7, Owner: "?", ServerOwner: "5d41402abc4b2a76"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			panes, err := ParseListPanes([]byte(tc.out))
			require.NoError(t, err)
			assert.Equal(t, tc.want, panes)
		})
	}
}

func TestParseListPanesErrors(t *testing.T) {
	for _, tc := range []struct{ name, out, want string }{
		{"too_few_fields", "loop-a\t%0\t0\t\t\t7\tcat\n", "line 1: 7 fields"},
		{"format_without_activity", "loop-a\t%0\t0\t\t\t7\t\t\t\tcat\n", "line 1: 10 fields"},
		{"old_format", "loop-a\t0\t\t7\n", "4 fields"},
		{"bad_dead_flag", "loop-a\t%0\tyes\t\t\t7\t\t\t\t\t0\t\t\tcat\n", `pane_dead "yes"`},
		{"bad_status", "loop-a\t%0\t1\tx\t\t7\t\t\t\t\t0\t\t\tcat\n", `pane_dead_status "x"`},
		{"bad_signal", "loop-a\t%0\t1\t\tTERM\t7\t\t\t\t\t0\t\t\tcat\n", `pane_dead_signal "TERM"`},
		{"bad_pid", "loop-a\t%0\t0\t\t\t-\t\t\t\t\t0\t\t\tcat\n", `pane_pid "-"`},
		{"bad_dead_time", "loop-a\t%0\t1\t1\t\t7\t\tsoon\t\t\t0\t\t\tcat\n", `pane_dead_time "soon"`},
		{"format_without_attendance", "loop-a\t%0\t0\t\t\t7\t\t\t\t\tcat\n", "line 1: 11 fields"},
		{"bad_clients", "loop-a\t%0\t0\t\t\t7\t\t\t\t\ttwo\t\t\tcat\n", `session_attached "two"`},
		{"bad_activity", "loop-a\t%0\t0\t\t\t7\t\t\tnow\t\t0\t\t\tcat\n", `window_activity "now"`},
		{"error_on_line_2", "loop-a\t%0\t0\t\t\t7\t\t\t\t\t0\t\t\tcat\nbroken\n", "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseListPanes([]byte(tc.out))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// listPanesOutput returns list-panes output for n sessions shaped like
// loopd's: every other pane a live claude, the rest dead with a status.
func listPanesOutput(n int) []byte {
	var b strings.Builder
	for i := range n {
		dead, status, died := "0", "", ""
		if i%2 == 1 {
			dead, status, died = "1", "1", "1796055234"
		}
		fmt.Fprintf(&b, "loop-acme-api-%d\t%%%d\t%s\t%s\t\t%d\t5d41402abc4b2a76\t%s\t1796055230\t5d41402abc4b2a76\t0\t1796055230\t\tclaude\n",
			i, i, dead, status, 20000+i, died)
	}
	return []byte(b.String())
}

func BenchmarkParseListPanes(b *testing.B) {
	out := listPanesOutput(1000)
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		panes, err := ParseListPanes(out)
		if err != nil || len(panes) != 1000 {
			b.Fatalf("parsed %d panes: %v", len(panes), err)
		}
	}
}
