// Package fakecli is what the fake harness CLIs in testdata (fakeclaude,
// fakecodex, fakegemini) share that is not their terminal (faketerm): the
// files of JSON lines they write (transcripts, start logs, pid files),
// and the physical cwd they name projects after.
// Their tests share fakeclitest.
package fakecli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
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
