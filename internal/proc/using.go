package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Using reports whether a live process has one of files open (a link in
// /proc/<pid>/fd names it), or works in one of dirs (its /proc/<pid>/cwd
// is one of them or below one) and has a command name (/proc/<pid>/comm)
// that match accepts; a nil match accepts every name. Paths are compared
// as the kernel shows them, every symlink resolved, so dirs and files
// should be physical paths; a sandboxed process whose binds keep their host
// paths shows them the same. A process whose files this process may not
// read (another user's) is not seen, nor is a zombie (it holds no file).
// It returns ErrUnsupported without /proc.
func Using(dirs, files []string, match func(comm string) bool) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, ErrUnsupported
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return false, ErrUnsupported
	}
	open := map[string]bool{}
	for _, f := range files {
		open[filepath.Clean(f)] = true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		base := "/proc/" + strconv.Itoa(pid)
		if cwd, err := os.Readlink(base + "/cwd"); err == nil && under(cwd, dirs) && accepts(base, match) {
			return true, nil
		}
		if len(open) == 0 {
			continue
		}
		fds, err := os.ReadDir(base + "/fd")
		if err != nil {
			continue // gone since the listing, or not ours to read
		}
		for _, fd := range fds {
			if target, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && open[target] {
				return true, nil
			}
		}
	}
	return false, nil
}

// under reports whether path is one of dirs or below one.
func under(path string, dirs []string) bool {
	for _, d := range dirs {
		d = filepath.Clean(d)
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// accepts reports whether the command name of the process at base (its
// /proc dir) passes match.
func accepts(base string, match func(string) bool) bool {
	if match == nil {
		return true
	}
	b, err := os.ReadFile(base + "/comm")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	return err == nil && match(strings.TrimSpace(string(b)))
}
