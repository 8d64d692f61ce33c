package tmuxtest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/proc"
)

// A server is a live tmux server process, found by process (/proc), not
// by its socket file: a server whose socket file was deleted runs on,
// unreachable by tmux -L, and kill-server cannot end it.
type server struct {
	proc.Process
	// socket is the name of the socket it listens on (the base of path);
	// path is the path it was bound to, which may no longer exist.
	socket, path string
	// tmpdir is TMPDIR in its environment: a server inherits the
	// environment of the client that started it, and teardown.Main gives
	// each test process a TMPDIR of its own.
	tmpdir string
}

// fileGone reports whether the server's socket file was deleted.
func (s server) fileGone() bool {
	_, err := os.Lstat(s.path)
	return os.IsNotExist(err)
}

// ownedBy reports whether the server belongs to a test process: its
// socket's name matches socket (teardown.Own, teardown.Stale), or its
// TMPDIR is inside a directory whose name matches dir, which makes it a
// server started by that process or by one it started (a daemon, a tmux
// client): teardown.Main names the TMPDIR of each test process after it.
// Its parentage cannot say so: a tmux server detaches (daemon(3)) and
// init adopts it (measured: ppid 1, tmux 3.3a).
func (s server) ownedBy(socket, dir func(name string) bool) bool {
	if socket(s.socket) {
		return true
	}
	for d := s.tmpdir; d != "" && d != "/" && d != "."; d = filepath.Dir(d) {
		if dir(filepath.Base(d)) {
			return true
		}
	}
	return false
}

// servers returns the live tmux servers that keep, by /proc, a listening
// Unix socket open, in pid order: a process whose name begins "tmux"
// (tmux 3.3a names its server "tmux: server"), holding a descriptor of a
// listening socket in /proc/net/unix, which keeps a deleted file's path,
// and whose parent is not one: a pane's process, forked by the server,
// holds the server's name and descriptors until it execs its command.
// Without /proc it returns none.
func servers() []server {
	listening := listeningUnixSockets()
	if len(listening) == 0 {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []server
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || !bytes.HasPrefix(comm, []byte("tmux")) {
			continue
		}
		path := listeningPath(dir, listening)
		if path == "" {
			continue // a tmux client, or gone since the listing
		}
		p, err := proc.Lookup(pid)
		if err != nil || !p.Running() {
			continue
		}
		out = append(out, server{Process: p, socket: filepath.Base(path), path: path, tmpdir: environValue(dir, "TMPDIR")})
	}
	return slices.DeleteFunc(out, func(s server) bool {
		ppid := parentOf(s.PID)
		return slices.ContainsFunc(out, func(o server) bool { return o.PID == ppid })
	})
}

// parentOf returns the parent pid of pid (/proc/<pid>/stat, field 4,
// after the name in parentheses), 0 when unknown.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// serversOn returns the live servers listening on the socket named socket.
func serversOn(socket string) []server {
	var out []server
	for _, s := range servers() {
		if s.socket == socket {
			out = append(out, s)
		}
	}
	return out
}

// ServerPIDs returns, in order, the pids of the live tmux servers on the
// socket named socket, found by process (/proc), whether or not their
// socket file is still there: what a test checks to show that nothing
// left a server running.
func ServerPIDs(socket string) []int {
	var pids []int
	for _, s := range serversOn(socket) {
		pids = append(pids, s.PID)
	}
	return pids
}

// listeningUnixSockets returns the path of each listening Unix socket of
// /proc/net/unix by its inode: the lines whose flags have __SO_ACCEPTCON
// (00010000) and that name a path (an abstract one starts with '@').
func listeningUnixSockets() map[string]string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header: Num RefCount Protocol Flags Type St Inode Path
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[3] != "00010000" || !strings.HasPrefix(fields[7], "/") {
			continue
		}
		out[fields[6]] = strings.Join(fields[7:], " ")
	}
	return out
}

// listeningPath returns the path of the first listening socket among the
// descriptors of the process at dir (/proc/<pid>), "" when it has none.
func listeningPath(dir string, listening map[string]string) string {
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return ""
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil {
			continue
		}
		inode, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		if path, ok := listening[strings.TrimSuffix(inode, "]")]; ok {
			return path
		}
	}
	return ""
}

// environValue returns the value of name in the environment of the
// process at dir (/proc/<pid>/environ), "" when unset or unreadable.
func environValue(dir, name string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "environ"))
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(raw, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// serverNames returns, sorted, the socket names of the live servers that
// belong to a test process by socket or dir (server.ownedBy).
func serverNames(socket, dir func(name string) bool) []string {
	var names []string
	for _, s := range servers() {
		if s.ownedBy(socket, dir) && !slices.Contains(names, s.socket) {
			names = append(names, s.socket)
		}
	}
	slices.Sort(names)
	return names
}
