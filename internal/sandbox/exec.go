package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/loopd/loopd/internal/proc"
)

// Exec is the first process inside the sandbox (loopd's Command): when its
// stdin is its controlling terminal (a pane's), it puts itself in a
// process group of its own and makes that the terminal's foreground
// group, then it replaces itself with the harness: path run with argv
// (argv[0] as the harness was configured) and this process's environment,
// which the launcher gave it. It returns only on failure.
//
// Without the foreground step the terminal's foreground group would stay
// bwrap's, and tmux, which names a pane's foreground process after the
// leader of that group (pane_current_command), would show "bwrap" while
// the harness runs, and after it left a shell behind.
func Exec(path string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("sandbox exec: no command")
	}
	if err := foreground(); err != nil {
		return fmt.Errorf("sandbox exec %s: %w", argv[0], err)
	}
	if err := syscall.Exec(path, argv, os.Environ()); err != nil {
		return fmt.Errorf("sandbox exec %s: exec %s: %w", argv[0], path, err)
	}
	return nil
}

// foreground makes a group of this process the foreground group of its
// controlling terminal on stdin; a stdin that is no terminal, or not this
// process's controlling one (a headless run's), is left alone.
func foreground() error {
	if _, err := unix.IoctlGetInt(0, unix.TIOCGSID); err != nil {
		return nil // ENOTTY: no terminal, or another session's
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		return fmt.Errorf("setpgid: %w", err)
	}
	// A background group that sets the foreground gets SIGTTOU unless it
	// ignores it; an ignored signal would stay ignored across exec, so
	// its handling is restored first.
	signal.Ignore(syscall.SIGTTOU)
	err := unix.IoctlSetPointerInt(0, unix.TIOCSPGRP, syscall.Getpgrp())
	signal.Reset(syscall.SIGTTOU)
	if err != nil {
		return fmt.Errorf("set the terminal's foreground group: %w", err)
	}
	return nil
}

// Init returns the sandbox's init process for the pid of its bwrap (a
// pane's process, a run's harness): bwrap's one child, pid 1 of the
// sandbox's pid namespace. The kernel ends every other process of the
// namespace before its init ends (pid_namespaces(7)), so an init that no
// longer runs means nothing of the sandbox does. It reports false when
// bwrap has no child (the sandbox not made yet, or gone).
func Init(bwrap int) (int, bool) {
	tree := proc.Descendants([]int{bwrap})
	if len(tree) < 2 {
		return 0, false
	}
	return tree[1], true
}
