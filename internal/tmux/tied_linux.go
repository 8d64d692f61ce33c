package tmux

import (
	"os/exec"
	"runtime"
	"syscall"
)

// runTied runs cmd as a child that the kernel kills with SIGKILL when
// loopd dies (Pdeathsig), so that a client that blocks (wait-for) is not
// left behind by a loopd killed with SIGKILL. Pdeathsig is sent when the
// thread that started the child ends, so the child is started from a
// thread kept for it until it exits. A server the client starts is its
// fork, which does not inherit the setting.
func runTied(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread ends with this goroutine, locked: the child has
		// exited by then.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		done <- cmd.Run()
	}()
	return <-done
}
