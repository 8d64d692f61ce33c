// Package proc identifies and ends a process across pid reuse, from
// /proc (proc(5)): a pid names a process only together with its start
// time, since the kernel hands a freed pid to the next process.
//
// loopd uses it to make sure that a respawned agent never runs next to
// its predecessor on the same conversation: tmux kill-server sends SIGHUP
// to every pane, and Claude Code 2.1.197 takes 40–150 ms to exit after it
// (measured), while a new server and new panes are up in less.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrUnsupported means the system has no /proc to read start times from:
// a process cannot be told from a later one with its pid.
var ErrUnsupported = errors.New("proc: no /proc on this system")

// ErrStillRunning means the process outlived SIGKILL for the whole wait
// (uninterruptible sleep, say).
var ErrStillRunning = errors.New("proc: process still running")

// Process is one process: its pid and its start time in clock ticks since
// boot (/proc/<pid>/stat field 22), which tells it from a later process
// given the same pid.
type Process struct {
	PID   int
	Start uint64
}

// Lookup returns the process that has pid now. It returns os.ErrNotExist
// (wrapped) when none has it, and ErrUnsupported without /proc.
func Lookup(pid int) (Process, error) {
	start, _, err := stat(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, Start: start}, nil
}

// Running reports whether p still runs: its pid names a process with its
// start time that is not a zombie (a zombie has closed its files and ends
// nothing more). A zero Process never runs.
func (p Process) Running() bool {
	if p.PID <= 0 {
		return false
	}
	start, state, err := stat(p.PID)
	return err == nil && start == p.Start && state != 'Z'
}

// End makes sure p is gone: it waits up to grace for it to exit by itself
// (it was sent SIGHUP with its terminal), then sends SIGKILL to its process
// group (the pane's process leads one: tmux starts it as a session leader)
// and waits up to grace again. It polls every poll. It returns whether it
// had to kill, and ErrStillRunning when p outlived that, or ctx's error.
func (p Process) End(ctx context.Context, grace, poll time.Duration) (killed bool, err error) {
	if !p.Running() {
		return false, nil
	}
	// No first signal (0): it had its hangup. Then the group first: a
	// tool the agent ran in its foreground goes with it; the pid itself
	// too, in case it left its group.
	return escalate(ctx, fmt.Sprintf("end pid %d", p.PID), 0, grace, poll,
		func(sig syscall.Signal) {
			if sig == 0 {
				return
			}
			_ = syscall.Kill(-p.PID, sig)
			if p.Running() {
				_ = syscall.Kill(p.PID, sig)
			}
		},
		p.Running)
}

// EndGroup makes sure the process group that p leads is gone, with every
// process in it, also those that outlive their leader: it sends the group
// first, waits up to grace for it to empty (GroupRunning), then sends it
// SIGKILL and waits up to grace again, polling every poll. The caller
// names the first signal: a tmux pane's group gets SIGHUP, the hangup its
// terminal would send (a CLI that ignores it, as Gemini's launcher does,
// ends at the SIGKILL); a headless run's group gets SIGTERM, as a timeout
// sends (runner.Runner.Stop). p.Start 0 means the leader's start time is
// not known: it is gone, and its group is ended only while no live
// process holds its pid (the kernel never gives a new process the id of a
// group that still has members, so the members left are the group's). It
// does nothing to a group whose leader's pid now names a later process.
// It returns whether it had to send SIGKILL, ErrStillRunning when a member
// outlived it, or ctx's error.
func (p Process) EndGroup(ctx context.Context, first syscall.Signal, grace, poll time.Duration) (killed bool, err error) {
	if p.PID <= 1 || !p.leads() {
		return false, nil
	}
	return escalate(ctx, fmt.Sprintf("end group %d", p.PID), first, grace, poll,
		func(sig syscall.Signal) { _ = syscall.Kill(-p.PID, sig) },
		func() bool { return GroupRunning(p.PID) })
}

// EndOwnGroup ends every other process of the caller's process group,
// which the caller must lead (a run's wrapper, internal/runner), as
// EndGroup ends a group, but signalling each of the others by its pid, so
// that the caller is never signalled. Zombies count as gone. It does
// nothing when the caller does not lead its group or is alone in it. It
// returns whether it had to send SIGKILL, ErrStillRunning when a process
// outlived that, or ctx's error.
func EndOwnGroup(ctx context.Context, first syscall.Signal, grace, poll time.Duration) (killed bool, err error) {
	self := os.Getpid()
	if syscall.Getpgrp() != self || len(groupMembers(self, self)) == 0 {
		return false, nil
	}
	return escalate(ctx, fmt.Sprintf("end own group %d", self), first, grace, poll,
		func(sig syscall.Signal) {
			for _, pid := range groupMembers(self, self) {
				_ = syscall.Kill(pid, sig)
			}
		},
		func() bool { return len(groupMembers(self, self)) > 0 })
}

// Alive reports whether a process has pid and is not a zombie (a
// reparented child may wait a while for its reaper), whatever its start
// time. Without /proc it reports whether kill(2) finds pid, zombies
// included. It reports false for a pid below 1.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	fields, err := statFields(pid)
	if errors.Is(err, ErrUnsupported) {
		return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	return err == nil && fields[0][0] != 'Z'
}

// Descendants returns pids and every process descended from one of them,
// from the parent pids in /proc/<pid>/stat (field 4), each after its
// parent. A CLI a wrapper runs as a job of its own (set -m) is in another
// process group than its pane's process, and outlives it when tmux hangs
// the pane up. Without /proc it returns pids.
func Descendants(pids []int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, err := statFields(pid)
		if err != nil {
			continue // gone since the listing
		}
		// fields[0] is field 3 (state); field 4 (ppid) is fields[1].
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	out := append([]int(nil), pids...)
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// escalate sends first (signal; 0 sends nothing), waits up to grace for
// running to report false, then sends SIGKILL and waits up to grace
// again, polling every poll. It returns whether it sent SIGKILL, an error naming what (wrapping
// ErrStillRunning) when running still reports true, or ctx's error.
func escalate(ctx context.Context, what string, first syscall.Signal, grace, poll time.Duration, signal func(syscall.Signal), running func() bool) (killed bool, err error) {
	signal(first)
	if waitGone(ctx, running, grace, poll) {
		return false, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	signal(syscall.SIGKILL)
	if waitGone(ctx, running, grace, poll) {
		return true, nil
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, fmt.Errorf("%s: %w", what, ErrStillRunning)
}

// groupMembers returns the pids of the processes of group pgid that are
// not zombies, except pid except, from /proc.
func groupMembers(pgid, except int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except {
			continue
		}
		if g, state, err := pgrp(pid); err == nil && g == pgid && state != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// leads reports whether p.PID still names p's group: the leader runs with
// its start time (or as a zombie), or, its start time unknown, no live
// process has its pid.
func (p Process) leads() bool {
	start, state, err := stat(p.PID)
	if err != nil {
		return true // no process has the pid: only the group can be left
	}
	if p.Start == 0 {
		return state == 'Z'
	}
	return start == p.Start
}

// GroupRunning reports whether a process other than a zombie is in process
// group pgid, from /proc/<pid>/stat (fields 3 and 5, the state and pgrp) of
// every process. A zombie has ended (it holds no files and runs nothing),
// and whoever reaps it may take its time: PID 1 in a container may never
// reap at all. It reports false for a pgid below 2 and without /proc.
func GroupRunning(pgid int) bool {
	if pgid <= 1 || errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return false // kill(2): no process at all, zombies included
	}
	return len(groupMembers(pgid, 0)) > 0
}

// pgrp reads the process group and the state of pid from /proc/<pid>/stat.
func pgrp(pid int) (int, byte, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	// fields[0] is field 3 (state); field 5 (pgrp) is fields[2].
	g, err := strconv.Atoi(fields[2])
	if err != nil {
		return 0, 0, fmt.Errorf("stat pid %d: pgrp: %w", pid, err)
	}
	return g, fields[0][0], nil
}

// waitGone polls until running reports false, for at most wait or until
// ctx ends, and reports whether it did.
func waitGone(ctx context.Context, running func() bool, wait, poll time.Duration) bool {
	deadline := time.Now().Add(wait)
	for running() {
		if !time.Now().Before(deadline) {
			return false
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return !running()
		case <-t.C:
		}
	}
	return true
}

// stat reads the start time and the state of pid from /proc/<pid>/stat.
func stat(pid int) (start uint64, state byte, err error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, 0, err
	}
	// fields[0] is field 3 (state); field 22 (starttime) is fields[19].
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat pid %d: starttime: %w", pid, err)
	}
	return start, fields[0][0], nil
}

// statFields returns the fields of /proc/<pid>/stat from field 3 (state)
// on, at least 20 of them, the first one a single byte.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat("/proc/self/stat"); serr != nil {
				return nil, ErrUnsupported
			}
		}
		return nil, fmt.Errorf("stat pid %d: %w", pid, err)
	}
	// The command name is in parentheses and may hold spaces and
	// parentheses itself: the fields that follow start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return nil, fmt.Errorf("stat pid %d: malformed %q", pid, s)
	}
	fields := strings.Fields(s[i+2:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return nil, fmt.Errorf("stat pid %d: malformed %q", pid, s)
	}
	return fields, nil
}
