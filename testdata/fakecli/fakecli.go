// Package fakecli is what the fake harness CLIs in testdata (fakeclaude,
// fakecodex, fakegemini) share that is not their terminal (faketerm): the
// event loop of their TUI (Loop), the files of JSON lines they write
// (transcripts, start logs, pid files), the physical cwd they name
// projects after, and the probes a prompt can make them run.
// Their tests share fakeclitest.
package fakecli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// ProbePrefix starts a line of a prompt that a fake CLI run with its probe
// knob (FAKECLAUDE_PROBE=1) runs as a shell command, as an agent runs what
// a comment talks it into: the tests from inside a sandbox send such
// lines and read what became of them (ProbeLog).
const ProbePrefix = "PROBE: "

// ProbeLog is the file in the cwd (the item's workdir) to which each probe
// appends its Probe as a line.
const ProbeLog = "probes.jsonl"

// Probe is what one probe ran and got: its command, its stdout and stderr
// together, and its exit status (-1 when it could not run).
type Probe struct {
	Cmd    string `json:"cmd"`
	Output string `json:"output"`
	Status int    `json:"status"`
}

// RunProbes runs each line of prompt that starts with ProbePrefix through
// sh -c in the cwd, one after the other, and appends its Probe to ProbeLog.
func RunProbes(prompt string) error {
	for _, line := range strings.Split(prompt, "\n") {
		cmd, ok := strings.CutPrefix(line, ProbePrefix)
		if !ok {
			continue
		}
		out, err := exec.Command("sh", "-c", cmd).CombinedOutput()
		p := Probe{Cmd: cmd, Output: string(out)}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			p.Status = exit.ExitCode()
		case err != nil:
			p.Status, p.Output = -1, err.Error()
		}
		if err := AppendJSONLine(ProbeLog, p, 0o644); err != nil {
			return err
		}
	}
	return nil
}
