package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hideProcess makes this process non-dumpable (prctl(2),
// PR_SET_DUMPABLE): /proc/<pid>/environ, cmdline's memory, mem and fd then
// belong to root, and ptrace needs CAP_SYS_PTRACE, so an agent running as
// the same user cannot read the environment loopd started with, which
// still holds the webhook secret after loopd unsets it (Go does not rewrite
// the initial environment block). execve resets the flag, so the tmux
// client and the harness loopd starts are unaffected. It also means no
// core dumps.
func hideProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}
