package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/loopd/loopd/schema"
)

// configEnv names the environment variable that gives the config file when
// --config is not given.
const configEnv = "LOOPD_CONFIG"

// etcConfig is the system-wide config file, the last place searched.
const etcConfig = "/etc/loopd/loopd.yaml"

// errNoConfig is returned when no --config is given and no config file is
// found in the search path (configSearchPath).
var errNoConfig = errors.New("no config file found")

// configSearchPath returns the files looked for, in order, when neither
// --config nor $LOOPD_CONFIG names one: ./loopd.yaml, then
// $XDG_CONFIG_HOME/loopd/loopd.yaml ($HOME/.config when XDG_CONFIG_HOME
// is unset or not absolute: the XDG Base Directory Specification), then
// etc. A home that cannot be found leaves its entry out.
func configSearchPath(getenv func(string) string, etc string) []string {
	paths := []string{"loopd.yaml"}
	xdg := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(xdg) {
		xdg = ""
		if home := getenv("HOME"); filepath.IsAbs(home) {
			xdg = filepath.Join(home, ".config")
		}
	}
	if xdg != "" {
		paths = append(paths, filepath.Join(xdg, "loopd", "loopd.yaml"))
	}
	return append(paths, etc)
}

// locateConfig returns the config file loopd uses: flag (--config) when
// given, else $LOOPD_CONFIG when set, else the first file of
// configSearchPath that exists. A file named by the flag or the variable
// is used as given, existing or not (loading it says what is wrong). When
// none of the search path exists the error wraps errNoConfig and lists
// where it looked; a file that exists but cannot be checked (permission
// denied) is returned, for loading to report.
func locateConfig(flag string, getenv func(string) string, etc string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := getenv(configEnv); env != "" {
		return env, nil
	}
	paths := configSearchPath(getenv, etc)
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: looked for %s; give --config FILE or set $%s", errNoConfig,
		strings.Join(dotted(paths), ", "), configEnv)
}

// dotted makes the relative paths of paths explicit (./loopd.yaml).
func dotted(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if !filepath.IsAbs(p) {
			p = "." + string(filepath.Separator) + p
		}
		out[i] = p
	}
	return out
}

// findConfig resolves g.config (locateConfig) once, before any command
// runs; a failure is kept for the commands that need a config (load), so
// that version and help work without one.
func (g *globals) findConfig() {
	g.config, g.configErr = locateConfig(g.config, os.Getenv, etcConfig)
}

// load loads the config file findConfig chose.
func (g *globals) load() (*schema.Config, error) {
	if g.configErr != nil {
		return nil, g.configErr
	}
	return schema.Load(g.config)
}
