package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loopd/loopd/schema"
)

// ErrBadSettings means a settings file that loopd must add a key to is not
// a JSON object it can rewrite without losing the user's text.
var ErrBadSettings = errors.New("settings file is not a plain JSON object")

// ErrSettingsLocked means another process held the lock of a settings
// file (settingsLock) for longer than loopd waits for it.
var ErrSettingsLocked = errors.New("settings file is locked")

// setting is one key a Provisioner owns in a JSON settings file: the path
// of object keys down to it, and the value it must hold.
type setting struct {
	keys  []string
	value any
}

// mergeSettings sets each key of set (objects created as needed) to its
// value in the JSON file path, keeping every other key and every value as
// written (numbers keep their text), and writes it back atomically (a
// temporary file renamed over it, with its mode) when some key did not
// hold its value already; the keys then come out sorted. A symlink is
// followed: the file it names is the one rewritten. A missing file is
// created (0600, its directory 0700). With lock, the read and the write
// happen under the file's lock as its CLI takes it (settingsLock). It
// returns ErrBadSettings for a file that is not a JSON object, or whose
// key on the way to a setting is not an object, and leaves it as it is.
func mergeSettings(path string, lock bool, set ...setting) error {
	if lock {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		unlock, err := settingsLock(path + ".lock")
		if err != nil {
			return err
		}
		defer unlock()
	}
	path, b, mode, err := readSettingsFile(path)
	if err != nil {
		return err
	}
	doc := map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil || doc == nil {
			return fmt.Errorf("%w: %v", ErrBadSettings, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("%w: text after the object", ErrBadSettings)
		}
	}
	changed := false
	for _, s := range set {
		c, err := setKey(doc, s)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if !changed {
		return nil
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return writeSettingsFile(path, append(out, '\n'), mode)
}

// readSettingsFile returns the file a settings file path names (a symlink
// followed: the file it names, made or not yet), its bytes (none for a
// missing file) and its mode (0600 for a missing one).
func readSettingsFile(path string) (string, []byte, fs.FileMode, error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target // a settings file kept with the user's dotfiles
	} else if link, lerr := os.Readlink(path); lerr == nil {
		// A link to a file not made yet: the file is made where it points.
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	mode := fs.FileMode(0o600)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, nil, mode, nil
	case err != nil:
		return "", nil, 0, err
	}
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	return path, b, mode, nil
}

// writeSettingsFile writes data to path atomically: a temporary file in
// its directory (made 0700 if missing), with mode, renamed over it.
func writeSettingsFile(path string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(mode), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}

// setKey sets s in doc and reports whether that changed doc.
func setKey(doc map[string]any, s setting) (bool, error) {
	obj := doc
	for i, k := range s.keys[:len(s.keys)-1] {
		next, ok := obj[k].(map[string]any)
		if !ok {
			if _, set := obj[k]; set {
				return false, fmt.Errorf("%w: %s is not an object", ErrBadSettings, strings.Join(s.keys[:i+1], "."))
			}
			next = map[string]any{}
			obj[k] = next
		}
		obj = next
	}
	last := s.keys[len(s.keys)-1]
	if cur, ok := obj[last]; ok && cur == s.value {
		return false, nil
	}
	obj[last] = s.value
	return true, nil
}

// settingsLock takes the lock directory dir as proper-lockfile does: it
// makes it, waits up to schema.SettingsLockWait while another process holds it,
// and takes over a lock older than schema.SettingsLockStale (its holder died).
// It returns the function that releases it, or an error wrapping
// ErrSettingsLocked.
func settingsLock(dir string) (func(), error) {
	deadline := time.Now().Add(schema.SettingsLockWait)
	for {
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			return func() { _ = os.Remove(dir) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		if info, err := os.Stat(dir); err == nil && time.Since(info.ModTime()) > schema.SettingsLockStale && os.Remove(dir) == nil {
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: %w", dir, ErrSettingsLocked)
		}
		time.Sleep(schema.SettingsLockPoll)
	}
}
