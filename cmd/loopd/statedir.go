package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// tightened is a mode privateStateDir took group and others' access from.
type tightened struct {
	path     string
	was, now fs.FileMode
}

func (t tightened) String() string {
	return fmt.Sprintf("%s: mode %04o tightened to %04o", t.path, t.was, t.now)
}

// privateStateDir makes the state dir dir with mode 0700, or tightens it to
// 0700, and takes group and others' access from every file and directory
// directly in it (the store and its -wal and -shm, the locks, the host id,
// the launch, runs, channels and mirrors directories: 0600 and 0700 as
// loopd makes them), and returns what it tightened. The state dir holds every event's
// text, the transcripts copied between hosts and the mirrors of every
// repository loopd fetched; what loopd writes deeper is made 0600 in 0700
// directories, and git's own files in the mirrors keep git's modes under
// the 0700 mirrors directory. Symlinks are left as they are. A mode that
// cannot be changed (another user's directory) is an error naming it.
func privateStateDir(dir string) ([]tightened, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err) // mkdir <dir>: …
	}
	var out []tightened
	tighten := func(path string, st fs.FileInfo, keep fs.FileMode) error {
		was := st.Mode().Perm()
		if was&0o077 == 0 {
			return nil
		}
		now := was & keep
		if err := os.Chmod(path, now); err != nil {
			return fmt.Errorf("state dir: mode %04o lets other users in, and cannot be tightened: %w", was, err)
		}
		out = append(out, tightened{path: path, was: was, now: now})
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := tighten(dir, st, 0o700); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() && !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("state dir: %w", err)
		}
		keep := fs.FileMode(0o600)
		if e.IsDir() {
			keep = 0o700
		}
		if err := tighten(filepath.Join(dir, e.Name()), info, keep); err != nil {
			return nil, err
		}
	}
	return out, nil
}
