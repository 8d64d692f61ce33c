// Package hostid keeps a daemon's instance id (desired.Host.Instance): the
// identity under which it heartbeats among the hosts sharing a store, so
// that the store tells a restart of one daemon from a second daemon under
// the same host name.
package hostid

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// File is the file in the state dir that holds the instance id.
const File = "host-id"

// Instance returns the instance id kept in stateDir's File, writing a new
// one (a random UUID, mode 0600, stateDir made 0700 when missing) the
// first time: a restart on the same state dir keeps it, and a daemon of
// another state dir given the same host name has another one. A file that
// holds no UUID is an error naming it, never a new id.
func Instance(stateDir string) (string, error) {
	path := filepath.Join(stateDir, File)
	if b, err := os.ReadFile(path); err == nil {
		id, err := uuid.ParseBytes(bytes.TrimSpace(b))
		if err != nil {
			return "", fmt.Errorf("instance id %s: %w", path, err)
		}
		return id.String(), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("instance id: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return Instance(stateDir) // another command of this state dir wrote it first
	}
	if err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	id := uuid.NewString()
	_, err = f.WriteString(id + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("instance id %s: %w", path, err)
	}
	return id, nil
}
