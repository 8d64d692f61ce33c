package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// systemPaths are the top-level paths of the system a harness needs
// read-only: programs and libraries (/usr, and the merged-/usr links or
// the directories of an older layout) and /etc (name service, TLS roots,
// the resolver). /home, /root, /var, /srv, /opt, /mnt, /media and /run
// are not the system: the operator's files and loopd's live there.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// SystemPath reports whether p is one of the top-level system paths a
// sandbox shows whole (/usr, /etc, …).
func SystemPath(p string) bool { return slices.Contains(systemPaths, p) }

// resolvConf is the resolver's config, which systemd-resolved and
// resolvconf make a symlink into /run.
const resolvConf = "/etc/resolv.conf"

// Layout returns the system paths of the machine whose root is root ("/"
// in production): each of systemPaths that exists, as a directory or as
// the symlink it is, and the target of /etc/resolv.conf when it lies
// outside them. The paths are those seen from inside, rooted at "/".
func Layout(root string) ([]Entry, []string, error) {
	var system []Entry
	for _, p := range systemPaths {
		host := filepath.Join(root, p)
		info, err := os.Lstat(host)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox layout: %w", err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(host)
			if err != nil {
				return nil, nil, fmt.Errorf("sandbox layout: %w", err)
			}
			system = append(system, Entry{Path: p, Link: link})
			continue
		}
		if info.IsDir() {
			system = append(system, Entry{Path: p})
		}
	}
	var extra []string
	if real, err := filepath.EvalSymlinks(filepath.Join(root, resolvConf)); err == nil {
		rel, err := filepath.Rel(root, real)
		if err == nil {
			inside := filepath.Join("/", rel)
			if !slices.ContainsFunc(system, func(e Entry) bool { return e.Link == "" && Within(inside, e.Path) }) {
				extra = append(extra, inside)
			}
		}
	}
	return system, extra, nil
}
