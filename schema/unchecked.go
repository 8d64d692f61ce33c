package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// LoadUnchecked reads the config file at path as far as it can be read,
// without the contract: the read-only commands (get, events, hosts) use it
// to find the store of a config that no longer validates. Every value of
// the right type is kept and every absent or unreadable one takes its
// default, as Load fills them: the state dir is stateDir resolved against
// the file's directory, else ./state beside the file; the store is
// store.url, else the SQLite file in the state dir. Unknown keys are read
// past. The error says only what leaves nothing to read: a file that
// cannot be read (wrapping the os error), or text that is not one YAML
// document (a *ValidationError, as Load gives).
func LoadUnchecked(path string) (*Config, error) {
	data, err := readConfig(path)
	if err != nil {
		return nil, err
	}
	return parseUnchecked(data, path)
}

// parseUnchecked is LoadUnchecked of the text data of the file at path.
func parseUnchecked(data []byte, path string) (*Config, error) {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("parse config %s: %w", path, err)
	}
	var cfg Config
	err = yaml.NewDecoder(bytes.NewReader(data)).Decode(&cfg)
	var terr *yaml.TypeError
	if err != nil && err != io.EOF && !errors.As(err, &terr) {
		return nil, invalid(path, yamlProblems(err))
	}
	// A value of the wrong type was left unset: it takes its default.
	cfg.applyDefaults(dir)
	return &cfg, nil
}
