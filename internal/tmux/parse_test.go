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

// testdata/list-panes.txt is real tmux 3.3a output for listPanesFormat: live
// panes, exit statuses 3 and 0, a pane killed by SIGTERM, a session with two
// panes, a start command with quotes and escaped tab and newline, a dead pane
// whose child tmux had not reaped (empty status and no pane_dead_time), a
// session that is not
// loopd's, sessions with and without an owner mark, and one whose mark is
// not an owner id ("Not-An-Id", shown as "?").
func TestParseListPanesCaptured(t *testing.T) {
	out, err := os.ReadFile("testdata/list-panes.txt")
	require.NoError(t, err)
	panes, err := ParseListPanes(out)
	require.NoError(t, err)
	const mine, theirs = "5d41402abc4b2a76", "7d793037a0760186"
	died := time.Unix(1796055234, 0)
	assert.Equal(t, []Pane{
		{Session: "loop-acme-api-4", PaneID: "%1", Dead: true, DeadStatus: 3, StatusKnown: true, DeadTime: died, PID: 6808,
			CurrentCommand: "sh", Owner: mine, StartCommand: `sh -c "exit 3" loop`},
		{Session: "loop-acme-api-42", PaneID: "%0", PID: 6804,
			CurrentCommand: "sleep", Owner: mine, StartCommand: "sleep 100000 1"},
		{Session: "loop-acme-web-7", PaneID: "%2", Dead: true, DeadSignal: 15, StatusKnown: true, DeadTime: died, PID: 6813,
			CurrentCommand: "sh", Owner: mine, StartCommand: `sh -c "kill -TERM $$" loop`},
		{Session: "loop-acme-web-8", PaneID: "%3", Dead: true, DeadStatus: 0, StatusKnown: true, DeadTime: died, PID: 6819,
			CurrentCommand: "sh", Owner: mine, StartCommand: `sh -c "exit 0" loop`},
		{Session: "loop-odd", PaneID: "%7", PID: 6837, CurrentCommand: "sleep", Owner: "?", StartCommand: "sleep 100000 4"},
		{Session: "loop-quoted", PaneID: "%4", PID: 6826, CurrentCommand: "sh", Owner: theirs,
			StartCommand: `sh -c "sleep 100000" "arg with space" tab\tinside "it's" "semi;" "\$HOME" '"dq"' new\nline`},
		{Session: "loop-quoted", PaneID: "%5", PID: 6831, CurrentCommand: "sleep", Owner: theirs, StartCommand: "sleep 100000 2"},
		{Session: "loop-unreaped", PaneID: "%9", Dead: true, StatusKnown: false, PID: 6852,
			CurrentCommand: "sh", StartCommand: `sh -c "sleep 0.1; exit 1" x`},
		{Session: "other", PaneID: "%6", PID: 6834, CurrentCommand: "sleep", StartCommand: "sleep 100000 3"},
	}, panes)
}

func TestParseListPanes(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want []Pane
	}{
		{"empty_output", "", []Pane{}},
		{"no_trailing_newline", "loop-a\t%0\t0\t\t\t7\tcat\t5d41402abc4b2a76\t\tcat -u",
			[]Pane{{Session: "loop-a", PaneID: "%0", PID: 7, CurrentCommand: "cat", Owner: "5d41402abc4b2a76", StartCommand: "cat -u"}}},
		{"tab_in_start_command", "loop-a\t%0\t1\t2\t\t7\tsh\t\t1796055234\tsh -c\tx\n",
			[]Pane{{Session: "loop-a", PaneID: "%0", Dead: true, DeadStatus: 2, StatusKnown: true, DeadTime: time.Unix(1796055234, 0), PID: 7,
				CurrentCommand: "sh", StartCommand: "sh -c\tx"}}},
		{"empty_start_command", "loop-a\t%0\t0\t\t\t7\tbash\t?\t\t\n",
			[]Pane{{Session: "loop-a", PaneID: "%0", PID: 7, CurrentCommand: "bash", Owner: "?"}}},
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
		{"format_without_dead_time", "loop-a\t%0\t0\t\t\t7\tcat\t\tcat\n", "line 1: 9 fields"},
		{"format_without_owner", "loop-a\t%0\t0\t\t\t7\tcat\tcat\n", "line 1: 8 fields"},
		{"old_format", "loop-a\t0\t\t7\n", "4 fields"},
		{"bad_dead_flag", "loop-a\t%0\tyes\t\t\t7\tcat\t\t\tcat\n", `pane_dead "yes"`},
		{"bad_status", "loop-a\t%0\t1\tx\t\t7\tcat\t\t\tcat\n", `pane_dead_status "x"`},
		{"bad_signal", "loop-a\t%0\t1\t\tTERM\t7\tcat\t\t\tcat\n", `pane_dead_signal "TERM"`},
		{"bad_pid", "loop-a\t%0\t0\t\t\t-\tcat\t\t\tcat\n", `pane_pid "-"`},
		{"bad_dead_time", "loop-a\t%0\t1\t1\t\t7\tcat\t\tsoon\tcat\n", `pane_dead_time "soon"`},
		{"error_on_line_2", "loop-a\t%0\t0\t\t\t7\tcat\t\t\tcat\nbroken\n", "line 2"},
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
		fmt.Fprintf(&b, "loop-acme-api-%d\t%%%d\t%s\t%s\t\t%d\tclaude\t5d41402abc4b2a76\t%s\t"+
			"claude --session-id 7f3c9a1e-2b4d-4c8f-9e6a-%012d -- \"Issue acme/api#%d opened by octocat (delivery %d)\"\n",
			i, i, dead, status, 20000+i, died, i, i, i)
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
