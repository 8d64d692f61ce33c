package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// probeTimeout bounds Check's run of a sandbox: bwrap starts one in a few
// milliseconds.
const probeTimeout = 10 * time.Second

// Check finds bwrap on pathEnv (loopd's PATH) and proves that it makes the
// namespaces of a sandbox on this machine, by running true in one with
// the options every spawn gets. It returns the Host that Wrap then uses,
// with exe as loopd's executable: Root as this process runs (root needs no
// user namespace; any other user does).
//
// It returns an error wrapping ErrMissing, saying to install Debian's
// bubblewrap (Install), when there is no bwrap; and one wrapping
// ErrNamespaces, naming the kernel setting that is off when it can tell
// (unprivileged user namespaces, user.max_user_namespaces, Ubuntu's
// AppArmor restriction) and quoting bwrap, when bwrap cannot make them.
func Check(ctx context.Context, exe, pathEnv string) (Host, error) {
	bwrap, err := lookPath("bwrap", pathEnv)
	if err != nil {
		return Host{}, fmt.Errorf("%w (no bwrap on PATH): install it with %s", ErrMissing, Install)
	}
	system, extra, err := Layout("/")
	if err != nil {
		return Host{}, err
	}
	h := Host{Bwrap: bwrap, Exe: exe, Root: os.Geteuid() == 0, System: system, Extra: extra}
	truth, err := h.Resolve("true", pathEnv)
	if err != nil {
		return Host{}, fmt.Errorf("sandbox check: %w", err)
	}
	var m mounts
	h.system(&m, nil)
	argv := append(append(h.options(), m.args...), "--", truth.Path)
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		said := strings.TrimSpace(stderr.String())
		if said == "" {
			said = err.Error()
		}
		return Host{}, fmt.Errorf("%w: %s: %s", ErrNamespaces, said, Diagnose(h.Root, readProc))
	}
	return h, nil
}

// readProc reads a file under /proc/sys, trimmed.
func readProc(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", name))
	return strings.TrimSpace(string(b)), err
}

// Diagnose says which kernel setting keeps bwrap from making namespaces,
// reading /proc/sys through read (the file's path below /proc/sys, its
// trimmed content): as root, none applies (a container that withholds
// CAP_SYS_ADMIN does); as any other user, the first of Debian's
// kernel.unprivileged_userns_clone, user.max_user_namespaces and Ubuntu's
// kernel.apparmor_restrict_unprivileged_userns that is off, with the
// sysctl that turns it on.
func Diagnose(root bool, read func(name string) (string, error)) string {
	if root {
		return "loopd runs as root, and root may not create namespaces here (a container without CAP_SYS_ADMIN?): " +
			"give the service that right, or set sandbox.mode: none"
	}
	settings := []struct{ file, off, fix string }{
		{"kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		{"user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces=15000"},
		{"kernel/apparmor_restrict_unprivileged_userns", "1",
			"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile that lets bwrap use user namespaces)"},
	}
	for _, s := range settings {
		v, err := read(s.file)
		if err != nil {
			continue // no such setting on this kernel
		}
		if v == s.off {
			return fmt.Sprintf("unprivileged user namespaces are off (%s is %s): %s", strings.ReplaceAll(s.file, "/", "."), v, s.fix)
		}
	}
	return "unprivileged user namespaces may be off: check kernel.unprivileged_userns_clone, user.max_user_namespaces " +
		"and kernel.apparmor_restrict_unprivileged_userns (sysctl -a | grep userns)"
}
