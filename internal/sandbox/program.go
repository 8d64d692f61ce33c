package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNoProgram means the harness's command is not an executable on the
// PATH the harness gets (or, for a path, not an executable file).
var ErrNoProgram = errors.New("harness executable not found")

// Program is a harness's executable as a sandbox must show it.
type Program struct {
	// Path is the executable with every symlink resolved: Exec runs it,
	// so the links that led to it need not exist inside.
	Path string
	// ReadOnly are the host paths the sandbox shows for it, outside the
	// system: the install dir of an npm package (the node_modules tree
	// it lies in, where its launcher finds sibling packages: Codex's
	// native binary is one), else the file itself; and, for a script,
	// its interpreter's ("#!", with env's NAME looked up on PATH).
	ReadOnly []string
}

// maxInterpreters bounds the chain of "#!" lines Resolve follows.
const maxInterpreters = 4

// Resolve finds the harness command argv0 (a path, or a name looked up on
// pathEnv, the harness's PATH) and what the sandbox must show for it. It
// returns an error wrapping ErrNoProgram when there is no such executable.
func (h Host) Resolve(argv0, pathEnv string) (Program, error) {
	path, err := lookPath(argv0, pathEnv)
	if err != nil {
		return Program{}, err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Program{}, fmt.Errorf("harness %s: %w: %w", argv0, ErrNoProgram, err)
	}
	p := Program{Path: real}
	p.show(h, real)
	for range maxInterpreters {
		next, err := interpreters(real, pathEnv)
		if err != nil || len(next) == 0 {
			return p, err
		}
		for _, x := range next {
			p.show(h, x)
		}
		real = next[len(next)-1]
	}
	return p, nil
}

// show adds what the sandbox must show for the executable at real, unless
// the system holds it.
func (p *Program) show(h Host, real string) {
	if h.onSystem(real) {
		return
	}
	dir := real
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		dir = real[:i+len("/node_modules")]
	}
	if !slices.Contains(p.ReadOnly, dir) {
		p.ReadOnly = append(p.ReadOnly, dir)
	}
}

// onSystem reports whether a system directory of h holds p.
func (h Host) onSystem(p string) bool {
	return slices.ContainsFunc(h.System, func(e Entry) bool { return e.Link == "" && Within(p, e.Path) })
}

// lookPath finds argv0 as a shell would: a path as it is, a bare name in
// the directories of pathEnv (an empty entry, the cwd, is skipped).
func lookPath(argv0, pathEnv string) (string, error) {
	if strings.Contains(argv0, "/") {
		if _, err := exec.LookPath(argv0); err != nil {
			return "", fmt.Errorf("harness %s: %w: %w", argv0, ErrNoProgram, err)
		}
		return filepath.Abs(argv0)
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, argv0)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("harness %s: %w on PATH %q", argv0, ErrNoProgram, pathEnv)
}

// interpreters returns the executables the "#!" line of the file at path
// runs, resolved, the one that reads the script last: the interpreter
// ("#!/bin/sh"), or env and the program it finds on pathEnv
// ("#!/usr/bin/env node"). A file without such a line runs none.
func interpreters(path, pathEnv string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("harness %s: %w", path, err)
	}
	line, ok := bytes.CutPrefix(head[:n], []byte("#!"))
	if !ok {
		return nil, nil
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	words := strings.Fields(string(line))
	if len(words) == 0 {
		return nil, nil
	}
	names := words[:1]
	if filepath.Base(words[0]) == "env" {
		if rest := slices.DeleteFunc(words[1:], func(w string) bool { return strings.HasPrefix(w, "-") }); len(rest) > 0 {
			names = append(names, rest[0])
		}
	}
	var out []string
	for _, name := range names {
		found, err := lookPath(name, pathEnv)
		if err != nil {
			return nil, fmt.Errorf("harness %s: interpreter: %w", path, err)
		}
		real, err := filepath.EvalSymlinks(found)
		if err != nil {
			return nil, fmt.Errorf("harness %s: interpreter %s: %w", path, name, err)
		}
		out = append(out, real)
	}
	return out, nil
}
