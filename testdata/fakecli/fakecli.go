// Package fakecli is what the fake harness CLIs in testdata (fakeclaude,
// fakecodex, fakegemini) share that is not their terminal (faketerm): the
// event loop of their TUI (Loop), the files of JSON lines they write
// (transcripts, start logs, pid files), and the physical cwd they name
// projects after.
// Their tests share fakeclitest.
package fakecli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"time"
)

// AppendJSONLine appends v to file as one line of JSON, creating the file
// with perm. Each line is one write(2) on a file opened O_APPEND, so lines
// that processes append at once stay whole.
func AppendJSONLine(file string, v any, perm os.FileMode) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Close())
}

// LogStart appends this process's start to the start log file, if file is
// not empty: one line {"time": RFC 3339 with ns, "pid": n, "argv": [...]},
// which the e2e tests read to count and check a fake's starts.
func LogStart(file string) error {
	if file == "" {
		return nil
	}
	return AppendJSONLine(file, Start{Time: time.Now().UTC().Format(time.RFC3339Nano), PID: os.Getpid(), Argv: os.Args}, 0o644)
}

// Start is one line of a start log.
type Start struct {
	Time string   `json:"time"`
	PID  int      `json:"pid"`
	Argv []string `json:"argv"`
}

// PhysicalCwd is the working directory with symlinks resolved: the real
// CLIs name a project after it and ignore $PWD
// (docs/reference/harness-cli-facts.md).
func PhysicalCwd() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(wd)
}
