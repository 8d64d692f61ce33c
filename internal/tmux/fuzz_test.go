package tmux

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseListPanes feeds ParseListPanes any output, seeded with real tmux
// 3.3a output (testdata/list-panes.txt) and its lines cut short. It never
// panics; it accepts an output exactly when it accepts each of its lines
// alone, and then gives one pane per non-empty line, each as its line gives
// it alone; no field but the foreground command (the last) holds a tab,
// none a newline; a pane with a known exit status is dead.
func FuzzParseListPanes(f *testing.F) {
	out, err := os.ReadFile("testdata/list-panes.txt")
	require.NoError(f, err)
	f.Add(out)
	for _, line := range strings.SplitAfter(string(out), "\n") {
		f.Add([]byte(line))
		f.Add([]byte(line[:len(line)/2]))
	}
	f.Add([]byte("loop-x\t%1\t1\t-1\t+9\t0\t?\t-5\t-7\t?\tcmd\twith\ttabs\n\n\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		panes, err := ParseListPanes(out)
		var lines []string
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			if line != "" {
				lines = append(lines, line)
			}
		}
		var lineErr error
		for i, line := range lines {
			alone, err := ParseListPanes([]byte(line + "\n"))
			if err != nil {
				lineErr = err
				continue
			}
			require.Len(t, alone, 1)
			if lineErr == nil && i < len(panes) {
				require.Equal(t, alone[0], panes[i], "line %d parses otherwise alone", i+1)
			}
		}
		if err != nil {
			require.Error(t, lineErr, "the output fails (%v) but each of its lines passes", err)
			require.Nil(t, panes)
			return
		}
		require.NoError(t, lineErr, "the output passes but one of its lines fails")
		require.Len(t, panes, len(lines))
		for _, p := range panes {
			for _, field := range []string{p.Session, p.PaneID, p.Owner, p.ServerOwner} {
				require.NotContains(t, field, "\t")
				require.NotContains(t, field, "\n")
			}
			require.NotContains(t, p.CurrentCommand, "\n")
			require.False(t, p.StatusKnown && !p.Dead, "a live pane has no exit status: %+v", p)
			require.True(t, p.DeadTime.IsZero() || p.DeadTime.Unix() > 0, "%+v", p)
			require.True(t, p.Activity.IsZero() || p.Activity.Unix() > 0, "%+v", p)
		}
	})
}
