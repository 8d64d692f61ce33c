//go:build !linux

package workspace

import "syscall"

// sysProcAttr puts git in its own process group; where prctl(2) does not
// exist, a git whose loopd died runs on, holding the mirror's lock
// (Manager.lock).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
