package tmux

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// listPanesFields is the number of tab-separated fields in listPanesFormat.
const listPanesFields = 14

// listPanesFormat is the list-panes -F format that ParseListPanes reads:
// only the fields a pass reads, since each costs format work per pane in
// the server on every pass. Session names cannot hold a tab (tmux escapes
// it); pane_current_command is the foreground process's argv[0], which
// that process chooses, so it comes last, where a tab cannot shift another
// field. The owner marks are user options that anyone may set to any text,
// so each is shown only when it has the shape of an owner id, and as "?"
// otherwise. The server's mark is the same on every row; it is read in the
// same call so that a pass needs no second exec to know the server is still
// its own (a format finds a server option too: tmux 3.3a format_find).
// session_attached and session_activity say whether a person attends the
// session and when they last typed, and the attender mark who (AttachArgv
// sets it), shown only when it has the shape of a login name.
const listPanesFormat = "#{session_name}\t#{pane_id}\t#{pane_dead}\t#{pane_dead_status}\t" +
	"#{pane_dead_signal}\t#{pane_pid}\t" +
	"#{?#{m/r:^[0-9a-f]+$,#{" + sessionOwnerOption + "}},#{" + sessionOwnerOption + "},#{?#{" + sessionOwnerOption + "},?,}}\t" +
	"#{pane_dead_time}\t#{window_activity}\t" +
	"#{?#{m/r:^[0-9a-f]+$,#{" + serverOwnerOption + "}},#{" + serverOwnerOption + "},#{?#{" + serverOwnerOption + "},?,}}\t" +
	"#{session_attached}\t#{session_activity}\t" +
	"#{?#{m/r:^[A-Za-z0-9._-]+$,#{" + attenderOption + "}},#{" + attenderOption + "},}\t" +
	"#{pane_current_command}"

// ParseListPanes parses the output of list-panes -a -F with loopd's format
// (session name, pane id, pane_dead, pane_dead_status, pane_dead_signal,
// pane_pid, the session's owner mark, pane_dead_time, window_activity, the
// server's owner mark, session_attached, session_activity, the attender
// mark, pane_current_command, separated by tabs), one pane a line, in the
// order given. Empty output gives an empty slice. A dead pane with neither a
// status nor a signal gets StatusKnown false, and one with no pane_dead_time
// a zero DeadTime. It returns an error naming the line for a row with too
// few fields or a malformed number.
func ParseListPanes(out []byte) ([]Pane, error) {
	panes := make([]Pane, 0, bytes.Count(out, []byte{'\n'})+1)
	for n, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		p, err := parsePane(line)
		if err != nil {
			return nil, fmt.Errorf("parse list-panes line %d: %w", n+1, err)
		}
		panes = append(panes, p)
	}
	return panes, nil
}

func parsePane(line string) (Pane, error) {
	var f [listPanesFields]string
	rest, n := line, 0
	for ; n < listPanesFields-1; n++ {
		var ok bool
		if f[n], rest, ok = strings.Cut(rest, "\t"); !ok {
			return Pane{}, fmt.Errorf("%d fields, want %d: %q", n+1, listPanesFields, line)
		}
	}
	f[n] = rest
	p := Pane{Session: f[0], PaneID: f[1], Owner: f[6], ServerOwner: f[9], AttachedBy: f[12], CurrentCommand: f[13]}
	switch f[2] {
	case "0":
	case "1":
		p.Dead = true
	default:
		return Pane{}, fmt.Errorf("pane_dead %q is not 0 or 1", f[2])
	}
	var err error
	if p.DeadStatus, err = optionalInt("pane_dead_status", f[3]); err != nil {
		return Pane{}, err
	}
	if p.DeadSignal, err = optionalInt("pane_dead_signal", f[4]); err != nil {
		return Pane{}, err
	}
	if p.PID, err = optionalInt("pane_pid", f[5]); err != nil {
		return Pane{}, err
	}
	if p.DeadTime, err = optionalTime("pane_dead_time", f[7]); err != nil {
		return Pane{}, err
	}
	if p.Activity, err = optionalTime("window_activity", f[8]); err != nil {
		return Pane{}, err
	}
	if p.Clients, err = optionalInt("session_attached", f[10]); err != nil {
		return Pane{}, err
	}
	if p.Input, err = optionalTime("session_activity", f[11]); err != nil {
		return Pane{}, err
	}
	p.StatusKnown = p.Dead && (f[3] != "" || f[4] != "")
	return p, nil
}

// optionalTime parses a field of whole Unix seconds that tmux leaves
// empty (or 0) when it has no value; that gives the zero time.
func optionalTime(name, s string) (time.Time, error) {
	n, err := optionalInt(name, s)
	if err != nil || n <= 0 {
		return time.Time{}, err
	}
	return time.Unix(int64(n), 0), nil
}

// optionalInt parses a decimal field that tmux leaves empty when it has no
// value; empty gives 0.
func optionalInt(name, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a number", name, s)
	}
	return n, nil
}
