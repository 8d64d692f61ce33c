//go:build !linux

package tmux

import "os/exec"

// runTied runs cmd; only Linux can have the kernel end it with loopd.
func runTied(cmd *exec.Cmd) error { return cmd.Run() }
