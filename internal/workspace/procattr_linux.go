package workspace

import "syscall"

// sysProcAttr puts git in its own process group and has the kernel kill it
// when the thread that started it, and so loopd, dies (prctl(2),
// PR_SET_PDEATHSIG): an orphan git would go on in the mirror with no
// timeout. git's own children (a hook, a filter, a remote helper) are not
// reached; they keep the mirror's lock until they exit (Manager.lock).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
