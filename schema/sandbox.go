package schema

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loopd/loopd/internal/sandbox"
)

// Sandbox says how a route's agents run (docs/design.md, "Sandbox"): the
// config's top-level sandbox is every route's default, and a route's own
// sandbox overrides its mode and adds its binds (Route.SandboxOf).
type Sandbox struct {
	// Mode is sandbox.ModeBubblewrap (default), every agent in a
	// bubblewrap sandbox of its own, or sandbox.ModeNone, as loopd's user
	// with nothing hidden; "" in a route is the top-level mode.
	Mode string `yaml:"mode" json:"mode"`
	// Binds are host paths the sandbox shows besides the item's own:
	// read-only unless Write. A path starting with "~/" is taken from
	// loopd's home, a relative one from the config file's directory.
	Binds []SandboxBind `yaml:"binds" json:"binds"`
}

// SandboxBind is one host path a route's sandbox shows at its own path.
type SandboxBind struct {
	Path  string `yaml:"path" json:"path"`
	Write bool   `yaml:"write" json:"write"`
}

// SandboxOf returns the sandbox of r's agents under the config's top-level
// sandbox global: r's mode when it sets one, else global's; global's binds,
// then r's.
func (r Route) SandboxOf(global Sandbox) Sandbox {
	out := Sandbox{Mode: global.Mode, Binds: slices.Clone(global.Binds)}
	if r.Sandbox == nil {
		return out
	}
	if r.Sandbox.Mode != "" {
		out.Mode = r.Sandbox.Mode
	}
	out.Binds = append(out.Binds, r.Sandbox.Binds...)
	return out
}

// Sandboxed reports whether s runs agents in a sandbox: any mode but
// none ("" is the default, bubblewrap).
func (s Sandbox) Sandboxed() bool { return s.Mode != sandbox.ModeNone }

// BindsOf returns s's binds as the sandbox takes them, nil for none.
func (s Sandbox) BindsOf() []sandbox.Bind {
	var out []sandbox.Bind
	for _, b := range s.Binds {
		out = append(out, sandbox.Bind{Source: b.Path, Write: b.Write})
	}
	return out
}

// NeedsSandbox reports whether some route of c runs its agents in a
// bubblewrap sandbox (Route.SandboxOf), which then must work on this
// machine (sandbox.Check).
func (c *Config) NeedsSandbox() bool {
	routes := c.Webhooks.GHWebhook.Routing.Repos
	if len(routes) == 0 {
		return c.Sandbox.Sandboxed()
	}
	for _, r := range routes {
		if r.SandboxOf(c.Sandbox).Sandboxed() {
			return true
		}
	}
	return false
}

// ownFiles are loopd's own files that no sandbox may show, besides its
// state dir: the config file at path, secretFile (resolved with lookup,
// SecretFilePath; one it cannot resolve is left out, as serve refuses to
// start with it) and the GitHub App's key.
func (c *Config) ownFiles(path string, lookup func(string) (string, bool)) []string {
	var own []string
	if abs, err := filepath.Abs(path); err == nil {
		own = append(own, abs)
	}
	if p, err := c.SecretFilePath(lookup); err == nil && p != "" {
		own = append(own, filepath.Clean(p))
	}
	if g := c.GitHub; g != nil && g.App != nil && g.App.PrivateKeyFile != "" {
		own = append(own, filepath.Clean(g.App.PrivateKeyFile))
	}
	return own
}

// Hidden returns what of loopd no sandbox may show (sandbox.Spec's Hide
// and Mask): the state dir, and each of its own files (the config file at
// path, secretFile, the App's key) by its directory, or by itself when
// that directory is the root or a system one a sandbox shows (/etc).
func (c *Config) Hidden(path string, lookup func(string) (string, bool)) (dirs, files []string) {
	dirs = []string{filepath.Clean(c.StateDir)}
	for _, f := range c.ownFiles(path, lookup) {
		if d := filepath.Dir(f); d == "/" || sandbox.SystemPath(d) {
			files = append(files, f)
		} else if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs, files
}

// checkSandbox refuses the binds of the top-level sandbox and of each
// route that would show what Hidden hides: a path that holds the state
// dir or lies inside it, or one that holds one of loopd's own files (a
// file next to them is the operator's to show). path is the config
// file's.
func (c *Config) checkSandbox(t *tree, path string) []Problem {
	var problems []Problem
	state := filepath.Clean(c.StateDir)
	own := append([]string{state}, c.ownFiles(path, os.LookupEnv)...)
	check := func(at []string, s *Sandbox) {
		if s == nil {
			return
		}
		for i, b := range s.Binds {
			for _, m := range own {
				if sandbox.Within(m, b.Path) || m == state && sandbox.Within(b.Path, m) {
					problems = append(problems, t.problemAt(child(child(child(at, "binds"), strconv.Itoa(i)), "path"),
						fmt.Sprintf("%s would show loopd's own %s to its agents: bind something else", b.Path, m)))
					break
				}
			}
		}
	}
	check([]string{"sandbox"}, &c.Sandbox)
	reposAt := []string{"webhooks", "ghWebhook", "routing", "repos"}
	for _, key := range slices.Sorted(maps.Keys(c.Webhooks.GHWebhook.Routing.Repos)) {
		check(child(child(reposAt, key), "sandbox"), c.Webhooks.GHWebhook.Routing.Repos[key].Sandbox)
	}
	return problems
}

// resolveBinds makes every bind path of s absolute: "~/" from home,
// relative from the config file's directory.
func (c *Config) resolveBinds(s *Sandbox, home string) {
	if s == nil {
		return
	}
	for i, b := range s.Binds {
		p := b.Path
		if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
			p = filepath.Join(home, rest)
		}
		s.Binds[i].Path = filepath.Clean(c.resolve(p))
	}
}
