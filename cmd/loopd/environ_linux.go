package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// scrubEnviron makes sure that none of the variables names stays readable
// in this process's /proc/<pid>/environ: unsetting a variable changes Go's
// copy of the environment, never the block the kernel shows there, which
// root (and, were loopd dumpable, its own user) reads. When any of them is
// set, it re-executes loopd (selfExe, the same argv) with an
// environment without them, and hands their values over in an anonymous
// file (memfd_create(2)) whose descriptor secretsFDEnv names: never an
// argv, never a file on disk. The new process takes them back into Go's
// environment at start (takeInherited), where loopd reads them as before
// and unsets those it unsets. It returns only when there is nothing to do,
// or with the error that stopped the exec.
func scrubEnviron(names []string) error {
	if reexecuted {
		return nil
	}
	held := map[string]string{}
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if slices.Contains(names, name) {
			held[name] = value
			continue
		}
		if name != secretsFDEnv {
			env = append(env, kv)
		}
	}
	if len(held) == 0 {
		return nil
	}
	data, err := json.Marshal(held)
	if err != nil {
		return fmt.Errorf("environment: %w", err)
	}
	// Not close-on-exec: the new image inherits it.
	fd, err := unix.MemfdCreate(secretsFileName, 0)
	if err != nil {
		return fmt.Errorf("environment: memfd_create: %w", err)
	}
	if err := writeAll(fd, data); err != nil {
		unix.Close(fd)
		return fmt.Errorf("environment: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		unix.Close(fd)
		return fmt.Errorf("environment: %w", err)
	}
	env = append(env, secretsFDEnv+"="+strconv.Itoa(fd))
	err = execve(selfExe(), os.Args, env)
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("environment: re-exec without %s: %w", strings.Join(slices.Sorted(maps.Keys(held)), ", "), err)
	}
	return nil // only a test's stand-in of execve returns without an error
}

// selfExe returns the path to exec loopd's own image again by: the path
// of its executable (os.Executable) while that still names the running
// image, so that the new process keeps loopd's name (the kernel names a
// process after the file it execs: ps, pgrep loopd, top), else
// /proc/self/exe, which names the image whatever became of its file (an
// upgrade that replaced it), and names the process "exe".
func selfExe() string {
	const proc = "/proc/self/exe"
	path, err := os.Executable()
	if err != nil {
		return proc
	}
	running, err := os.Stat(proc)
	if err != nil {
		return proc
	}
	if named, err := os.Stat(path); err != nil || !os.SameFile(running, named) {
		return proc
	}
	return path
}

// writeAll writes data to the descriptor fd.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// takeInherited takes back, at start, the values of the variables the
// exec before this one handed over (scrubEnviron) into Go's environment,
// and closes their file. A descriptor that is not that file is left
// alone. Without secretsFDEnv it does nothing.
func takeInherited() error {
	v, ok := os.LookupEnv(secretsFDEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(secretsFDEnv); err != nil {
		return err
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 0 {
		return fmt.Errorf("environment: %s=%q is not a file descriptor", secretsFDEnv, v)
	}
	if link, err := os.Readlink("/proc/self/fd/" + v); err != nil || !strings.HasPrefix(link, "/memfd:"+secretsFileName+" ") {
		return fmt.Errorf("environment: %s=%s is not loopd's", secretsFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), secretsFileName)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSecretsFile))
	if err != nil {
		return fmt.Errorf("environment: read %s: %w", secretsFileName, err)
	}
	var held map[string]string
	if err := json.Unmarshal(data, &held); err != nil {
		return fmt.Errorf("environment: %s: %w", secretsFileName, err)
	}
	for name, value := range held {
		if err := os.Setenv(name, value); err != nil {
			return err
		}
	}
	reexecuted = true
	return nil
}
