// Command loopd keeps one AI coding agent session per GitHub work item alive
// in tmux, driven by GitHub webhooks. See README.md and docs/design.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := hideProcess(); err != nil {
		fmt.Fprintln(os.Stderr, "loopd:", err)
		os.Exit(1)
	}
	// What the exec before this one kept out of the environment block
	// (scrubEnviron), back in Go's copy of it.
	if err := takeInherited(); err != nil {
		fmt.Fprintln(os.Stderr, "loopd:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	var ex exitError
	switch {
	case errors.As(err, &ex):
		if ex.err != nil {
			fmt.Fprintln(os.Stderr, "loopd:", ex.err)
		}
		os.Exit(ex.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "loopd:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}
